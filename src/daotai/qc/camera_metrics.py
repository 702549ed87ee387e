"""Camera checks measured on the frames: motion regularity (judder) and, below, recovered poses.

Judder: a steady camera move shows the same image motion from one frame to the next. Frames
repeated to reach a higher rate (16 fps shown at 30) move the picture on some frame steps and
not on others. :func:`judder` measures that irregularity: for every pair of neighbouring
frames the median optical flow (DIS) is the step's global motion; projected on the clip's mean
motion direction these steps should all be equal, and the judder score is their coefficient of
variation (standard deviation / mean). A clip with less than ``min_step_px`` mean motion per
frame has no move to judge and scores 0.

That score assumes a steady move: an eased start or stop varies the steps too. QC judges any
planned move, so it reads ``jerk`` instead: the mean size of the second differences of the step
lengths (s[i+1] - 2 s[i] + s[i-1], s = the median length of the step's flow, so a roll, a dolly and a
zoom count too) over the mean step length. Easing changes the step a little from one frame to
the next (a 48-frame ease-in-out: under 0.01 of the mean step); a repeated frame makes a step
of 0 between two full ones, a second difference of about twice the mean step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from daotai.plan import geometry

# Measured (tests/test_retime_judder.py): a 16 fps steady pan retimed to 30 fps scores 0.002
# motion-interpolated and 0.94 with repeated frames (the source: 0.000); 0.2 separates them widely.
JUDDER_BOUND = 0.2
# Measured (tests/test_camera_metrics_qc.py, print with -s; QC of examples/*.json previz renders): moves
# at 1 px a frame or more jerk 0.12-0.33, a previz close-up truck 0.44 (tracks on the subject); frames
# repeated to show 16 fps at 24: 2.2. One repeat in five (24 at 30) works out at 1.0.
JERK_BOUND = 0.7
# The jerk's noise grows as the step shrinks (flow noise of ~0.05 px over a 0.3 px step reads 0.4);
# QC judges pictures moving at least this much a frame, where repeated frames are also visible.
JUDGED_SPEED_PX = 1.0
MIN_STEP_PX = 0.25  # mean motion per frame below which a clip counts as still
FLOW_SIDE = 512  # flow is measured on frames shrunk to at most this wide (global motion needs no detail)


@dataclass(frozen=True)
class Judder:
    """Frame-to-frame motion regularity of a clip."""

    score: float  # coefficient of variation of the per-step motion along the mean direction (0 = even)
    mean_step_px: float  # mean motion per frame step, pixels of the full frame
    steps_px: tuple[float, ...]  # each step's motion along the mean direction
    jerk: float = 0.0  # mean |second difference of the step lengths| / mean step length (0 = even or eased)
    mean_speed_px: float = 0.0  # mean median flow length per step, full-frame pixels (what the jerk is judged on)

    @property
    def even(self) -> bool:
        """Whether the motion is even within :data:`JUDDER_BOUND`."""
        return self.score <= JUDDER_BOUND

    @property
    def smooth(self) -> bool:
        """Whether no frame step jumps out of the move (repeated or dropped frames) within :data:`JERK_BOUND`."""
        return self.jerk <= JERK_BOUND


def _step_flows(frames: Iterable[np.ndarray], preset: int | None, side: int) -> np.ndarray:
    """Per neighbouring pair: median flow (dx, dy) and median flow length, full-frame pixels: (N - 1, 3)."""
    import cv2

    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM if preset is None else preset)
    previous, scale, rows = None, 1.0, []
    for frame in frames:
        grey = cv2.cvtColor(np.asarray(frame), cv2.COLOR_RGB2GRAY)
        if grey.shape[1] > side:
            scale = grey.shape[1] / side
            grey = cv2.resize(grey, (side, max(8, round(grey.shape[0] / scale))), interpolation=cv2.INTER_AREA)
        if previous is not None:
            # every other pixel each way: the medians barely change, their cost (more than the flow's) quarters
            flow = dis.calc(previous, grey, None)[::2, ::2].reshape(-1, 2)  # (h * w / 4, 2) float32
            rows.append([*np.median(flow, axis=0), np.median(np.linalg.norm(flow, axis=1))])
        previous = grey
    return np.array(rows, dtype=np.float64).reshape(-1, 3) * scale


def step_motions(frames: Iterable[np.ndarray], preset: int | None = None, side: int = FLOW_SIDE) -> np.ndarray:
    """Median optical flow (dx, dy) in full-frame pixels of every neighbouring pair: (N - 1, 2) float64.

    ``preset``: OpenCV's DIS preset (default: medium); ``side``: frames are shrunk to at most this wide."""
    return _step_flows(frames, preset, side)[:, :2]


def judder(frames: Iterable[np.ndarray], min_step_px: float = MIN_STEP_PX, pixel_scale: float = 1.0,
           preset: int | None = None, side: int = FLOW_SIDE) -> Judder:
    """The judder of a clip of (H, W, 3) uint8 frames (see the module docstring).

    ``pixel_scale``: full-frame pixels per pixel of ``frames`` (frames shrunk before the call)."""
    flows = _step_flows(frames, preset, side) * pixel_scale
    return judder_of_motions(flows[:, :2], min_step_px, flows[:, 2])


def judder_of_motions(motions: np.ndarray, min_step_px: float = MIN_STEP_PX,
                      speeds: np.ndarray | None = None) -> Judder:
    """The judder of a clip from its per-step global motions (N - 1, 2) in pixels.

    ``speeds`` (N - 1,): each step's median flow length, which the jerk is measured on (a roll,
    a dolly or a zoom moves the picture with a median flow near zero); default: the motions' lengths."""
    speeds = np.linalg.norm(motions, axis=1) if speeds is None else np.asarray(speeds, dtype=np.float64)
    mean_speed = float(speeds.mean()) if len(speeds) else 0.0
    jerk = float(np.abs(np.diff(speeds, 2)).mean() / mean_speed) \
        if len(speeds) >= 3 and mean_speed >= min_step_px else 0.0
    if len(motions) < 2:
        return Judder(0.0, 0.0, (), 0.0, mean_speed)
    mean = motions.mean(axis=0)
    speed = float(np.linalg.norm(mean))
    if speed < min_step_px:
        return Judder(0.0, speed, tuple(float(v) for v in np.linalg.norm(motions, axis=1)), jerk, mean_speed)
    steps = motions @ (mean / speed)  # (N - 1,) signed motion along the mean direction
    return Judder(float(steps.std() / speed), speed, tuple(float(v) for v in steps), jerk, mean_speed)


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
# step sets the unit). Poses are chained from frame 0 (OpenCV axes, frame 0 = identity). Once the
# chain has triangulated points, every sampled frame is placed on them and the points and poses are
# adjusted together (see "every frame placed on the map" below): the key frames keep those poses.
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


def _tracks(frames: list[np.ndarray], excludes: list[np.ndarray | None] | None = None) -> list[dict[int, np.ndarray]]:
    """Per frame, track id -> pixel position (u, v) with pixel centres at +0.5 (docs/conventions.md).

    ``excludes``: per frame an (H, W) bool map (or None) of pixels that move on their own (walkers,
    screen-space labels): no track starts there and a track that enters one ends."""
    import cv2

    lk = dict(winSize=(21, 21), maxLevel=3, criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01))
    out: list[dict[int, np.ndarray]] = []
    next_id, ids, points, previous = 0, np.zeros(0, np.int64), np.zeros((0, 2), np.float32), None
    for index, frame in enumerate(frames):
        exclude = excludes[index] if excludes is not None else None
        grey = _grey(frame)
        if previous is not None and len(points):
            p1, st1, _ = cv2.calcOpticalFlowPyrLK(previous, grey, points.reshape(-1, 1, 2), None, **lk)
            p0, st2, _ = cv2.calcOpticalFlowPyrLK(grey, previous, p1, None, **lk)
            p1, p0 = p1.reshape(-1, 2), p0.reshape(-1, 2)
            h, w = grey.shape
            keep = ((st1.ravel() == 1) & (st2.ravel() == 1) & (np.linalg.norm(p0 - points, axis=1) < 0.5)
                    & (p1[:, 0] >= 0) & (p1[:, 0] <= w - 1) & (p1[:, 1] >= 0) & (p1[:, 1] <= h - 1))
            ids, points = ids[keep], p1[keep]
        if exclude is not None and len(points):
            rows = np.clip(points[:, 1].astype(int), 0, grey.shape[0] - 1)
            cols = np.clip(points[:, 0].astype(int), 0, grey.shape[1] - 1)
            inside = exclude[rows, cols]
            ids, points = ids[~inside], points[~inside]
        if len(points) < TRACK_REFILL * TRACK_CORNERS:
            mask = np.full(grey.shape, 255, np.uint8)
            if exclude is not None:
                mask[exclude] = 0
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


def triangulate(xa: np.ndarray, xb: np.ndarray, rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """Points (N, 3) in camera a from normalised coordinates, camera b = [R | t] of camera a.

    Linear (DLT) triangulation: each point is the null vector of the 4x4 system its two views
    give, solved for all points at once by one batched SVD. Written here rather than called
    from OpenCV because ``cv2.triangulatePoints`` returns None in OpenCV 5.0."""
    pa = np.hstack([np.eye(3), np.zeros((3, 1))])  # (3, 4)
    pb = np.hstack([rotation, translation.reshape(3, 1)])  # (3, 4)
    xa = np.asarray(xa, dtype=np.float64)  # (N, 2)
    xb = np.asarray(xb, dtype=np.float64)  # (N, 2)
    system = np.stack([
        xa[:, :1] * pa[2] - pa[0],
        xa[:, 1:2] * pa[2] - pa[1],
        xb[:, :1] * pb[2] - pb[0],
        xb[:, 1:2] * pb[2] - pb[1],
    ], axis=1)  # (N, 4, 4)
    homogeneous = np.linalg.svd(system)[2][:, -1, :]  # (N, 4): right singular vector of the smallest value
    with np.errstate(divide="ignore", invalid="ignore"):
        return homogeneous[:, :3] / homogeneous[:, 3:4]


def sampson_px(e: np.ndarray, xa: np.ndarray, xb: np.ndarray, focal: float) -> np.ndarray:
    """Sampson distances (N,) in pixels of track pairs (normalised (N, 2) each) from an essential matrix."""
    ha = np.hstack([xa, np.ones((len(xa), 1))])
    hb = np.hstack([xb, np.ones((len(xb), 1))])
    line_b, line_a = ha @ e.T, hb @ e  # epipolar lines in b and in a, (N, 3)
    residual = np.einsum("ij,ij->i", hb, line_b)
    gradient = line_b[:, 0] ** 2 + line_b[:, 1] ** 2 + line_a[:, 0] ** 2 + line_a[:, 1] ** 2
    return np.abs(residual) / np.sqrt(np.maximum(gradient, 1e-300)) * focal


# Robust estimators tried for each step's essential matrix. A short sideways move with a turn (an
# orbit) reads almost as well as a move forward (the bas-relief ambiguity), and which one a single
# RANSAC lands on changed with a 0.03-level difference between two GPUs' renders of the same shot.
# Every estimator's answer is a candidate; the path keeps the one the points already placed agree
# with (see recover_path).
ESSENTIAL_METHODS = ("RANSAC", "LMEDS", "USAC_ACCURATE", "USAC_MAGSAC")
MAP_MIN_POINTS = 8  # placed points seen again that let the map choose between a step's candidates


def essential_candidates(xa: np.ndarray, xb: np.ndarray, focal: float) -> list[tuple[float, np.ndarray]]:
    """Essential matrices (3, 3) of normalised track pairs (N, 2) from several robust estimators, best first.

    Each is scored by the mean of squared Sampson distances capped at RANSAC_PX (an MSAC score over
    every track), so a degenerate fit that only some tracks obey scores worse than one most obey."""
    import cv2

    out: list[tuple[float, np.ndarray]] = []
    for name in ESSENTIAL_METHODS:
        try:
            found, _ = cv2.findEssentialMat(xa, xb, np.eye(3), getattr(cv2, name), 0.999, RANSAC_PX / focal)
        except cv2.error:
            continue
        if found is None or found.ndim != 2 or found.shape[1] != 3:
            continue
        for j in range(0, found.shape[0] - 2, 3):
            e = found[j:j + 3]
            cost = float(np.mean(np.minimum(sampson_px(e, xa, xb, focal), RANSAC_PX) ** 2))
            out.append((cost, e))
    return sorted(out, key=lambda c: c[0])


def _choose_step(xa: np.ndarray, xb: np.ndarray, focal: float, common: list[int], rotation: np.ndarray,
                 w2c_key: np.ndarray, world: dict[int, np.ndarray], last_length: float | None):
    """The moving step from key frame a to frame b: (R, unit t, length, track ids, unit-baseline points), or None.

    Each candidate essential matrix gives a pose (a twisted pair, turning far from the homography's
    rotation, is dropped); its points are scaled to the map (points already placed, ``world``,
    in frame 0's camera) and the candidate whose step puts the map's points where frame b sees them
    (median reprojection error) wins; with too few map points seen again, the best MSAC score wins."""
    import cv2

    best = None
    for rank, (_, e) in enumerate(essential_candidates(xa, xb, focal)):
        inliers = sampson_px(e, xa, xb, focal) <= RANSAC_PX
        if int(inliers.sum()) < MIN_STEP_TRACKS:
            continue
        _, r_e, t_unit, mask = cv2.recoverPose(e, xa, xb, np.eye(3), mask=inliers.astype(np.uint8).reshape(-1, 1))
        if float(geodesic_deg(r_e[None], rotation[None])[0]) >= MAX_STEP_TURN_DEG:
            continue
        t_unit = t_unit.ravel()
        good = mask.ravel() > 0
        unit_points = triangulate(xa[good], xb[good], r_e, t_unit)  # camera a, unit baseline
        ids = [common[i] for i in np.flatnonzero(good)]
        ratios = []
        for track_id, point in zip(ids, unit_points, strict=True):
            if track_id in world and point[2] > 0:
                known = w2c_key[:3, :3] @ world[track_id] + w2c_key[:3, 3]
                if known[2] > 0:
                    ratios.append(known[2] / point[2])
        length = float(np.median(ratios)) if len(ratios) >= MAP_MIN_POINTS else (
            last_length if last_length is not None else 1.0)
        seen = [i for i, track_id in enumerate(common) if track_id in world]
        score: tuple[float, float] = (1.0, float(rank))  # no map to judge by: the MSAC order
        if len(seen) >= MAP_MIN_POINTS and len(ratios) >= MAP_MIN_POINTS:
            in_a = np.array([w2c_key[:3, :3] @ world[common[i]] + w2c_key[:3, 3] for i in seen])  # (M, 3)
            in_b = in_a @ r_e.T + length * t_unit
            with np.errstate(divide="ignore", invalid="ignore"):
                error = np.linalg.norm(in_b[:, :2] / in_b[:, 2:3] - xb[seen], axis=1) * focal
            error = np.where(in_b[:, 2] > 0, error, np.inf)
            score = (0.0, float(np.median(error)))
        if best is None or score < best[0]:
            best = (score, (r_e, t_unit, length, ids, unit_points))
    return None if best is None else best[1]


def recover_path(frames: Iterable[np.ndarray], intrinsics: list[geometry.Intrinsics] | geometry.Intrinsics,
                 stride: int = 1, excludes: list[np.ndarray | None] | None = None) -> CameraPath:
    """The camera path of (H, W, 3) uint8 frames with known intrinsics (pixels, one per frame or one for all).

    ``excludes``: per frame (all frames, not only the sampled ones) an (H, W) bool map of pixels
    to keep tracks out of, or None."""
    import cv2

    sampled = [(i, np.asarray(f)) for i, f in enumerate(frames) if i % stride == 0]
    if len(sampled) < 2:
        raise ValueError("a camera path needs at least two frames")
    per_frame = intrinsics if isinstance(intrinsics, list) else None

    def lens(index: int) -> geometry.Intrinsics:
        return per_frame[index] if per_frame is not None else intrinsics

    tracks = _tracks([f for _, f in sampled], [excludes[i] for i, _ in sampled] if excludes is not None else None)
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
        key_pose = poses[-1]
        chosen = None
        if moving:
            chosen = _choose_step(xa, xb, f, common, rotation, np.linalg.inv(key_pose), world, last_length)
            moving = chosen is not None
        indexes.append(sampled[k][0])
        key = k
        if not moving:
            step = np.eye(4)
            step[:3, :3] = rotation  # X_b = R X_a
            poses.append(key_pose @ np.linalg.inv(step))
            focal.append(focal[-1] * zoom)
            parallax.append(False)
            continue
        r_e, t_unit, length, ids, unit_points = chosen
        last_length = length
        step = np.eye(4)
        step[:3, :3], step[:3, 3] = r_e, length * t_unit
        poses.append(key_pose @ np.linalg.inv(step))
        focal.append(focal[-1])
        parallax.append(True)
        for track_id, point in zip(ids, unit_points * length, strict=True):
            if point[2] > 0:
                world[track_id] = key_pose[:3, :3] @ point + key_pose[:3, 3]
    poses_out = np.stack(poses)
    if any(parallax) and np.all(np.abs(np.array(focal) - 1.0) <= ZOOM_SHARE):
        observed = [_normalised_tracks(t, lens(i)) for (i, _), t in zip(sampled, tracks, strict=True)]
        keys = [i // stride for i in indexes]  # positions of the key frames among the sampled ones
        placed = _adjusted_poses(observed, _chained(keys, poses_out, len(sampled)), world,
                                 [float(lens(i)[1]) for i, _ in sampled])[keys]
        turned = geodesic_deg(placed[:, :3, :3], poses_out[:, :3, :3])
        if float(turned.max()) <= MAP_AGREE_DEG:
            poses_out = placed
    return CameraPath(tuple(indexes), poses_out, np.array(focal), tuple(parallax), skipped)


# ---------------------------------------------------------------- every frame placed on the map
#
# The chain above measures each moving step between two key frames alone: a short last step (the
# shot ends before a long baseline builds up) gets its length from points triangulated over that
# short baseline, and which frames become key frames turns on sub-pixel differences. Two renders
# of one dolly that differ by 0.09 levels on average (two GPUs' rasterisation at triangle edges)
# picked different key frames and the last step's length came out over ten times too long on one
# of them: the path ran 22% behind its plan and failed. So once the chain has a map, every sampled
# frame is placed on it by PnP (RANSAC, then Levenberg-Marquardt on the inliers), the map is
# triangulated again from all the frames that see each track, and the two alternate for
# ADJUST_ROUNDS rounds (a bundle adjustment by resection and intersection; frame 0 stays fixed).
# A frame that sees too few map points keeps its step from the frame before it.
ADJUST_ROUNDS = 1
PNP_MIN_POINTS = 12  # map points a frame must see to be placed on the map
MIN_RAY_ANGLE_DEG = 1.0  # a track whose views' rays meet at less than this is not triangulated
MAP_REPROJECT_PX = 2.0  # largest reprojection error (px) of a triangulated point in any view
# The map is trusted where the poses it gives turn as the chain's do, within this much at every key
# frame. A shaking camera that only turns can leave residual motion the chain reads as parallax; the
# points it triangulates then lie where tracking noise puts them and the frames placed on them turned
# 11 deg a frame off the chain's (a handheld previz shot). On the dolly and orbit previz shots the map's
# rotations stay within 0.3 deg of the chain's; where they part further, the chain's poses are kept.
MAP_AGREE_DEG = 2.0


def _normalised_tracks(tracks: dict[int, np.ndarray], intrinsics: geometry.Intrinsics) -> dict[int, np.ndarray]:
    """A frame's tracks (id -> pixel (2,)) in normalised image coordinates (id -> (2,))."""
    if not tracks:
        return {}
    ids = list(tracks)
    uv = _normalised(np.array([tracks[i] for i in ids]), intrinsics)
    return dict(zip(ids, uv, strict=True))


def _chained(keys: list[int], poses: np.ndarray, count: int) -> np.ndarray:
    """cam_to_world (count, 4, 4) of every sampled frame from the key frames' poses (K, 4, 4): a frame
    between two key frames starts at the earlier one's pose (the map then places it)."""
    out = np.empty((count, 4, 4))
    for position, pose in zip(keys, poses, strict=True):
        out[position:] = pose
    return out


def _place(points: np.ndarray, image: np.ndarray, guess: np.ndarray, focal: float) -> np.ndarray | None:
    """cam_to_world (4, 4) of a frame seeing map points (N, 3) at normalised coordinates (N, 2), or None.

    ``guess``: a cam_to_world to start from (the frame before's pose)."""
    import cv2

    w2c = np.linalg.inv(guess)
    rvec, tvec = cv2.Rodrigues(w2c[:3, :3])[0], w2c[:3, 3].reshape(3, 1).copy()
    try:
        ok, rvec, tvec, inliers = cv2.solvePnPRansac(
            points, image, np.eye(3), None, rvec, tvec, useExtrinsicGuess=True, iterationsCount=100,
            reprojectionError=RANSAC_PX / focal, confidence=0.999, flags=cv2.SOLVEPNP_ITERATIVE)
    except cv2.error:
        return None
    if not ok or inliers is None or len(inliers) < PNP_MIN_POINTS:
        return None
    keep = inliers.ravel()
    rvec, tvec = cv2.solvePnPRefineLM(points[keep], image[keep], np.eye(3), None, rvec, tvec)
    out = np.eye(4)
    out[:3, :3] = cv2.Rodrigues(rvec)[0]
    out[:3, 3] = tvec.ravel()
    return np.linalg.inv(out)


def _placed_all(observed: list[dict[int, np.ndarray]], poses: np.ndarray, world: dict[int, np.ndarray],
                focals: list[float]) -> np.ndarray:
    """Every sampled frame's cam_to_world (N, 4, 4) placed on the map (frame 0 fixed; see above)."""
    out = poses.copy()
    for k in range(1, len(observed)):
        seen = [i for i in observed[k] if i in world]
        placed = None
        if len(seen) >= PNP_MIN_POINTS:
            points = np.array([world[i] for i in seen])  # (M, 3), frame 0's camera
            image = np.array([observed[k][i] for i in seen])  # (M, 2)
            placed = _place(points, image, out[k - 1], focals[k])
        # unplaced: keep the chain's step from the frame before
        out[k] = placed if placed is not None else out[k - 1] @ np.linalg.inv(poses[k - 1]) @ poses[k]
    return out


def _intersected(observed: list[dict[int, np.ndarray]], poses: np.ndarray, focals: list[float]) -> dict[int, np.ndarray]:
    """Map points (id -> (3,), frame 0's camera) triangulated from every frame that sees each track.

    Linear: each view adds two rows to a track's 4x4 normal matrix; the point is its smallest
    eigenvector. Points behind a camera, off by more than MAP_REPROJECT_PX in a view, or seen
    under too narrow an angle are left out."""
    w2c = np.linalg.inv(poses)[:, :3, :]  # (N, 3, 4)
    ids = sorted({i for frame in observed for i in frame})
    if not ids:
        return {}
    row = {track_id: n for n, track_id in enumerate(ids)}
    frame_of, track_of, xy = [], [], []
    for k, frame in enumerate(observed):
        frame_of += [k] * len(frame)
        track_of += [row[i] for i in frame]
        xy += list(frame.values())
    frame_of, track_of, xy = np.array(frame_of), np.array(track_of), np.array(xy).reshape(-1, 2)
    p = w2c[frame_of]  # (O, 3, 4)
    r1 = xy[:, :1] * p[:, 2] - p[:, 0]  # (O, 4)
    r2 = xy[:, 1:] * p[:, 2] - p[:, 1]
    normal = np.zeros((len(ids), 4, 4))
    np.add.at(normal, track_of, r1[:, :, None] * r1[:, None, :] + r2[:, :, None] * r2[:, None, :])
    homogeneous = np.linalg.eigh(normal)[1][:, :, 0]  # (T, 4)
    with np.errstate(divide="ignore", invalid="ignore"):
        points = homogeneous[:, :3] / homogeneous[:, 3:4]  # (T, 3)
    in_cam = np.einsum("oij,oj->oi", p[:, :, :3], points[track_of]) + p[:, :, 3]  # (O, 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.linalg.norm(in_cam[:, :2] / in_cam[:, 2:3] - xy, axis=1) * np.array(focals)[frame_of]
    bad = ~(in_cam[:, 2] > 0) | ~(error <= MAP_REPROJECT_PX)
    rejected = np.zeros(len(ids), bool)
    np.logical_or.at(rejected, track_of, bad)
    # the widest angle between a track's rays: from the camera centres to the point
    rays = points[track_of] - poses[frame_of, :3, 3]  # (O, 3), frame 0's camera
    with np.errstate(divide="ignore", invalid="ignore"):
        rays /= np.linalg.norm(rays, axis=1, keepdims=True)
    first = np.zeros(len(ids), np.int64)
    first[np.unique(track_of, return_index=True)[0]] = np.unique(track_of, return_index=True)[1]
    cos = np.einsum("oi,oi->o", rays, rays[first[track_of]])  # each ray against the track's first
    narrowest = np.ones(len(ids))
    np.minimum.at(narrowest, track_of, np.nan_to_num(cos, nan=1.0))
    wide = narrowest < np.cos(np.radians(MIN_RAY_ANGLE_DEG))
    keep = wide & ~rejected & np.all(np.isfinite(points), axis=1)
    return {ids[n]: points[n] for n in np.flatnonzero(keep)}


def _adjusted_poses(observed: list[dict[int, np.ndarray]], poses: np.ndarray, world: dict[int, np.ndarray],
                    focals: list[float]) -> np.ndarray:
    """Every sampled frame's cam_to_world (N, 4, 4), placed on the chain's map and adjusted (see above).

    ``observed``: per sampled frame, track id -> normalised coordinates (2,); ``poses``: the chain's
    cam_to_world per sampled frame; ``world``: the chain's map (id -> (3,), frame 0's camera)."""
    placed = poses
    for _ in range(ADJUST_ROUNDS):
        placed = _placed_all(observed, placed, world, focals)
        remapped = _intersected(observed, placed, focals)
        if len(remapped) < PNP_MIN_POINTS:
            break
        world = remapped
    return _placed_all(observed, placed, world, focals)


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
                      intrinsics: list[geometry.Intrinsics], stride: int = 1,
                      excludes: list[np.ndarray | None] | None = None) -> CameraPathCheck:
    """Recover a shot's camera from its frames with the planned intrinsics and check it against the plan.

    ``cam_to_world`` (F, 4, 4): the plan's poses (OpenGL axes) of every frame; ``intrinsics``: per frame,
    pixels of ``frames``; ``excludes``: see :func:`recover_path`.
    """
    path = recover_path(frames, list(intrinsics), stride, excludes)
    planned = relative_cv(np.asarray(cam_to_world)[list(path.indexes)])
    return check_camera_path(planned, path)


# ---------------------------------------------------------------- in qc.json
#
# QC decodes each shot once; while the flow-based check reads the frames, a copy shrunk to at most
# METRICS_SIDE wide is kept for the pose recovery and the judder measure. Measured on the previz
# renders of examples/all_moves.json and office.json (640x360, 48-72 frames a shot, 2 busy cores):
# at 480 px both take 0.5-1.5 s a shot together (full size: 1-3.5 s) and every shot keeps the
# verdict it has at full size; a 1080p shot costs the same as a 480 px one plus the shrinking.
METRICS_SIDE = 640
QC_STRIDE = 2  # the path is recovered from every other frame (the timing check still sees 24 steps in 2 s)
# px: the judder's flow is measured on frames shrunk to this wide. At 320 a wide previz dolly in the
# office (1.1 px a frame at 640 wide, 0.55 px measured) read jerk 0.70 from flow noise alone, at the
# bound; at 480 it reads 0.41 and at 640 0.37 (tests/test_qc_false_alarms.py's WIDE_DOLLY_AND_ZOOM).
JUDDER_SIDE = 480
JUDDER_PRESET = 0  # DIS ultrafast: global motion per step needs no fine flow (a third of medium's time)
UNRELIABLE_SKIPPED_SHARE = 0.5  # more steps than this without enough tracks: the path is not known


def shrink(frame: np.ndarray, side: int = METRICS_SIDE) -> np.ndarray:
    """An (H, W, 3) uint8 frame shrunk to at most ``side`` wide (area filter), or the frame itself."""
    import cv2

    height, width = frame.shape[:2]
    if width <= side:
        return frame
    return cv2.resize(frame, (side, max(8, round(height * side / width))), interpolation=cv2.INTER_AREA)


def shrink_mask(exclude: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """An (H, W) bool map shrunk to ``shape`` (h, w): a pixel is excluded when any part of it was."""
    import cv2

    if exclude.shape == shape:
        return exclude
    return cv2.resize(exclude.astype(np.uint8) * 255, (shape[1], shape[0]), interpolation=cv2.INTER_AREA) > 0


def scaled_intrinsics(intrinsics: geometry.Intrinsics, full: tuple[int, int],
                      small: tuple[int, int]) -> geometry.Intrinsics:
    """Pixel intrinsics (fx, fy, cx, cy) of a (w, h) frame carried to a resized (w, h) frame."""
    sx, sy = small[0] / full[0], small[1] / full[1]
    fx, fy, cx, cy = intrinsics
    return (fx * sx, fy * sy, cx * sx, cy * sy)


# Reasons that read the path's shape (its direction, whether it travels) fail a shot on their own.
# Timing and error-bound reasons fail it only where the flow-based camera check also fails: on
# close-ups without a depth control the path is recovered from the subject's own texture, and
# previz close-ups that follow their plan exactly measured up to 31% off in timing and 5.2 deg a
# frame of RotErr (tests/test_qc_false_alarms.py's CLOSE_UPS); alone they are a warning.
SHAPE_REASONS = ("turns the opposite way", "travels the opposite way", "does not travel")


def path_verdict(check: CameraPathCheck | None, reason: str = "",
                 flow_failed: bool = False) -> tuple[dict, list[str], str | None, str | None]:
    """qc.json's "camera_path" entry, its failures, its passing text and a warning (not checked, or
    only timing or error bounds off while the flow-based check passed: see SHAPE_REASONS)."""
    if check is None:
        return ({"checked": False, "ok": None, "reason": reason}, [], None,
                f"camera path not recovered: {reason}")
    entry = {**check.as_dict(), "checked": True, "ok": check.passed,
             "rule": (f"per compared frame: RotErr <= {ROT_BOUND_DEG:g} deg + {ROT_BOUND_SHARE:g} x the planned turn, "
                      f"TransErr <= {TRANS_BOUND_M:g} m + {TRANS_BOUND_SHARE:g} x the planned path (after one scale "
                      f"fit); direction, travel (parallax) and timing within {TIMING_BOUND:g} of the move; timing "
                      "and bounds fail only with the flow-based camera check, else they are a warning")}
    numbers = (f"RotErr {entry['RotErr_per_frame_deg']:.2f} deg/frame (bound {entry['rot_bound_deg']:.1f}), "
               f"TransErr {entry['TransErr_per_frame_m']:.3f} m/frame (bound {entry['trans_bound_m']:.2f}), "
               f"CamMC {entry['CamMC']:.2f}")
    if not check.passed:
        text = f"camera path: {'; '.join(check.reasons)} ({numbers})"
        if flow_failed or any(r.startswith(SHAPE_REASONS) for r in check.reasons):
            return entry, [text], None, None
        entry["ok"] = None
        return entry, [], None, f"{text}; the flow-based camera check found the move as planned"
    return entry, [], f"camera path as planned: {numbers}", None


def uneven_steps(measured: Judder, clear_share: float) -> str | None:
    """Why a shot's frame steps may hide a fault from a check that samples every other frame (a
    moving picture whose jerk is over ``clear_share`` of JERK_BOUND), or None."""
    if measured.mean_speed_px >= JUDGED_SPEED_PX and not measured.jerk <= clear_share * JERK_BOUND:
        return f"frame steps uneven: jerk {measured.jerk:.2f} near the {JERK_BOUND:g} bound"
    return None


def judder_verdict(measured: Judder) -> tuple[dict, list[str], str | None]:
    """qc.json's "judder" entry, its failures and its passing text (None for a picture that does not move)."""
    moving = measured.mean_speed_px >= JUDGED_SPEED_PX
    entry = {"jerk": round(measured.jerk, 4), "steady_score": round(measured.score, 4),
             "mean_step_px": round(measured.mean_speed_px, 3), "moving": moving, "ok": measured.smooth,
             "rule": f"mean |second difference of the frame steps| / mean step <= {JERK_BOUND:g} "
                     f"(pictures moving under {JUDGED_SPEED_PX:g} px a frame are not judged)"}
    if not moving:
        return entry, [], None
    if not measured.smooth:
        return entry, [f"motion judders: jerk {measured.jerk:.2f} (bound {JERK_BOUND:g}): frame steps alternate "
                       "between moving and standing still (repeated or dropped frames; retime by motion "
                       "interpolation)"], None
    return entry, [], f"motion even (jerk {measured.jerk:.2f})"


def shot_judder(frames: list[np.ndarray], full_size: tuple[int, int]) -> Judder:
    """The judder of a shot's (shrunk) frames as QC measures it, in pixels of ``full_size`` (w, h)."""
    return judder(frames, pixel_scale=full_size[0] / frames[0].shape[1], preset=JUDDER_PRESET, side=JUDDER_SIDE)


def assess_frames(frames: list[np.ndarray], full_size: tuple[int, int], cam_to_world: np.ndarray,
                  intrinsics: list[geometry.Intrinsics], excludes: list[np.ndarray | None] | None = None,
                  stride: int = QC_STRIDE, measured: Judder | None = None):
    """The camera path check and the judder of a shot's (shrunk) frames.

    ``full_size``: (w, h) of the delivered frames, which ``intrinsics`` (pixels, per frame) and the
    judder's pixels refer to; ``cam_to_world`` (F, 4, 4): the plan, OpenGL axes; ``measured``: the
    frames' :func:`shot_judder` when already measured. Returns (CameraPathCheck or None, why not, Judder)."""
    small = (frames[0].shape[1], frames[0].shape[0])
    measured = shot_judder(frames, full_size) if measured is None else measured
    lenses = [scaled_intrinsics(k, full_size, small) for k in intrinsics]
    if excludes is not None:
        excludes = [None if e is None else shrink_mask(e, (small[1], small[0])) for e in excludes]
    try:
        path = recover_path(frames, lenses, stride, excludes)
    except ValueError as exc:
        return None, str(exc), measured
    if path.skipped > UNRELIABLE_SKIPPED_SHARE * max(len(path.parallax), 1):
        return None, (f"{path.skipped} of {len(path.parallax)} steps had too few tracks "
                      "(too little texture to follow)"), measured
    planned = relative_cv(np.asarray(cam_to_world)[list(path.indexes)])
    return check_camera_path(planned, path), "", measured
