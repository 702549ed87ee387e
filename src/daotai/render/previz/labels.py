"""Character id labels drawn onto rendered RGB frames with Pillow.

A label is a dark rounded box with a swatch of the character's colour and white text,
placed off every face: above the head where the frame has room, else beside the head, else
below the chin (``place_label``). Patches are rendered once per (text, size, colour) and composited
with integer maths, so the same frame always gets the same bytes.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FontT = ImageFont.FreeTypeFont | ImageFont.ImageFont

# Fonts that carry Chinese glyphs, tried in order before asking fontconfig.
_CJK_FONT_PATHS: tuple[str, ...] = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJKsc-Regular.otf",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/wenquanyi/wqy-microhei/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
    "/System/Library/Fonts/PingFang.ttc",
    "/System/Library/Fonts/STHeiti Medium.ttc",
    "/Library/Fonts/Arial Unicode.ttf",
    "C:/Windows/Fonts/msyh.ttc",
    "C:/Windows/Fonts/simhei.ttf",
)
# Latin fallbacks when no CJK font exists (labels then fall back to the ASCII char_id).
_LATIN_FONT_PATHS: tuple[str, ...] = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/System/Library/Fonts/Helvetica.ttc",
    "C:/Windows/Fonts/arial.ttf",
)
_CJK_PROBE = "中"


def _fc_match(pattern: str) -> str | None:
    """The font file fontconfig picks for ``pattern``, or None without fontconfig."""
    exe = shutil.which("fc-match")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "-f", "%{file}", pattern], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    path = done.stdout.strip()
    return path if done.returncode == 0 and path and os.path.isfile(path) else None


def _loads(path: str) -> bool:
    """Whether Pillow can open ``path`` as a TrueType/OpenType font."""
    try:
        ImageFont.truetype(path, 12)
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def find_label_font() -> str | None:
    """Path of the label font: a CJK-capable one if installed, else a Latin one, else None."""
    fc = _fc_match(":lang=zh")
    latin: str | None = None
    for path in (*_CJK_FONT_PATHS, *((fc,) if fc else ()), *_LATIN_FONT_PATHS):
        if not (os.path.isfile(path) and _loads(path)):
            continue
        if covers(ImageFont.truetype(path, 16), _CJK_PROBE):
            return path
        latin = latin or path
    return latin


def load_font(path: str | None, size: int) -> FontT:
    """The font at ``path`` in ``size`` pixels, or Pillow's built-in font when ``path`` is None."""
    if path is not None:
        return ImageFont.truetype(path, size)
    return ImageFont.load_default(size=size)


def _glyph(font: FontT, ch: str) -> tuple[tuple[int, int], bytes]:
    """Bitmap size and bytes of one rendered character."""
    mask = font.getmask(ch)
    return mask.size, bytes(mask)


def covers(font: FontT, text: str) -> bool:
    """Whether ``font`` has a real glyph for every visible character of ``text``."""
    # A missing character renders as the font's .notdef glyph (a box, or nothing); compare
    # against a code point no font maps (a noncharacter) to recognise it.
    notdef = _glyph(font, "\U0010fffe")
    for ch in set(text):
        if ch.isspace():
            continue
        if not ch.isprintable() or _glyph(font, ch) == notdef:
            return False
    return True


@dataclass(frozen=True)
class LabelStyle:
    """Look of a label, in fractions of its font size where lengths are relative."""

    box_rgba: tuple[int, int, int, int] = (16, 16, 20, 205)
    text_rgba: tuple[int, int, int, int] = (255, 255, 255, 255)
    pad: float = 0.35  # inner margin
    radius: float = 0.35  # corner radius
    swatch: float = 0.55  # diameter of the colour dot before the text
    gap: float = 0.3  # space between the head top and the box


class LabelPainter:
    """Renders and composites label patches; caches fonts and patches per size."""

    def __init__(self, font_path: str | None, style: LabelStyle = LabelStyle()):
        self.font_path = font_path
        self.style = style
        self._fonts: dict[int, FontT] = {}
        self._patches: dict[tuple[str, int, tuple[int, int, int]], np.ndarray] = {}
        self._texts: dict[tuple[str, str], str] = {}

    def font(self, size: int) -> FontT:
        """The label font at ``size`` pixels."""
        if size not in self._fonts:
            self._fonts[size] = load_font(self.font_path, size)
        return self._fonts[size]

    def text_for(self, label: str, char_id: str) -> str:
        """``label`` when the font can draw it, else the ASCII ``char_id``."""
        key = (label, char_id)
        if key not in self._texts:
            font = self.font(16)
            self._texts[key] = label if label.strip() and covers(font, label) else char_id
        return self._texts[key]

    def patch(self, text: str, size: int, colour: tuple[int, int, int]) -> np.ndarray:
        """The label image: (h, w, 4) uint8 RGBA, premultiplication-free."""
        key = (text, size, colour)
        cached = self._patches.get(key)
        if cached is not None:
            return cached
        st = self.style
        font = self.font(size)
        left, top, right, bottom = font.getbbox(text)
        pad = max(2, round(st.pad * size))
        dot = max(4, round(st.swatch * size))
        text_h = max(bottom - top, round(0.7 * size))
        w = pad + dot + pad // 2 + (right - left) + pad
        h = text_h + 2 * pad
        img = Image.new("RGBA", (w, h), (0, 0, 0, 0))
        draw = ImageDraw.Draw(img)
        draw.rounded_rectangle((0, 0, w - 1, h - 1), radius=max(2, round(st.radius * size)), fill=st.box_rgba)
        dy = (h - dot) // 2
        draw.ellipse((pad, dy, pad + dot - 1, dy + dot - 1), fill=(*colour, 255), outline=(235, 235, 235, 255))
        draw.text((pad + dot + pad // 2 - left, pad - top + (text_h - (bottom - top)) // 2), text,
                  font=font, fill=st.text_rgba)
        arr = np.asarray(img, dtype=np.uint8).copy()  # (h, w, 4) uint8
        arr.setflags(write=False)
        if len(self._patches) > 512:  # bound memory when sizes keep changing (zoom shots)
            self._patches.clear()
        self._patches[key] = arr
        return arr

    def draw_at(self, rgb: np.ndarray, corner: tuple[int, int], size: int, text: str,
                colour: tuple[int, int, int]) -> None:
        """Composite a label onto ``rgb`` (H, W, 3) uint8 in place with its box's top-left at ``corner``."""
        patch = self.patch(text, size, colour)
        height, width = rgb.shape[:2]
        x0, y0 = max(corner[0], 0), max(corner[1], 0)
        x1, y1 = min(corner[0] + patch.shape[1], width), min(corner[1] + patch.shape[0], height)
        if x0 >= x1 or y0 >= y1:
            return
        part = patch[y0 - corner[1]: y1 - corner[1], x0 - corner[0]: x1 - corner[0]]
        alpha = part[..., 3:4].astype(np.uint16)  # (h, w, 1)
        region = rgb[y0:y1, x0:x1]
        mixed = (region.astype(np.uint16) * (255 - alpha) + part[..., :3].astype(np.uint16) * alpha + 127) // 255
        region[...] = mixed.astype(np.uint8)

    def draw(self, rgb: np.ndarray, anchor: tuple[float, float], size: int, text: str,
             colour: tuple[int, int, int]) -> None:
        """Composite a label onto ``rgb`` (H, W, 3) uint8 in place, its box centred above ``anchor``."""
        patch = self.patch(text, size, colour)
        ph, pw = patch.shape[:2]
        height, width = rgb.shape[:2]
        gap = round(self.style.gap * size)
        x0 = round(anchor[0] - pw / 2)
        y0 = round(anchor[1] - gap - ph)
        # keep the whole box in frame: a character near an edge still gets a readable label
        x0 = min(max(x0, 0), max(width - pw, 0))
        y0 = min(max(y0, 0), max(height - ph, 0))
        x1, y1 = min(x0 + pw, width), min(y0 + ph, height)
        part = patch[: y1 - y0, : x1 - x0]
        alpha = part[..., 3:4].astype(np.uint16)  # (h, w, 1)
        region = rgb[y0:y1, x0:x1]
        mixed = (region.astype(np.uint16) * (255 - alpha) + part[..., :3].astype(np.uint16) * alpha + 127) // 255
        region[...] = mixed.astype(np.uint8)


Box = tuple[float, float, float, float]  # (x0, y0, x1, y1) pixels, x1 and y1 exclusive


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_label(box_wh: tuple[int, int], head: Box, faces: list[Box], frame_wh: tuple[int, int],
                gap: int) -> tuple[int, int] | None:
    """Top-left pixel of a ``box_wh`` label for the figure whose head covers ``head``, clear of every face.

    Tried in order: centred above the head (as on wide shots), beside the head on its right, on its
    left, then centred below the chin; each may slide along the frame edge it would cross, and is
    taken when the whole box is in the frame and overlaps none of ``faces`` (every visible head,
    this one's included). None when no place is free: a face that fills the frame gets no label.
    """
    w, h = box_wh
    width, height = frame_wh
    x0, y0, x1, y1 = head
    cx, cy = (x0 + x1) / 2.0, (y0 + y1) / 2.0
    candidates = (
        (cx - w / 2.0, y0 - gap - h),
        (x1 + gap, cy - h / 2.0),
        (x0 - gap - w, cy - h / 2.0),
        (cx - w / 2.0, y1 + gap),
    )
    for left, top in candidates:
        left = min(max(round(left), 0), width - w)
        top = min(max(round(top), 0), height - h)
        if left < 0 or top < 0:  # the box is larger than the frame
            return None
        box = (left, top, left + w, top + h)
        if not any(_overlaps(box, face) for face in faces):
            return left, top
    return None
