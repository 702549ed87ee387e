"""Camera checks measured on the frames: motion regularity (judder) and, below, recovered poses.

Judder: a steady camera move shows the same image motion from one frame to the next. Frames
repeated to reach a higher rate (16 fps shown at 30) move the picture on some frame steps and
not on others. :func:`judder` measures that irregularity: for every pair of neighbouring
frames the median optical flow (DIS) is the step's global motion; projected on the clip's mean
motion direction these steps should all be equal, and the judder score is their coefficient of
variation (standard deviation / mean). A clip with less than ``min_step_px`` mean motion per
frame has no move to judge and scores 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from daotai.plan import geometry

# Measured (tests/test_retime_judder.py): a 16 fps steady pan retimed to 30 fps scores 0.002
# motion-interpolated and 0.94 with repeated frames (the source: 0.000); 0.2 separates them widely.
JUDDER_BOUND = 0.2
MIN_STEP_PX = 0.25  # mean motion per frame below which a clip counts as still
FLOW_SIDE = 512  # flow is measured on frames shrunk to at most this wide (global motion needs no detail)


@dataclass(frozen=True)
class Judder:
    """Frame-to-frame motion regularity of a clip."""

    score: float  # coefficient of variation of the per-step motion along the mean direction (0 = even)
    mean_step_px: float  # mean motion per frame step, pixels of the full frame
    steps_px: tuple[float, ...]  # each step's motion along the mean direction

    @property
    def even(self) -> bool:
        """Whether the motion is even within :data:`JUDDER_BOUND`."""
        return self.score <= JUDDER_BOUND


def step_motions(frames: Iterable[np.ndarray]) -> np.ndarray:
    """Median optical flow (dx, dy) in full-frame pixels of every neighbouring pair: (N - 1, 2) float64."""
    import cv2

    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    previous, scale, motions = None, 1.0, []
    for frame in frames:
        grey = cv2.cvtColor(np.asarray(frame), cv2.COLOR_RGB2GRAY)
        if grey.shape[1] > FLOW_SIDE:
            scale = grey.shape[1] / FLOW_SIDE
            grey = cv2.resize(grey, (FLOW_SIDE, max(8, round(grey.shape[0] / scale))), interpolation=cv2.INTER_AREA)
        if previous is not None:
            flow = dis.calc(previous, grey, None)  # (h, w, 2) float32
            motions.append(np.median(flow.reshape(-1, 2), axis=0) * scale)
        previous = grey
    return np.array(motions, dtype=np.float64).reshape(-1, 2)


def judder(frames: Iterable[np.ndarray], min_step_px: float = MIN_STEP_PX) -> Judder:
    """The judder of a clip of (H, W, 3) uint8 frames (see the module docstring)."""
    motions = step_motions(frames)
    if len(motions) < 2:
        return Judder(0.0, 0.0, ())
    mean = motions.mean(axis=0)
    speed = float(np.linalg.norm(mean))
    if speed < min_step_px:
        return Judder(0.0, speed, tuple(float(v) for v in np.linalg.norm(motions, axis=1)))
    steps = motions @ (mean / speed)  # (N - 1,) signed motion along the mean direction
    return Judder(float(steps.std() / speed), speed, tuple(float(v) for v in steps))


# ---------------------------------------------------------------- recovered camera paths
#
# A shot's camera path is recovered from its frames with the plan's intrinsics by a two-view
# chain: features are tracked through the sampled frames (Lucas-Kanade, checked forward and
# backward, topped up when they thin out); for each step between two sampled frames a
# homography and an essential matrix compete for the tracks (RANSAC, 1 px). When the homography
# explains as many tracks as the essential matrix and has the form of a rotation (with an
# isotropic zoom), the step has no parallax: the camera turned (and the lens zoomed) without
# moving. Otherwise the essential matrix gives the rotation and the direction of travel; the
# step's length comes from the depths of tracks triangulated on earlier steps (the first moving
# step sets the unit). Poses are chained from frame 0 (OpenCV axes, frame 0 = identity).
#
# Metrics as CameraCtrl and CamI2V report them, after the recovered translations are scaled to
# the plan's by one least-squares factor per shot: RotErr = sum of geodesic angles between planned
# and recovered rotations (degrees here), TransErr = sum of the translation differences (plan
# metres), CamMC = sum of the Frobenius norms of the [R | t] differences.

TRACK_CORNERS = 800  # corners kept alive through the shot
TRACK_REFILL = 0.5  # detect new corners when fewer than this share of TRACK_CORNERS survive
RANSAC_PX = 1.0  # inlier threshold of both models, pixels
NO_PARALLAX_SHARE = 0.9  # a rotation (with zoom) explains this share of the essential matrix's inliers
MIN_STEP_TRACKS = 12  # a step with fewer tracks is skipped (its pose is the previous one)
STILL_PX = 0.05  # median track motion below which a step is still (no essential matrix is fitted)
KEY_STEP_PX = 4.0  # median motion (px) that makes the next key frame of a turning camera
NOISE_PX = 0.5  # median parallax below this is tracking noise: the camera only turned (or zoomed)
NOISE_SHARE = 0.03  # ... or below this share of the step's motion (trackers err more on long jumps)
PARALLAX_KEY_PX = 8.0  # median parallax (px) left by the best rotation that makes a moving camera's key frame
TRACK_KEEP = 0.5  # a key frame is also taken before fewer than this share of its tracks survive
MAX_STEP_TURN_DEG = 30.0  # an essential-matrix rotation this far from the homography's is the twisted pair


@dataclass(frozen=True)
class CameraPath:
    """A camera path recovered from frames: cam_to_world per sampled frame, frame 0's camera = identity."""

    indexes: tuple[int, ...]  # the frames the poses belong to
    poses: np.ndarray  # (N, 4, 4) cam_to_world, OpenCV axes, relative to frame indexes[0]; arbitrary scale
    focal_scale: np.ndarray  # (N,) focal length relative to the planned one (a zoom the plan lacks)
    parallax: tuple[bool, ...]  # per step (N - 1): whether the step showed parallax (the camera moved)
    skipped: int  # steps with too few tracks (their pose is the previous one)


def _grey(frame: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)


def _tracks(frames: list[np.ndarray]) -> list[dict[int, np.ndarray]]:
    """Per frame, track id -> pixel position (u, v) with pixel centres at +0.5 (docs/conventions.md)."""
    import cv2

    lk = dict(winSize=(21, 21), maxLevel=3, criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01))
    out: list[dict[int, np.ndarray]] = []
    next_id, ids, points, previous = 0, np.zeros(0, np.int64), np.zeros((0, 2), np.float32), None
    for frame in frames:
        grey = _grey(frame)
        if previous is not None and len(points):
            p1, st1, _ = cv2.calcOpticalFlowPyrLK(previous, grey, points.reshape(-1, 1, 2), None, **lk)
            p0, st2, _ = cv2.calcOpticalFlowPyrLK(grey, previous, p1, None, **lk)
            p1, p0 = p1.reshape(-1, 2), p0.reshape(-1, 2)
            h, w = grey.shape
            keep = ((st1.ravel() == 1) & (st2.ravel() == 1) & (np.linalg.norm(p0 - points, axis=1) < 0.5)
                    & (p1[:, 0] >= 0) & (p1[:, 0] <= w - 1) & (p1[:, 1] >= 0) & (p1[:, 1] <= h - 1))
            ids, points = ids[keep], p1[keep]
        if len(points) < TRACK_REFILL * TRACK_CORNERS:
            mask = np.full(grey.shape, 255, np.uint8)
            for x, y in points:
                cv2.circle(mask, (int(x), int(y)), 7, 0, -1)
            found = cv2.goodFeaturesToTrack(grey, TRACK_CORNERS - len(points), 0.005, 7, mask=mask, blockSize=7)
            if found is not None:
                found = found.reshape(-1, 2).astype(np.float32)
                ids = np.concatenate([ids, np.arange(next_id, next_id + len(found))])
                points = np.concatenate([points, found])
                next_id += len(found)
        out.append({int(i): p.astype(np.float64) + 0.5 for i, p in zip(ids, points, strict=True)})
        previous = grey
    return out


def _normalised(uv: np.ndarray, intrinsics: geometry.Intrinsics) -> np.ndarray:
    """Pixels (N, 2) -> normalised OpenCV image coordinates (N, 2) ((u - cx) / fx, (v - cy) / fy)."""
    fx, fy, cx, cy = intrinsics
    return np.stack([(uv[:, 0] - cx) / fx, (uv[:, 1] - cy) / fy], axis=1)


def _rotation(matrix: np.ndarray) -> np.ndarray:
    """The rotation nearest a 3x3 matrix (SVD, det +1)."""
    u, _, vt = np.linalg.svd(matrix)
    r = u @ vt
    if np.linalg.det(r) < 0:
        u[:, -1] *= -1
        r = u @ vt
    return r


def rotation_with_zoom(h: np.ndarray) -> tuple[np.ndarray, float]:
    """The rotation R and zoom z nearest a homography of normalised coordinates: h ∝ diag(z, z, 1) R."""
    m = h / np.cbrt(np.linalg.det(h))
    mm = m @ m.T  # diag(z^2, z^2, 1) / c^2 for an exact rotation with zoom
    z = float(np.sqrt(0.5 * (mm[0, 0] + mm[1, 1]) / mm[2, 2]))
    return _rotation(np.diag([1.0 / z, 1.0 / z, 1.0]) @ m), z


def _transfer_px(xa: np.ndarray, xb: np.ndarray, rotation: np.ndarray, zoom: float, focal: float) -> np.ndarray:
    """Pixel distances (N,) between tracks in b and tracks in a moved by a rotation with zoom (no parallax)."""
    rays = np.hstack([xa, np.ones((len(xa), 1))]) @ rotation.T  # (N, 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        predicted = zoom * rays[:, :2] / rays[:, 2:3]
    error = np.linalg.norm(predicted - xb, axis=1) * focal
    return np.where(rays[:, 2] > 0, error, np.inf)


def _triangulate(xa: np.ndarray, xb: np.ndarray, rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """Points (N, 3) in camera a from normalised coordinates, camera b = [R | t] of camera a."""
    import cv2

    pa = np.hstack([np.eye(3), np.zeros((3, 1))])
    pb = np.hstack([rotation, translation.reshape(3, 1)])
    homogeneous = cv2.triangulatePoints(pa, pb, xa.T.astype(np.float64), xb.T.astype(np.float64))
    return (homogeneous[:3] / homogeneous[3]).T


def recover_path(frames: Iterable[np.ndarray], intrinsics: list[geometry.Intrinsics] | geometry.Intrinsics,
                 stride: int = 1) -> CameraPath:
    """The camera path of (H, W, 3) uint8 frames with known intrinsics (pixels, one per frame or one for all)."""
    import cv2

    sampled = [(i, np.asarray(f)) for i, f in enumerate(frames) if i % stride == 0]
    if len(sampled) < 2:
        raise ValueError("a camera path needs at least two frames")
    per_frame = intrinsics if isinstance(intrinsics, list) else None

    def lens(index: int) -> geometry.Intrinsics:
        return per_frame[index] if per_frame is not None else intrinsics

    tracks = _tracks([f for _, f in sampled])
    indexes, poses, focal, parallax = [sampled[0][0]], [np.eye(4)], [1.0], []
    world: dict[int, np.ndarray] = {}  # track id -> point in frame 0's camera (the recovered scale)
    last_length, skipped, key = None, 0, 0
    for k in range(1, len(sampled)):
        last = k == len(sampled) - 1
        common = sorted(set(tracks[key]) & set(tracks[k]))
        thinning = len(common) < TRACK_KEEP * len(tracks[key])
        if len(common) < MIN_STEP_TRACKS:
            if not last and not thinning:
                continue
            indexes.append(sampled[k][0])
            poses.append(poses[-1].copy())
            focal.append(focal[-1])
            parallax.append(False)
            skipped += 1
            key = k
            continue
        ka, kb = lens(sampled[key][0]), lens(sampled[k][0])
        f = float(kb[1])
        xa = _normalised(np.array([tracks[key][i] for i in common]), ka)
        xb = _normalised(np.array([tracks[k][i] for i in common]), kb)
        moved = float(np.median(np.linalg.norm(xb - xa, axis=1))) * f  # px, with the planned lens change removed
        rotation, zoom, shift = np.eye(3), 1.0, moved
        if moved > STILL_PX:
            h, _ = cv2.findHomography(xa, xb, cv2.RANSAC, RANSAC_PX / f)
            if h is not None:
                rotation, zoom = rotation_with_zoom(h)
                shift = float(np.median(_transfer_px(xa, xb, rotation, zoom, f)))  # parallax left over
        # The tracks moved as a rotation (with zoom) moves them, within tracking noise: no parallax.
        turned = shift <= max(NOISE_PX, NOISE_SHARE * moved)
        if turned and not (last or thinning or moved >= KEY_STEP_PX):
            continue  # too little motion since the key frame to measure well: wait
        if not turned and shift < PARALLAX_KEY_PX and not (last or thinning):
            continue  # some parallax, too little for the direction of travel: wait for a longer baseline
        moving = not turned
        if moving:
            try:
                e, e_inliers = cv2.findEssentialMat(xa, xb, np.eye(3), cv2.RANSAC, 0.999, RANSAC_PX / f)
            except cv2.error:
                e = None
            moving = e is not None and e.shape == (3, 3) and int(e_inliers.sum()) >= MIN_STEP_TRACKS
        if moving:
            _, r_e, t_unit, pose_mask = cv2.recoverPose(e, xa, xb, np.eye(3), mask=e_inliers.copy())
            # The twisted-pair solution of a nearly degenerate step turns the camera by ~180 degrees.
            moving = float(geodesic_deg(r_e[None], rotation[None])[0]) < MAX_STEP_TURN_DEG
        indexes.append(sampled[k][0])
        key_pose = poses[-1]
        key = k
        if not moving:
            step = np.eye(4)
            step[:3, :3] = rotation  # X_b = R X_a
            poses.append(key_pose @ np.linalg.inv(step))
            focal.append(focal[-1] * zoom)
            parallax.append(False)
            continue
        t_unit = t_unit.ravel()
        good = pose_mask.ravel() > 0
        unit_points = _triangulate(xa[good], xb[good], r_e, t_unit)  # camera a, unit baseline
        ids = [common[i] for i in np.flatnonzero(good)]
        w2c_key = np.linalg.inv(key_pose)
        ratios = []
        for track_id, point in zip(ids, unit_points, strict=True):
            if track_id in world and point[2] > 0:
                known = w2c_key[:3, :3] @ world[track_id] + w2c_key[:3, 3]
                if known[2] > 0:
                    ratios.append(known[2] / point[2])
        length = float(np.median(ratios)) if len(ratios) >= 8 else last_length if last_length is not None else 1.0
        last_length = length
        step = np.eye(4)
        step[:3, :3], step[:3, 3] = r_e, length * t_unit
        poses.append(key_pose @ np.linalg.inv(step))
        focal.append(focal[-1])
        parallax.append(True)
        for track_id, point in zip(ids, unit_points * length, strict=True):
            if point[2] > 0:
                world[track_id] = key_pose[:3, :3] @ point + key_pose[:3, 3]
    return CameraPath(tuple(indexes), np.stack(poses), np.array(focal), tuple(parallax), skipped)


def relative_cv(cam_to_world: np.ndarray) -> np.ndarray:
    """Planned cam_to_world (N, 4, 4) (OpenGL axes) -> relative to the first, OpenCV axes (first = identity)."""
    cv = geometry.gl_to_cv(np.asarray(cam_to_world, dtype=np.float64))
    return np.linalg.inv(cv[0]) @ cv


def geodesic_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angles (N,) in degrees between rotations a and b (N, 3, 3)."""
    # ||A - B||_F = 2 sqrt(2) sin(angle / 2) for rotations: stable near 0, unlike arccos of the trace
    chord = np.linalg.norm((np.asarray(a) - np.asarray(b)).reshape(len(a), -1), axis=1)
    return np.degrees(2.0 * np.arcsin(np.clip(chord / (2.0 * np.sqrt(2.0)), 0.0, 1.0)))


@dataclass(frozen=True)
class CameraErrors:
    """RotErr, TransErr and CamMC of a recovered path against the planned one (sums over the compared frames)."""

    rot_err_deg: float
    trans_err: float  # plan metres, after the recovered translations are scaled by ``scale``
    cam_mc: float
    frames: int  # frames compared (frame 0, identity in both, included)
    scale: float  # the least-squares factor applied to the recovered translations
    planned_path_m: float  # length of the planned path (metres) and total planned rotation (degrees),
    planned_turn_deg: float  # for reading the sums in proportion


def camera_errors(planned: np.ndarray, recovered: np.ndarray) -> CameraErrors:
    """Errors of ``recovered`` cam_to_world (N, 4, 4) against ``planned`` (N, 4, 4), both relative to frame 0."""
    t_plan, t_rec = planned[:, :3, 3], recovered[:, :3, 3]
    norm = float((t_rec * t_rec).sum())
    scale = float((t_plan * t_rec).sum() / norm) if norm > 1e-12 else 1.0
    scale = max(scale, 0.0)  # a path recovered backwards is not turned round by the scale
    angles = geodesic_deg(planned[:, :3, :3], recovered[:, :3, :3])
    trans = np.linalg.norm(t_plan - scale * t_rec, axis=1)
    scaled = recovered[:, :3, :4].copy()
    scaled[:, :, 3] *= scale
    mc = np.linalg.norm((planned[:, :3, :4] - scaled).reshape(len(planned), -1), axis=1)
    path = float(np.linalg.norm(np.diff(t_plan, axis=0), axis=1).sum())
    turn = float(geodesic_deg(planned[:-1, :3, :3], planned[1:, :3, :3]).sum())
    return CameraErrors(float(angles.sum()), float(trans.sum()), float(mc.sum()), len(planned), scale, path, turn)


# ---------------------------------------------------------------- the check against the plan
#
# Bounds, per compared frame (measured on previz renders of every example, whose cameras are
# exact: worst 3.9 deg and 0.22 m, on a pedestal move and an orbit; see tests/test_camera_metrics.py).
ROT_BOUND_DEG = 5.0  # mean RotErr per frame allowed, plus ROT_BOUND_SHARE of the planned turn
ROT_BOUND_SHARE = 0.1
TRANS_BOUND_M = 0.05  # mean TransErr per frame allowed, plus TRANS_BOUND_SHARE of the planned path
TRANS_BOUND_SHARE = 0.25
TIMING_BOUND = 0.2  # largest gap between planned and recovered progress along the move (share of it)
MOVE_TURN_DEG = 5.0  # a plan turning at least this much has a direction and a timing to check
MOVE_PATH_M = 0.2  # a plan travelling at least this far has a direction of travel, parallax and a timing
ZOOM_SHARE = 0.05  # a recovered focal change beyond this share is a zoom


@dataclass(frozen=True)
class CameraPathCheck:
    """A shot's recovered camera path against its plan: the standard metrics, bounds, and what is wrong."""

    errors: CameraErrors
    rot_bound_deg: float  # per frame
    trans_bound_m: float  # per frame
    zoom: float  # recovered focal change over the shot (1 = none)
    parallax_steps: int  # steps that showed the camera travelling
    steps: int
    reasons: tuple[str, ...]  # empty when the camera followed the plan

    @property
    def passed(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict:
        e = self.errors
        return {"RotErr_deg": round(e.rot_err_deg, 3), "TransErr_m": round(e.trans_err, 4), "CamMC": round(e.cam_mc, 4),
                "frames_compared": e.frames, "RotErr_per_frame_deg": round(e.rot_err_deg / e.frames, 3),
                "TransErr_per_frame_m": round(e.trans_err / e.frames, 4), "rot_bound_deg": round(self.rot_bound_deg, 3),
                "trans_bound_m": round(self.trans_bound_m, 4), "scale": round(e.scale, 5), "zoom": round(self.zoom, 4),
                "parallax_steps": self.parallax_steps, "steps": self.steps, "passed": self.passed,
                "reasons": list(self.reasons)}


def _progress(amount: np.ndarray) -> np.ndarray | None:
    """Progress (N,) in [0, 1] along a move from its amount per frame; None when the amount is not monotonic."""
    total = amount[-1]
    if total <= 0 or np.any(np.diff(amount) < -0.02 * total):
        return None
    return amount / total


def _rotation_vector(rotation: np.ndarray) -> np.ndarray:
    """Axis times angle (3,) of a rotation matrix."""
    import cv2

    vector, _ = cv2.Rodrigues(rotation)
    return vector.ravel()


def check_camera_path(planned: np.ndarray, path: CameraPath) -> CameraPathCheck:
    """Compare a recovered path with the planned cam_to_world (N, 4, 4) of the same frames (relative, OpenCV)."""
    errors = camera_errors(planned, path.poses)
    n = errors.frames
    rot_bound = ROT_BOUND_DEG + ROT_BOUND_SHARE * errors.planned_turn_deg
    trans_bound = TRANS_BOUND_M + TRANS_BOUND_SHARE * errors.planned_path_m
    zoom = float(path.focal_scale[-1])
    reasons = []
    turn = errors.planned_turn_deg >= MOVE_TURN_DEG
    travel = errors.planned_path_m >= MOVE_PATH_M
    t_plan, t_rec = planned[-1, :3, 3], path.poses[-1, :3, 3]
    if turn:
        want, got = _rotation_vector(planned[-1, :3, :3]), _rotation_vector(path.poses[-1, :3, :3])
        if np.linalg.norm(want) > np.radians(MOVE_TURN_DEG / 2) and float(want @ got) < 0:
            reasons.append(f"turns the opposite way to the plan ({np.degrees(np.linalg.norm(want)):.0f} deg planned)")
    if travel and not any(path.parallax):
        zoomed = f"; the picture zooms x{zoom:.2f} instead" if abs(zoom - 1.0) > ZOOM_SHARE else ""
        reasons.append(f"does not travel (no parallax) where the plan moves {errors.planned_path_m:.2f} m{zoomed}")
    elif travel and np.linalg.norm(t_plan) > 0.5 * MOVE_PATH_M and np.linalg.norm(t_rec) > 0:
        cos = float(t_plan @ t_rec / (np.linalg.norm(t_plan) * np.linalg.norm(t_rec)))
        if cos < 0:
            reasons.append("travels the opposite way to the plan")
    if not reasons and (turn or travel):
        if turn and (not travel or errors.planned_turn_deg >= 10.0):
            planned_amount = geodesic_deg(np.broadcast_to(np.eye(3), planned[:, :3, :3].shape), planned[:, :3, :3])
            recovered_amount = geodesic_deg(np.broadcast_to(np.eye(3), planned[:, :3, :3].shape), path.poses[:, :3, :3])
        else:
            planned_amount = np.linalg.norm(planned[:, :3, 3], axis=1)
            recovered_amount = np.linalg.norm(path.poses[:, :3, 3], axis=1)
        want_p, got_p = _progress(planned_amount), _progress(recovered_amount)
        if want_p is not None and got_p is not None:
            gap = got_p - want_p
            worst = int(np.argmax(np.abs(gap)))
            if abs(gap[worst]) > TIMING_BOUND:
                side = "ahead of" if gap[worst] > 0 else "behind"
                reasons.append(f"runs {side} the plan by {abs(gap[worst]) * 100:.0f}% of the move at frame "
                               f"{path.indexes[worst]} (dropped or repeated frames, or another speed)")
    if not reasons:
        if errors.rot_err_deg / n > rot_bound:
            reasons.append(f"rotation off the plan: RotErr {errors.rot_err_deg / n:.1f} deg a frame "
                           f"(bound {rot_bound:.1f})")
        if errors.trans_err / n > trans_bound:
            reasons.append(f"position off the plan: TransErr {errors.trans_err / n:.2f} m a frame "
                           f"(bound {trans_bound:.2f})")
    return CameraPathCheck(errors, rot_bound, trans_bound, zoom, sum(path.parallax), len(path.parallax), tuple(reasons))


def check_shot_camera(frames: Iterable[np.ndarray], cam_to_world: np.ndarray,
                      intrinsics: list[geometry.Intrinsics], stride: int = 1) -> CameraPathCheck:
    """Recover a shot's camera from its frames with the planned intrinsics and check it against the plan.

    ``cam_to_world`` (F, 4, 4): the plan's poses (OpenGL axes) of every frame; ``intrinsics``: per frame, pixels.
    """
    path = recover_path(frames, list(intrinsics), stride)
    planned = relative_cv(np.asarray(cam_to_world)[list(path.indexes)])
    return check_camera_path(planned, path)
