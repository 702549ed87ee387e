"""Camera grammar -> per-frame extrinsics and intrinsics (see docs/conventions.md).

World: metres, degrees, seconds, right-handed, y up. Camera-local axes: x right, y up,
-z forward (OpenGL). Poses are ``cam_to_world`` 4x4 rigid transforms whose columns 0..2
are the camera axes in world coordinates and column 3 its position. Intrinsics use the
OpenCV pixel convention (origin top-left, u right, v down). Projection, intrinsics and
the clip planes are ``daotai.plan.geometry``'s; ``intrinsics`` here adds the planner's input
checks, and it and ``project`` use the plan's (3, 3) K form.

Sign conventions of a move, all relative to the shot's start camera:

* pan > 0 turns the view right (yaw about world +y by -pan);
* tilt > 0 turns the view up (about the camera's local +x by +tilt);
* roll > 0 turns the camera body clockwise as seen from behind it (about local +z by
  -roll), so the picture turns counter-clockwise;
* orbit > 0 carries the camera toward its right around the subject (about world +y by
  +orbit through the orbit centre), keeping its orientation relative to the subject.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from daotai.errors import PlanError
from daotai.plan import geometry

FOV_RANGE_DEG = (1.0, 170.0)  # open interval for the vertical field of view

EASINGS = ("linear", "ease_in", "ease_out", "ease_in_out")

# max de/dt of each easing on [0, 1]; bounds how far one frame step can move the camera.
EASE_MAX_SLOPE = MappingProxyType({"linear": 1.0, "ease_in": 2.0, "ease_out": 2.0, "ease_in_out": 1.5})

SHAKE_FREQ_RANGE_HZ = (0.5, 3.0)
_SHAKE_SINES_PER_AXIS = 3

_ORTHONORMAL_TOLERANCE = 1e-6  # how far from rigid a start pose may be before it is refused
_PARALLEL_TOLERANCE = 1e-9  # |sin| of the view/up angle below which `up` is unusable


# ---------------------------------------------------------------- rotations and poses


def rot_x(deg: float) -> np.ndarray:
    """Right-handed rotation about +x by ``deg`` degrees, (3, 3) float64."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(deg: float) -> np.ndarray:
    """Right-handed rotation about +y by ``deg`` degrees, (3, 3) float64."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(deg: float) -> np.ndarray:
    """Right-handed rotation about +z by ``deg`` degrees, (3, 3) float64."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def axis_rotations(axis: int, deg: np.ndarray) -> np.ndarray:
    """Rotations about world axis 0/1/2 by each angle in ``deg`` (n,), as (n, 3, 3) float64."""
    rad = np.radians(np.asarray(deg, dtype=np.float64))
    c, s = np.cos(rad), np.sin(rad)
    out = np.zeros((rad.shape[0], 3, 3))  # (n, 3, 3) float64
    i, j = [(1, 2), (2, 0), (0, 1)][axis]  # the plane the rotation acts in, right-handed
    out[:, axis, axis] = 1.0
    out[:, i, i] = c
    out[:, j, j] = c
    out[:, i, j] = -s
    out[:, j, i] = s
    return out


def _unit(v: np.ndarray) -> np.ndarray:
    """``v`` scaled to unit length (caller guarantees it is not zero)."""
    return v / np.linalg.norm(v)


def look_at(
    eye: Sequence[float],
    target: Sequence[float],
    up: Sequence[float] = (0.0, 1.0, 0.0),
    roll_deg: float = 0.0,
) -> np.ndarray:
    """Camera-to-world rotation (3, 3) at ``eye`` whose -z column points at ``target``.

    When the view is parallel to ``up`` (bird's-eye / worm's-eye) the up hint is
    replaced by world -z when looking down and +z when looking up: the orientation a
    camera that starts at +z facing -z reaches by tilting straight down or up.
    """
    eye_v = np.asarray(eye, dtype=np.float64)
    forward = np.asarray(target, dtype=np.float64) - eye_v  # (3,) metres
    if not np.all(np.isfinite(forward)) or np.linalg.norm(forward) == 0.0:
        raise PlanError(f"look_at: eye {list(eye)} and target {list(target)} must differ")
    forward = _unit(forward)
    up_v = np.asarray(up, dtype=np.float64)
    if np.linalg.norm(up_v) == 0.0:
        raise PlanError(f"look_at: up {list(up)} must not be the zero vector")
    up_v = _unit(up_v)
    right = np.cross(forward, up_v)
    if np.linalg.norm(right) < _PARALLEL_TOLERANCE:
        sign = 1.0 if float(forward @ up_v) > 0.0 else -1.0  # +1: looking along up
        for fallback in ((0.0, 0.0, sign), (0.0, -sign, 0.0), (sign, 0.0, 0.0)):
            right = np.cross(forward, np.asarray(fallback))
            if np.linalg.norm(right) >= 1e-3:
                break
    x_axis = _unit(right)
    z_axis = -forward
    y_axis = np.cross(z_axis, x_axis)  # already unit: z and x are orthonormal
    rotation = np.stack([x_axis, y_axis, z_axis], axis=1)  # (3, 3) columns = camera axes
    return rotation @ rot_z(-roll_deg) if roll_deg else rotation


def make_pose(rotation: np.ndarray, translation: Sequence[float]) -> np.ndarray:
    """4x4 rigid transform from a (3, 3) rotation and a (3,) translation."""
    pose = np.eye(4)  # (4, 4) float64
    pose[:3, :3] = rotation
    pose[:3, 3] = np.asarray(translation, dtype=np.float64)
    return pose


def invert_pose(pose: np.ndarray) -> np.ndarray:
    """Inverse of a rigid (4, 4) transform (or a stack (..., 4, 4)), using R^T."""
    rotation = np.asarray(pose, dtype=np.float64)[..., :3, :3]
    translation = np.asarray(pose, dtype=np.float64)[..., :3, 3]
    inverse = np.zeros(np.shape(pose))
    inverse[..., :3, :3] = np.swapaxes(rotation, -1, -2)
    inverse[..., :3, 3] = -np.einsum("...ji,...j->...i", rotation, translation)
    inverse[..., 3, 3] = 1.0
    return inverse


# ---------------------------------------------------------------- easing and optics


def ease(name: str, t: float | np.ndarray) -> float | np.ndarray:
    """Easing curve ``name`` at progress ``t`` in [0, 1] (clipped); e(0) = 0, e(1) = 1."""
    if name not in EASINGS:
        raise PlanError(f"easing: {name!r} must be one of {', '.join(EASINGS)}")
    x = np.clip(np.asarray(t, dtype=np.float64), 0.0, 1.0)
    if name == "linear":
        y = x
    elif name == "ease_in":
        y = x * x
    elif name == "ease_out":
        y = 1.0 - (1.0 - x) ** 2
    else:
        y = x * x * (3.0 - 2.0 * x)  # smoothstep
    return float(y) if np.ndim(t) == 0 else y


def _check_fov(name: str, fov_deg: float) -> None:
    """Raise PlanError unless ``fov_deg`` lies in the open interval FOV_RANGE_DEG."""
    low, high = FOV_RANGE_DEG
    if not (isinstance(fov_deg, (int, float)) and low < fov_deg < high):
        raise PlanError(f"{name}: {fov_deg!r} must be in ({low:g}, {high:g})")


def intrinsics(fov_deg: float, width: int, height: int) -> np.ndarray:
    """Pixel intrinsics K (3, 3): fx = fy = (H/2)/tan(fov/2), cx = W/2, cy = H/2."""
    _check_fov("fov", fov_deg)
    if width <= 0 or height <= 0:
        raise PlanError(f"size: {width}x{height} must have both sides > 0")
    return geometry.intrinsics_matrix(geometry.intrinsics_from_fov(fov_deg, width, height))


def project(
    points_world: np.ndarray, cam_to_world: np.ndarray, K: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Pixels (N, 2) and depths (N,) along -z of world points (N, 3); uv is NaN at depth <= 0."""
    return geometry.project(points_world, cam_to_world, geometry.intrinsics_from_matrix(K))


def dolly_zoom_fov_end(fov: float, start_distance: float, end_distance: float) -> float:
    """End fov keeping a subject's image size: d0*tan(f0/2) = d1*tan(f1/2)."""
    _check_fov("fov", fov)
    for name, value in (("start_distance", start_distance), ("end_distance", end_distance)):
        if not (math.isfinite(value) and value > 0):
            raise PlanError(f"{name}: {value!r} must be a finite distance > 0 m")
    half = math.atan(start_distance * math.tan(math.radians(fov) / 2.0) / end_distance)
    fov_end = math.degrees(2.0 * half)
    low, high = FOV_RANGE_DEG
    if not low < fov_end < high:
        raise PlanError(
            f"dolly_zoom: {start_distance:g} m -> {end_distance:g} m at fov {fov:g} needs "
            f"fov_end {fov_end:.2f}, which must be in ({low:g}, {high:g})"
        )
    return fov_end


# ---------------------------------------------------------------- moves and trajectories


def _vec3(name: str, value: Sequence[float]) -> tuple[float, float, float]:
    """``value`` as a tuple of three finite floats, or PlanError naming ``name``."""
    try:
        items = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise PlanError(f"{name}: {value!r} must be three numbers") from None
    if len(items) != 3 or not all(math.isfinite(v) for v in items):
        raise PlanError(f"{name}: {list(value)!r} must be three finite numbers")
    return items  # type: ignore[return-value]


@dataclass(frozen=True)
class Move:
    """One shot's camera move, relative to its start camera (units: metres, degrees)."""

    motion: tuple[float, float, float] = (0.0, 0.0, 0.0)  # m, start camera's local axes
    rotate: tuple[float, float, float] = (0.0, 0.0, 0.0)  # (pan, tilt, roll) degrees
    orbit: float = 0.0  # degrees about world +y through orbit_center
    fov: float = 60.0  # vertical, degrees
    fov_end: float | None = None  # None: no zoom
    easing: str = "linear"
    shake: float = 0.0  # peak handheld jitter per axis, degrees
    orbit_center: tuple[float, float, float] = (0.0, 0.0, 0.0)  # world point, metres
    shake_seed: int = 0

    def __post_init__(self) -> None:
        """Normalise vectors to float tuples and refuse values outside the grammar."""
        for name in ("motion", "rotate", "orbit_center"):
            object.__setattr__(self, name, _vec3(name, getattr(self, name)))
        for name in ("orbit", "shake"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise PlanError(f"{name}: {value!r} must be a finite number")
        if self.shake < 0:
            raise PlanError(f"shake: {self.shake!r} must be >= 0 degrees")
        _check_fov("fov", self.fov)
        if self.fov_end is not None:
            _check_fov("fov_end", self.fov_end)
        if self.easing not in EASINGS:
            raise PlanError(f"easing: {self.easing!r} must be one of {', '.join(EASINGS)}")
        seed = self.shake_seed
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise PlanError(f"shake_seed: {seed!r} must be an integer >= 0")


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Per-frame camera of one shot; arrays are read-only."""

    cam_to_world: np.ndarray  # (n, 4, 4) float64
    fov: np.ndarray  # (n,) float64, vertical degrees

    def __post_init__(self) -> None:
        """Freeze the arrays so the dataclass is immutable in fact, not just in name."""
        for name in ("cam_to_world", "fov"):
            array = np.array(getattr(self, name), dtype=np.float64)
            array.flags.writeable = False
            object.__setattr__(self, name, array)

    def __len__(self) -> int:
        """Number of frames."""
        return int(self.fov.shape[0])

    @property
    def positions(self) -> np.ndarray:
        """Camera centres in world metres, (n, 3)."""
        return self.cam_to_world[:, :3, 3]

    def intrinsics(self, width: int, height: int) -> np.ndarray:
        """Per-frame K matrices for a width x height image, (n, 3, 3)."""
        return np.stack([intrinsics(float(f), width, height) for f in self.fov])


def shake_angles(n_frames: int, fps: float, shake: float, seed: int) -> np.ndarray:
    """Handheld jitter (n, 3) in degrees (pan, tilt, roll); each axis peaks at ``shake``.

    Each axis is a sum of three sines with frequencies in SHAKE_FREQ_RANGE_HZ, weighted
    1/f so slow sway dominates fast tremble, phases and frequencies drawn from
    ``numpy.random.default_rng(seed)``; the sum is then scaled so its largest absolute
    value over the shot's frames is exactly ``shake``.
    """
    if n_frames < 1 or fps <= 0:
        raise PlanError(f"shake: needs n_frames >= 1 and fps > 0, got {n_frames}, {fps}")
    if shake == 0.0:
        return np.zeros((n_frames, 3))
    rng = np.random.default_rng(seed)
    freq = rng.uniform(*SHAKE_FREQ_RANGE_HZ, size=(3, _SHAKE_SINES_PER_AXIS))  # (axis, k) Hz
    phase = rng.uniform(0.0, 2.0 * math.pi, size=(3, _SHAKE_SINES_PER_AXIS))  # (axis, k) rad
    seconds = np.arange(n_frames) / fps  # (n,)
    waves = np.sin(2.0 * math.pi * freq[None] * seconds[:, None, None] + phase[None])
    signal = np.sum(waves / freq[None], axis=2)  # (n, 3)
    peak = np.max(np.abs(signal), axis=0)  # (3,)
    # A sum of sines with random phases is zero at every sampled frame only by freak
    # chance; such an axis stays still rather than dividing by ~0.
    scale = np.where(peak > 1e-12, shake / np.where(peak > 1e-12, peak, 1.0), 0.0)
    return signal * scale[None]


def _as_rigid(pose: np.ndarray) -> np.ndarray:
    """``pose`` as a float64 (4, 4) rigid transform with its rotation re-orthonormalised."""
    pose = np.asarray(pose, dtype=np.float64)
    if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
        raise PlanError(f"start: a pose of shape {pose.shape} must be a finite 4x4 matrix")
    rotation = pose[:3, :3]
    off = np.max(np.abs(rotation.T @ rotation - np.eye(3)))
    if off > _ORTHONORMAL_TOLERANCE or np.linalg.det(rotation) <= 0.0:
        raise PlanError(f"start: rotation is {off:.1e} from orthonormal; it must be a proper rotation")
    if np.max(np.abs(pose[3] - np.array([0.0, 0.0, 0.0, 1.0]))) > _ORTHONORMAL_TOLERANCE:
        raise PlanError(f"start: last row {pose[3].tolist()} must be [0, 0, 0, 1]")
    # Snap to the nearest rotation so every frame is rigid to machine precision.
    u, _, vt = np.linalg.svd(rotation)
    return make_pose(u @ vt, pose[:3, 3])


def trajectory(start: np.ndarray, move: Move, n_frames: int, fps: float) -> Trajectory:
    """Per-frame cam_to_world (n, 4, 4) and fov (n,) of ``move`` from the ``start`` pose."""
    if isinstance(n_frames, bool) or not isinstance(n_frames, int) or n_frames < 1:
        raise PlanError(f"n_frames: {n_frames!r} must be an integer >= 1")
    if not (math.isfinite(fps) and fps > 0):
        raise PlanError(f"fps: {fps!r} must be a finite number > 0")
    pose0 = _as_rigid(start)
    r0, p0 = pose0[:3, :3], pose0[:3, 3]
    t = np.arange(n_frames) / (n_frames - 1) if n_frames > 1 else np.zeros(1)  # (n,)
    e = np.asarray(ease(move.easing, t))  # (n,)
    pan, tilt, roll = move.rotate
    centre = np.asarray(move.orbit_center)
    motion = np.asarray(move.motion)

    orbit = axis_rotations(1, move.orbit * e)  # (n, 3, 3)
    offset = p0 + np.outer(e, r0 @ motion) - centre  # (n, 3) metres, from the orbit centre
    positions = centre + np.einsum("nij,nj->ni", orbit, offset)  # (n, 3)

    jitter = shake_angles(n_frames, fps, move.shake, move.shake_seed)  # (n, 3) degrees
    local = (  # rotations in the start camera's frame: tilt then roll, then shake
        axis_rotations(0, tilt * e)
        @ axis_rotations(2, -roll * e)
        @ axis_rotations(1, -jitter[:, 0])
        @ axis_rotations(0, jitter[:, 1])
        @ axis_rotations(2, -jitter[:, 2])
    )
    rotations = axis_rotations(1, -pan * e) @ orbit @ r0 @ local  # (n, 3, 3)

    poses = np.zeros((n_frames, 4, 4))  # (n, 4, 4) float64
    poses[:, :3, :3] = rotations
    poses[:, :3, 3] = positions
    poses[:, 3, 3] = 1.0

    fov_end = move.fov if move.fov_end is None else move.fov_end
    tan0 = math.tan(math.radians(move.fov) / 2.0)
    tan1 = math.tan(math.radians(fov_end) / 2.0)
    fovs = np.degrees(2.0 * np.arctan((1.0 - e) * tan0 + e * tan1))  # (n,)
    # tan/atan can be an ulp off; keep the script's own numbers where the shot starts/ends.
    fovs[e == 0.0] = move.fov
    fovs[e == 1.0] = fov_end
    return Trajectory(cam_to_world=poses, fov=fovs)


def frame_motion(traj: Trajectory) -> np.ndarray:
    """Per-step deltas (n-1, 6) in the previous camera's axes: x, y, z m; pan, tilt, roll deg.

    The relative rotation R_prev^T R_next is read as Ry(-pan) Rx(tilt) Rz(-roll) in the
    previous camera's axes, so the signs match the move grammar (pan > 0 turns right,
    tilt > 0 turns up, roll > 0 turns the body clockwise as seen from behind).
    """
    poses = traj.cam_to_world
    prev_r = poses[:-1, :3, :3]  # (n-1, 3, 3)
    prev_rt = np.swapaxes(prev_r, 1, 2)
    step = poses[1:, :3, 3] - poses[:-1, :3, 3]  # (n-1, 3) world metres
    translation = np.einsum("nij,nj->ni", prev_rt, step)  # (n-1, 3) local metres
    rel = prev_rt @ poses[1:, :3, :3]  # (n-1, 3, 3)
    # Ry(a) Rx(b) Rz(c) has [0,2] = sa*cb, [2,2] = ca*cb, [1,2] = -sb, [1,0] = cb*sc, [1,1] = cb*cc.
    yaw = np.arctan2(rel[:, 0, 2], rel[:, 2, 2])
    pitch = np.arctan2(-rel[:, 1, 2], np.hypot(rel[:, 1, 0], rel[:, 1, 1]))
    spin = np.arctan2(rel[:, 1, 0], rel[:, 1, 1])
    angles = np.degrees(np.stack([-yaw, pitch, -spin], axis=1))  # (n-1, 3) pan, tilt, roll
    return np.concatenate([translation, angles], axis=1)
