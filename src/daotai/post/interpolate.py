"""Frame interpolation ×2 / ×4 or to a target frame rate with classical optical flow.

For every pair of neighbouring frames (I0, I1) OpenCV's DIS flow gives F01 and F10 on luma.
An in-between frame at 0 < t < 1 is made by backward-warping both neighbours with the flow
from t to them, approximated (as in Super-SloMo) by

    F_t0 = −(1 − t)·t·F01 + t²·F10,   F_t1 = (1 − t)²·F01 − t·(1 − t)·F10,

and blending them with weights (1 − t)·v0 and t·v1, where v0 (v1) says whether the sampled
pixel of I0 (I1) is visible in the other frame: the forward–backward flow round trip of a
visible pixel returns to where it started, an occluded one does not. Where both are
occluded the plain time-weighted blend is used.

Output timing: frame j of the result shows source time j·(fps_in / fps_out); frames past
the last source frame hold it. The result has round(n · fps_out / fps_in) frames, so the
clip's duration is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import cv2
import numpy as np

from daotai.encode.video import as_fps
from daotai.errors import EncodeError

__all__ = ["InterpolateConfig", "interpolate_frames", "output_frame_count", "output_fps", "in_between"]

METHODS = ("dis", "blend")
FLOW_SIDE = 1024  # flow is estimated at most this wide: smooth motion fields lose little, 1080p runs ~2x faster
OCCLUSION_TOLERANCE_PX = 1.0  # round-trip error (pixels) still counted as visible


@dataclass(frozen=True)
class InterpolateConfig:
    """Interpolate step: either factor (2 or 4) or a target fps; method dis (flow) | blend."""

    factor: int | None = 2
    fps: Fraction | None = None  # target frame rate; overrides factor when set
    method: str = "dis"

    def __post_init__(self) -> None:
        if self.fps is not None:
            object.__setattr__(self, "fps", as_fps(self.fps))
            object.__setattr__(self, "factor", None)
        elif isinstance(self.factor, bool) or self.factor not in (2, 4):
            raise EncodeError(f"interpolate.factor: {self.factor!r} must be 2 or 4 (or give a target fps)")
        if self.method not in METHODS:
            raise EncodeError(f"interpolate.method: {self.method!r} must be one of {', '.join(METHODS)}")


def output_fps(config: InterpolateConfig, fps_in: Fraction) -> Fraction:
    """Frame rate of the interpolated clip."""
    return config.fps if config.fps is not None else fps_in * config.factor


def output_frame_count(frames_in: int, fps_in: Fraction, fps_out: Fraction) -> int:
    """Frames of the result: the same duration at the new rate (at least one frame)."""
    return max(1, math.floor(Fraction(frames_in) * fps_out / fps_in + Fraction(1, 2)))


def _luma(frame: np.ndarray) -> np.ndarray:
    """(H, W) uint8 luma of an RGB frame, the input DIS expects."""
    return cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)


def _grid(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinate maps, each (H, W) float32."""
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    return xs, ys


def _warp(image: np.ndarray, flow: np.ndarray, grid: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Sample image at x + flow(x) (backward warp, bilinear, edges replicated)."""
    return cv2.remap(
        image, grid[0] + flow[..., 0], grid[1] + flow[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )


@dataclass
class _Pair:
    """Flows and visibility of one pair of neighbouring frames."""

    f01: np.ndarray  # (H, W, 2) float32 pixels
    f10: np.ndarray  # (H, W, 2) float32 pixels
    v0: np.ndarray  # (H, W) float32 1 = pixel of I0 visible in I1
    v1: np.ndarray  # (H, W) float32 1 = pixel of I1 visible in I0


def _visibility(forward: np.ndarray, backward: np.ndarray, grid) -> np.ndarray:
    """1 where the forward–backward round trip closes within tolerance, else 0: (H, W) float32."""
    back_at_target = _warp(backward, forward, grid)  # (H, W, 2)
    error = np.linalg.norm(forward + back_at_target, axis=2)
    scale = 0.05 * np.linalg.norm(forward, axis=2)  # long motions get proportionally more slack
    return (error <= OCCLUSION_TOLERANCE_PX + scale).astype(np.float32)


def _flow(dis, a: np.ndarray, b: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """DIS flow a → b at most FLOW_SIDE wide, returned at full size: (H, W, 2) float32 pixels."""
    h, w = a.shape[:2]
    k = max(h, w) / FLOW_SIDE
    if k <= 1:
        return dis.calc(a, b, None)
    small = (round(w / k), round(h / k))
    flow = dis.calc(cv2.resize(a, small, interpolation=cv2.INTER_AREA),
                    cv2.resize(b, small, interpolation=cv2.INTER_AREA), None)
    flow = cv2.resize(flow, size, interpolation=cv2.INTER_LINEAR)
    flow[..., 0] *= w / small[0]
    flow[..., 1] *= h / small[1]
    return flow


def _pair(dis, a: np.ndarray, b: np.ndarray, grid) -> _Pair:
    """Flows both ways between two frames and where each frame's pixels are visible."""
    la, lb = _luma(a), _luma(b)
    size = (a.shape[1], a.shape[0])
    f01 = _flow(dis, la, lb, size)
    f10 = _flow(dis, lb, la, size)
    return _Pair(f01, f10, _visibility(f01, f10, grid), _visibility(f10, f01, grid))


def in_between(a: np.ndarray, b: np.ndarray, t: float, pair: _Pair | None = None, dis=None) -> np.ndarray:
    """The frame at time t in (0, 1) between a and b: (H, W, 3) uint8."""
    h, w = a.shape[:2]
    grid = _grid(h, w)
    if pair is None:
        pair = _pair(dis or _new_dis(), a, b, grid)
    return _synthesise(a, b, t, pair, grid)


def _synthesise(a: np.ndarray, b: np.ndarray, t: float, pair: _Pair, grid) -> np.ndarray:
    """Warp both neighbours to time t and blend them by time and visibility."""
    ft0 = -(1 - t) * t * pair.f01 + t * t * pair.f10
    ft1 = (1 - t) * (1 - t) * pair.f01 - t * (1 - t) * pair.f10
    w0 = (1 - t) * _warp(pair.v0, ft0, grid)  # (H, W) float32
    w1 = t * _warp(pair.v1, ft1, grid)
    plain = (w0 + w1) < 1e-3  # both sides occluded: fall back to the time weights
    w0[plain], w1[plain] = 1 - t, t
    total = w0 + w1
    warped0 = _warp(a, ft0, grid).astype(np.float32)  # (H, W, 3)
    warped1 = _warp(b, ft1, grid).astype(np.float32)
    out = (warped0 * (w0 / total)[..., None] + warped1 * (w1 / total)[..., None]) + 0.5
    return np.clip(out, 0, 255).astype(np.uint8)


def _blend(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """Plain cross-dissolve at time t: (H, W, 3) uint8."""
    out = a.astype(np.float32) * (1 - t) + b.astype(np.float32) * t + 0.5
    return out.astype(np.uint8)


def _new_dis():
    """A DIS flow estimator tuned for quality over speed (still real time at 720p)."""
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    return dis


def interpolate_frames(
    frames: Iterator[np.ndarray], frames_in: int, fps_in: Fraction, config: InterpolateConfig
) -> Iterator[np.ndarray]:
    """Resample a stream of ``frames_in`` frames at ``fps_in`` to ``output_fps(config)``."""
    fps_out = output_fps(config, fps_in)
    total = output_frame_count(frames_in, fps_in, fps_out)
    step = Fraction(fps_in) / fps_out  # source frames per output frame
    source = iter(frames)
    try:
        a = next(source)
    except StopIteration:
        raise EncodeError("interpolate: the clip has no frames") from None
    b = next(source, None)
    index = 0  # source index of a
    dis = _new_dis() if config.method == "dis" else None
    grid = _grid(*a.shape[:2]) if dis is not None else None
    pair = None
    for j in range(total):
        position = j * step
        while b is not None and position >= index + 1:
            a, b, index, pair = b, next(source, None), index + 1, None
        t = float(position - index)
        if b is None or t <= 1e-6:
            yield a  # on a source frame, or past the end: hold it
            continue
        if dis is None:
            yield _blend(a, b, t)
            continue
        if pair is None:
            pair = _pair(dis, a, b, grid)
        yield _synthesise(a, b, t, pair, grid)
    for _ in source:  # drain, so a decoder behind the iterator is closed cleanly
        pass
