"""Motion interpolation between two frames: DIS optical flow both ways, occlusion-aware warping
to any time between them. One implementation for the restoration interpolator
(:mod:`daotai.post.interpolate`) and the neural backends' retiming
(:mod:`daotai.render.neural.retime`)."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

FLOW_SIDE = 1024  # flow is estimated at most this wide: smooth motion fields lose little, 1080p runs ~2x faster
OCCLUSION_TOLERANCE_PX = 1.0  # round-trip error (flow-resolution pixels) still counted as visible


def luma(frame: np.ndarray) -> np.ndarray:
    """(H, W) uint8 luma of an RGB frame, the input DIS expects."""
    return cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)


def grid_of(h: int, w: int) -> np.ndarray:
    """Pixel coordinates (x, y) of every pixel: (H, W, 2) float32, the layout cv2.remap takes as one map."""
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    return np.dstack((xs, ys))


def warp(image: np.ndarray, flow: np.ndarray, grid: np.ndarray, border: int = cv2.BORDER_REPLICATE) -> np.ndarray:
    """Sample image at x + flow(x) (backward warp, bilinear; outside: edges replicated, or 0 with BORDER_CONSTANT)."""
    return cv2.remap(image, grid + flow, None, cv2.INTER_LINEAR, borderMode=border, borderValue=0)


def flow_size(width: int, height: int) -> tuple[int, int]:
    """(w, h) flow is estimated at: the frame's size, shrunk so the longer side is at most FLOW_SIDE."""
    k = max(width, height) / FLOW_SIDE
    if k <= 1:
        return width, height
    return max(8, round(width / k)), max(8, round(height / k))


class Grids:
    """Coordinate grids at the frame size and at the flow size of one clip."""

    def __init__(self, width: int, height: int):
        self.full_size = (width, height)
        self.flow_size = flow_size(width, height)
        self.full = grid_of(height, width)  # (H, W, 2) float32
        self.small = grid_of(self.flow_size[1], self.flow_size[0]) if self.scaled else self.full

    @property
    def scaled(self) -> bool:
        """Whether flow runs below the frame size."""
        return self.flow_size != self.full_size


@dataclass
class Pair:
    """Flows and visibility of one pair of neighbouring frames, all at the flow size (h, w)."""

    f01: np.ndarray  # (h, w, 2) float32 flow-size pixels
    f10: np.ndarray  # (h, w, 2) float32 flow-size pixels
    v0: np.ndarray  # (h, w) float32 1 = pixel of I0 visible in I1
    v1: np.ndarray  # (h, w) float32 1 = pixel of I1 visible in I0


def visibility(forward: np.ndarray, backward: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """1 where the forward–backward round trip closes within tolerance, else 0: (h, w) float32."""
    back_at_target = warp(backward, forward, grid)  # (h, w, 2)
    error = cv2.magnitude(*cv2.split(forward + back_at_target))
    scale = 0.05 * cv2.magnitude(*cv2.split(forward))  # long motions get proportionally more slack
    return (error <= OCCLUSION_TOLERANCE_PX + scale).astype(np.float32)


def flow_pair(dis, a: np.ndarray, b: np.ndarray, grids: Grids) -> Pair:
    """Flows both ways between two frames and where each frame's pixels are visible."""
    la, lb = luma(a), luma(b)
    if grids.scaled:
        la = cv2.resize(la, grids.flow_size, interpolation=cv2.INTER_AREA)
        lb = cv2.resize(lb, grids.flow_size, interpolation=cv2.INTER_AREA)
    f01 = dis.calc(la, lb, None)  # (h, w, 2) float32
    f10 = dis.calc(lb, la, None)
    return Pair(f01, f10, visibility(f01, f10, grids.small), visibility(f10, f01, grids.small))


def in_between(a: np.ndarray, b: np.ndarray, t: float, pair: Pair | None = None, dis=None) -> np.ndarray:
    """The frame at time t in (0, 1) between a and b: (H, W, 3) uint8."""
    grids = Grids(a.shape[1], a.shape[0])
    if pair is None:
        pair = flow_pair(dis or new_dis(), a, b, grids)
    return synthesise(a, b, t, pair, grids)


def to_full(flow: np.ndarray, grids: Grids) -> np.ndarray:
    """A flow-size flow resized to the frame size, its vectors scaled to frame pixels: (H, W, 2) float32."""
    (w, h), (sw, sh) = grids.full_size, grids.flow_size
    scaled = flow * np.float32((w / sw, h / sh))  # scaling first: the small array is ~4x cheaper
    return cv2.resize(scaled, (w, h), interpolation=cv2.INTER_LINEAR)


def synthesise(a: np.ndarray, b: np.ndarray, t: float, pair: Pair, grids: Grids) -> np.ndarray:
    """Warp both neighbours to time t and blend them by time and visibility.

    Flows and weights are formed at the flow size (smooth fields, a quarter of the work at
    1080p) and only the two warps of the frames themselves run at full size.
    """
    ft0 = cv2.addWeighted(pair.f01, -(1 - t) * t, pair.f10, t * t, 0.0)  # (h, w, 2) float32
    ft1 = cv2.addWeighted(pair.f01, (1 - t) * (1 - t), pair.f10, -t * (1 - t), 0.0)
    # A sample from outside a frame is content that frame never saw (it entered or left the
    # picture between the two): visibility 0 there, so the frame that does show it is used.
    w0 = (1 - t) * warp(pair.v0, ft0, grids.small, cv2.BORDER_CONSTANT)  # (h, w) float32
    w1 = t * warp(pair.v1, ft1, grids.small, cv2.BORDER_CONSTANT)
    plain = (w0 + w1) < 1e-3  # both sides occluded: fall back to the time weights
    w0[plain], w1[plain] = 1 - t, t
    if grids.scaled:
        ft0, ft1 = to_full(ft0, grids), to_full(ft1, grids)
        w0 = cv2.resize(w0, grids.full_size, interpolation=cv2.INTER_LINEAR)
        w1 = cv2.resize(w1, grids.full_size, interpolation=cv2.INTER_LINEAR)
    warped0 = warp(a, ft0, grids.full)  # (H, W, 3) uint8
    warped1 = warp(b, ft1, grids.full)
    # (w0·I0 + w1·I1) / (w0 + w1), rounded; the weights are > 0 everywhere after the fallback
    return cv2.blendLinear(warped0, warped1, w0, w1)


def blend(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """Plain cross-dissolve at time t: (H, W, 3) uint8."""
    out = a.astype(np.float32) * (1 - t) + b.astype(np.float32) * t + 0.5
    return out.astype(np.uint8)


def new_dis():
    """A DIS flow estimator tuned for quality over speed (MEDIUM preset)."""
    return cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
