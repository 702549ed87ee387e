"""Depth control channels: 16-bit millimetres for conditioning, 8-bit previews for people."""

from __future__ import annotations

import numpy as np

from daotai.errors import BackendError

MM_SKY = 65535  # uint16 code for sky, no hit, or anything at or beyond 65.535 m
PREVIEW_FARTHEST = 24  # 8-bit level of the farthest surface; 0 is reserved for the sky


def depth_to_uint16_mm(depth: np.ndarray) -> np.ndarray:
    """Metres (H, W) float -> millimetres (H, W) uint16, rounded; 65535 for inf/NaN or >= 65.535 m."""
    d = np.asarray(depth, dtype=np.float32)
    if d.ndim != 2:
        raise BackendError(f"depth: shape {d.shape} must be (H, W)")
    mm = np.rint(d * np.float32(1000.0))  # (H, W) float32; inf stays inf
    far = ~(mm < MM_SKY)  # also catches NaN and inf
    np.clip(mm, 0.0, MM_SKY, out=mm, where=~far)
    mm[far] = MM_SKY
    return mm.astype(np.uint16)


def depth_to_preview(depth: np.ndarray, near: float, far: float) -> np.ndarray:
    """Metres (H, W) -> (H, W) uint8 preview: nearest surface 255, sky 0, log-scaled in between.

    Finite depths are first clamped to the clip range [near, far]. The scale then runs from
    the nearest to the farthest depth actually present in the frame (not the clip planes,
    which would squeeze a 2-10 m scene into a few grey levels): the nearest maps to 255, the
    farthest to ``PREVIEW_FARTHEST`` (24), logarithmically, so equal depth ratios get equal
    steps. Sky (inf), NaN and anything beyond ``far`` are 0, so the sky never looks like a
    far wall. A frame with a single depth maps it to 255.
    """
    if not (0.0 < near < far):
        raise BackendError(f"depth_to_preview near/far: {(near, far)!r} must satisfy 0 < near < far")
    d = np.asarray(depth, dtype=np.float32)
    if d.ndim != 2:
        raise BackendError(f"depth: shape {d.shape} must be (H, W)")
    out = np.zeros(d.shape, np.uint8)  # (H, W) uint8, sky = 0
    valid = np.isfinite(d) & (d <= far)
    if not valid.any():
        return out
    logd = np.log(np.clip(d[valid], near, far))  # (N,) float32
    lo, hi = float(logd.min()), float(logd.max())
    if hi - lo < 1e-9:
        out[valid] = 255
        return out
    x = (logd - lo) / (hi - lo)  # 0 = nearest, 1 = farthest
    out[valid] = np.rint(255.0 - x * (255.0 - PREVIEW_FARTHEST)).astype(np.uint8)
    return out
