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
# No maintained PyPI loader runs RIFE/FILM-style interpolation weights (spandrel loads
# single-image models only), so there is no neural method to name here.
FLOW_SIDE = 1024  # flow is estimated at most this wide: smooth motion fields lose little, 1080p runs ~2x faster
OCCLUSION_TOLERANCE_PX = 1.0  # round-trip error (flow-resolution pixels) still counted as visible


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
            raise EncodeError(
                f"interpolate.method: {self.method!r} must be one of {', '.join(METHODS)} "
                "(dis: optical flow with occlusion handling; blend: plain cross-dissolve)"
            )


def output_fps(config: InterpolateConfig, fps_in: Fraction) -> Fraction:
    """Frame rate of the interpolated clip."""
    return config.fps if config.fps is not None else fps_in * config.factor


def output_frame_count(frames_in: int, fps_in: Fraction, fps_out: Fraction) -> int:
    """Frames of the result: the same duration at the new rate (at least one frame)."""
    return max(1, math.floor(Fraction(frames_in) * fps_out / fps_in + Fraction(1, 2)))


def _luma(frame: np.ndarray) -> np.ndarray:
    """(H, W) uint8 luma of an RGB frame, the input DIS expects."""
    return cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)


def _grid(h: int, w: int) -> np.ndarray:
    """Pixel coordinates (x, y) of every pixel: (H, W, 2) float32, the layout cv2.remap takes as one map."""
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    return np.dstack((xs, ys))


def _warp(image: np.ndarray, flow: np.ndarray, grid: np.ndarray, border: int = cv2.BORDER_REPLICATE) -> np.ndarray:
    """Sample image at x + flow(x) (backward warp, bilinear; outside: edges replicated, or 0 with BORDER_CONSTANT)."""
    return cv2.remap(image, grid + flow, None, cv2.INTER_LINEAR, borderMode=border, borderValue=0)


def flow_size(width: int, height: int) -> tuple[int, int]:
    """(w, h) flow is estimated at: the frame's size, shrunk so the longer side is at most FLOW_SIDE."""
    k = max(width, height) / FLOW_SIDE
    if k <= 1:
        return width, height
    return max(8, round(width / k)), max(8, round(height / k))


class _Grids:
    """Coordinate grids at the frame size and at the flow size of one clip."""

    def __init__(self, width: int, height: int):
        self.full_size = (width, height)
        self.flow_size = flow_size(width, height)
        self.full = _grid(height, width)  # (H, W, 2) float32
        self.small = _grid(self.flow_size[1], self.flow_size[0]) if self.scaled else self.full

    @property
    def scaled(self) -> bool:
        """Whether flow runs below the frame size."""
        return self.flow_size != self.full_size


@dataclass
class _Pair:
    """Flows and visibility of one pair of neighbouring frames, all at the flow size (h, w)."""

    f01: np.ndarray  # (h, w, 2) float32 flow-size pixels
    f10: np.ndarray  # (h, w, 2) float32 flow-size pixels
    v0: np.ndarray  # (h, w) float32 1 = pixel of I0 visible in I1
    v1: np.ndarray  # (h, w) float32 1 = pixel of I1 visible in I0


def _visibility(forward: np.ndarray, backward: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """1 where the forward–backward round trip closes within tolerance, else 0: (h, w) float32."""
    back_at_target = _warp(backward, forward, grid)  # (h, w, 2)
    error = cv2.magnitude(*cv2.split(forward + back_at_target))
    scale = 0.05 * cv2.magnitude(*cv2.split(forward))  # long motions get proportionally more slack
    return (error <= OCCLUSION_TOLERANCE_PX + scale).astype(np.float32)


def _pair(dis, a: np.ndarray, b: np.ndarray, grids: _Grids) -> _Pair:
    """Flows both ways between two frames and where each frame's pixels are visible."""
    la, lb = _luma(a), _luma(b)
    if grids.scaled:
        la = cv2.resize(la, grids.flow_size, interpolation=cv2.INTER_AREA)
        lb = cv2.resize(lb, grids.flow_size, interpolation=cv2.INTER_AREA)
    f01 = dis.calc(la, lb, None)  # (h, w, 2) float32
    f10 = dis.calc(lb, la, None)
    return _Pair(f01, f10, _visibility(f01, f10, grids.small), _visibility(f10, f01, grids.small))


def in_between(a: np.ndarray, b: np.ndarray, t: float, pair: _Pair | None = None, dis=None) -> np.ndarray:
    """The frame at time t in (0, 1) between a and b: (H, W, 3) uint8."""
    grids = _Grids(a.shape[1], a.shape[0])
    if pair is None:
        pair = _pair(dis or _new_dis(), a, b, grids)
    return _synthesise(a, b, t, pair, grids)


def _to_full(flow: np.ndarray, grids: _Grids) -> np.ndarray:
    """A flow-size flow resized to the frame size, its vectors scaled to frame pixels: (H, W, 2) float32."""
    (w, h), (sw, sh) = grids.full_size, grids.flow_size
    scaled = flow * np.float32((w / sw, h / sh))  # scaling first: the small array is ~4x cheaper
    return cv2.resize(scaled, (w, h), interpolation=cv2.INTER_LINEAR)


def _synthesise(a: np.ndarray, b: np.ndarray, t: float, pair: _Pair, grids: _Grids) -> np.ndarray:
    """Warp both neighbours to time t and blend them by time and visibility.

    Flows and weights are formed at the flow size (smooth fields, a quarter of the work at
    1080p) and only the two warps of the frames themselves run at full size.
    """
    ft0 = cv2.addWeighted(pair.f01, -(1 - t) * t, pair.f10, t * t, 0.0)  # (h, w, 2) float32
    ft1 = cv2.addWeighted(pair.f01, (1 - t) * (1 - t), pair.f10, -t * (1 - t), 0.0)
    # A sample from outside a frame is content that frame never saw (it entered or left the
    # picture between the two): visibility 0 there, so the frame that does show it is used.
    w0 = (1 - t) * _warp(pair.v0, ft0, grids.small, cv2.BORDER_CONSTANT)  # (h, w) float32
    w1 = t * _warp(pair.v1, ft1, grids.small, cv2.BORDER_CONSTANT)
    plain = (w0 + w1) < 1e-3  # both sides occluded: fall back to the time weights
    w0[plain], w1[plain] = 1 - t, t
    if grids.scaled:
        ft0, ft1 = _to_full(ft0, grids), _to_full(ft1, grids)
        w0 = cv2.resize(w0, grids.full_size, interpolation=cv2.INTER_LINEAR)
        w1 = cv2.resize(w1, grids.full_size, interpolation=cv2.INTER_LINEAR)
    warped0 = _warp(a, ft0, grids.full)  # (H, W, 3) uint8
    warped1 = _warp(b, ft1, grids.full)
    # (w0·I0 + w1·I1) / (w0 + w1), rounded; the weights are > 0 everywhere after the fallback
    return cv2.blendLinear(warped0, warped1, w0, w1)


def _blend(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """Plain cross-dissolve at time t: (H, W, 3) uint8."""
    out = a.astype(np.float32) * (1 - t) + b.astype(np.float32) * t + 0.5
    return out.astype(np.uint8)


def _new_dis():
    """A DIS flow estimator tuned for quality over speed (MEDIUM preset)."""
    return cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)


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
    grids = _Grids(a.shape[1], a.shape[0]) if dis is not None else None
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
            pair = _pair(dis, a, b, grids)
        yield _synthesise(a, b, t, pair, grids)
    for _ in source:  # drain, so a decoder behind the iterator is closed cleanly
        pass
