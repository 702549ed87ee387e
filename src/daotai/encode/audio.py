"""Sound in and out through PyAV: checking, resampling, reading any audio file, muxing audio
beside an encoded picture, and probing.

Every sample daotai works with is float32 in [-1, 1], shaped ``(N, C)`` (samples, channels).
Rates are changed only by FFmpeg's resampler (``av.AudioResampler``), never by dropping or
repeating samples; its output keeps time zero where the input had it.

Files carry sound as AAC-LC at 48 kHz in MP4 and as 24-bit PCM in MOV (ProRes deliveries).
AAC encoders put 1024 samples of priming before the first real one; FFmpeg's MP4 muxer
records that in the track's edit list (media time 1024), so players and decoders that honour
edit lists (FFmpeg, QuickTime, browsers) start the sound at zero, together with the picture.
:func:`decode_audio` reports the first decoded sample's time so the QC can prove it.

Audio is added to a finished video file by remuxing (:func:`mux_audio`): the picture's
packets are copied unchanged into a new file beside it, the sound is encoded next to them,
and the new file replaces the old one atomically. The picture encoders (threads, or the
processes of :mod:`daotai.encode.procsink`) therefore never see sound, and a file without
sound is written exactly as before.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from daotai.errors import EncodeError
from daotai.files import atomic_path

__all__ = [
    "MIX_RATE",
    "AudioInfo",
    "check_samples",
    "copy_audio",
    "decode_audio",
    "fit_length",
    "mux_audio",
    "probe_audio",
    "read_audio",
    "resample",
    "samples_for",
]

MIX_RATE = 48000  # every file and every mix runs at 48 kHz, the video standard
LAYOUTS = {"mono": 1, "stereo": 2}
AAC_BITRATE = {1: 128_000, 2: 192_000}  # AAC-LC, transparent for speech and music at these rates
PCM_CODEC = "pcm_s24le"
MIN_RATE, MAX_RATE = 8000, 192000
CHUNK = 1 << 16  # samples per frame handed to the resampler and the encoder
# Tags written into the audio track's handler name, so a file says what its sound is.
ROLE_SHOT = "daotai shot audio"  # the sound the backend made for this shot
ROLE_SOUNDTRACK = "daotai soundtrack"  # the slice of the soundtrack under this shot
ROLE_MIX = "daotai mix"  # the sequence: shot audio and soundtrack mixed
ROLES = (ROLE_SHOT, ROLE_SOUNDTRACK, ROLE_MIX)
_MUXERS = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov"}


def samples_for(seconds: float | Fraction, rate: int = MIX_RATE) -> int:
    """Whole samples in a duration, rounded half up (exact for Fractions)."""
    return math.floor(Fraction(seconds) * rate + Fraction(1, 2))


def check_samples(samples: Any, rate: Any, layout: str | None = None, where: str = "audio") -> np.ndarray:
    """Validate (N, C) float samples in [-1, 1] at a sane rate; returns them as float32 (N, C)."""
    if isinstance(rate, bool) or not isinstance(rate, (int, np.integer)) or not MIN_RATE <= rate <= MAX_RATE:
        raise EncodeError(f"{where}.rate: {rate!r} must be an integer number of Hz in {MIN_RATE}..{MAX_RATE}")
    if not isinstance(samples, np.ndarray) or samples.dtype.kind != "f":
        kind = samples.dtype if isinstance(samples, np.ndarray) else type(samples).__name__
        raise EncodeError(f"{where}.samples: {kind} must be a float numpy array (N, C)")
    if samples.ndim != 2 or samples.shape[1] not in (1, 2) or samples.shape[0] == 0:
        raise EncodeError(f"{where}.samples: shape {samples.shape} must be (N, 1) or (N, 2) with N > 0")
    if layout is not None:
        if layout not in LAYOUTS:
            raise EncodeError(f"{where}.layout: {layout!r} must be one of {', '.join(LAYOUTS)}")
        if LAYOUTS[layout] != samples.shape[1]:
            raise EncodeError(f"{where}.layout: {layout!r} has {LAYOUTS[layout]} channel(s), the samples have {samples.shape[1]}")
    out = np.ascontiguousarray(samples, dtype=np.float32)
    if not np.isfinite(out).all():
        raise EncodeError(f"{where}.samples: contain NaN or infinity")
    peak = float(np.abs(out).max())
    if peak > 1.0 + 1e-6:
        raise EncodeError(f"{where}.samples: peak {peak:.4f} must be within [-1, 1]")
    return out


def _layout(channels: int) -> str:
    return "mono" if channels == 1 else "stereo"


def _frame(chunk: np.ndarray, rate: int, pts: int) -> av.AudioFrame:
    """An interleaved float AudioFrame of (n, C) float32 samples."""
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk.reshape(1, -1)), format="flt",
                                       layout=_layout(chunk.shape[1]))
    frame.sample_rate = rate
    frame.pts = pts
    frame.time_base = Fraction(1, rate)
    return frame


def _to_array(frames: list[av.AudioFrame], channels: int) -> np.ndarray:
    """(N, C) float32 of packed-float frames."""
    if not frames:
        return np.zeros((0, channels), np.float32)
    return np.concatenate([f.to_ndarray().reshape(-1, channels) for f in frames]).astype(np.float32, copy=False)


def remix(samples: np.ndarray, channels: int) -> np.ndarray:
    """(N, C) → (N, channels): mono is copied to both sides at its own level, stereo is averaged to mono."""
    if samples.shape[1] == channels:
        return samples
    if channels == 2:
        return np.repeat(samples[:, :1], 2, axis=1)
    return samples.mean(axis=1, keepdims=True, dtype=np.float32)


def resample(samples: np.ndarray, rate: int, to_rate: int = MIX_RATE, channels: int | None = None) -> np.ndarray:
    """(N, C) float32 at ``rate`` → (M, channels) float32 at ``to_rate`` through FFmpeg's resampler.

    M = round(N · to_rate / rate); time zero stays at sample zero. Channels are mapped by
    :func:`remix` (FFmpeg's own up/downmix would change the level by 3 dB).
    """
    samples = remix(np.ascontiguousarray(samples, dtype=np.float32), channels or samples.shape[1])
    if rate == to_rate:
        return samples
    resampler = av.AudioResampler(format="flt", layout=_layout(samples.shape[1]), rate=to_rate)
    out: list[av.AudioFrame] = []
    for start in range(0, samples.shape[0], CHUNK):
        out.extend(resampler.resample(_frame(samples[start:start + CHUNK], rate, start)))
    out.extend(resampler.resample(None))
    return fit_length(_to_array(out, samples.shape[1]), samples_for(Fraction(samples.shape[0], rate), to_rate))


def fit_length(samples: np.ndarray, count: int) -> np.ndarray:
    """Trim or zero-pad (N, C) samples at their end to exactly ``count`` samples."""
    n = samples.shape[0]
    if n == count:
        return samples
    if n > count:
        return samples[:count]
    return np.concatenate([samples, np.zeros((count - n, samples.shape[1]), samples.dtype)])


# ------------------------------------------------------------------ reading


@dataclass(frozen=True)
class AudioInfo:
    """The first audio stream of a file."""

    codec: str
    rate: int
    channels: int
    duration_s: float  # as the container states it (edit list applied)
    start_s: float  # presentation time of the first sample (0 when aligned with the picture)
    role: str  # ROLE_SHOT / ROLE_SOUNDTRACK / ROLE_MIX for files daotai wrote, else ""
    bit_rate: int


def _open(path: str | os.PathLike[str]) -> Any:
    source = Path(path)
    if not source.is_file():
        raise EncodeError(f"path: {str(source)!r} does not exist or is not a file")
    try:
        return av.open(str(source), "r")
    except (av.FFmpegError, OSError, UnicodeDecodeError) as error:
        raise EncodeError(f"path: {str(source)!r} is not a readable media file: {error}") from error


def _stream_duration(stream: Any, container: Any) -> Fraction | None:
    if stream.duration and stream.time_base:
        return Fraction(stream.duration) * stream.time_base
    if container.duration:
        return Fraction(container.duration, av.time_base)
    return None


def probe_audio(path: str | os.PathLike[str]) -> AudioInfo | None:
    """The file's first audio stream, or None when it has none."""
    container = _open(path)
    try:
        if not container.streams.audio:
            return None
        stream = container.streams.audio[0]
        context = stream.codec_context
        duration = _stream_duration(stream, container)
        start = Fraction(stream.start_time) * stream.time_base if stream.start_time is not None else Fraction(0)
        return AudioInfo(
            codec=str(context.name), rate=int(context.sample_rate), channels=int(context.channels),
            duration_s=float(duration or 0), start_s=float(start),
            role=str(stream.metadata.get("handler_name", "")) if stream.metadata.get("handler_name", "") in ROLES else "",
            bit_rate=int(context.bit_rate or 0),
        )
    finally:
        container.close()


def decode_audio(path: str | os.PathLike[str], max_seconds: float | None = None,
                 until_s: float | None = None) -> tuple[np.ndarray, int, float]:
    """(samples (N, C) float32, rate, time of the first sample in s) of the file's first audio stream.

    Samples beyond the stream's stated duration (an AAC encoder's padding of its last frame)
    are dropped, so N is the duration the file claims. Decoding stops after ``until_s``
    seconds when given. Raises EncodeError when there is no audio, it cannot be decoded, or it
    is longer than ``max_seconds``.
    """
    container = _open(path)
    try:
        if not container.streams.audio:
            raise EncodeError(f"path: {str(path)!r} has no audio stream")
        stream = container.streams.audio[0]
        rate = int(stream.codec_context.sample_rate)
        channels = int(stream.codec_context.channels)
        if not rate or channels < 1:
            raise EncodeError(f"path: {str(path)!r}: the audio stream states no rate or channels")
        duration = _stream_duration(stream, container)
        if max_seconds is not None and duration is not None and duration > max_seconds:
            raise EncodeError(f"path: {str(path)!r}: {float(duration):.1f} s of sound exceeds the {max_seconds:g} s limit")
        keep = channels if channels <= 2 else 2  # more than two channels are folded to stereo by FFmpeg
        resampler = av.AudioResampler(format="flt", layout=_layout(keep), rate=rate)
        frames: list[av.AudioFrame] = []
        first: float | None = None
        total = 0
        limit = None if max_seconds is None else int(max_seconds * rate) + rate
        try:
            for frame in container.decode(stream):
                if first is None and frame.pts is not None and frame.time_base is not None:
                    first = float(frame.pts * frame.time_base)
                for out in resampler.resample(frame):
                    frames.append(out)
                    total += out.samples
                if limit is not None and total > limit:
                    raise EncodeError(f"path: {str(path)!r}: decodes to more than the {max_seconds:g} s limit")
                if until_s is not None and total >= until_s * rate:
                    break
            frames.extend(resampler.resample(None))
        except av.FFmpegError as error:
            raise EncodeError(f"path: {str(path)!r}: the audio failed to decode: {error}") from error
        samples = _to_array(frames, keep)
        if duration is not None:
            stated = samples_for(duration, rate)
            if 0 < stated < samples.shape[0]:
                samples = samples[:stated]
        if samples.shape[0] == 0:
            raise EncodeError(f"path: {str(path)!r}: the audio stream holds no samples")
        return samples, rate, first or 0.0
    finally:
        container.close()


def read_audio(path: str | os.PathLike[str], rate: int = MIX_RATE, channels: int = 2,
               max_seconds: float | None = None, until_s: float | None = None) -> np.ndarray:
    """Any audio file (WAV, FLAC, MP3, AAC/M4A, Ogg, Opus, or a video's sound) as (N, channels) float32 at ``rate``."""
    samples, source_rate, _ = decode_audio(path, max_seconds, until_s)
    np.clip(samples, -1.0, 1.0, out=samples)  # decoders of lossy formats overshoot a little
    return resample(samples, source_rate, rate, channels)


# ------------------------------------------------------------------ writing


def _audio_codec(suffix: str) -> str:
    if suffix == ".mov":
        return PCM_CODEC
    return "aac"


def _add_audio_stream(container: Any, codec: str, rate: int, channels: int, role: str) -> Any:
    stream = container.add_stream(codec, rate=rate, layout=_layout(channels))
    if codec == "aac":
        stream.bit_rate = AAC_BITRATE[channels]
    stream.metadata["handler_name"] = role
    return stream


def _encoded_packets(stream: Any, samples: np.ndarray, rate: int) -> Iterator[Any]:
    """Packets of (N, C) float32 samples encoded by ``stream``, lazily, flush included."""
    for start in range(0, samples.shape[0], CHUNK):
        yield from stream.encode(_frame(samples[start:start + CHUNK], rate, start))
    yield from stream.encode(None)


def _packet_time(packet: Any) -> float:
    stamp = packet.dts if packet.dts is not None else packet.pts
    return float(stamp * packet.time_base) if stamp is not None and packet.time_base else 0.0


def _container_options(muxer: str, fps: Fraction | None) -> dict[str, str]:
    options = {"movflags": "+faststart"}
    if fps:
        # the same movie timescale the picture writer uses (exact edit lists at NTSC rates)
        options["movie_timescale"] = str(math.lcm(fps.numerator, 1000))
    return options


def _remux(video_path: Path, add: Callable[[Any], Iterator[Any]]) -> None:
    """Copy the picture of ``video_path`` into a new file beside the sound ``add(container)`` makes, then
    replace the file atomically. ``add`` adds its stream(s) and returns an iterator of their packets,
    which are interleaved with the picture's by time (nothing is held back in memory)."""
    suffix = video_path.suffix.lower()
    muxer = _MUXERS.get(suffix)
    if muxer is None:
        raise EncodeError(f"path: {str(video_path)!r} must be .mp4 or .mov to carry sound")
    source = _open(video_path)
    try:
        if not source.streams.video:
            raise EncodeError(f"path: {str(video_path)!r} has no video stream")
        vin = source.streams.video[0]
        fps = Fraction(vin.average_rate) if vin.average_rate else None
        with atomic_path(video_path) as temp:
            try:
                out = av.open(str(temp), "w", format=muxer, container_options=_container_options(muxer, fps))
            except (av.FFmpegError, OSError) as error:
                raise EncodeError(f"path: cannot create {str(video_path)!r}: {error}") from error
            try:
                vout = out.add_stream_from_template(vin)
                tag = vin.codec_context.codec_tag
                if tag and tag.strip("\x00 "):
                    vout.codec_context.codec_tag = tag  # e.g. hvc1, which Apple players need and the muxer would not pick
                sound = iter(add(out))
                pending = next(sound, None)
                for packet in source.demux(vin):
                    if packet.dts is None:
                        continue  # the demuxer's flush packet
                    now = _packet_time(packet)
                    while pending is not None and _packet_time(pending) <= now:
                        out.mux(pending)
                        pending = next(sound, None)
                    packet.stream = vout
                    out.mux(packet)
                while pending is not None:
                    out.mux(pending)
                    pending = next(sound, None)
            except av.FFmpegError as error:
                raise EncodeError(f"path: {str(video_path)!r}: adding sound failed: {error}") from error
            finally:
                out.close()
    finally:
        source.close()


def mux_audio(video_path: str | os.PathLike[str], samples: np.ndarray, rate: int = MIX_RATE,
              role: str = ROLE_SHOT) -> None:
    """Give a finished .mp4 / .mov its sound (replacing any it had): AAC-LC in MP4, 24-bit PCM in MOV.

    ``samples`` (N, C) float32 at ``rate`` (resampled to 48 kHz here). The picture's packets
    are copied, not re-encoded; the file is replaced atomically.
    """
    path = Path(video_path)
    data = check_samples(samples, rate, where="audio")
    if rate != MIX_RATE:
        data = np.clip(resample(data, rate, MIX_RATE), -1.0, 1.0)  # the resampler may overshoot full scale
    codec = _audio_codec(path.suffix.lower())

    def add(out: Any) -> Iterator[Any]:
        stream = _add_audio_stream(out, codec, MIX_RATE, data.shape[1], role)
        return _encoded_packets(stream, data, MIX_RATE)

    _remux(path, add)


def copy_audio(source_path: str | os.PathLike[str], video_path: str | os.PathLike[str]) -> bool:
    """Copy the sound of ``source_path`` into ``video_path`` unchanged (packets, timing, priming).

    Returns False (and leaves the video alone) when the source has no sound. Where the target's
    container cannot hold the source's codec, the sound is decoded and encoded again at 48 kHz.
    """
    info = probe_audio(source_path)
    if info is None:
        return False
    target = Path(video_path)
    suffix = target.suffix.lower()
    copyable = suffix == ".mov" or info.codec in ("aac", "mp3", "alac", "opus", "flac")
    role = info.role or ROLE_SHOT
    if not copyable:
        samples, rate, _ = decode_audio(source_path)
        mux_audio(target, np.clip(samples, -1.0, 1.0), rate, role)
        return True
    source = _open(source_path)
    try:
        ain = source.streams.audio[0]

        def add(out: Any) -> Iterator[Any]:
            aout = out.add_stream_from_template(ain)
            aout.metadata["handler_name"] = role
            for packet in source.demux(ain):
                if packet.dts is None:
                    continue
                packet.stream = aout
                yield packet

        _remux(target, add)
    finally:
        source.close()
    return True
