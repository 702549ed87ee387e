"""Colour between RGB and the YUV planes of a video, done here rather than by swscale (whose default
matrix is BT.601): ITU-T H.273 code points, BT.709 (and the matrices decoding meets) RGB <-> YUV in
float32 numpy, and numpy views of a frame's planes."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

# ITU-T H.273 code points, as stored in the streams' colour tags.
BT709 = 1
UNSPECIFIED = 2
BT470BG = 5
SMPTE170M = 6
BT2020_NCL = 9
BT2020_CL = 10
RANGE_LIMITED = 1  # "MPEG" / "tv": Y 16..235, C 16..240 at 8 bit
RANGE_FULL = 2  # "JPEG" / "pc": 0..255
KR_KB = {  # luma weights (Kr, Kb) per matrix code point
    BT709: (0.2126, 0.0722),
    BT470BG: (0.299, 0.114),
    SMPTE170M: (0.299, 0.114),
    BT2020_NCL: (0.2627, 0.0593),
    BT2020_CL: (0.2627, 0.0593),
}


def _yuv_from_rgb_matrix(kr: float, kb: float) -> np.ndarray:
    """(3, 3) matrix taking RGB in [0, 1] to (Y' in [0, 1], Cb, Cr in [-0.5, 0.5])."""
    kg = 1.0 - kr - kb
    return np.array(
        [
            [kr, kg, kb],
            [-kr / (2 * (1 - kb)), -kg / (2 * (1 - kb)), 0.5],
            [0.5, -kg / (2 * (1 - kr)), -kb / (2 * (1 - kr))],
        ]
    )


def _range_scale(bits: int, full: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (scale, offset) from normalised (Y', Cb, Cr) to integer code values."""
    step = float(1 << (bits - 8))
    if full:
        top = float((1 << bits) - 1)
        return np.array([top, top, top]), np.array([0.0, 128.0 * step, 128.0 * step])
    return np.array([219.0, 224.0, 224.0]) * step, np.array([16.0, 128.0, 128.0]) * step


@lru_cache(maxsize=None)
def _encode_coeffs(bits: int) -> tuple[np.ndarray, np.ndarray]:
    """BT.709 limited range: (3, 3) float32 matrix from 8-bit RGB to code values, and offsets."""
    scale, offset = _range_scale(bits, full=False)
    matrix = scale[:, None] * _yuv_from_rgb_matrix(*KR_KB[BT709]) / 255.0
    return matrix.astype(np.float32), offset.astype(np.float32)


@lru_cache(maxsize=None)
def _decode_coeffs(matrix_code: int, bits: int, full: bool) -> tuple[np.ndarray, np.ndarray]:
    """(3, 3) float32 matrix and (3,) offsets taking code values (Y, Cb, Cr) to 8-bit RGB."""
    kr, kb = KR_KB.get(matrix_code, KR_KB[BT709])
    scale, offset = _range_scale(bits, full)
    forward = scale[:, None] * _yuv_from_rgb_matrix(kr, kb) / 255.0
    return np.linalg.inv(forward).astype(np.float32), offset.astype(np.float32)


def rgb_to_yuv_planes(
    rgb: np.ndarray, sub_y: int = 2, bits: int = 8
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BT.709 limited-range Y, Cb, Cr float32 planes (+0.5, to be truncated) from RGB.

    ``rgb`` is (H, W, 3) uint8 with even H and W. Chroma is the average over sub_y x 2
    blocks (sub_y = 2: 4:2:0, sub_y = 1: 4:2:2); ``bits`` is 8 or 10. The
    channel mix is done as BLAS matrix products on float32 so no float64 temporaries
    are made and the inner loops are not strided over a length-3 axis.
    """
    h, w, _ = rgb.shape
    matrix, offset = _encode_coeffs(bits)
    y = rgb.reshape(-1, 3) @ matrix[0]  # (H*W,) float32
    y += offset[0] + 0.5  # +0.5: the later cast to int truncates
    if sub_y == 2:
        rows = rgb[0::2].astype(np.uint16)  # (H/2, W, 3) sums of vertical pairs, exact
        rows += rgb[1::2]
    else:
        rows = rgb
    # Each row of (N, 6) holds two horizontal neighbours; one (6, 2) product averages them
    # and applies the Cb/Cr rows of the matrix at once.
    pair = np.concatenate([matrix[1:].T, matrix[1:].T]) / np.float32(sub_y * 2)  # (6, 2)
    cbcr = rows.reshape(-1, 6) @ pair  # (H/sy * W/2, 2) float32
    cbcr += offset[1] + 0.5  # Cb and Cr share the offset
    ch, cw = h // sub_y, w // 2
    return y.reshape(h, w), cbcr[:, 0].reshape(ch, cw), cbcr[:, 1].reshape(ch, cw)


@lru_cache(maxsize=None)
def _encode_affine_u8() -> tuple[np.ndarray, np.ndarray]:
    """BT.709 limited range as OpenCV affine matrices on 8-bit RGB: Y (1, 4) and Cb/Cr (2, 4)."""
    matrix, offset = _encode_coeffs(8)
    luma = np.hstack([matrix[0:1], offset[0:1, None]]).astype(np.float32)
    chroma = np.hstack([matrix[1:3], offset[1:3, None]]).astype(np.float32)
    return luma, chroma


def rgb_to_yuv_u8(rgb: np.ndarray, sub_y: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BT.709 limited-range 8-bit Y (H, W) and Cb, Cr (H/sub_y, W/2) uint8 planes from RGB.

    The same numbers as ``rgb_to_yuv_planes`` (chroma averaged over sub_y x 2 blocks before the
    matrix, which is the same by linearity; round half up there, round half to even here, so a
    value can differ by one code only on an exact tie), done by OpenCV's vectorised affine
    transform: about a quarter of the CPU time of the BLAS path at 1080p, which matters when
    render and encode share two cores. (Chroma from 16-bit block sums through ``cv2.transform``
    on CV_16U was ~4 ms faster but gave different bytes from run to run for the same frames;
    the float path below is deterministic.)
    """
    import cv2

    h, w, _ = rgb.shape
    luma, chroma = _encode_affine_u8()
    y = cv2.transform(rgb, luma)  # (H, W) uint8, rounded and saturated
    # chroma from the exact block mean (float32), not from rounded 8-bit means
    blocks = cv2.resize(rgb.astype(np.float32), (w // 2, h // sub_y), interpolation=cv2.INTER_AREA)
    cbcr = cv2.transform(blocks, chroma)  # (H/sy, W/2, 2) float32 code values
    cbcr += 0.5  # the cast below truncates
    return y, cbcr[..., 0].astype(np.uint8), cbcr[..., 1].astype(np.uint8)


def yuv_planes_to_rgb(
    y: np.ndarray,
    cb: np.ndarray,
    cr: np.ndarray,
    *,
    matrix_code: int = BT709,
    bits: int = 8,
    full_range: bool = False,
) -> np.ndarray:
    """(H, W, 3) uint8 RGB from Y (H, W) and Cb/Cr planes at (H/sy, W/sx).

    Chroma is upsampled bilinearly with centre siting (each chroma sample sits at the
    centre of the luma block it was averaged from, which is how the writer makes it and
    how its streams are tagged), as players do; pixel repetition would show block steps
    along every coloured edge.
    """
    import cv2

    h, w = y.shape
    inverse, offset = _decode_coeffs(matrix_code, bits, full_range)
    # Every row of the inverse matrix has the same luma weight, so scale Y once.
    yf = y.astype(np.float32)  # (H, W)
    yf -= offset[0]
    yf *= inverse[0, 0]
    if cb.shape != (h, w):
        cbf = cv2.resize(cb.astype(np.float32), (w, h), interpolation=cv2.INTER_LINEAR)  # (H, W)
        crf = cv2.resize(cr.astype(np.float32), (w, h), interpolation=cv2.INTER_LINEAR)
    else:
        cbf, crf = cb.astype(np.float32), cr.astype(np.float32)
    cbf -= offset[1]
    crf -= offset[2]
    out = np.empty((h, w, 3), np.uint8)
    for k in range(3):
        channel = inverse[k, 1] * cbf
        channel += inverse[k, 2] * crf
        channel += yf
        channel += 0.5  # the cast below truncates
        np.clip(channel, 0.0, 255.0, out=channel)
        out[..., k] = channel
    return out


def plane_view(plane: Any, dtype: np.dtype | type = np.uint8) -> np.ndarray:
    """A numpy view (rows, cols) of one frame plane without its line padding."""
    itemsize = np.dtype(dtype).itemsize
    return np.ndarray(
        (plane.height, plane.width),
        dtype=dtype,
        buffer=plane,
        strides=(plane.line_size, itemsize),
    )


def fill_plane(plane: Any, values: np.ndarray, dtype: np.dtype | type) -> None:
    """Write code values into an integer plane: integers as they are, floats (already offset
    by +0.5) truncated."""
    np.copyto(plane_view(plane, dtype), values, casting="unsafe")
