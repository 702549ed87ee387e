"""Video files read back through PyAV: frames as RGB by the file's own matrix and range tags, single-channel
control frames, and what a file holds (size, rate, frame count, colour tags, faststart)."""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from daotai.encode.colour import BT709, KR_KB, RANGE_FULL, RANGE_LIMITED, SMPTE170M, plane_view, yuv_planes_to_rgb
from daotai.errors import EncodeError


@dataclass(frozen=True)
class VideoInfo:
    """What probe() found out about a video file."""

    width: int
    height: int
    fps: Fraction
    frames: int
    duration_s: float
    codec: str
    pix_fmt: str
    color_primaries: int
    color_trc: int
    colorspace: int
    color_range: int
    faststart: bool  # MP4/MOV only: the moov index precedes the media data


def _open_video(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """Open a file for decoding and return (container, first video stream)."""
    container, stream = open_container(path)
    # Frame + slice threads, so decoding keeps up with encoding in assembly.
    stream.codec_context.thread_type = "AUTO"
    return container, stream


def open_container(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """Open a file for reading (decoding or demuxing): (container, its first video stream)."""
    source = Path(path)
    if not source.is_file():
        raise EncodeError(f"path: {str(source)!r} does not exist or is not a file")
    try:
        container = av.open(str(source), "r")
    except (av.FFmpegError, OSError, UnicodeDecodeError) as error:
        raise EncodeError(f"path: {str(source)!r} is not a readable video: {error}") from error
    if not container.streams.video:
        container.close()
        raise EncodeError(f"path: {str(source)!r} has no video stream")
    return container, container.streams.video[0]


def frame_index(timestamp: int, stream: Any) -> int:
    """The frame number a packet or frame timestamp of ``stream`` stands for (pts · time_base · fps)."""
    exact = Fraction(timestamp) * stream.time_base * _stream_fps(stream)
    index = math.floor(exact + Fraction(1, 2))
    if abs(exact - index) > Fraction(1, 100):
        raise EncodeError(f"timestamp {timestamp} ({stream.time_base} s units) falls between frames "
                          f"at {_stream_fps(stream)} fps")
    return index


def _decoded(container: Any, stream: Any, source: str | os.PathLike[str], start: int = 0) -> Iterator[Any]:
    """Decoded av frames of stream from the keyframe at frame ``start`` (packets before it are
    skipped undecoded), with FFmpeg failures turned into EncodeError."""
    try:
        if start == 0:
            yield from container.decode(stream)
            return
        found = False
        for packet in container.demux(stream):
            if not found:
                found = packet.is_keyframe and packet.pts is not None and frame_index(packet.pts, stream) == start
                if not found:
                    continue
            yield from packet.decode()
        if not found:
            raise EncodeError(f"start: {str(source)!r} has no keyframe at frame {start}")
    except av.FFmpegError as error:
        raise EncodeError(f"path: {str(source)!r} failed to decode: {error}") from error


def _component_bits(frame: Any) -> int:
    """Bits per sample of the frame's first component."""
    return int(frame.format.components[0].bits)


def _frame_to_rgb(frame: Any, step: int) -> np.ndarray:
    """(H', W', 3) uint8 RGB of a decoded frame, every step-th pixel, own YUV maths."""
    fmt = frame.format
    name = fmt.name
    if fmt.is_rgb or name.startswith(("rgb", "bgr", "gbr", "pal")):
        rgb = frame.to_ndarray(format="rgb24")  # (H, W, 3) uint8; no matrix involved
        return np.ascontiguousarray(rgb[::step, ::step])
    if name.startswith(("gray", "ya")):
        gray = frame.to_ndarray(format="gray")[::step, ::step]  # (H', W') uint8
        return np.repeat(gray[:, :, None], 3, axis=2)
    if not (name.startswith(("yuv", "yuvj")) and fmt.is_planar and len(frame.planes) >= 3):
        # Packed or semi-planar YUV (nv12, yuyv…): unpack to planar without a matrix.
        frame = frame.reformat(format="yuv444p")
        name = "yuv444p"
    bits = _component_bits(frame)
    dtype = np.uint8 if bits <= 8 else np.uint16
    y = plane_view(frame.planes[0], dtype)
    cb = plane_view(frame.planes[1], dtype)
    cr = plane_view(frame.planes[2], dtype)
    full = name.startswith("yuvj") or frame.color_range == RANGE_FULL
    matrix = frame.colorspace
    if matrix not in KR_KB:
        matrix = BT709 if frame.height > 576 else SMPTE170M  # the usual guess for untagged video
    h, w = y.shape
    sy, sx = max(1, round(h / cb.shape[0])), max(1, round(w / cb.shape[1]))
    if step == 1 and h % sy == 0 and w % sx == 0:
        return yuv_planes_to_rgb(y, cb, cr, matrix_code=matrix, bits=bits, full_range=full)
    rows = np.arange(0, h, step)
    cols = np.arange(0, w, step)
    pick = np.ix_(rows // sy, cols // sx)  # nearest chroma sample of each kept pixel
    return yuv_planes_to_rgb(
        y[np.ix_(rows, cols)], cb[pick], cr[pick], matrix_code=matrix, bits=bits, full_range=full
    )


def _rgb_frames(
    container: Any, stream: Any, path: Any, max_side: int | None, start: int = 0
) -> Iterator[np.ndarray]:
    """Generator body of decode_frames; closes the container when done or dropped."""
    try:
        for frame in _decoded(container, stream, path, start):
            longest = max(frame.width, frame.height)
            step = 1 if max_side is None else max(1, -(-longest // max_side))
            yield _frame_to_rgb(frame, step)
    finally:
        container.close()


def decode_frames(
    path: str | os.PathLike[str], *, max_side: int | None = None, start: int = 0
) -> Iterator[np.ndarray]:
    """Iterate (H, W, 3) uint8 RGB frames, converting YUV by the file's matrix/range tags.

    The file is opened right away, so a missing or invalid file raises EncodeError here
    rather than at the first frame. With ``max_side`` every k-th row and column is kept
    (k the smallest integer that brings the longer side to at most max_side): cheap
    thumbnails for statistics. With ``start`` (the index of a keyframe, see
    :func:`daotai.encode.remux.keyframes`) decoding begins at that frame; the GOPs before it are
    skipped without being decoded.
    """
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise EncodeError(f"start: {start!r} must be a frame index >= 0")
    if max_side is not None and (
        isinstance(max_side, bool) or not isinstance(max_side, int) or max_side < 1
    ):
        raise EncodeError(f"max_side: {max_side!r} must be None or an integer >= 1")
    container, stream = _open_video(path)
    return _rgb_frames(container, stream, path, max_side, start)


def _gray_frames(container: Any, stream: Any, path: Any) -> Iterator[np.ndarray]:
    """Generator body of decode_gray; closes the container when done or dropped."""
    try:
        for frame in _decoded(container, stream, path):
            name = frame.format.name
            if name.startswith(("rgb", "bgr", "gbr", "pal")) or frame.format.is_rgb:
                raise EncodeError(f"path: {str(path)!r} is {name}, not a single-channel video")
            if name.endswith("be"):
                frame = frame.reformat(format="gray16le")
            bits = _component_bits(frame)
            dtype = np.uint8 if bits <= 8 else np.uint16
            yield plane_view(frame.planes[0], dtype).copy()  # (H, W)
    finally:
        container.close()


def decode_gray(path: str | os.PathLike[str]) -> Iterator[np.ndarray]:
    """Iterate (H, W) frames of a single-channel file: uint8 for 8-bit, uint16 for deeper.

    For YUV files (e.g. an H.264 depth preview) the luma plane is returned as stored.
    """
    container, stream = _open_video(path)
    return _gray_frames(container, stream, path)


def top_level_boxes(path: str | os.PathLike[str]) -> list[str]:
    """Names of the top-level ISO-BMFF boxes (atoms) of an MP4/MOV file, in file order."""
    names: list[str] = []
    with open(path, "rb") as handle:
        total = os.fstat(handle.fileno()).st_size
        position = 0
        while position + 8 <= total:
            handle.seek(position)
            size, kind = struct.unpack(">I4s", handle.read(8))
            if size == 1:  # 64-bit "largesize" follows the type
                size = struct.unpack(">Q", handle.read(8))[0]
            elif size == 0:  # box runs to the end of the file
                size = total - position
            if size < 8:
                break  # corrupt; what was read so far still tells the order
            names.append(kind.decode("latin-1"))
            position += size
    return names


def _has_faststart(path: Path) -> bool:
    """True when an MP4/MOV file's moov box comes before its mdat box."""
    if path.suffix.lower() not in (".mp4", ".mov", ".m4v"):
        return False
    names = top_level_boxes(path)
    return "moov" in names and "mdat" in names and names.index("moov") < names.index("mdat")


def _stream_fps(stream: Any) -> Fraction:
    """The stream's nominal frame rate as a Fraction."""
    for rate in (stream.average_rate, stream.guessed_rate, stream.base_rate):
        if rate:
            fps = Fraction(rate)
            # Matroska stores ms timestamps; snap near-NTSC rates back to n*1000/1001.
            ntsc = Fraction(round(fps * Fraction(1001, 1000)) * 1000, 1001)
            if fps.denominator > 1001 and abs(fps - ntsc) < Fraction(1, 1000):
                return ntsc
            return fps
    return Fraction(0)


def _stated_range(codec: str, decoded_range: int) -> int:
    """The colour range of a stream, with ProRes's unstated range read as video range.

    A QuickTime 'colr' atom carries no range flag and a ProRes bitstream is video range by
    definition; FFmpeg 8's decoder says so, FFmpeg 7 (PyAV 14, our floor) leaves it unspecified."""
    if codec == "prores" and decoded_range == 0:
        return RANGE_LIMITED
    return decoded_range


def probe(path: str | os.PathLike[str]) -> VideoInfo:
    """Size, rate, frame count, exact duration, codec, colour tags and faststart of a file."""
    source = Path(path)
    container, stream = _open_video(source)
    try:
        context = stream.codec_context
        fps = _stream_fps(stream)
        frames = int(stream.frames or 0)
        if frames <= 0:  # container keeps no count (Matroska): count by decoding
            frames = sum(1 for _ in _decoded(container, stream, source))
        if stream.duration and stream.time_base:
            duration = Fraction(stream.duration) * stream.time_base
        elif fps:
            duration = frames / fps
        else:
            duration = Fraction(container.duration or 0, av.time_base)
        info = VideoInfo(
            width=int(context.width),
            height=int(context.height),
            fps=fps,
            frames=frames,
            duration_s=float(duration),
            codec=str(context.name),
            pix_fmt=str(context.pix_fmt or (context.format.name if context.format else "")),
            color_primaries=int(context.color_primaries),
            color_trc=int(context.color_trc),
            colorspace=int(context.colorspace),
            color_range=_stated_range(str(context.name), int(context.color_range)),
            faststart=_has_faststart(source),
        )
    except av.FFmpegError as error:
        raise EncodeError(f"path: {str(source)!r} cannot be probed: {error}") from error
    finally:
        container.close()
    return info


def as_fps(value: int | float | str | Fraction) -> Fraction:
    """Frame rate as an exact Fraction (ints, Fractions, "24000/1001" strings, decimal floats)."""
    if isinstance(value, bool):
        raise EncodeError(f"fps: {value!r} must be a positive number such as 24 or 24000/1001")
    try:
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(value)
            fps = Fraction(repr(value))  # the decimal the user wrote, not the binary float
        else:
            fps = Fraction(value)
    except (TypeError, ValueError, ZeroDivisionError):
        raise EncodeError(
            f"fps: {value!r} must be a positive number such as 24 or 24000/1001"
        ) from None
    if not 0 < fps <= 1000:
        raise EncodeError(f"fps: {value!r} must be in (0, 1000]")
    return fps
