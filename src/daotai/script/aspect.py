"""Aspect ratios as frame sizes: '2.39:1', '1.85:1', '9:16', '4:3', '1:1', alone or after a size.

Rule (stated in docs/conventions.md): the frame is *cropped* to the ratio, not letterboxed. It is
the largest frame of that ratio inside the named size (the script's default 1280x720 when none
is named), turned upright first for a portrait ratio, so '1080p 2.39:1' is 1920x804 (the width
kept, the height from the ratio), '1080p 4:3' is 1440x1080 and '1080p 9:16' is 1080x1920. The
side the ratio sets is rounded to the nearest even number (H.264 4:2:0 needs even sizes), half up.
Every frame is rendered at that size: no bars are drawn, nothing is rendered and then cut away.

Letterboxed, on request: a word after the ratio (``'1080p 2.39:1 letterbox'``, ``遮幅``) keeps the
named size as the delivery frame. The shots, their control channels and cameras are still the cropped
picture (1920x804); the assembled sequence is delivered in the named frame (1920x1080) with the picture
centred between black bars, each bar an even number of rows or columns (4:2:0 chroma never straddles
a bar's edge), the odd remainder of a split below or to the right.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from types import MappingProxyType
from typing import Mapping

# Widest and tallest shapes accepted: 4:1 is past any cinema ratio (2.76:1 Ultra Panavision),
# 1:4 past any phone screen held upright.
MIN_RATIO, MAX_RATIO = Fraction(1, 4), Fraction(4, 1)
# A ratio as people write it: 2.39:1, 16:9, 2.39 : 1, 2.39：1 (a Chinese colon).
RATIO_TEXT = re.compile(r"([0-9]{1,4}(?:\.[0-9]{1,4})?) *[:：] *([0-9]{1,4}(?:\.[0-9]{1,4})?)")
# Ratios by the names crews use for them.
RATIO_NAMES: Mapping[str, Fraction] = MappingProxyType(
    {"scope": Fraction("2.39"), "cinemascope": Fraction("2.39"), "flat": Fraction("1.85"),
     "square": Fraction(1), "vertical": Fraction(9, 16), "竖屏": Fraction(9, 16), "方形": Fraction(1)}
)
RATIO_RULE = (f"an aspect ratio is WIDTH:HEIGHT with both numbers > 0, from 1:4 to 4:1 "
              f"('2.39:1', '1.85:1', '16:9', '9:16', '4:3', '1:1'), or one of: {', '.join(RATIO_NAMES)}")
# How the ratio meets the named size: cropped to it (the default) or letterboxed inside it.
FIT_WORDS: Mapping[str, str] = MappingProxyType(
    {"crop": "crop", "cropped": "crop", "裁切": "crop", "letterbox": "letterbox", "letterboxed": "letterbox",
     "遮幅": "letterbox", "加黑边": "letterbox"}
)
_FIT = re.compile(r"^(?P<rest>.*?)[ ,]*(?P<fit>" + "|".join(FIT_WORDS) + r")$", re.IGNORECASE)
_TAIL = re.compile(r"^(?P<base>.*?)[ ,@]*(?P<ratio>" + RATIO_TEXT.pattern + "|" + "|".join(RATIO_NAMES) + r")$",
                   re.IGNORECASE)


def read_ratio(text: str) -> Fraction:
    """'2.39:1' / '9:16' / 'scope' → the width over the height; ValueError naming the rule otherwise."""
    cleaned = text.strip().lower()
    if cleaned in RATIO_NAMES:
        return RATIO_NAMES[cleaned]
    match = RATIO_TEXT.fullmatch(cleaned)
    if match is None:
        raise ValueError(f"aspect ratio {text!r} is not WIDTH:HEIGHT; {RATIO_RULE}")
    width, height = Fraction(match.group(1)), Fraction(match.group(2))
    if width <= 0 or height <= 0:
        raise ValueError(f"aspect ratio {text!r} has a side of 0; {RATIO_RULE}")
    ratio = width / height
    if not MIN_RATIO <= ratio <= MAX_RATIO:
        raise ValueError(f"aspect ratio {text!r} is {float(ratio):.3g}:1, outside 1:4 to 4:1; {RATIO_RULE}")
    return ratio


def split_ratio(text: str) -> tuple[str, str | None]:
    """'1080p 2.39:1' → ('1080p', '2.39:1'); text with no ratio at its end → (text, None)."""
    match = _TAIL.fullmatch(text.strip())
    if match is None:
        return text, None
    return match.group("base").strip(), match.group("ratio")


def _even(value: Fraction) -> int:
    """The nearest even whole number, half up."""
    return 2 * math.floor(value / 2 + Fraction(1, 2))


def frame_for_ratio(width: int, height: int, ratio: Fraction) -> tuple[int, int]:
    """The largest frame of ``ratio`` (width / height) inside width x height, turned upright for a
    portrait ratio; the side the ratio sets rounded to even (module doc)."""
    if (ratio < 1) != (width < height) and width != height:
        width, height = height, width  # a portrait ratio from a landscape size, or the other way
    return picture_in_frame(width, height, ratio)


def picture_in_frame(width: int, height: int, ratio: Fraction) -> tuple[int, int]:
    """The largest picture of ``ratio`` inside width x height as it stands (not turned: a letterbox's
    picture); the side the ratio sets rounded to even."""
    if ratio >= Fraction(width, height):
        return width, _even(Fraction(width) / ratio)
    return _even(Fraction(height) * ratio), height


def split_fit(text: str) -> tuple[str, str | None]:
    """'1080p 2.39:1 letterbox' → ('1080p 2.39:1', 'letterbox'); text without a fit word → (text, None)."""
    match = _FIT.fullmatch(text.strip())
    if match is None:
        return text, None
    return match.group("rest").strip(), FIT_WORDS[match.group("fit").lower()]


def bars(frame: tuple[int, int], picture: tuple[int, int]) -> tuple[int, int]:
    """(left, top) pixels of black beside and above a picture centred in ``frame`` (width, height), each
    even (module doc); ValueError when the picture does not fit."""
    (fw, fh), (pw, ph) = frame, picture
    if pw > fw or ph > fh:
        raise ValueError(f"a {pw}x{ph} picture does not fit a {fw}x{fh} frame")
    return 2 * ((fw - pw) // 4), 2 * ((fh - ph) // 4)
