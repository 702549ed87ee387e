"""Per-frame quality metrics on decoded (H, W, 3) uint8 RGB frames.

Statistics are taken on strided thumbnails (longer side ≤ ``THUMB_SIDE``) so a 1080p frame
costs well under a millisecond; PSNR uses every pixel. Luma here is BT.709 Y' computed
from full-range RGB (0..255), the same weights the encoder uses.

Nothing here decides pass or fail for a shot: a static camera over a static set produces a
frozen run legitimately, so the functions report and the caller (the QC report) judges.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields

import numpy as np

from daotai.encode.video import decode_frames
from daotai.errors import DaotaiError

__all__ = [
    "THUMB_SIDE",
    "FrameStats",
    "VideoScan",
    "flicker_score",
    "frame_stats",
    "frozen_runs",
    "is_black",
    "is_green",
    "mean_abs_diff",
    "psnr",
    "psnr_series",
    "scan_video",
    "thumbnail",
    "warped_change",
]

THUMB_SIDE = 320
_LUMA = np.array([0.2126, 0.7152, 0.0722], np.float32)  # BT.709 Kr, Kg, Kb

# Defaults, in 8-bit code values unless stated.
BLACK_MAX_MEAN = 16.0  # mean luma at or below this …
BLACK_BRIGHT_LEVEL = 40.0  # … and almost no pixel brighter than this
BLACK_MAX_BRIGHT_FRACTION = 0.01
GREEN_MIN_G = 48  # a "broken green" pixel: G at least this …
GREEN_MAX_RATIO = 1 / 3  # … and R, B at most this fraction of G
GREEN_MIN_FRACTION = 0.6  # fraction of such pixels that makes the frame green
FROZEN_MAX_DIFF = 0.5  # mean |a - b| per sample from the frame before below this: "the same" …
FROZEN_MAX_DRIFT = 1.0  # … as long as the run's first frame stays within this (see _StillRuns)
FROZEN_MIN_LENGTH = 12  # frames (half a second at 24 fps)
FLICKER_WINDOW = 9  # frames of the moving average that is the "smooth trend"


def _check_frame(frame: object, what: str = "frame") -> np.ndarray:
    """Validate an (H, W, 3) uint8 RGB frame."""
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8:
        kind = frame.dtype if isinstance(frame, np.ndarray) else type(frame).__name__
        raise DaotaiError(f"{what}: dtype {kind} must be uint8 RGB")
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.shape[0] < 1 or frame.shape[1] < 1:
        raise DaotaiError(f"{what}: shape {frame.shape} must be (H, W, 3)")
    return frame


def thumbnail(frame: np.ndarray, max_side: int = THUMB_SIDE) -> np.ndarray:
    """Strided view keeping every k-th row/column so the longer side is at most max_side."""
    frame = _check_frame(frame)
    step = max(1, -(-max(frame.shape[:2]) // max_side))
    return frame[::step, ::step]


def _luma(frame: np.ndarray) -> np.ndarray:
    """(h·w,) float32 BT.709 luma of an RGB frame (one BLAS product, no float64 copies)."""
    return np.ascontiguousarray(frame).reshape(-1, 3) @ _LUMA


@dataclass(frozen=True)
class FrameStats:
    """Brightness summary of one frame, in 8-bit code values."""

    mean_luma: float
    std_luma: float
    mean_rgb: tuple[float, float, float]


def frame_stats(frame: np.ndarray) -> FrameStats:
    """Mean and spread of luma and the mean colour of a frame (on its thumbnail)."""
    small = thumbnail(frame)
    luma = _luma(small)
    mean_rgb = small.reshape(-1, 3).mean(axis=0, dtype=np.float64)
    return FrameStats(
        mean_luma=float(luma.mean(dtype=np.float64)),
        std_luma=float(luma.std(dtype=np.float64)),
        mean_rgb=(float(mean_rgb[0]), float(mean_rgb[1]), float(mean_rgb[2])),
    )


def is_black(
    frame: np.ndarray,
    max_mean: float = BLACK_MAX_MEAN,
    bright_level: float = BLACK_BRIGHT_LEVEL,
    max_bright_fraction: float = BLACK_MAX_BRIGHT_FRACTION,
) -> bool:
    """True for a (nearly) black frame: dark on average and almost nothing bright in it.

    The second condition keeps night scenes with a few lights from being flagged.
    """
    luma = _luma(thumbnail(frame))
    if luma.mean(dtype=np.float64) > max_mean:
        return False
    return float(np.count_nonzero(luma > bright_level)) <= max_bright_fraction * luma.size


def is_green(
    frame: np.ndarray,
    min_g: int = GREEN_MIN_G,
    max_ratio: float = GREEN_MAX_RATIO,
    min_fraction: float = GREEN_MIN_FRACTION,
) -> bool:
    """True for the broken-decode look: most pixels with G high and R, B near zero.

    All-zero YUV decodes to about (0, 77, 0) in BT.709 and (0, 135, 0) in BT.601; natural
    greens (foliage, a green screen) keep R or B well above a third of G and pass.
    """
    small = thumbnail(frame).astype(np.int16)  # (h, w, 3)
    r, g, b = small[..., 0], small[..., 1], small[..., 2]
    limit = (g * max_ratio).astype(np.int16)
    green = (g >= min_g) & (r <= limit) & (b <= limit)
    return float(np.count_nonzero(green)) >= min_fraction * green.size


def mean_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute difference per sample of two frames' thumbnails, in code values."""
    ta, tb = thumbnail(a), thumbnail(b)
    if ta.shape != tb.shape:
        raise DaotaiError(f"frames: shapes {a.shape} and {b.shape} must match")
    return float(np.abs(ta.astype(np.int16) - tb.astype(np.int16)).mean(dtype=np.float64))


class _StillRuns:
    """Runs of still frames, fed one thumbnail at a time.

    A frame continues the run when it is within ``max_diff`` of the frame before it *and*
    within ``max_drift`` of the run's first frame. The first condition alone takes a slow move
    over flat-shaded content for a freeze (each step changes a few edge pixels, the picture
    drifts far over a dozen frames); a lossy encode of a held picture drifts too, but only
    while the encoder refines it, and settles (measured: below 0.7 over 25 frames at the
    default quality, where an eased start or a small walker passes 1.0 within 10 frames).
    A keyframe inside a held run (the encoder starts one every second) codes the picture afresh:
    one step up to ``max_drift`` (measured: 0.68 on a held picture of the office set) between
    still steps continues the run, as long as the run's first frame stays within ``max_drift``.
    """

    def __init__(self, max_diff: float, min_length: int, max_drift: float):
        self.max_diff, self.max_drift, self.min_length = max_diff, max_drift, min_length
        self.runs: list[tuple[int, int]] = []
        self.anchors: list[np.ndarray] = []  # per run, its first frame's thumbnail
        self._anchor: np.ndarray | None = None
        self._previous: np.ndarray | None = None
        self._start = 0
        self._count = 0
        self._last_step = math.inf  # the step into the previous frame (inf: it began the run)

    def add(self, small: np.ndarray) -> None:
        """Take the next frame's thumbnail (H, W, 3) uint8."""
        index = self._count
        self._count += 1
        previous, self._previous = self._previous, small
        if previous is not None:
            if previous.shape != small.shape:
                raise DaotaiError(f"frames: shapes change from {previous.shape} to {small.shape}")
            step = _mad(small, previous)
            # a lone larger step between still ones: a keyframe coding the held picture afresh
            lone = step < self.max_drift and self._last_step < self.max_diff
            self._last_step = step
            if (step < self.max_diff or lone) and _mad(small, self._anchor) < self.max_drift:
                return
            self._close(index)
        self._anchor, self._start, self._last_step = small, index, math.inf

    def _close(self, end: int) -> None:
        if end - self._start >= self.min_length:
            self.runs.append((self._start, end - self._start))
            self.anchors.append(self._anchor)

    def finish(self) -> list[tuple[int, int]]:
        """(start, length) of every run of at least ``min_length`` frames."""
        if self._anchor is not None:
            self._close(self._count)
            self._anchor = self._previous = None
        return self.runs


def _mad(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute difference per sample of two equally shaped uint8 arrays."""
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean(dtype=np.float64))


def frozen_runs(
    frames: Iterable[np.ndarray],
    max_diff: float = FROZEN_MAX_DIFF,
    min_length: int = FROZEN_MIN_LENGTH,
    max_drift: float = FROZEN_MAX_DRIFT,
) -> list[tuple[int, int]]:
    """(start, length) of every run of at least min_length frames, each within max_diff (mean
    |a - b| per sample) of the one before and within max_drift of the run's first frame."""
    if isinstance(min_length, bool) or not isinstance(min_length, int) or min_length < 2:
        raise DaotaiError(f"min_length: {min_length!r} must be an integer >= 2")
    runs = _StillRuns(max_diff, min_length, max_drift)
    for frame in frames:
        runs.add(thumbnail(frame))
    return runs.finish()


def _flicker_from_means(means: np.ndarray, window: int = FLICKER_WINDOW) -> float:
    """Std of frame-to-frame mean-luma steps after subtracting their moving average."""
    if means.size < 3:
        return 0.0
    steps = np.diff(means.astype(np.float64))  # (N - 1,)
    width = max(1, min(window, steps.size))
    padded = np.pad(steps, (width // 2, width - 1 - width // 2), mode="edge")
    trend = np.convolve(padded, np.full(width, 1.0 / width), mode="valid")  # (N - 1,)
    return float(np.std(steps - trend))


def flicker_score(frames: Iterable[np.ndarray], window: int = FLICKER_WINDOW) -> float:
    """Brightness flicker in code values: ~0 for steady shots, fades and slow light changes."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise DaotaiError(f"window: {window!r} must be an integer >= 1")
    means = np.array([_luma(thumbnail(frame)).mean(dtype=np.float64) for frame in frames])
    return _flicker_from_means(means, window)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB of two uint8 images (inf when identical)."""
    for name, image in (("a", a), ("b", b)):
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
            kind = image.dtype if isinstance(image, np.ndarray) else type(image).__name__
            raise DaotaiError(f"psnr {name}: dtype {kind} must be uint8")
    if a.shape != b.shape:
        raise DaotaiError(f"psnr: shapes {a.shape} and {b.shape} must match")
    diff = a.astype(np.int16) - b.astype(np.int16)
    mse = float(np.mean(np.square(diff, dtype=np.int32), dtype=np.float64))
    if mse == 0.0:
        return math.inf
    return 10.0 * math.log10(255.0**2 / mse)


def psnr_series(frames_a: Iterable[np.ndarray], frames_b: Iterable[np.ndarray]) -> np.ndarray:
    """(N,) float64 per-frame PSNR of two equally long frame sequences."""
    values = []
    iter_a, iter_b = iter(frames_a), iter(frames_b)
    missing = object()
    while True:
        a, b = next(iter_a, missing), next(iter_b, missing)
        if a is missing and b is missing:
            break
        if a is missing or b is missing:
            shorter = "a" if a is missing else "b"
            raise DaotaiError(
                f"psnr_series: sequence {shorter} ended after {len(values)} frames; "
                "both must be equally long"
            )
        values.append(psnr(a, b))  # type: ignore[arg-type]
    return np.array(values, dtype=np.float64)


@dataclass(frozen=True)
class VideoScan:
    """Per-frame statistics and findings of one pass over a video."""

    frames: int
    stats: tuple[FrameStats, ...]
    black_frames: tuple[int, ...]
    green_frames: tuple[int, ...]
    frozen_runs: tuple[tuple[int, int], ...]
    flicker: float
    # per frozen run, the thumbnail (h, w, 3) uint8 of its first frame: what the plan would have
    # moved (see warped_change); not part of the JSON form
    frozen_anchors: tuple[np.ndarray, ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (for qc.json)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "frozen_anchors"}


def _plain(value: object) -> object:
    """Dataclasses as dicts, tuples as they are (asdict's rules, without the anchors)."""
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, FrameStats):
        return {f.name: getattr(value, f.name) for f in fields(value)}
    return value


def warped_change(
    small: np.ndarray, grid_uv: np.ndarray, flow: np.ndarray, size: tuple[int, int]
) -> float:
    """Mean |a - b| per sample between a thumbnail and itself moved by a coarse flow field.

    ``small``: (h, w, 3) uint8 thumbnail of a (W, H) = ``size`` frame; ``grid_uv`` (N, 2) full-size
    pixel positions on a regular grid (row-major, as ``np.meshgrid(us, vs)`` makes them) and
    ``flow`` (N, 2) where each moves in px (non-finite: it leaves the picture). This is how far
    a picture would drift under a planned move: a move over flat sky or a plain wall changes no
    pixel, so a picture standing still there cannot be told from the plan.
    """
    import cv2

    small = _check_frame(small, "small")
    width, height = size
    h, w = small.shape[:2]
    us, vs = np.unique(grid_uv[:, 0]), np.unique(grid_uv[:, 1])
    if len(us) * len(vs) != len(grid_uv):
        raise DaotaiError(f"grid_uv: {len(grid_uv)} points do not form a regular grid")
    moved = np.where(np.isfinite(flow), flow, 0.0).reshape(len(vs), len(us), 2)  # (rows, cols, 2) px
    # the grid's flow spread over the thumbnail, in thumbnail pixels; nearest, so a depth edge
    # (a figure against the sky) stays an edge
    field_ = cv2.resize(moved.astype(np.float32), (w, h), interpolation=cv2.INTER_NEAREST)
    field_ *= np.array([w / width, h / height], np.float32)
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    # what lands on each pixel came from where the flow started: a backward map is close enough
    warped = cv2.remap(small, xs - field_[..., 0], ys - field_[..., 1], cv2.INTER_LINEAR,
                       borderMode=cv2.BORDER_REPLICATE)
    return _mad(warped, small)


def scan_video(
    path: str | os.PathLike[str],
    *,
    frozen_max_diff: float = FROZEN_MAX_DIFF,
    frozen_min_length: int = FROZEN_MIN_LENGTH,
    flicker_window: int = FLICKER_WINDOW,
    frozen_max_drift: float = FROZEN_MAX_DRIFT,
    picture: tuple[float, float, float, float] | None = None,
) -> VideoScan:
    """Decode a file once (as thumbnails) and collect stats, black/green frames, frozen runs
    and the flicker score. ``picture``: (left, top, right, bottom) as shares of the frame's width and
    height, the part of each frame that is picture (a letterbox's bars left out; rounded inward)."""
    if isinstance(frozen_min_length, bool) or not isinstance(frozen_min_length, int):
        raise DaotaiError(f"frozen_min_length: {frozen_min_length!r} must be an integer >= 2")
    if frozen_min_length < 2:
        raise DaotaiError(f"frozen_min_length: {frozen_min_length!r} must be an integer >= 2")
    if isinstance(flicker_window, bool) or not isinstance(flicker_window, int):
        raise DaotaiError(f"flicker_window: {flicker_window!r} must be an integer >= 1")
    if flicker_window < 1:
        raise DaotaiError(f"flicker_window: {flicker_window!r} must be an integer >= 1")
    stats: list[FrameStats] = []
    black: list[int] = []
    green: list[int] = []
    still = _StillRuns(frozen_max_diff, frozen_min_length, frozen_max_drift)
    for index, small in enumerate(decode_frames(path, max_side=THUMB_SIDE)):
        if picture is not None:
            h, w = small.shape[:2]
            small = small[math.ceil(picture[1] * h):math.floor(picture[3] * h),
                          math.ceil(picture[0] * w):math.floor(picture[2] * w)]
        stats.append(frame_stats(small))
        if is_black(small):
            black.append(index)
        if is_green(small):
            green.append(index)
        still.add(thumbnail(small))
    means = np.array([s.mean_luma for s in stats])
    runs = tuple(still.finish())
    return VideoScan(
        frames=len(stats),
        stats=tuple(stats),
        black_frames=tuple(black),
        green_frames=tuple(green),
        frozen_runs=runs,
        flicker=_flicker_from_means(means, flicker_window),
        frozen_anchors=tuple(still.anchors),
    )
