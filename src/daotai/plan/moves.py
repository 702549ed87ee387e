"""A camera spec's move filled in: what a move does when the script only names it (and its direction),
scaled to the distance of the subject it is framed on."""

from __future__ import annotations

import math

from daotai.errors import PlanError
from daotai.plan import camera_grammar as cam
from daotai.plan.model import ResolvedMove
from daotai.plan.stable import rounded
from daotai.script.camera_spec import CameraSpec
from daotai.script.vocab import CAMERA_MOVES

ZOOM_IN_RATIO = 0.6
TOO_CLOSE_M = 0.25
# Default amounts that grow with the framing distance, so a move reads on a wide as on a close-up:
# a crane rises at least this share of the distance to the subject, a truck travels at least this share.
CRANE_RISE_PER_M = 0.35
TRUCK_PER_M = 0.25


def _signed(values: tuple[float, ...], axis: int | None, sign: int) -> tuple[float, ...]:
    """``values`` with component ``axis`` given the sign ``sign`` (its size kept)."""
    return tuple(sign * abs(v) if i == axis else v for i, v in enumerate(values))



def resolve_move(spec: CameraSpec, subject_distance: float, where: str = "camera") -> ResolvedMove:
    """Fill a camera spec's unset fields from its type's defaults (and direction); ``where`` is the
    spec's JSON path, for errors."""
    kind = spec.type.value
    row = CAMERA_MOVES[kind]  # the move's defaults (what it does when the script only names it) and signs
    defaults = dict(row.defaults)
    sign = 1
    if spec.direction is not None:
        sign = row.signs[spec.direction.value]
    motion = spec.motion if spec.motion is not None else defaults.get("motion", (0.0, 0.0, 0.0))
    if spec.motion is None and kind in ("dolly", "dolly_zoom"):
        # A push-in covers a third of the way to the subject: framing changes visibly
        # without the lens passing through anyone.
        motion = (0.0, 0.0, -round(subject_distance / 3.0, 3))
    if spec.motion is None and kind == "crane":
        rise = max(motion[1], round(CRANE_RISE_PER_M * subject_distance, 3))
        motion = (0.0, rise, 0.0)
    if spec.rotate is None and kind == "crane":
        # Tilt by the angle the rise subtends at the subject, so the aim point that starts in the
        # middle of the frame ends there (a fixed 10° lost a medium shot's subject below the frame).
        rise = abs(motion[1])
        tilt = round(math.degrees(math.atan2(rise, max(subject_distance, 0.1))), 3) if rise else 0.0
        defaults = {**defaults, "rotate": (0.0, -tilt if motion[1] >= 0 else tilt, 0.0)}
    if spec.motion is None and kind == "truck":
        motion = (max(motion[0], round(TRUCK_PER_M * subject_distance, 3)), 0.0, 0.0)
    rotate = spec.rotate if spec.rotate is not None else defaults.get("rotate", (0.0, 0.0, 0.0))
    orbit = spec.orbit if spec.orbit is not None else defaults.get("orbit", 0.0)
    amount = row.amount
    if spec.direction is not None and amount is not None and getattr(spec, amount.field) is None:
        # The direction gives the sign of the default amount's defining component; an explicit
        # amount already agrees with it (the schema refuses a contradiction). A zoom's sign
        # picks its ratio below.
        if amount.field == "motion":
            motion = _signed(motion, amount.axis, sign)
        elif amount.field == "rotate":
            rotate = _signed(rotate, amount.axis, sign)
        elif amount.field == "orbit":
            orbit = sign * abs(orbit)
        if kind == "crane" and spec.rotate is None:
            rotate = (0.0, -sign * abs(rotate[1]), 0.0)  # a crane keeps the subject in view
    shake = spec.shake if spec.shake is not None else defaults.get("shake", 0.0)
    fov_end = spec.fov_end
    if fov_end is None and kind == "zoom":
        ratio = ZOOM_IN_RATIO if sign < 0 or spec.direction is None else 1.0 / ZOOM_IN_RATIO
        fov_end = min(spec.fov * ratio, 160.0)
    if fov_end is None and kind == "dolly_zoom":
        end_distance = subject_distance + motion[2]
        if end_distance <= TOO_CLOSE_M:
            raise PlanError.at(f"{where}.motion[2]", motion[2], f"would carry a dolly zoom through the subject "
                               f"({subject_distance:.2f} m away); use a smaller push-in")
        fov_end = cam.dolly_zoom_fov_end(spec.fov, subject_distance, end_distance)
    if fov_end is None:
        fov_end = spec.fov
    return ResolvedMove(
        type=kind,
        motion=tuple(float(v) for v in motion),
        rotate=tuple(float(v) for v in rotate),
        orbit=float(orbit),
        fov=float(spec.fov),
        fov_end=rounded(fov_end),
        easing=spec.easing.value,
        shake=float(shake),
        follow=kind in ("follow", "steadicam"),
    )
