"""Sparse feature tracks between frames, for the camera check.

Shi-Tomasi corners of each frame pair, minus those on a single straight edge (motion along an
edge cannot be measured: the aperture problem), followed by Lucas-Kanade and kept when the
backward track returns to the start. Positions are in the conventions' pixels (pixel centres at
+0.5), at full resolution even when the frames are tracked downscaled. Separate from the check
(daotai.qc.camera_adherence) because it knows nothing of the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from daotai.errors import EncodeError

__all__ = ["TrackedPair", "TrackerConfig", "track_pairs"]


@dataclass(frozen=True)
class TrackerConfig:
    """Feature tracking settings; pixel values are at the analysis resolution."""

    max_width: int = 960  # frames wider than this are tracked on a downscaled grey image
    max_corners: int = 500
    quality: float = 0.01  # Shi-Tomasi quality relative to the best corner
    min_distance: float = 6.0  # px between detected corners
    block_size: int = 7
    window: int = 21  # Lucas-Kanade window, px
    levels: int = 3  # pyramid levels above the base image
    fb_max_px: float = 0.5  # forward-backward round-trip error allowed, px
    min_tracks: int = 20  # fewer usable tracks than this: the pair is skipped
    # Smallest / largest eigenvalue of the image's structure tensor over the tracking window:
    # below this the window holds one straight edge and Lucas-Kanade cannot tell motion along
    # it (the aperture problem). Measured on previz renders (a low-angle push-in, a tilt at
    # night, an orbit; 1225 tracks against the exact depth): under 0.05, tracks on edges (a
    # building against the sky, a lamp post) slide along them and 36-66% miss the planned
    # motion by more than 1 px a frame; from 0.05 up, 10% (0.05-0.1) down to 1% (over 0.2).
    min_corner_ratio: float = 0.05


@dataclass(frozen=True)
class TrackedPair:
    """Sparse tracks between two frames, in full-resolution convention pixels."""

    index_a: int
    index_b: int
    points_uv: np.ndarray  # (N, 2) float64 positions in frame a (pixel centres at +0.5)
    displacement: np.ndarray  # (N, 2) float64 measured motion a -> b, px
    detected: int  # corners found in frame a; detected - N were lost or failed the round trip
    width: int  # full-resolution frame size, px
    height: int
    analysis_scale: float  # analysis px per full-resolution px (1.0 when not downscaled)


def _check_frame(frame: object, index: int, size: tuple[int, int] | None) -> np.ndarray:
    """A validated (H, W, 3) uint8 frame of the shot's size."""
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] != 3:
        shape = getattr(frame, "shape", type(frame).__name__)
        raise EncodeError(f"frames[{index}]: {shape} must be an (H, W, 3) uint8 RGB array")
    if frame.dtype != np.uint8:
        raise EncodeError(f"frames[{index}]: dtype {frame.dtype} must be uint8")
    if size is not None and frame.shape[:2] != size:
        raise EncodeError(f"frames[{index}]: size {frame.shape[:2]} must match frame 0's {size}")
    return frame


def _analysis_grey(frame: np.ndarray, max_width: int) -> np.ndarray:
    """Grey image for tracking, (h, w) uint8, downscaled with area averaging when too wide."""
    grey = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)
    height, width = grey.shape
    if width <= max_width:
        return grey
    small = (max_width, max(1, round(height * max_width / width)))
    return cv2.resize(grey, small, interpolation=cv2.INTER_AREA)


def _corner_ratio(grey: np.ndarray, points: np.ndarray, window: int) -> np.ndarray:
    """(K,) smallest / largest eigenvalue of the structure tensor in the window around each point.

    Near 0 on a straight edge (motion along it is unobservable), up to 1 on a corner or blob.
    """
    gx = cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3)  # (h, w)
    gy = cv2.Sobel(grey, cv2.CV_32F, 0, 1, ksize=3)
    products = np.stack([gx * gx, gx * gy, gy * gy], axis=-1)  # (h, w, 3)
    summed = cv2.boxFilter(products, -1, (window, window), normalize=False,
                           borderType=cv2.BORDER_REFLECT)  # (h, w, 3) tensor sums per window
    h, w = grey.shape
    cols = np.clip(np.rint(points[:, 0]).astype(np.int64), 0, w - 1)
    rows = np.clip(np.rint(points[:, 1]).astype(np.int64), 0, h - 1)
    sxx, sxy, syy = summed[rows, cols].astype(np.float64).T  # (K,) each
    half_trace = 0.5 * (sxx + syy)
    root = np.sqrt(np.maximum(0.25 * (sxx - syy) ** 2 + sxy * sxy, 0.0))
    large, small = half_trace + root, half_trace - root
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(large > 0, small / large, 0.0)


def _track(grey_a: np.ndarray, grey_b: np.ndarray,
           cfg: TrackerConfig) -> tuple[np.ndarray, np.ndarray, int]:
    """Forward-backward checked LK tracks a -> b: starts, ends (K, 2) float32, corners found.

    Corners whose tracking window holds a single straight edge (``min_corner_ratio``) are
    dropped before tracking: their motion along the edge is a guess.
    """
    corners = cv2.goodFeaturesToTrack(grey_a, cfg.max_corners, cfg.quality, cfg.min_distance,
                                      blockSize=cfg.block_size)
    if corners is None or len(corners) == 0:
        empty = np.zeros((0, 2), np.float32)
        return empty, empty, 0
    found = len(corners)
    corners = corners.reshape(-1, 2)
    corners = corners[_corner_ratio(grey_a, corners, cfg.window) >= cfg.min_corner_ratio]
    if len(corners) == 0:
        empty = np.zeros((0, 2), np.float32)
        return empty, empty, found
    p0 = corners.reshape(-1, 1, 2).astype(np.float32)  # (K, 1, 2)
    lk = dict(winSize=(cfg.window, cfg.window), maxLevel=cfg.levels,
              criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01))
    p1, st1, _ = cv2.calcOpticalFlowPyrLK(grey_a, grey_b, p0, None, **lk)
    p0_back, st2, _ = cv2.calcOpticalFlowPyrLK(grey_b, grey_a, p1, None, **lk)
    p0, p1, p0_back = p0.reshape(-1, 2), p1.reshape(-1, 2), p0_back.reshape(-1, 2)
    h, w = grey_b.shape
    inside = (p1[:, 0] >= 0) & (p1[:, 0] <= w - 1) & (p1[:, 1] >= 0) & (p1[:, 1] <= h - 1)
    round_trip = np.linalg.norm(p0 - p0_back, axis=1)
    keep = (st1.ravel() == 1) & (st2.ravel() == 1) & inside & (round_trip < cfg.fb_max_px)
    return p0[keep], p1[keep], found


def track_pairs(frames: Iterable[np.ndarray], stride: int = 1,
                config: TrackerConfig = TrackerConfig(), threads: int = 1) -> Iterator[TrackedPair]:
    """Yield tracks between frames (0, s), (s, 2s), … as they arrive; fresh corners per pair.

    ``threads`` > 1: pairs are tracked on that many threads (OpenCV lets go of the GIL), each pair
    from its own two frames as before, so the tracks are the same; up to ``threads`` frames are then
    read ahead of the pair yielded, so a caller that stops early must want that (or keep 1)."""
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride: {stride!r} must be an integer >= 1")
    if threads <= 1:
        for a, b, size, grey_a, grey_b in _frame_pairs(frames, stride, config):
            yield _pair(a, b, size, grey_b.shape, _track(grey_a, grey_b, config))
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="daotai-tracks")
    pending: deque = deque()
    try:
        for a, b, size, grey_a, grey_b in _frame_pairs(frames, stride, config):
            pending.append((a, b, size, grey_b.shape, pool.submit(_track, grey_a, grey_b, config)))
            while len(pending) > threads:
                a, b, size, shape, tracked = pending.popleft()
                yield _pair(a, b, size, shape, tracked.result())
        while pending:
            a, b, size, shape, tracked = pending.popleft()
            yield _pair(a, b, size, shape, tracked.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _frame_pairs(frames: Iterable[np.ndarray], stride: int,
                 config: TrackerConfig) -> Iterator[tuple[int, int, tuple[int, int], np.ndarray, np.ndarray]]:
    """(index a, index b, full (H, W), grey a, grey b) of each sampled pair, frames checked as they arrive."""
    previous: tuple[int, np.ndarray] | None = None
    size: tuple[int, int] | None = None
    for index, frame in enumerate(frames):
        frame = _check_frame(frame, index, size)
        size = frame.shape[:2]
        if index % stride:
            continue
        grey = _analysis_grey(frame, config.max_width)  # (h, w) uint8
        if previous is not None:
            yield previous[0], index, size, previous[1], grey
        previous = (index, grey)


def _pair(index_a: int, index_b: int, size: tuple[int, int], grey_shape: tuple[int, ...],
          tracked: tuple[np.ndarray, np.ndarray, int]) -> TrackedPair:
    """The tracks of one pair (analysis px, OpenCV centres) as a TrackedPair in full-resolution convention px."""
    start, end, detected = tracked
    sx = grey_shape[1] / size[1]
    sy = grey_shape[0] / size[0]
    scale = np.array([sx, sy])
    # OpenCV puts pixel centres on integers; the conventions put them at +0.5.
    points_uv = (start.astype(np.float64) + 0.5) / scale  # (K, 2) full-res px
    displacement = (end.astype(np.float64) - start) / scale  # (K, 2) full-res px
    return TrackedPair(index_a, index_b, points_uv, displacement, detected, size[1], size[0], float(min(sx, sy)))
