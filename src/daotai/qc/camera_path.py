"""A shot's camera path recovered from its frames with the plan's intrinsics.

The path is recovered by a two-view chain: features are tracked through the sampled frames (Lucas-Kanade, checked forward and
backward, topped up when they thin out); for each step between two sampled frames a
homography and an essential matrix compete for the tracks (RANSAC, 1 px). When the homography
explains as many tracks as the essential matrix and has the form of a rotation (with an
isotropic zoom), the step has no parallax: the camera turned (and the lens zoomed) without
moving. Otherwise the essential matrix gives the rotation and the direction of travel; the
step's length comes from the depths of tracks triangulated on earlier steps (the first moving
step sets the unit). Poses are chained from frame 0 (OpenCV axes, frame 0 = identity). Once the
chain has triangulated points, every sampled frame is placed on them and the points and poses are
adjusted together (daotai.qc.camera_path_map): the key frames keep those poses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from daotai.plan import geometry
from daotai.qc.camera_path_map import MAP_AGREE_DEG, adjusted_poses, chained, normalised_tracks
from daotai.qc.camera_two_view import (
    RANSAC_PX,
    essential_candidates_of_steps,
    geodesic_deg,
    normalised,
    rotation_with_zoom,
    sampson_px,
    transfer_px,
    triangulate,
)

TRACK_CORNERS = 800  # corners kept alive through the shot
TRACK_REFILL = 0.5  # detect new corners when fewer than this share of TRACK_CORNERS survive
NO_PARALLAX_SHARE = 0.9  # a rotation (with zoom) explains this share of the essential matrix's inliers
MIN_STEP_TRACKS = 12  # a step with fewer tracks is skipped (its pose is the previous one)
STILL_PX = 0.05  # median track motion below which a step is still (no essential matrix is fitted)
KEY_STEP_PX = 4.0  # median motion (px) that makes the next key frame of a turning camera
NOISE_PX = 0.5  # median parallax below this is tracking noise: the camera only turned (or zoomed)
NOISE_SHARE = 0.03  # ... or below this share of the step's motion (trackers err more on long jumps)
PARALLAX_KEY_PX = 8.0  # median parallax (px) left by the best rotation that makes a moving camera's key frame
TRACK_KEEP = 0.5  # a key frame is also taken before fewer than this share of its tracks survive
MAX_STEP_TURN_DEG = 30.0  # an essential-matrix rotation this far from the homography's is the twisted pair
ZOOM_SHARE = 0.05  # a recovered focal change beyond this share is a zoom


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


MAP_MIN_POINTS = 8  # placed points seen again that let the map choose between a step's candidates


def _choose_step(xa: np.ndarray, xb: np.ndarray, focal: float, common: list[int], rotation: np.ndarray,
                 w2c_key: np.ndarray, world: dict[int, np.ndarray], last_length: float | None,
                 candidates: list[tuple[float, np.ndarray]]):
    """The moving step from key frame a to frame b: (R, unit t, length, track ids, unit-baseline points), or None.

    Each candidate essential matrix (``candidates``: the step's, best MSAC score first) gives a pose (a twisted pair, turning far from the homography's
    rotation, is dropped); its points are scaled to the map (points already placed, ``world``,
    in frame 0's camera) and the candidate whose step puts the map's points where frame b sees them
    (median reprojection error) wins; with too few map points seen again, the best MSAC score wins."""
    import cv2

    best = None
    for rank, (_, e) in enumerate(candidates):
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


@dataclass(frozen=True)
class _Step:
    """A step from key frame ``key`` to sampled frame ``k`` (positions among the sampled frames)."""

    key: int
    k: int
    kind: str  # "skip": too few tracks; "turn": no parallax (rotation, zoom); "move": parallax
    xa: np.ndarray | None = None  # (N, 2) normalised tracks in the key frame ("turn", "move")
    xb: np.ndarray | None = None  # (N, 2) the same tracks in frame k
    focal: float = 0.0  # px, frame k's
    common: tuple[int, ...] = ()  # the tracks' ids
    rotation: np.ndarray | None = None  # (3, 3) the homography's rotation, X_b = R X_a
    zoom: float = 1.0


def _key_steps(tracks: list[dict[int, np.ndarray]], lenses: list[geometry.Intrinsics]) -> list[_Step]:
    """The steps between key frames, with what each needs, from the tracks alone.

    Which frames become key frames depends on the tracks and their homographies only, never on the
    essential matrix a moving step then chooses, so every moving step is known before any of them
    is measured (and their estimators can all run at once)."""
    import cv2

    steps: list[_Step] = []
    key = 0
    for k in range(1, len(tracks)):
        last = k == len(tracks) - 1
        common = sorted(set(tracks[key]) & set(tracks[k]))
        thinning = len(common) < TRACK_KEEP * len(tracks[key])
        if len(common) < MIN_STEP_TRACKS:
            if last or thinning:
                steps.append(_Step(key, k, "skip"))
                key = k
            continue
        f = float(lenses[k][1])
        xa = normalised(np.array([tracks[key][i] for i in common]), lenses[key])
        xb = normalised(np.array([tracks[k][i] for i in common]), lenses[k])
        moved = float(np.median(np.linalg.norm(xb - xa, axis=1))) * f  # px, with the planned lens change removed
        rotation, zoom, shift = np.eye(3), 1.0, moved
        if moved > STILL_PX:
            h, _ = cv2.findHomography(xa, xb, cv2.RANSAC, RANSAC_PX / f)
            if h is not None:
                rotation, zoom = rotation_with_zoom(h)
                shift = float(np.median(transfer_px(xa, xb, rotation, zoom, f)))  # parallax left over
        # The tracks moved as a rotation (with zoom) moves them, within tracking noise: no parallax.
        turned = shift <= max(NOISE_PX, NOISE_SHARE * moved)
        if turned and not (last or thinning or moved >= KEY_STEP_PX):
            continue  # too little motion since the key frame to measure well: wait
        if not turned and shift < PARALLAX_KEY_PX and not (last or thinning):
            continue  # some parallax, too little for the direction of travel: wait for a longer baseline
        steps.append(_Step(key, k, "turn" if turned else "move", xa, xb, f, tuple(common), rotation, zoom))
        key = k
    return steps


def recover_path(frames: Iterable[np.ndarray], intrinsics: list[geometry.Intrinsics] | geometry.Intrinsics,
                 stride: int = 1, excludes: list[np.ndarray | None] | None = None) -> CameraPath:
    """The camera path of (H, W, 3) uint8 frames with known intrinsics (pixels, one per frame or one for all).

    ``excludes``: per frame (all frames, not only the sampled ones) an (H, W) bool map of pixels
    to keep tracks out of, or None."""
    sampled = [(i, np.asarray(f)) for i, f in enumerate(frames) if i % stride == 0]
    if len(sampled) < 2:
        raise ValueError("a camera path needs at least two frames")
    per_frame = intrinsics if isinstance(intrinsics, list) else None

    def lens(index: int) -> geometry.Intrinsics:
        return per_frame[index] if per_frame is not None else intrinsics

    tracks = _tracks([f for _, f in sampled], [excludes[i] for i, _ in sampled] if excludes is not None else None)
    steps = _key_steps(tracks, [lens(i) for i, _ in sampled])
    moving = [step for step in steps if step.kind == "move"]
    found = dict(zip((step.k for step in moving),
                     essential_candidates_of_steps([(step.xa, step.xb, step.focal) for step in moving]), strict=True))
    indexes, poses, focal, parallax = [sampled[0][0]], [np.eye(4)], [1.0], []
    world: dict[int, np.ndarray] = {}  # track id -> point in frame 0's camera (the recovered scale)
    last_length, skipped = None, 0
    for step in steps:
        indexes.append(sampled[step.k][0])
        key_pose = poses[-1]
        if step.kind == "skip":
            poses.append(key_pose.copy())
            focal.append(focal[-1])
            parallax.append(False)
            skipped += 1
            continue
        chosen = None
        if step.kind == "move":
            chosen = _choose_step(step.xa, step.xb, step.focal, list(step.common), step.rotation,
                                  np.linalg.inv(key_pose), world, last_length, found[step.k])
        if chosen is None:
            turn = np.eye(4)
            turn[:3, :3] = step.rotation  # X_b = R X_a
            poses.append(key_pose @ np.linalg.inv(turn))
            focal.append(focal[-1] * step.zoom)
            parallax.append(False)
            continue
        r_e, t_unit, length, ids, unit_points = chosen
        last_length = length
        move = np.eye(4)
        move[:3, :3], move[:3, 3] = r_e, length * t_unit
        poses.append(key_pose @ np.linalg.inv(move))
        focal.append(focal[-1])
        parallax.append(True)
        for track_id, point in zip(ids, unit_points * length, strict=True):
            if point[2] > 0:
                world[track_id] = key_pose[:3, :3] @ point + key_pose[:3, 3]
    poses_out = np.stack(poses)
    if any(parallax) and np.all(np.abs(np.array(focal) - 1.0) <= ZOOM_SHARE):
        observed = [normalised_tracks(t, lens(i)) for (i, _), t in zip(sampled, tracks, strict=True)]
        keys = [i // stride for i in indexes]  # positions of the key frames among the sampled ones
        placed = adjusted_poses(observed, chained(keys, poses_out, len(sampled)), world,
                                 [float(lens(i)[1]) for i, _ in sampled])[keys]
        turned = geodesic_deg(placed[:, :3, :3], poses_out[:, :3, :3])
        if float(turned.max()) <= MAP_AGREE_DEG:
            poses_out = placed
    return CameraPath(tuple(indexes), poses_out, np.array(focal), tuple(parallax), skipped)
