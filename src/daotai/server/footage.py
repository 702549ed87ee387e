"""Video uploads (a director's footage for ``shots[].reference_video``), checked in the upload sandbox.

As with images and sound (:mod:`daotai.server.images`), nothing here trusts the client: the
container comes from the bytes (an ISO-BMFF ``ftyp`` box or a Matroska/WebM EBML header) and is
forced on FFmpeg's demuxer, so a file can never lead it into a playlist or another file; every
frame is decoded in an isolated child process with limited memory and CPU time, and the size of a
frame and the length of the video are held to limits before and while it decodes.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from daotai.server.images import ImageRejected, _isolated_python

# Media type per container as the bytes say it (the ftyp brand or the EBML doctype).
VIDEO_TYPES = {"mp4": "video/mp4", "mov": "video/quicktime", "webm": "video/webm", "mkv": "video/x-matroska"}
MAX_VIDEO_SECONDS = 10 * 60.0  # a rehearsal or a take, not a feature
MAX_VIDEO_PIXELS = 4096 * 2160  # DCI 4K, as daotai.render.footage accepts
# Decoding every frame of ten minutes of 1080p H.264 takes about a minute of one core; the child
# gets twice that, and the parent waits a little longer than the child may run.
VIDEO_CPU_SECONDS = 120
VIDEO_TIMEOUT_S = 150.0
VIDEO_MEMORY_BYTES = 2 << 30  # 4K frames and the decoder's reference pictures fit well within it

# The child prints "CODEC WIDTH HEIGHT SECONDS FRAMES"; exit 3: longer than allowed; 4: no video
# stream; 6: frames larger than allowed; 7: no frame decodes.
_VIDEO_CHILD = r"""
import resource, sys
memory, cpu = int(sys.argv[5]), int(sys.argv[6])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
import av
src, fmt, max_seconds, max_pixels = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
with av.open(src, format=fmt) as container:
    if not container.streams.video:
        sys.exit(4)
    stream = container.streams.video[0]
    width, height = stream.codec_context.width, stream.codec_context.height
    if width * height > max_pixels:
        sys.exit(6)
    stated = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else 0.0
    if stated > max_seconds or (container.duration or 0) / 1e6 > max_seconds:
        sys.exit(3)
    frames, end = 0, 0.0
    for frame in container.decode(stream):
        if frame.width * frame.height > max_pixels:
            sys.exit(6)
        frames += 1
        if frame.pts is not None:
            end = max(end, float(frame.pts * stream.time_base))
            if end > max_seconds:
                sys.exit(3)
    if frames == 0:
        sys.exit(7)
    print(stream.codec_context.name, width, height, round(end, 6), frames)
"""


@dataclass(frozen=True)
class CheckedVideo:
    """What decoding an uploaded video found."""

    codec: str
    width: int
    height: int
    seconds: float  # timestamp of the last frame
    frames: int
    content_type: str


def video_container(data: bytes) -> str | None:
    """The container of uploaded video bytes from their first bytes: mp4, mov, webm, mkv (None: not one we take).

    An ISO-BMFF file may also be sound alone (M4A): :func:`check_video` answers that with
    ``no_video_stream`` so the caller can try it as sound.
    """
    if data[4:8] == b"ftyp":
        return "mov" if data[8:12] == b"qt  " else "mp4"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm" if b"\x42\x82\x84webm" in data[:64] else "mkv"
    return None


def check_video(data: bytes, staging: Path, field: str = "file", max_seconds: float = MAX_VIDEO_SECONDS,
                max_pixels: int = MAX_VIDEO_PIXELS, timeout_s: float = VIDEO_TIMEOUT_S) -> CheckedVideo:
    """Decode uploaded video bytes fully in a memory- and CPU-limited subprocess; raises ImageRejected.

    Nothing is left in ``staging`` whatever happens.
    """
    if not data:
        raise ImageRejected(f"{field}: the file is empty", code="empty_file")
    container = video_container(data)
    if container is None:
        raise ImageRejected(f"{field}: must be an MP4, MOV, Matroska or WebM video", 415, "unsupported_video_type")
    demuxer = "mov" if container in ("mp4", "mov") else "matroska"
    staging.mkdir(parents=True, exist_ok=True)
    src = staging / f"{secrets.token_hex(8)}.upload"
    try:
        src.write_bytes(data)  # inside the try: a disk that fills up mid-write leaves no part of it behind
        done = subprocess.run(
            _isolated_python(_VIDEO_CHILD, str(src), demuxer, repr(float(max_seconds)), str(max_pixels),
                             str(VIDEO_MEMORY_BYTES), str(VIDEO_CPU_SECONDS)),
            capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise ImageRejected(f"{field}: decoding took longer than {timeout_s:g} s", code="invalid_video") from None
    finally:
        src.unlink(missing_ok=True)
    if done.returncode == 3:
        raise ImageRejected(f"{field}: the video lasts longer than {max_seconds:g} s", 413, "video_too_long")
    if done.returncode == 4:
        raise ImageRejected(f"{field}: the file holds no video stream", code="no_video_stream")
    if done.returncode == 6:
        raise ImageRejected(f"{field}: the video's frames have more than {max_pixels} pixels", 413,
                            "video_too_large")
    parts = done.stdout.decode("ascii", "replace").split()
    if done.returncode != 0 or len(parts) != 5:
        raise ImageRejected(f"{field}: not a decodable {container} video", code="invalid_video")
    return CheckedVideo(parts[0], int(parts[1]), int(parts[2]), float(parts[3]), int(parts[4]),
                        VIDEO_TYPES[container])
