"""Join encoded clips by copying their compressed packets: no decoding, no re-encoding.

Every H.264/HEVC file daotai writes is made of closed GOPs, each opened by a keyframe (an IDR
picture) at most ``EncodeSettings.keyint_s`` apart; every ProRes frame is a keyframe. A run of
whole GOPs, ``[first, end)`` with ``first`` a keyframe and ``end`` the next kept keyframe or the
end of the file, decodes on its own to exactly the frames it decoded to inside its file. So a
sequence can be written as a list of such runs (:class:`Segment`) taken from the clips, their
timestamps moved to where they land, as long as every run shares one stream format: the same
codec, size, pixel format, rate, colour tags, parameter sets (the ``avcC``/``hvcC`` extradata)
and encoder options (x264/x265 write theirs into the first picture).
:func:`stream_format` reads what a file has; :func:`daotai.encode.video.reference_format` what a given
:class:`~daotai.encode.video.EncodeSettings` writes, so a caller can tell whether a clip was
encoded with the sequence's settings before copying it.

Copying is deterministic: the same segments give the same bytes. The written file is atomic
(a temp file beside the target, renamed when complete) and, like every MP4/MOV daotai writes,
has its index first (+faststart).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from daotai.encode.read import as_fps, frame_index, open_container
from daotai.errors import EncodeError
from daotai.files import publish, remove_quietly, temp_path

__all__ = ["Segment", "StreamFormat", "copy_segments", "keyframes", "stream_format"]

_MUXERS = {".mp4": "mp4", ".mov": "mov"}  # containers a joined sequence is written in
_OPTIONS_MARK = b"options: "  # x264 and x265 write "... options: <their settings>\0" in an SEI


@dataclass(frozen=True)
class StreamFormat:
    """What two video streams must share for their packets to be joined into one stream."""

    codec: str
    width: int
    height: int
    pix_fmt: str
    fps: Fraction
    colour: tuple[int, int, int, int]  # primaries, transfer, matrix, range (H.273 code points)
    profile: int | None
    codec_tag: str
    extradata: bytes  # parameter sets (avcC / hvcC); empty for ProRes
    encoder_options: bytes  # x264/x265's options string; empty where the encoder writes none


@dataclass(frozen=True)
class Segment:
    """Frames ``[first, end)`` of a file, copied as they are; ``first`` must be a keyframe and
    ``end`` a keyframe or the file's frame count."""

    path: Path
    first: int
    end: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        if not 0 <= self.first < self.end:
            raise EncodeError(f"segment {str(self.path)!r}: frames [{self.first}, {self.end}) must be a "
                              "non-empty range from frame 0 on")

    @property
    def frames(self) -> int:
        """Frames the segment holds."""
        return self.end - self.first


def _encoder_options(packet_data: bytes) -> bytes:
    """The encoder's options string in a stream's first packet, or b"" when it carries none."""
    start = packet_data.find(_OPTIONS_MARK)
    if start < 0:
        return b""
    end = packet_data.find(b"\x00", start)
    return packet_data[start + len(_OPTIONS_MARK): end if end >= 0 else len(packet_data)]


def stream_format(path: str | os.PathLike[str]) -> StreamFormat:
    """The format of a file's first video stream (reads its header and first packet only)."""
    container, stream = open_container(path)
    try:
        context = stream.codec_context
        first = next((bytes(p) for p in container.demux(stream) if p.size), b"")
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        return StreamFormat(
            codec=str(context.name),
            width=int(context.width),
            height=int(context.height),
            pix_fmt=str(context.pix_fmt or ""),
            fps=Fraction(rate) if rate else Fraction(0),
            colour=(int(context.color_primaries), int(context.color_trc), int(context.colorspace),
                    int(context.color_range)),
            profile=context.profile if isinstance(context.profile, int) else None,
            codec_tag=str(context.codec_tag or ""),
            extradata=bytes(context.extradata or b""),
            encoder_options=_encoder_options(first),
        )
    except av.FFmpegError as error:
        raise EncodeError(f"path: {str(path)!r} cannot be read: {error}") from error
    finally:
        container.close()


def keyframes(path: str | os.PathLike[str]) -> tuple[int, ...]:
    """Frames where the file can be cut: keyframes that every frame shown before them also precedes
    in decoding order, and no later frame is shown before (a closed GOP starts there; an open
    GOP's keyframe, whose leading pictures need the GOP before, is left out). Ascending; demuxes,
    decodes nothing."""
    container, stream = open_container(path)
    try:
        order = [(frame_index(p.pts, stream), bool(p.is_keyframe))  # decoding order
                 for p in container.demux(stream) if p.size and p.pts is not None]
    except av.FFmpegError as error:
        raise EncodeError(f"path: {str(path)!r} cannot be read: {error}") from error
    finally:
        container.close()
    later = [0] * len(order)  # later[p]: the first frame shown among packets p, p + 1, …
    lowest = math.inf
    for p in range(len(order) - 1, -1, -1):
        lowest = min(lowest, order[p][0])
        later[p] = int(lowest)
    cuts, shown_before = [], -1
    for p, (frame, key) in enumerate(order):
        if key and shown_before < frame == later[p]:
            cuts.append(frame)
        shown_before = max(shown_before, frame)
    return tuple(sorted(cuts))


def copy_segments(segments: Sequence[Segment], out_path: str | os.PathLike[str],
                  fps: int | float | str | Fraction,
                  on_segment: Callable[[int], None] | None = None) -> int:
    """Write the segments one after the other as the video stream of ``out_path``; returns its frames.

    Every segment's file must have the stream format of the first (:func:`stream_format`), or
    EncodeError names the first that differs. ``on_segment(frames_so_far)`` is called after each
    segment; raising from it stops the work and leaves nothing at out_path. Only the video
    stream is copied.
    """
    if not segments:
        raise EncodeError("segments: empty; need at least one segment")
    rate = as_fps(fps)
    target = Path(out_path)
    muxer = _MUXERS.get(target.suffix.lower())
    if muxer is None:
        raise EncodeError(f"path: {str(target)!r} must end with .mp4 or .mov")
    if not target.parent.is_dir():
        raise EncodeError(f"path: folder {str(target.parent)!r} does not exist")
    expected = stream_format(segments[0].path)
    for index, segment in enumerate(segments[1:], start=1):
        found = stream_format(segment.path)
        if found != expected:
            differs = [name for name in StreamFormat.__dataclass_fields__
                       if getattr(found, name) != getattr(expected, name)]
            raise EncodeError(f"segments[{index}]: {str(segment.path)!r} differs from segment 0 in "
                              f"{', '.join(differs)}; only streams of one format can be joined")
    temp = temp_path(target)
    try:
        options = {"movflags": "+faststart", "movie_timescale": str(math.lcm(rate.numerator, 1000))}
        output = av.open(str(temp), "w", format=muxer, container_options=options)
        try:
            written = _copy_all(segments, output, rate, on_segment)
        finally:
            output.close()
        publish(temp, target)
    except av.FFmpegError as error:
        remove_quietly(temp)
        raise EncodeError(f"{str(target)!r}: joining the segments failed: {error}") from error
    except BaseException:  # KeyboardInterrupt and a cancelling on_segment too: no half-written file
        remove_quietly(temp)
        raise
    return written


def _copy_all(segments: Sequence[Segment], output: Any, rate: Fraction,
              on_segment: Callable[[int], None] | None) -> int:
    """Mux every segment's packets into ``output``, frame timestamps shifted to where each lands."""
    out_stream = None
    unit = 1 / rate  # output time base: one tick a frame
    written = 0
    last_dts: int | None = None
    for index, segment in enumerate(segments):
        container, stream = open_container(segment.path)
        try:
            if out_stream is None:
                out_stream = output.add_stream_from_template(stream)
                out_stream.time_base = unit
            shift = written - segment.first
            frames = 0
            started = False
            for packet in container.demux(stream):
                if not packet.size or packet.pts is None:
                    continue  # the demuxer's closing empty packet
                pts = frame_index(packet.pts, stream)
                if not started:
                    started = packet.is_keyframe and pts == segment.first
                    if not started:
                        continue
                elif packet.is_keyframe and pts == segment.end:
                    break
                if not segment.first <= pts < segment.end:
                    raise EncodeError(f"segments[{index}]: {str(segment.path)!r} has frame {pts} inside the GOPs of "
                                      f"[{segment.first}, {segment.end}): {segment.end} is not a keyframe")
                dts = frame_index(packet.dts, stream) if packet.dts is not None else pts
                if last_dts is not None and dts + shift <= last_dts:
                    raise EncodeError(f"segments[{index}]: {str(segment.path)!r} decodes frame {pts} before the "
                                      "previous segment's last frame (its reorder delay differs)")
                last_dts = dts + shift
                packet.stream = out_stream
                packet.time_base = unit
                packet.pts, packet.dts, packet.duration = pts + shift, dts + shift, 1
                output.mux(packet)
                frames += 1
            if not started:
                raise EncodeError(f"segments[{index}]: {str(segment.path)!r} has no keyframe at frame {segment.first}")
            if frames != segment.frames:
                raise EncodeError(f"segments[{index}]: {str(segment.path)!r} holds {frames} frames in "
                                  f"[{segment.first}, {segment.end}), not {segment.frames}")
        finally:
            container.close()
        written += segment.frames
        if on_segment is not None:
            on_segment(written)
    return written
