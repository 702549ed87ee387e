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
    src.write_bytes(data)
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _DECODE_CHILD, str(src), str(dst) if keep_png else "-", str(max_pixels)],
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
