"""Depth control channels: 16-bit millimetres for conditioning, 8-bit previews for people.

Both conversions run once per frame on 1080p float32 depth beside a renderer and encoders on
the same cores, so they avoid boolean gathers and scatters (each a pass over a compacted copy)
and work in place over whole frames, with OpenCV for the rounding casts and the masked
min/max. The arithmetic is the same float32 arithmetic, step for step, as the plain numpy
definition (pinned in tests/test_previz_render.py), so the output is bit-identical.
"""

from __future__ import annotations

import numpy as np

from daotai.errors import BackendError

MM_SKY = 65535  # uint16 code for sky, no hit, or anything at or beyond 65.535 m
PREVIEW_FARTHEST = 24  # 8-bit level of the farthest surface; 0 is reserved for the sky
_LOWEST = float(np.finfo(np.float32).min)  # -FLT_MAX: the lowest finite float32


def _depth_f32(depth: np.ndarray) -> np.ndarray:
    """Depth as a C-contiguous (H, W) float32 array (no copy when it already is one)."""
    d = np.ascontiguousarray(depth, dtype=np.float32)
    if d.ndim != 2:
        raise BackendError(f"depth: shape {d.shape} must be (H, W)")
    return d


def depth_to_uint16_mm(depth: np.ndarray) -> np.ndarray:
    """Metres (H, W) float -> millimetres (H, W) uint16, rounded; 65535 for inf/NaN or >= 65.535 m.

    Rounding is to nearest, ties to even; negative depths give 0.
    """
    import cv2

    d = _depth_f32(depth)
    if d.size == 0:
        return np.zeros(d.shape, np.uint16)
    mm = np.multiply(d, np.float32(1000.0))  # (H, W) float32; inf stays inf
    np.fmin(mm, np.float32(MM_SKY), out=mm)  # NaN, +inf and anything past 65535 -> 65535
    # round half to even and saturate (negatives, -inf -> 0) while casting; +0.0 is exact in
    # whatever precision OpenCV adds in, so only the cast rounds
    return cv2.add(mm, 0.0, dtype=cv2.CV_16U)  # (H, W) uint16


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
    import cv2

    d = _depth_f32(depth)
    if d.size == 0:
        return np.zeros(d.shape, np.uint8)
    near32, far32 = np.float32(near), np.float32(far)  # the comparisons and clamps run in float32
    # finite and <= far: 255, else 0 (NaN fails both comparisons; -inf is below the lowest float)
    valid = cv2.inRange(d, _LOWEST, float(far32))  # (H, W) uint8
    # On valid pixels the clamp to [near, far] is a max with near; other pixels are masked below.
    logd = np.maximum(d, near32)  # (H, W) float32
    np.log(logd, out=logd)
    lo, hi, lo_at, _ = cv2.minMaxLoc(logd, mask=valid)  # exact float32 values, as doubles
    if lo_at[0] < 0:  # no valid pixel at all
        return np.zeros(d.shape, np.uint8)
    if hi - lo < 1e-9:
        return valid  # a single depth: every valid pixel is 255
    # x = (log d - lo) / (hi - lo): 0 = nearest, 1 = farthest; the level is 255 - x * (255 - 24)
    np.subtract(logd, np.float32(lo), out=logd)
    np.divide(logd, np.float32(hi - lo), out=logd)
    np.multiply(logd, np.float32(255.0 - PREVIEW_FARTHEST), out=logd)
    np.subtract(np.float32(255.0), logd, out=logd)
    level = cv2.convertScaleAbs(logd)  # (H, W) uint8, rounded half to even; values lie in 24..255
    return cv2.bitwise_and(level, valid)  # sky, NaN and beyond far -> 0
