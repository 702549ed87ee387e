"""Every frame of a recovered camera path placed on the chain's map, and the map adjusted.

The chain (daotai.qc.camera_path) measures each moving step between two key frames alone: a
short last step (the shot ends before a long baseline builds up) gets its length from points triangulated over that
short baseline, and which frames become key frames turns on sub-pixel differences. Two renders
of one dolly that differ by 0.09 levels on average (two GPUs' rasterisation at triangle edges)
picked different key frames and the last step's length came out over ten times too long on one
of them: the path ran 22% behind its plan and failed. So once the chain has a map, every sampled
frame is placed on it by PnP (RANSAC, then Levenberg-Marquardt on the inliers), the map is
triangulated again from all the frames that see each track, and the two alternate for
ADJUST_ROUNDS rounds (a bundle adjustment by resection and intersection; frame 0 stays fixed).
A frame that sees too few map points keeps its step from the frame before it.
"""

from __future__ import annotations

import numpy as np

from daotai.plan import geometry
from daotai.qc.camera_two_view import RANSAC_PX, normalised

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


def normalised_tracks(tracks: dict[int, np.ndarray], intrinsics: geometry.Intrinsics) -> dict[int, np.ndarray]:
    """A frame's tracks (id -> pixel (2,)) in normalised image coordinates (id -> (2,))."""
    if not tracks:
        return {}
    ids = list(tracks)
    uv = normalised(np.array([tracks[i] for i in ids]), intrinsics)
    return dict(zip(ids, uv, strict=True))


def chained(keys: list[int], poses: np.ndarray, count: int) -> np.ndarray:
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
    """Every sampled frame's cam_to_world (N, 4, 4) placed on the map (frame 0 fixed; see the module docstring)."""
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


def adjusted_poses(observed: list[dict[int, np.ndarray]], poses: np.ndarray, world: dict[int, np.ndarray],
                    focals: list[float]) -> np.ndarray:
    """Every sampled frame's cam_to_world (N, 4, 4), placed on the chain's map and adjusted (see the module docstring).

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
