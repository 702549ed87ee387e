"""Compact motion code: a 3-vector as two 16-bit angles plus its magnitude.

For m = (x, y, z): theta = atan2(y, x) in (-pi, pi], phi = acos(z / |m|) in [0, pi],
magnitude |m|. Quantisation:

* theta_q = round(theta / STEP_THETA) mod 65536 with STEP_THETA = 2*pi / 65536, so the
  code wraps around the circle: 0 is theta = 0 (+x), 16384 is +pi/2 (+y), 32768 is pi
  (-x) and 49152 is -pi/2 (-y).
* phi_q = round(phi / STEP_PHI) with STEP_PHI = pi / 65535, so both poles are exact:
  0 is +z and 65535 is -z.

The zero vector encodes to MotionCode(theta_q=0, phi_q=0, magnitude=0.0); any code with
magnitude 0 decodes to the zero vector, whatever its angles. The magnitude is kept as a
float64, exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from daotai.errors import PlanError

LEVELS = 65536  # 16 bits per angle
STEP_THETA = 2.0 * math.pi / LEVELS  # radians per theta level; the circle wraps
STEP_PHI = math.pi / (LEVELS - 1)  # radians per phi level; both ends of [0, pi] included

ANGLE_ERROR_BOUND_RAD = math.hypot(STEP_THETA / 2.0, STEP_PHI / 2.0)
"""Worst-case angle (radians) between a unit direction and its decoded code.

Rounding leaves |d_theta| <= STEP_THETA/2 and |d_phi| <= STEP_PHI/2. On the unit sphere
ds^2 = dphi^2 + sin^2(phi) dtheta^2 <= dphi^2 + dtheta^2, so the straight path in
(theta, phi) between the two directions is at most
sqrt((STEP_THETA/2)^2 + (STEP_PHI/2)^2) = sqrt((pi/65536)^2 + (pi/131070)^2)
~= 5.36e-5 rad (0.0031 deg) long, and the great-circle angle is no longer. The bound
is reached near the equator (phi ~ pi/2) when both angles fall half a step off.
"""


@dataclass(frozen=True)
class MotionCode:
    """A quantised motion direction (two uint16 levels) and its exact magnitude in metres."""

    theta_q: int  # 0..65535, azimuth in the x-y plane, wraps
    phi_q: int  # 0..65535, polar angle from +z
    magnitude: float  # |m|, >= 0

    def __post_init__(self) -> None:
        """Refuse levels outside 16 bits and negative or non-finite magnitudes."""
        for name in ("theta_q", "phi_q"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise PlanError(f"motion_code.{name}: {value!r} must be an integer in [0, 65535]")
            if not 0 <= value < LEVELS:
                raise PlanError(f"motion_code.{name}: {value!r} must be in [0, 65535]")
            object.__setattr__(self, name, int(value))
        mag = self.magnitude
        if isinstance(mag, bool) or not isinstance(mag, (int, float, np.floating)):
            raise PlanError(f"motion_code.magnitude: {mag!r} must be a number")
        if not (math.isfinite(mag) and mag >= 0.0):
            raise PlanError(f"motion_code.magnitude: {mag!r} must be finite and >= 0")
        object.__setattr__(self, "magnitude", float(mag))


def encode_motion(m: Sequence[float] | np.ndarray) -> MotionCode:
    """Motion vector (3,) -> MotionCode; the zero vector gives (0, 0, 0.0)."""
    vec = np.asarray(m, dtype=np.float64)
    if vec.shape != (3,) or not np.all(np.isfinite(vec)):
        raise PlanError(f"motion: {np.asarray(m).tolist()!r} must be three finite numbers")
    x, y, z = (float(v) for v in vec)
    magnitude = math.hypot(x, y, z)
    if magnitude == 0.0:
        return MotionCode(0, 0, 0.0)
    theta = math.atan2(y, x)  # -pi for y = -0.0, x < 0: the wrap below makes it pi's code
    # atan2(rho, z) equals acos(z/|m|) but keeps full precision near the poles.
    phi = math.atan2(math.hypot(x, y), z)
    theta_q = round(theta / STEP_THETA) % LEVELS
    phi_q = min(LEVELS - 1, round(phi / STEP_PHI))
    return MotionCode(theta_q, phi_q, magnitude)


def decode_motion(code: MotionCode) -> np.ndarray:
    """MotionCode -> (3,) float64: the decoded unit direction times the magnitude."""
    if code.magnitude == 0.0:
        return np.zeros(3)
    theta = code.theta_q * STEP_THETA
    if code.theta_q > LEVELS // 2:
        theta -= 2.0 * math.pi  # back into (-pi, pi]
    phi = code.phi_q * STEP_PHI
    direction = np.array(
        [math.sin(phi) * math.cos(theta), math.sin(phi) * math.sin(theta), math.cos(phi)]
    )  # (3,) unit
    return code.magnitude * direction


def to_list(code: MotionCode) -> list[int | float]:
    """MotionCode -> [theta_q, phi_q, magnitude] for JSON."""
    return [code.theta_q, code.phi_q, code.magnitude]


def from_list(values: Sequence[int | float]) -> MotionCode:
    """[theta_q, phi_q, magnitude] from JSON -> MotionCode (validated)."""
    if isinstance(values, (str, bytes)) or len(values) != 3:
        raise PlanError(f"motion_code: {values!r} must be [theta_q, phi_q, magnitude]")
    theta_q, phi_q, magnitude = values
    return MotionCode(theta_q, phi_q, magnitude)
