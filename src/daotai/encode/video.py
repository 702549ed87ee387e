"""Video files written through PyAV: H.264 / HEVC / ProRes writers, lossless FFV1 control
channels and 8-bit depth previews.

Colour is converted by :mod:`daotai.encode.colour`, not by swscale: swscale's default RGB↔YUV
matrix is BT.601, while every file daotai writes is BT.709 limited range and tagged so
(primaries, transfer, matrix = 1; range = 1). Reading files back (RGB by the file's own tags,
single-channel frames, probing) is :mod:`daotai.encode.read`.

Every writer is atomic: it encodes into a hidden ``.<name>.<random>.partial<suffix>`` file
in the target folder (the naming of :mod:`daotai.files`) and renames it onto the target
only after the muxer closed cleanly.
An exception (KeyboardInterrupt included) or ``abort()`` deletes the temp file, so the
target path never holds a half-written video.
"""

from __future__ import annotations

import functools
import math
import os
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import av
import numpy as np

from daotai.encode.colour import (
    BT709,
    RANGE_FULL,
    RANGE_LIMITED,
    fill_plane,
    plane_view,
    rgb_to_yuv_planes,
    rgb_to_yuv_u8,
)
from daotai.encode.read import as_fps, decode_frames, decode_gray, probe
from daotai.errors import EncodeError
from daotai.files import publish, remove_quietly, temp_path

if TYPE_CHECKING:
    from daotai.encode import remux
    from daotai.encode.hardware import HardwareEncoder

__all__ = [
    "CODECS",
    "PRESETS",
    "PREVIEW_SETTINGS",
    "EncodeSettings",
    "VideoWriter",
    "as_fps",
    "write_gray16",
    "write_gray8",
    "write_preview_h264",
    # read from here by qc/ (and named "daotai.encode.video:probe" in its check table); they live in
    # daotai.encode.read, where everything else imports them from
    "decode_frames",
    "decode_gray",
    "probe",
    "reference_format",
]

CODECS = ("h264", "hevc", "prores")
PRESETS = (
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
)
# Default CRF per codec, chosen so that smooth synthetic renders with hard edges and
# text-like detail round-trip at ≥ 38.5 dB mean PSNR with margin (see tests/test_encode.py).
DEFAULT_CRF = {"h264": 18, "hevc": 18}
PRORES_PROFILES = {0: "proxy", 1: "lt", 2: "standard", 3: "hq"}
# x264 frame threads of every colour encode. A fixed count, never "auto" (which follows the
# machine's cores): x264 is deterministic for a given thread count, so the same frames and
# settings give the same bytes on a laptop, a cluster node and CI (tests/test_encode_threads.py
# encodes under different CPU affinities and compares). 24 encodes of 48 frames at 640x360 on
# 2 busy cores (3 at once) gave one file; 4 threads keep 2 to 4 cores busy where one kept one.
FRAME_THREADS = 4
# A keyframe (closed GOP, IDR) at least every second: assembly copies the GOPs a transition
# does not touch instead of re-encoding them, so the GOP is what a blend re-encodes at most.
KEYINT_S = 1.0

_ENCODERS = {"h264": "libx264", "hevc": "libx265", "prores": "prores_ks"}
_PIX_FMTS = {"h264": "yuv420p", "hevc": "yuv420p", "prores": "yuv422p10le"}
_CONTAINERS = {"h264": ".mp4", "hevc": ".mp4", "prores": ".mov"}
_ALLOWED_SUFFIXES = {"h264": (".mp4", ".mov"), "hevc": (".mp4", ".mov"), "prores": (".mov",)}
_MUXERS = {".mp4": "mp4", ".mov": "mov", ".mkv": "matroska"}


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class EncodeSettings:
    """How a colour video is encoded; pix_fmt and container follow from the codec."""

    codec: Literal["h264", "hevc", "prores"] = "h264"
    crf: int | None = None  # None: DEFAULT_CRF[codec]; must stay None for prores
    preset: str = "veryfast"  # x264/x265 speed preset; prores has none and ignores it
    prores_profile: int = 3  # 0 proxy, 1 LT, 2 standard, 3 HQ (all 4:2:2 10 bit)
    # encoder threads: any fixed count gives the same bytes for the same frames on every machine;
    # 0 (auto) follows the core count, so its bytes differ between machines
    threads: int = FRAME_THREADS
    keyint_s: float = KEYINT_S  # longest GOP in seconds (x264/x265 keyint = round(keyint_s * fps))
    tune: str | None = None  # x264/x265 tune, e.g. "psnr" for flat synthetic content
    # A hardware encoder (VideoToolbox, NVENC; daotai.encode.hardware) in place of the software
    # one; crf, preset and tune then do not apply (the encoder's own quality settings do).
    # None: libx264 / libx265 / prores_ks, byte-identical from run to run.
    hardware: HardwareEncoder | None = None

    def __post_init__(self) -> None:
        if self.hardware is not None and self.hardware.codec != self.codec:
            raise EncodeError(f"settings.hardware: {self.hardware.name!r} encodes {self.hardware.codec}, "
                              f"not the codec asked, {self.codec}")
        if self.tune is not None and self.tune not in TUNES:
            raise EncodeError(f"settings.tune: {self.tune!r} must be one of {', '.join(TUNES)} (or None)")
        if self.codec not in CODECS:
            raise EncodeError(f"settings.codec: {self.codec!r} must be one of {', '.join(CODECS)}")
        if self.crf is not None:
            if self.codec == "prores":
                raise EncodeError(
                    f"settings.crf: {self.crf!r} must be None for prores (quality is set by "
                    "prores_profile)"
                )
            if isinstance(self.crf, bool) or not isinstance(self.crf, int):
                raise EncodeError(f"settings.crf: {self.crf!r} must be an integer in 0..51")
            if not 0 <= self.crf <= 51:
                raise EncodeError(f"settings.crf: {self.crf!r} must be an integer in 0..51")
        if self.preset not in PRESETS:
            raise EncodeError(
                f"settings.preset: {self.preset!r} must be one of {', '.join(PRESETS)}"
            )
        if isinstance(self.prores_profile, bool) or self.prores_profile not in PRORES_PROFILES:
            raise EncodeError(
                f"settings.prores_profile: {self.prores_profile!r} must be 0 (proxy), 1 (LT), "
                "2 (standard) or 3 (HQ)"
            )
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 0:
            raise EncodeError(
                f"settings.threads: {self.threads!r} must be an integer >= 0 (0 = auto)"
            )
        keyint = self.keyint_s
        if isinstance(keyint, bool) or not isinstance(keyint, (int, float)) or not 0 < keyint <= 60:
            raise EncodeError(f"settings.keyint_s: {keyint!r} must be a number of seconds in (0, 60]")

    @property
    def pix_fmt(self) -> str:
        """Pixel format written: yuv420p for h264/hevc, yuv422p10le for prores."""
        return _PIX_FMTS[self.codec]

    @property
    def container(self) -> str:
        """Default file suffix: .mp4 for h264/hevc, .mov for prores."""
        return _CONTAINERS[self.codec]

    @property
    def effective_crf(self) -> int | None:
        """The CRF actually used (None for prores)."""
        if self.codec == "prores":
            return None
        return self.crf if self.crf is not None else DEFAULT_CRF[self.codec]

    @property
    def encoder_name(self) -> str:
        """The FFmpeg encoder that writes the video: the hardware one when set, else the software one."""
        return self.hardware.name if self.hardware is not None else _ENCODERS[self.codec]

    def stream_options(self, width: int, height: int, fps: Fraction) -> dict[str, str]:
        """Options the encoder is opened with for this frame size and rate (hardware encoders may
        need a bit rate, which follows from both)."""
        if self.hardware is not None:
            return self.hardware.stream_options(width, height, fps)
        return self.codec_options(fps)

    def keyint_frames(self, fps: Fraction) -> int:
        """The longest GOP in frames at this rate: round(keyint_s * fps), at least 1."""
        return max(1, math.floor(Fraction(repr(float(self.keyint_s))) * fps + Fraction(1, 2)))

    def codec_options(self, fps: Fraction | None = None) -> dict[str, str]:
        """Software encoder private options for PyAV; with ``fps`` the keyframe interval too."""
        if self.codec == "prores":
            return {"profile": str(self.prores_profile)}  # every ProRes frame is a keyframe
        keyint = f":keyint={self.keyint_frames(fps)}" if fps is not None else ""
        options = {"crf": str(self.effective_crf), "preset": self.preset}
        if self.tune is not None:
            options["tune"] = self.tune
        # Chroma is averaged over 2x2 blocks, i.e. sited at the block centre: say so in
        # the VUI (chroma_sample_loc_type 1) so players interpolate it from the right place.
        if self.codec == "hevc":
            # open-gop=0: every keyframe starts a closed GOP, as x264's do, so assembly can cut there
            options["x265-params"] = "log-level=error:chromaloc=1:open-gop=0" + keyint  # x265 prints a banner otherwise
        else:
            # No macroblock-tree rate control: with it, x264 wrote different bytes for the same
            # frames from run to run (about 1 previz run in 8 on two busy cores, one x264 thread,
            # identical YUV input); without it 80 of 80 runs matched. Reproducible files are
            # worth the few percent of bitrate mbtree saves at a given CRF.
            options["x264-params"] = "chromaloc=1:mbtree=0" + keyint
        return options


TUNES = ("film", "animation", "grain", "stillimage", "psnr", "ssim", "fastdecode", "zerolatency")


# --------------------------------------------------------------------------- atomic output


def _check_target(path: str | os.PathLike[str], suffixes: tuple[str, ...]) -> Path:
    """Validate an output path: allowed suffix and an existing folder."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in suffixes:
        raise EncodeError(
            f"path: {str(target)!r} must end with {' or '.join(suffixes)} for this codec"
        )
    if not target.parent.is_dir():
        raise EncodeError(f"path: folder {str(target.parent)!r} does not exist")
    if target.is_dir():
        raise EncodeError(f"path: {str(target)!r} is a folder, not a file name")
    return target


@dataclass(frozen=True)
class _StreamSpec:
    """Everything needed to open one output video stream."""

    codec: str  # FFmpeg encoder name
    pix_fmt: str
    width: int
    height: int
    fps: Fraction
    options: tuple[tuple[str, str], ...]
    color_range: int
    threads: int = 0
    codec_tag: str | None = None
    tag_colour: bool = True


class _AtomicOutput:
    """One video stream muxed into a hidden temp file, renamed onto the target by commit()."""

    def __init__(self, path: Path, spec: _StreamSpec):
        self.path = path
        self.spec = spec
        self.frames = 0
        self.temp = temp_path(path)  # keeps the suffix, so the muxer is chosen the same way
        self._closed = False
        muxer = _MUXERS[path.suffix.lower()]
        # +faststart puts the moov index before the media data so players can start early.
        container_options: dict[str, str] = {}
        if muxer in ("mp4", "mov"):
            container_options = {
                "movflags": "+faststart",
                # The edit list (which hides the B-frame delay) is counted in the movie
                # timescale, 1000 by default: 30 frames at 24000/1001 would then last 1.251 s
                # instead of 1.25125 s. A multiple of the rate's numerator keeps it exact.
                "movie_timescale": str(math.lcm(spec.fps.numerator, 1000)),
            }
        elif muxer == "matroska":
            # Matroska writes a random segment UID into every file unless told to be bit-exact:
            # the same frames would give other bytes on every run (and another manifest hash).
            container_options = {"fflags": "+bitexact"}
        try:
            self._container = av.open(
                str(self.temp), "w", format=muxer, container_options=container_options
            )
        except (av.FFmpegError, OSError) as error:
            remove_quietly(self.temp)
            raise EncodeError(f"path: cannot create {str(path)!r}: {error}") from error
        # Safety net: a writer that is garbage-collected without close() leaves no temp file.
        self._finalizer = weakref.finalize(self, remove_quietly, self.temp)
        try:
            self._stream = self._add_stream(spec)
        except BaseException:
            self.discard()
            raise

    def _add_stream(self, spec: _StreamSpec) -> Any:
        """Create and configure the encoder stream (time base 1/fps so pts = frame index)."""
        try:
            stream = self._container.add_stream(
                spec.codec, rate=spec.fps, options=dict(spec.options)
            )
            stream.width = spec.width
            stream.height = spec.height
            stream.pix_fmt = spec.pix_fmt
            context = stream.codec_context
            context.time_base = 1 / spec.fps
            stream.time_base = 1 / spec.fps
            context.thread_count = spec.threads
            # Frame threads rather than PyAV's default slice threads when several are asked for
            # (what the ffmpeg command line does): no slices, so better compression. (Threaded
            # bytes once varied from run to run; that was mbtree, off since, not the threads.)
            if spec.codec == "libx264" and spec.threads != 1:
                context.thread_type = "FRAME"
            if spec.tag_colour:
                context.color_primaries = BT709
                context.color_trc = BT709
                context.colorspace = BT709
            context.color_range = spec.color_range
            if spec.codec_tag:
                context.codec_tag = spec.codec_tag
        except (av.FFmpegError, ValueError) as error:
            raise EncodeError(
                f"codec {spec.codec!r}: cannot encode {spec.width}x{spec.height} "
                f"{spec.pix_fmt} at {spec.fps} fps: {error}"
            ) from error
        return stream

    def new_frame(self) -> av.VideoFrame:
        """A blank frame of the stream's size and format, tagged like the stream."""
        frame = av.VideoFrame(self.spec.width, self.spec.height, self.spec.pix_fmt)
        if self.spec.tag_colour:
            frame.colorspace = BT709
        frame.color_range = self.spec.color_range
        return frame

    def encode(self, frame: av.VideoFrame) -> None:
        """Encode one frame at the next frame index and mux its packets."""
        if self._closed:
            raise EncodeError(f"{str(self.path)!r}: the writer is already closed")
        frame.pts = self.frames
        frame.time_base = self._stream.codec_context.time_base
        try:
            self._container.mux(self._stream.encode(frame))
        except av.FFmpegError as error:
            raise EncodeError(
                f"{str(self.path)!r}: encoding frame {self.frames} failed: {error}"
            ) from error
        self.frames += 1

    def finish(self) -> None:
        """Flush the encoder and close the muxer; the complete file stays at ``temp`` (a run of
        daotai.encode.gops is joined from there), to be published or discarded."""
        if self.frames == 0:
            raise EncodeError(
                f"{str(self.path)!r}: no frames were written; refusing an empty video"
            )
        try:
            self._container.mux(self._stream.encode(None))
            self._container.close()
        except av.FFmpegError as error:
            raise EncodeError(
                f"{str(self.path)!r}: finishing the file failed: {error}"
            ) from error
        self._closed = True

    def commit(self) -> None:
        """Flush the encoder, close the muxer, fsync and rename the temp file onto the target."""
        if self._closed:
            return
        try:
            self.finish()
            publish(self.temp, self.path)  # fsync, then rename onto the target
            self._finalizer.detach()
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Close without finishing and delete the temp file; the target is left untouched."""
        if not self._closed:
            self._closed = True
            try:
                self._container.close()
            except Exception:  # noqa: BLE001 - best effort while already failing
                pass
        remove_quietly(self.temp)
        self._finalizer.detach()


# --------------------------------------------------------------------------- colour writer


def _rgb_picture(out: _AtomicOutput, frame: np.ndarray, bits: int, sub_y: int, plane_dtype: Any) -> av.VideoFrame:
    """The encoder's frame for one (H, W, 3) uint8 RGB frame."""
    # code values: Y (H, W), Cb and Cr (H/sy, W/2); uint8 at 8 bits, float32 (+0.5) at 10
    if bits == 8:
        y, cb, cr = rgb_to_yuv_u8(np.ascontiguousarray(frame), sub_y)
    else:
        y, cb, cr = rgb_to_yuv_planes(np.ascontiguousarray(frame), sub_y, bits)
    av_frame = out.new_frame()
    for plane, values in zip(av_frame.planes, (y, cb, cr), strict=True):
        fill_plane(plane, values, plane_dtype)
    return av_frame


def _in_gop_runs(settings: EncodeSettings, path: Path) -> bool:
    """Whether a clip is encoded as runs of GOPs side by side (daotai.encode.gops): software H.264
    at a fixed thread count into MP4/MOV, the files whose GOPs remux can join."""
    return (settings.codec == "h264" and settings.hardware is None and settings.threads > 0
            and path.suffix.lower() in (".mp4", ".mov"))


def _check_size(width: object, height: object, *, even: bool) -> tuple[int, int]:
    """Validate a frame size: positive ints, even where chroma is subsampled."""
    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise EncodeError(f"{name}: {value!r} must be a positive integer")
        if even and value % 2:
            raise EncodeError(f"{name}: {value!r} must be even (chroma is subsampled by 2)")
    return int(width), int(height)  # type: ignore[call-overload]


class VideoWriter:
    """Atomic H.264 / HEVC / ProRes writer of (H, W, 3) uint8 RGB frames.

    Use as a context manager; the file appears at ``path`` only after a clean exit::

        with VideoWriter("shot.mp4", 1280, 720, Fraction(24000, 1001)) as out:
            for frame in frames:
                out.write(frame)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        width: int,
        height: int,
        fps: int | float | str | Fraction,
        settings: EncodeSettings | None = None,
    ):
        self.settings = settings or EncodeSettings()
        self.width, self.height = _check_size(width, height, even=True)
        self.fps = as_fps(fps)
        self.path = _check_target(path, _ALLOWED_SUFFIXES[self.settings.codec])
        self._bits = 10 if self.settings.codec == "prores" else 8
        self._sub_y = 2 if self.settings.pix_fmt.startswith("yuv420") else 1
        self._plane_dtype = np.uint16 if self._bits > 8 else np.uint8
        spec = _StreamSpec(
            codec=self.settings.encoder_name,
            pix_fmt=self.settings.pix_fmt,
            width=self.width,
            height=self.height,
            fps=self.fps,
            options=tuple(self.settings.stream_options(self.width, self.height, self.fps).items()),
            color_range=RANGE_LIMITED,
            threads=self.settings.threads,
            # hvc1 (parameter sets out of band) is what Apple players require for HEVC in MP4.
            codec_tag="hvc1" if self.settings.codec == "hevc" else None,
        )
        self._out: Any
        if _in_gop_runs(self.settings, self.path):
            from daotai.encode.gops import GopRunsOutput, RunLayout, encoders_for

            self._out = GopRunsOutput(
                self.path, RunLayout.for_gop(self.settings.keyint_frames(self.fps)),
                self.width * self.height * 3, encoders_for(self.settings.threads),
                lambda target: _AtomicOutput(target, spec),
                # not a bound method: a run's thread must not keep the writer alive
                functools.partial(_rgb_picture, bits=self._bits, sub_y=self._sub_y, plane_dtype=self._plane_dtype),
            )
        else:
            self._out = _AtomicOutput(self.path, spec)

    @property
    def frames_written(self) -> int:
        """Frames encoded so far."""
        return self._out.frames

    def write(self, frame: np.ndarray) -> None:
        """Encode one (H, W, 3) uint8 RGB frame."""
        if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8:
            kind = frame.dtype if isinstance(frame, np.ndarray) else type(frame).__name__
            raise EncodeError(f"frame {self.frames_written}: dtype {kind} must be uint8 RGB")
        if frame.shape != (self.height, self.width, 3):
            raise EncodeError(
                f"frame {self.frames_written}: shape {frame.shape} must be "
                f"({self.height}, {self.width}, 3) (H, W, RGB)"
            )
        if isinstance(self._out, _AtomicOutput):
            self._out.encode(_rgb_picture(self._out, frame, self._bits, self._sub_y, self._plane_dtype))
        else:  # runs of GOPs: converted and encoded by the run's thread
            self._out.put(frame)

    def close(self) -> None:
        """Finish the file and move it onto the target path."""
        self._out.commit()

    def abort(self) -> None:
        """Drop everything written; nothing is left at the target path or in the folder."""
        self._out.discard()

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# libx265 with its B-frames leaves a one- or two-frame MP4 unfinishable about half the time (the
# muxer refuses the flushed packets' timing: "not yet implemented"); from three frames on it never
# failed in 50 tries, so the sample holds four.
SAMPLE_FRAMES = 4


def reference_format(settings: EncodeSettings, width: int, height: int,
                     fps: int | float | str | Fraction) -> remux.StreamFormat:
    """The stream format ``settings`` writes at this size and rate (a few black frames encoded
    into a temporary file and read back): a clip with this format can be copied into a
    sequence encoded with these settings (daotai.encode.remux.copy_segments)."""
    import tempfile

    from daotai.encode.remux import stream_format

    with tempfile.TemporaryDirectory(prefix="daotai-format-") as folder:
        sample = Path(folder) / f"format{settings.container}"
        with VideoWriter(sample, width, height, fps, settings) as writer:
            for _ in range(SAMPLE_FRAMES):
                writer.write(np.zeros((height, width, 3), np.uint8))  # (H, W, 3) uint8
        return stream_format(sample)


# --------------------------------------------------------------------------- lossless / preview


def _first_and_rest(
    frames: Iterable[np.ndarray], what: str
) -> tuple[np.ndarray, Iterator[np.ndarray]]:
    """Split an iterable into its first frame and an iterator over the rest."""
    iterator = iter(frames)
    try:
        first = next(iterator)
    except StopIteration:
        raise EncodeError(f"{what}: no frames given; refusing an empty video") from None
    return first, iterator


def _check_gray(
    frame: object, index: int, dtype: type, shape: tuple[int, ...] | None
) -> np.ndarray:
    """Validate one single-channel frame: ndarray, 2-D, the given dtype, the first frame's shape."""
    if not isinstance(frame, np.ndarray) or frame.dtype != dtype:
        kind = frame.dtype if isinstance(frame, np.ndarray) else type(frame).__name__
        raise EncodeError(f"frame {index}: dtype {kind} must be {np.dtype(dtype).name}")
    if frame.ndim != 2 or (shape is not None and frame.shape != shape):
        want = f"{shape}" if shape is not None else "(H, W)"
        raise EncodeError(f"frame {index}: shape {frame.shape} must be {want}")
    return frame


def _write_gray_ffv1(
    frames: Iterable[np.ndarray], path: str | os.PathLike[str], fps: Any, dtype: type
) -> int:
    """Shared body of the FFV1 writers; returns the number of frames written."""
    target = _check_target(path, (".mkv",))
    rate = as_fps(fps)
    pix_fmt = "gray16le" if dtype is np.uint16 else "gray"
    first, rest = _first_and_rest(frames, str(target))
    _check_gray(first, 0, dtype, None)
    width, height = _check_size(first.shape[1], first.shape[0], even=False)
    spec = _StreamSpec(
        codec="ffv1",
        pix_fmt=pix_fmt,
        width=width,
        height=height,
        fps=rate,
        # level 3 = multi-threaded slices with per-slice CRCs, so corruption is detectable
        options=(("level", "3"), ("slices", "4"), ("slicecrc", "1"), ("g", "1")),
        color_range=RANGE_FULL,  # code values are data (millimetres, mask ids), not video levels
        tag_colour=False,
    )
    out = _AtomicOutput(target, spec)
    try:
        index = 0
        frame: np.ndarray = first
        while True:
            av_frame = out.new_frame()
            np.copyto(plane_view(av_frame.planes[0], dtype), frame)
            out.encode(av_frame)
            index += 1
            nxt = next(rest, None)
            if nxt is None:
                break
            frame = _check_gray(nxt, index, dtype, first.shape)
        out.commit()
    except BaseException:
        out.discard()
        raise
    return out.frames


def write_gray16(frames: Iterable[np.ndarray], path: str | os.PathLike[str], fps: Any) -> int:
    """Lossless FFV1 .mkv (gray16le) from (H, W) uint16 frames, e.g. depth in millimetres."""
    return _write_gray_ffv1(frames, path, fps, np.uint16)


def write_gray8(frames: Iterable[np.ndarray], path: str | os.PathLike[str], fps: Any) -> int:
    """Lossless FFV1 .mkv (gray) from (H, W) uint8 frames, e.g. masks and depth previews."""
    return _write_gray_ffv1(frames, path, fps, np.uint8)


# Depth previews are flat gray gradients with hard edges: x264's ultrafast preset encodes them
# ~3x faster than veryfast and closer to the source (1080p office previews at crf 18: 6.5 vs
# 17.6 ms of CPU a frame, 61.6 vs 56.2 dB PSNR, worst pixel 7 vs 65 levels off; ~8 KiB a frame).
# One thread: x264's bytes depend on its thread count, so "auto" would differ between machines.
PREVIEW_SETTINGS = EncodeSettings(preset="ultrafast", threads=1)


def write_preview_h264(
    frames_gray8: Iterable[np.ndarray],
    path: str | os.PathLike[str],
    fps: Any,
    settings: EncodeSettings | None = None,
) -> int:
    """Viewable H.264/HEVC preview of (H, W) uint8 frames: Y = value, neutral chroma.

    The stream is tagged full range, so 0 shows as black and 255 as white in players.
    ``settings`` None means ``PREVIEW_SETTINGS``. Returns the number of frames written.
    """
    chosen = settings or PREVIEW_SETTINGS
    if chosen.hardware is not None:  # a control channel: always the reproducible software encoder
        chosen = EncodeSettings(codec=chosen.codec, crf=chosen.crf, preset=chosen.preset, threads=chosen.threads,
                                keyint_s=chosen.keyint_s, tune=chosen.tune)
    if chosen.codec == "prores":
        raise EncodeError("settings.codec: 'prores' must be h264 or hevc for a gray preview")
    target = _check_target(path, _ALLOWED_SUFFIXES[chosen.codec])
    rate = as_fps(fps)
    first, rest = _first_and_rest(frames_gray8, str(target))
    _check_gray(first, 0, np.uint8, None)
    width, height = _check_size(first.shape[1], first.shape[0], even=True)
    spec = _StreamSpec(
        codec=_ENCODERS[chosen.codec],
        pix_fmt="yuv420p",
        width=width,
        height=height,
        fps=rate,
        options=tuple(chosen.codec_options().items()),
        color_range=RANGE_FULL,
        threads=chosen.threads,
        codec_tag="hvc1" if chosen.codec == "hevc" else None,
    )
    out = _AtomicOutput(target, spec)
    try:
        index = 0
        frame: np.ndarray = first
        while True:
            av_frame = out.new_frame()
            np.copyto(plane_view(av_frame.planes[0]), frame)
            plane_view(av_frame.planes[1])[...] = 128  # neutral chroma: a pure gray picture
            plane_view(av_frame.planes[2])[...] = 128
            out.encode(av_frame)
            index += 1
            nxt = next(rest, None)
            if nxt is None:
                break
            frame = _check_gray(nxt, index, np.uint8, first.shape)
        out.commit()
    except BaseException:
        out.discard()
        raise
    return out.frames
