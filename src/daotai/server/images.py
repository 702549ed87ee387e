"""The upload sandbox: every uploaded image is fully decoded in a limited child process.

Nothing here trusts the client: the type comes from the bytes (magic numbers, then the
decoder), never from a file name or a part header; the decoder runs in ``python -I`` with
1 GiB of address space and 10 s of CPU, and a pixel cap stops decompression bombs before
they expand. No FastAPI here: the routers translate ``ImageRejected`` into a reply.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

IMAGE_MAGIC = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG", b"RIFF": "WEBP"}
# Pillow format → media type; phone cameras write MPO, a JPEG with extra pictures appended.
IMAGE_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg", "WEBP": "image/webp"}

# The child prints "WIDTH HEIGHT FORMAT"; exit code 3 means more pixels than allowed.
_DECODE_CHILD = r"""
import resource, sys, warnings
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
resource.setrlimit(resource.RLIMIT_CPU, (10, 10))
from PIL import Image
src, dst, max_pixels = sys.argv[1], sys.argv[2], int(sys.argv[3])
Image.MAX_IMAGE_PIXELS = max_pixels
warnings.simplefilter("error", Image.DecompressionBombWarning)
try:
    im = Image.open(src, formats=["PNG", "JPEG", "WEBP"])
except (Image.DecompressionBombError, Image.DecompressionBombWarning):
    sys.exit(3)
with im:
    w, h = im.size
    if w * h > max_pixels or w < 1 or h < 1:
        sys.exit(3)
    im.load()
    if dst != "-":
        im.convert("RGB").save(dst, format="PNG")
    print(w, h, im.format)
"""


class ImageRejected(ValueError):
    """An uploaded image that is refused: ``status`` and ``code`` say how to answer."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_image"):
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class CheckedImage:
    """What decoding an upload found (and the re-encoded PNG, when one was asked for)."""

    width: int
    height: int
    content_type: str
    png: Path | None


def _isolated_python(code: str, *args: str) -> list[str]:
    """The command line of a decoding child: Python in isolated mode (no environment variables,
    no user site, not the current folder) that imports from this process's own path.

    Isolation alone drops a PYTHONPATH, and with it PyAV or Pillow wherever an environment
    provides packages that way (a container image, a portable ComfyUI), so the parent's path
    is handed over in the code itself; the current folder ('') stays out."""
    path = [entry for entry in sys.path if entry]
    return [sys.executable, "-I", "-c", f"import sys\nsys.path[:] = {path!r}\n{code}", *args]


def check_image(data: bytes, staging: Path, max_pixels: int, field: str = "input_reference",
                keep_png: bool = True, timeout_s: float = 20.0) -> CheckedImage:
    """Decode uploaded bytes fully in a memory- and CPU-limited subprocess; raises ImageRejected.

    The type comes from the bytes (magic numbers, then the decoder), never from the client's
    file name or part header. With ``keep_png`` the pixels are re-encoded as an RGB PNG.
    """
    if not data:
        raise ImageRejected(f"{field}: the file is empty", code="empty_file")
    if not any(data.startswith(magic) for magic in IMAGE_MAGIC) or (data.startswith(b"RIFF") and data[8:12] != b"WEBP"):
        raise ImageRejected(f"{field}: must be a PNG, JPEG or WebP image", code="unsupported_image_type")
    staging.mkdir(parents=True, exist_ok=True)
    stem = secrets.token_hex(8)
    src, dst = staging / f"{stem}.upload", staging / f"{stem}.png"
    try:
        src.write_bytes(data)  # inside the try: a disk that fills up mid-write leaves no part of it behind
        done = subprocess.run(
            _isolated_python(_DECODE_CHILD, str(src), str(dst) if keep_png else "-", str(max_pixels)),
            capture_output=True, timeout=timeout_s, check=False,
        )
    except subprocess.TimeoutExpired:
        dst.unlink(missing_ok=True)
        raise ImageRejected(f"{field}: decoding took longer than {timeout_s:g} s") from None
    finally:
        src.unlink(missing_ok=True)
    parts = done.stdout.decode("ascii", "replace").split()
    if done.returncode != 0 or len(parts) != 3 or parts[2] not in IMAGE_TYPES or (keep_png and not dst.is_file()):
        dst.unlink(missing_ok=True)
        if done.returncode == 3:
            raise ImageRejected(f"{field}: the image has more than {max_pixels} pixels", 413, "image_too_large")
        raise ImageRejected(f"{field}: not a decodable PNG/JPEG/WebP image of at most {max_pixels} pixels")
    return CheckedImage(int(parts[0]), int(parts[1]), IMAGE_TYPES[parts[2]], dst if keep_png else None)


def decode_upload(data: bytes, staging: Path, max_pixels: int, timeout_s: float = 20.0) -> Path:
    """Decode an uploaded image in a limited subprocess and re-encode it as PNG; raises ImageRejected (a ValueError)."""
    png = check_image(data, staging, max_pixels, timeout_s=timeout_s).png
    if png is None:  # keep_png=True always writes one; a missing file would be a bug in check_image
        raise RuntimeError("check_image returned no PNG although one was asked for")
    return png


# ------------------------------------------------------------------ sound

# FFmpeg demuxer and media type per container, chosen from the bytes; the demuxer is forced so
# FFmpeg never probes its way into a playlist or concat format that would open other files.
SOUND_TYPES = {"wav": "audio/wav", "flac": "audio/flac", "mp3": "audio/mpeg", "ogg": "audio/ogg",
               "mov": "audio/mp4", "aac": "audio/aac"}
MAX_SOUND_SECONDS = 30 * 60.0  # a soundtrack for an animatic: half an hour is plenty

# The child prints "CODEC RATE CHANNELS SECONDS"; exit 3: longer than allowed; 4: no sound in it;
# 5: the file holds clearly less sound than its header states (truncated).
_SOUND_CHILD = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
resource.setrlimit(resource.RLIMIT_CPU, (10, 10))
import av
src, fmt, max_seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
with av.open(src, format=fmt) as container:
    if not container.streams.audio:
        sys.exit(4)
    stream = container.streams.audio[0]
    rate = stream.codec_context.sample_rate
    channels = stream.codec_context.channels
    if not rate or not 1 <= channels <= 8:
        sys.exit(4)
    stated = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else 0.0
    if stated > max_seconds or (container.duration or 0) / 1e6 > max_seconds:
        sys.exit(3)
    samples = 0
    for frame in container.decode(stream):
        samples += frame.samples
        if samples > max_seconds * rate:
            sys.exit(3)
    if samples == 0:
        sys.exit(4)
    if stated and samples / rate < stated - 0.5:
        sys.exit(5)
    print(stream.codec_context.name, rate, channels, round(samples / rate, 6))
"""


@dataclass(frozen=True)
class CheckedSound:
    """What decoding an uploaded sound file found."""

    codec: str
    rate: int
    channels: int
    seconds: float
    content_type: str


def sound_container(data: bytes) -> str | None:
    """The FFmpeg demuxer for uploaded sound bytes, from their magic numbers (None: not a sound file we take)."""
    if data.startswith(b"RIFF") and data[8:12] == b"WAVE":
        return "wav"
    if data.startswith(b"fLaC"):
        return "flac"
    if data.startswith(b"OggS"):
        return "ogg"
    if data[4:8] == b"ftyp":
        return "mov"
    if data.startswith(b"ID3"):
        return "mp3"
    if len(data) >= 2 and data[0] == 0xFF:
        if data[1] & 0xF6 == 0xF0:  # ADTS: sync, layer 00
            return "aac"
        if data[1] & 0xE0 == 0xE0 and (data[1] >> 1) & 0x3:  # MPEG audio frame sync, layer I-III
            return "mp3"
    return None


def _riff_chunks_fit(data: bytes) -> bool:
    """Whether every chunk of a RIFF/WAVE file lies within the bytes (FFmpeg quietly clamps one that does not)."""
    import struct

    if len(data) < 12 or struct.unpack("<I", data[4:8])[0] + 8 > len(data) + 1:
        return False
    position = 12
    while position + 8 <= len(data):
        size = struct.unpack("<I", data[position + 4:position + 8])[0]
        if position + 8 + size > len(data):
            return False
        position += 8 + size + (size & 1)
    return True


def check_sound(data: bytes, staging: Path, field: str = "file", max_seconds: float = MAX_SOUND_SECONDS,
                timeout_s: float = 20.0) -> CheckedSound:
    """Decode uploaded sound bytes fully in a memory- and CPU-limited subprocess; raises ImageRejected.

    The container comes from the bytes and is forced on the demuxer; the stated duration and the
    decoded samples are both held to ``max_seconds`` (413 beyond), so a header that lies about
    its length costs at most that much decoding.
    """
    if not data:
        raise ImageRejected(f"{field}: the file is empty", code="empty_file")
    fmt = sound_container(data)
    if fmt is None:
        raise ImageRejected(f"{field}: must be a WAV, FLAC, MP3, AAC/M4A or Ogg/Opus sound file",
                            415, "unsupported_sound_type")
    if fmt == "wav" and not _riff_chunks_fit(data):
        raise ImageRejected(f"{field}: the WAV header states more data than the file holds (truncated or forged)",
                            code="invalid_sound")
    staging.mkdir(parents=True, exist_ok=True)
    src = staging / f"{secrets.token_hex(8)}.upload"
    try:
        src.write_bytes(data)  # inside the try: a disk that fills up mid-write leaves no part of it behind
        done = subprocess.run(_isolated_python(_SOUND_CHILD, str(src), fmt, repr(float(max_seconds))),
                              capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise ImageRejected(f"{field}: decoding took longer than {timeout_s:g} s", code="invalid_sound") from None
    finally:
        src.unlink(missing_ok=True)
    if done.returncode == 3:
        raise ImageRejected(f"{field}: the sound lasts longer than {max_seconds:g} s", 413, "sound_too_long")
    parts = done.stdout.decode("ascii", "replace").split()
    if done.returncode != 0 or len(parts) != 4:
        raise ImageRejected(f"{field}: not a decodable {fmt} sound file with audio in it", code="invalid_sound")
    return CheckedSound(parts[0], int(parts[1]), int(parts[2]), float(parts[3]), SOUND_TYPES[fmt])
