"""Spellings people write that the canonical script spells one way.

Each reader turns one kind of shorthand into canonical values or raises ``ValueError`` whose
text is the rule (pydantic puts the JSON path and the value in front of it): field names
people guess (``color``, ``resolution``, ``description``), durations as text (``"3s"``,
``"1m30s"``), frame sizes by name (``"4K"``, ``"UHD"``), colours by name (``"brown"``,
``"深蓝"``) and a camera written as a short phrase (``"slow push in"``, ``"pan left 20°"``,
``"推镜头"``). Nothing is guessed: a word that could mean two things is refused with both
meanings named, and an unknown word gets the nearest known ones (difflib).

The same tables drive the accepted-spellings JSON Schema (``daotai schema --accepted``).
"""

from __future__ import annotations

import difflib
import math
import re
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from daotai.script import vocab

# ------------------------------------------------------------------ field names

# Other names a field may be written with, per model: accepted because each reads one way
# there (``description`` is the scene's own field, so only a character's means appearance).
# The schema accepts either spelling, never both in one object.
ALTERNATIVE_KEYS: Mapping[str, Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "Script": {"size": ("resolution",)},
        "Scene": {"time_of_day": ("time",), "set": ("kit",)},
        "Character": {"appearance": ("description", "look"), "colour": ("color",)},
        "SetPiece": {"colour": ("color",)},
        "Shot": {"shot_id": ("id",), "framing": ("shot",), "subject": ("character",), "camera": ("move",),
                 "reference_video": ("footage",)},
        "ReferenceVideo": {"start": ("in",), "end": ("out",)},
        "CameraSpec": {"type": ("move",)},
    }
)


def alternatives(model: str, field: str) -> tuple[str, ...]:
    """The other names ``field`` of ``model`` may be written with (empty when none)."""
    return ALTERNATIVE_KEYS.get(model, {}).get(field, ())


def _lens_rule(value: Any) -> str:
    """Where the lens goes, with the fov of a focal length when the value gives one."""
    rule = ("the lens is set as camera.focal_length_mm (millimetres on camera.sensor, Super 35 unless named) "
            "or as camera.fov, the vertical field of view in degrees")
    millimetres = _focal_length(value)
    if millimetres is not None:
        rule += f": {millimetres:g} mm on a full-frame camera is fov {focal_length_to_fov(millimetres):.1f}"
    return rule


def focal_length_to_fov(millimetres: float, sensor_height_mm: float = 24.0) -> float:
    """Vertical field of view in degrees of a lens on a sensor (full frame: 24 mm high)."""
    return math.degrees(2.0 * math.atan(sensor_height_mm / (2.0 * millimetres)))


def _focal_length(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 1 <= value <= 2000:
        return float(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(?:mm)?\s*", value.lower())
        if match and 1 <= float(match.group(1)) <= 2000:
            return float(match.group(1))
    return None


_IN_CAMERA = "it belongs to the shot's camera: write it as camera.{key}"
_IN_SCENE = "it belongs to the scene: write it as scene.time_of_day"

# Names people guess that are not fields where they wrote them: the answer names the right
# place. A value makes the answer exact where it can (a focal length becomes a fov).
GUESSED_KEYS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "Script": {
            "time": _IN_SCENE, "time_of_day": _IN_SCENE,
            "description": "it belongs to the scene: write it as scene.description",
            "duration": "it belongs to each shot: write it as shots[i].duration",
            "camera": "it belongs to each shot: write it as shots[i].camera",
            "framing": "it belongs to each shot: write it as shots[i].framing",
        },
        "Shot": {
            "lens": "", "focal_length": "",
            **{key: _IN_CAMERA for key in ("fov", "fov_end", "motion", "rotate", "orbit", "easing", "shake",
                                           "direction")},
            "type": "it is ambiguous in a shot: the camera move is camera.type, the shot size is framing",
            "size": "the shot size is framing (the frame size is the script's size)",
            "time": _IN_SCENE, "time_of_day": _IN_SCENE,
        },
        "CameraSpec": {
            "lens": "", "focal_length": "",
            "framing": "it belongs to the shot, not its camera: write it as the shot's framing",
            "angle": "it belongs to the shot, not its camera: write it as the shot's angle",
            "speed": "a move's speed is its amount over the shot's duration: give a larger motion, rotate or "
                     "orbit for a faster move",
        },
    }
)


def guessed_key_rule(model: str, key: str, value: Any) -> str | None:
    """The answer for a guessed field name in ``model`` (None when the name is not a known guess)."""
    rule = GUESSED_KEYS.get(model, {}).get(key)
    if rule is None:
        return None
    if key in ("lens", "focal_length"):
        rule = _lens_rule(value)
        return rule.replace("camera.", "") if model == "CameraSpec" else rule
    return rule.format(key=key)


# ------------------------------------------------------------------ nearest names


def nearest(word: str, candidates: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The known names closest to ``word`` (difflib ratio), best first; spellings compared folded."""
    folded: dict[str, str] = {}
    for name in candidates:
        folded.setdefault(vocab.normalise_word(name), name)
    found = difflib.get_close_matches(vocab.normalise_word(word), list(folded), n=n, cutoff=cutoff)
    return list(dict.fromkeys(folded[f] for f in found))


def did_you_mean(names: list[str]) -> str:
    """'; did you mean 'x'?' (or 'x' or 'y'), or '' when there is nothing close."""
    if not names:
        return ""
    quoted = [f"'{name}'" for name in names]
    return "; did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"


# ------------------------------------------------------------------ durations


# The grammar of a duration written as text, applied to the stripped, lower-cased text: a
# number (seconds), or a number with a unit, or minutes and seconds ("1m30s", "1 min 30",
# "1分30秒"), or minutes:seconds ("1:30"). Letters appear only in the unit words, so the
# same template, with each letter made case-blind, is the JSON Schema pattern.
_NUM = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
_S_UNIT = "(?:seconds|second|secs|sec|s|秒钟|秒)"
_M_UNIT = "(?:minutes|minute|mins|min|m|分钟|分)"
_MS_UNIT = "(?:milliseconds|millisecond|ms|毫秒)"
SECONDS_TEMPLATE = (
    rf"(?P<sign>[+-]?)(?:(?P<s>{_NUM}) *{_S_UNIT}?|(?P<ms>{_NUM}) *{_MS_UNIT}"
    rf"|(?P<m>{_NUM}) *{_M_UNIT}(?: *(?P<ms_s>{_NUM}) *{_S_UNIT}?)?"
    r"|(?P<cm>[0-9]+):(?P<cs>[0-5][0-9](?:\.[0-9]+)?))"
)
_SECONDS = re.compile(SECONDS_TEMPLATE)
SECONDS_EXAMPLES = "3, 2.5, '3s', '2.5 s', '1m30s', '1:30', '500ms', '3秒'"


def read_seconds(value: Any) -> Any:
    """A duration as a number (seconds) or text ('3s', '2.5 s', '1m30s', '1:30') → seconds."""
    if isinstance(value, bool):
        raise ValueError("must be a number of seconds, not true or false")
    if not isinstance(value, str):
        return value
    match = _SECONDS.fullmatch(value.strip().lower())
    if match is None:
        raise ValueError(f"must be seconds as a number or as text such as {SECONDS_EXAMPLES}")
    parts = match.groupdict()
    if parts["s"] is not None:
        seconds = float(parts["s"])
    elif parts["ms"] is not None:
        seconds = float(parts["ms"]) / 1000.0
    elif parts["m"] is not None:
        seconds = float(parts["m"]) * 60.0 + float(parts["ms_s"] or 0.0)
    else:
        seconds = int(parts["cm"]) * 60.0 + float(parts["cs"])
    return -seconds if parts["sign"] == "-" else seconds


def read_number(value: Any) -> Any:
    """A JSON number as it is; true/false and text are refused (no quiet conversion)."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not true or false")
    if isinstance(value, str):
        raise ValueError("must be a number")
    return value


def read_whole(value: Any) -> Any:
    """A whole JSON number (5 and 5.0); true/false and text are refused."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    if isinstance(value, str):
        raise ValueError("must be a whole number")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# ------------------------------------------------------------------ frame sizes


# Frame sizes by the names people use (matched like film words: case, spaces and hyphens
# folded). "4K" is the UHD television size; the cinema size has its own name.
SIZE_NAMES: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        vocab.normalise_word(name): size
        for names, size in (
            (("4k", "uhd", "4k_uhd", "uhd_4k", "2160p"), (3840, 2160)),
            (("dci_4k", "4k_dci"), (4096, 2160)),
            (("dci_2k", "2k_dci"), (2048, 1080)),
            (("1440p", "qhd", "wqhd"), (2560, 1440)),
            (("fhd", "full_hd", "fullhd"), (1920, 1080)),
            (("8k", "8k_uhd", "4320p"), (7680, 4320)),
        )
        for name in names
    }
)
# Names that mean more than one size: answered with the choices instead of picking one.
AMBIGUOUS_SIZES: Mapping[str, str] = MappingProxyType(
    {
        "2k": "is ambiguous: cinema 2K is 2048x1080 ('dci_2k'), a '2K' screen is 2560x1440 ('1440p')",
        "hd": "is ambiguous: HD is 1280x720 ('720p') or full HD 1920x1080 ('1080p')",
        "sd": "is ambiguous: SD is 640x480, 720x480 or 720x576; write the size as 'WIDTHxHEIGHT'",
    }
)
SIZE_TEXT = re.compile(r"([0-9]{1,6}) *(?:x|×|\*) *([0-9]{1,6})")


def read_size(value: Any, presets: Mapping[str, tuple[int, int]]) -> Any:
    """'1080p' / '4K' / 'UHD' / '1920x1080' / [w, h] → {width, height}; objects pass through."""
    if isinstance(value, str):
        key = vocab.normalise_word(value)
        found = presets.get(key) or SIZE_NAMES.get(key)
        if found is not None:
            return {"width": found[0], "height": found[1]}
        if key in AMBIGUOUS_SIZES:
            raise ValueError(AMBIGUOUS_SIZES[key])
        match = SIZE_TEXT.fullmatch(value.strip().lower())
        if match:
            return {"width": int(match.group(1)), "height": int(match.group(2))}
        names = [*presets, "4K", "UHD", "2160p", "1440p", "8K"]
        raise ValueError(
            "must be a size name (" + ", ".join(names) + "), 'WIDTHxHEIGHT' or {width, height}, "
            "optionally followed by an aspect ratio ('1080p 2.39:1')"
            + did_you_mean(nearest(value, [*presets, *SIZE_NAMES]))
        )
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return {"width": value[0], "height": value[1]}
    return value


# ------------------------------------------------------------------ colours


def shade(colour: tuple[float, float, float], modifier: str | None) -> tuple[float, float, float]:
    """A colour lightened ('light'), darkened ('dark') or made more vivid ('bright').

    The same rule as the previz wardrobe's colour words (daotai.plan.wardrobe), so "dark blue"
    means one colour wherever it is written.
    """
    r, g, b = colour
    if modifier == "light":
        out = [c + (1.0 - c) * 0.45 for c in (r, g, b)]
    elif modifier == "dark":
        out = [c * 0.55 for c in (r, g, b)]
    elif modifier == "bright":
        mean = (r + g + b) / 3.0
        out = [min(max(mean + (c - mean) * 1.3, 0.0), 1.0) for c in (r, g, b)]
    else:
        out = [r, g, b]
    return (round(out[0], 4), round(out[1], 4), round(out[2], 4))


def colour_words() -> tuple[dict[str, str], dict[str, str], dict[str, str], dict[str, str]]:
    """(English colours, Chinese colours, English modifiers, Chinese modifiers), folded spellings."""
    en = {vocab.normalise_word(w): w for w in vocab.COLOUR_WORDS if w.isascii()}
    zh = {vocab.normalise_word(w): w for w in vocab.COLOUR_WORDS if not w.isascii()}
    en_mod = {vocab.normalise_word(w): m for w, m in vocab.COLOUR_MODIFIERS.items() if w.isascii()}
    zh_mod = {vocab.normalise_word(w): m for w, m in vocab.COLOUR_MODIFIERS.items() if not w.isascii()}
    return en, zh, en_mod, zh_mod


def read_colour_name(text: str) -> tuple[float, float, float] | None:
    """'brown', 'dark blue', '深蓝', '浅灰色' → RGB in 0..1; None when the text names no colour."""
    key = vocab.normalise_word(text)
    en, zh, en_mod, zh_mod = colour_words()
    if key in en or key in zh:
        return shade(vocab.COLOUR_WORDS[en.get(key) or zh[key]], None)
    head, _, tail = key.partition("_")
    if tail and head in en_mod and tail in en:
        return shade(vocab.COLOUR_WORDS[en[tail]], en_mod[head])
    if key[:1] in zh_mod and key[1:] in zh:
        return shade(vocab.COLOUR_WORDS[zh[key[1:]]], zh_mod[key[:1]])
    return None


def colour_name_rule(text: str) -> str:
    """The rule for a colour text that is neither '#RRGGBB' nor a known colour name."""
    en, _, _, _ = colour_words()
    return ("must be '#RRGGBB', a colour name such as 'brown', 'dark blue' or '深蓝', or [r, g, b] with floats "
            "in 0..1" + did_you_mean(nearest(text, list(en.values()))))


# ------------------------------------------------------------------ camera phrases


# Words of a camera phrase besides the move itself. A speed word says how fast; the move's
# default amount (pan 30°, truck 1 m, a push-in a third of the way to the subject) is a slow,
# steady move, so "slow" keeps it, and a fast move needs its amount ("fast pan left 90°").
SPEED_WORDS: Mapping[str, str] = MappingProxyType(
    {
        **dict.fromkeys(("slow", "slowly", "gentle", "gently", "gradual", "gradually", "subtle", "subtly",
                         "slight", "slightly", "steady", "smooth", "smoothly"), "slow"),
        **dict.fromkeys(("fast", "quick", "quickly", "rapid", "rapidly", "swift", "swiftly", "whip"), "fast"),
        **dict.fromkeys(("缓慢", "缓缓", "慢慢", "慢速", "轻轻", "缓", "慢"), "slow"),
        **dict.fromkeys(("快速", "迅速", "急速", "快", "急"), "fast"),
    }
)
FILLER_WORDS = frozenset(
    ("a", "an", "the", "to", "toward", "towards", "camera", "cam", "shot", "move", "moves", "moving", "movement",
     "around", "镜头", "向", "往", "朝", "地", "的")
)
# Directions written with a move: the canonical ones and their aliases, plus a few that
# read one way next to a move.
_EXTRA_DIRECTIONS = {"forward": "in", "forwards": "in", "backward": "out", "backwards": "out", "inward": "in",
                     "outward": "out", "前": "in", "后": "out"}
ANGLE_UNITS = ("°", "º", "degrees", "degree", "degs", "deg", "度")
DISTANCE_UNITS: Mapping[str, float] = MappingProxyType(
    {"metres": 1.0, "metre": 1.0, "meters": 1.0, "meter": 1.0, "m": 1.0, "米": 1.0, "centimetres": 0.01,
     "centimetre": 0.01, "centimeters": 0.01, "centimeter": 0.01, "cm": 0.01, "厘米": 0.01, "feet": 0.3048,
     "foot": 0.3048, "ft": 0.3048}
)
_UNITS = sorted((*ANGLE_UNITS, *DISTANCE_UNITS), key=len, reverse=True)
_AMOUNT = re.compile(
    r"(?<![a-z0-9.])([+-]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+))\s*(" + "|".join(re.escape(u) for u in _UNITS)
    + r")?(?![a-z0-9])"
)
# Which part of the camera an amount sets, per move: (field, axis or None, unit kind).
_AMOUNT_FIELD: Mapping[str, tuple[str, int | None, str]] = MappingProxyType({
    row.type: (row.amount.field, row.amount.axis, row.amount.unit)
    for row in vocab.CAMERA_MOVES.values() if row.amount is not None and row.amount.unit is not None
})
PHRASE_EXAMPLES = "'slow push in', 'pan left 20°', 'crane up 2 m', '推镜头', '向左摇20度'"
MAX_PHRASE = 200


def _direction_word(word: str) -> str | None:
    return _EXTRA_DIRECTIONS.get(word) or vocab.lookup(vocab.DIRECTION_ALIASES, word)


def _zh_lexicon() -> list[tuple[str, str, str]]:
    """(text, kind, value) of the Chinese words a phrase may hold, longest first."""
    items = [(k, "move", k) for k in vocab.CAMERA_ALIASES if not k.isascii()]
    items += [(w, "speed", s) for w, s in SPEED_WORDS.items() if not w.isascii()]
    items += [(w, "filler", w) for w in FILLER_WORDS if not w.isascii()]
    items += [(w, "direction", d) for w in ("左", "右", "上", "下", "前", "后", "进", "出")
              if (d := _direction_word(w)) is not None]
    return sorted(items, key=lambda item: len(item[0]), reverse=True)


def _words(text: str) -> list[tuple[str, str]]:
    """(kind, value) items of a phrase without its amount: move, speed, direction, word (unknown)."""
    lexicon = _zh_lexicon()
    items: list[tuple[str, str]] = []
    for run in re.findall(r"[a-z]+|[^\x00-\x7f]+", text.replace("'", "").replace("’", "")):
        if run.isascii():
            if run in SPEED_WORDS:
                items.append(("speed", SPEED_WORDS[run]))
            elif run not in FILLER_WORDS:
                items.append(("word", run))
            continue
        i = 0
        while i < len(run):
            for piece, kind, value in lexicon:
                if run.startswith(piece, i):
                    if kind != "filler":
                        items.append((kind, value))
                    i += len(piece)
                    break
            else:
                if not run[i].isspace():
                    items.append(("word", run[i]))
                i += 1
    return items


class NoMove(ValueError):
    """A camera phrase in which no camera move was found."""


def _find_move(items: list[tuple[str, str]]) -> tuple[str, dict[str, Any], list[tuple[str, str]]]:
    """The one camera move among the items: (type, preset fields, the items left over)."""
    found: list[tuple[int, int, str]] = []  # (start, end, alias key)
    i = 0
    while i < len(items):
        kind, value = items[i]
        if kind == "move":
            found.append((i, i + 1, value))
            i += 1
            continue
        if kind == "word":
            # the longest run of English words that is a move name ("push in", "dolly zoom")
            for j in range(len(items), i, -1):
                run = items[i:j]
                if all(k in ("word", "direction") for k, _ in run):
                    key = vocab.normalise_word(" ".join(v for _, v in run))
                    if key in vocab.CAMERA_ALIASES and any(k == "word" for k, _ in run):
                        found.append((i, j, key))
                        i = j
                        break
            else:
                i += 1
            continue
        i += 1
    if not found:
        raise NoMove("names no camera move")
    if len(found) > 1:
        moves = ", ".join(f"'{key}'" for _, _, key in found)
        raise ValueError(f"names more than one move ({moves}); one move per camera (write the fields for more)")
    start, end, key = found[0]
    canonical, preset = vocab.CAMERA_ALIASES[key]
    return canonical, dict(preset), items[:start] + items[end:]


def read_camera(value: str) -> dict[str, Any]:
    """A camera move name ('push_in', '推') or a short phrase → the camera's fields (raises ValueError)."""
    preset = vocab.CAMERA_ALIASES.get(vocab.normalise_word(value))
    if preset is not None:
        return {**dict(preset[1]), "type": preset[0]}
    try:
        return read_camera_phrase(value)
    except NoMove:
        moves = vocab.canonical_names(vocab.CameraType)
        close = nearest(value, [*vocab.CAMERA_ALIASES, *(t.value for t in vocab.CameraType)]) if len(value) < 30 else []
        raise ValueError(
            f"is not a camera move or a phrase daotai reads{did_you_mean(close)}; moves: {moves}; a phrase is a "
            f"move with a direction, an amount and a speed word, e.g. {PHRASE_EXAMPLES}"
        ) from None


def read_camera_phrase(text: str) -> dict[str, Any]:
    """'slow push in', 'pan left 20°', 'crane up 2 m', '向左摇20度' → camera fields; ValueError says why not."""
    if len(text) > MAX_PHRASE:
        raise ValueError(f"is longer than {MAX_PHRASE} characters")
    lowered = text.strip().lower()
    amounts = list(_AMOUNT.finditer(lowered))
    if len(amounts) > 1:
        raise ValueError("gives more than one amount")
    amount: tuple[float, str | None] | None = None
    if amounts:
        match = amounts[0]
        amount = (float(match.group(1)), match.group(2))
        lowered = lowered[: match.start()] + " " + lowered[match.end():]
    items = _words(lowered)
    kind, fields, rest = _find_move(items)
    speeds = {value for k, value in rest if k == "speed"}
    unknown = [value for k, value in rest if k == "word" and _direction_word(value) is None]
    if unknown:
        words = [*SPEED_WORDS, *vocab.DIRECTION_ALIASES, *_EXTRA_DIRECTIONS]
        raise ValueError(f"has '{unknown[0]}', which is not a word of camera phrases"
                         f"{did_you_mean(nearest(unknown[0], words))}")
    directions = {d for k, v in rest if k in ("direction", "word") and (d := _direction_word(v)) is not None}
    if "direction" in fields:
        directions.add(str(fields["direction"]))
    if len(directions) > 1:
        raise ValueError(f"names contradicting directions ({', '.join(sorted(directions))})")
    if len(speeds) > 1:
        raise ValueError("names contradicting speeds (slow and fast)")
    direction = next(iter(directions), None)
    if direction is not None:
        fields["direction"] = direction
    if amount is None:
        if "fast" in speeds and kind not in _AMOUNT_FIELD:
            raise ValueError(f"says 'fast', which a {kind} phrase cannot say; write the camera's fields")
        if "fast" in speeds:
            example = "90°" if _AMOUNT_FIELD[kind][2] == "angle" else "2 m"
            raise ValueError(f"says 'fast' without an amount (the default {kind} is a slow move); give the "
                             f"amount, e.g. '{text.strip()} {example}'")
        return {**fields, "type": kind}
    return {**fields, "type": kind, **_amount_fields(kind, direction, *amount)}


def _amount_fields(kind: str, direction: str | None, number: float, unit: str | None) -> dict[str, Any]:
    """The explicit field an amount sets for a move ('pan left 20°' → rotate [-20, 0, 0])."""
    target = _AMOUNT_FIELD.get(kind)
    if target is None:
        raise ValueError(f"gives an amount, which a {kind} camera does not take in a phrase; write the camera's fields")
    field, axis, unit_kind = target
    if unit is not None and (unit in ANGLE_UNITS) != (unit_kind == "angle"):
        want = "degrees, e.g. 20°" if unit_kind == "angle" else "metres, e.g. 1.5 m"
        raise ValueError(f"gives {number:g} {unit} for a {kind}, which moves by {want}")
    size = number * (DISTANCE_UNITS.get(unit, 1.0) if unit is not None else 1.0)
    if direction is not None:
        if number < 0:
            raise ValueError("gives a signed amount and a direction; give one of them")
        size = vocab.DIRECTION_SIGNS.get(kind, {}).get(direction, 1) * abs(size)
    elif kind in ("dolly", "dolly_zoom"):
        raise ValueError(f"gives a {kind} amount without saying which way (in or out)")
    size = round(size, 6) + 0.0  # + 0.0: no negative zero
    if axis is None:
        return {field: size}
    vector = [0.0, 0.0, 0.0]
    vector[axis] = size
    return {field: vector}
