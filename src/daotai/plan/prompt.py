"""Compose an English model prompt per shot from the script's words.

Camera vocabulary always comes out in English (video models are trained on it); the
author's own words (appearance, action, names) are kept as written. Names that are not
ASCII are quoted (``"小雨"``) so a text encoder reads them as a name, not as a description,
and each character is described by exactly the same phrase in every shot (consistency).
Prompts are fitted to a per-model length budget (T5 tokens, estimated from words).
"""

from __future__ import annotations

import math
import re
from types import MappingProxyType

from daotai import catalog
from daotai.catalog import WAN_PROMPT, PromptBudget

FRAMING_WORDS = MappingProxyType(
    {
        "extreme_close_up": "Extreme close-up",
        "close_up": "Close-up",
        "medium_close_up": "Medium close-up",
        "medium": "Medium shot",
        "medium_full": "Medium full shot",
        "full": "Full shot",
        "wide": "Wide shot",
        "extreme_wide": "Extreme wide shot",
    }
)

ANGLE_WORDS = MappingProxyType(
    {
        "eye_level": "eye-level angle",
        "high": "high angle looking down",
        "low": "low angle looking up",
        "birds_eye": "bird's-eye view from directly above",
        "worms_eye": "worm's-eye view from the ground",
        "dutch": "Dutch angle, tilted horizon",
    }
)

TIME_WORDS = MappingProxyType(
    {
        "dawn": "at dawn, soft pink light",
        "morning": "in the morning, fresh daylight",
        "day": "in daylight",
        "afternoon": "in the afternoon, warm light",
        "dusk": "at dusk, golden-hour light",
        "night": "at night, artificial light",
        "interior": "indoors, soft interior light",
    }
)

DEFAULT_NEGATIVE = (
    "blurry, low quality, distorted face, extra limbs, deformed hands, text, watermark, "
    "flicker, jitter, abrupt cuts"
)


def _speed(amount_per_second: float, slow: float, fast: float) -> str:
    """'slowly' / 'steadily' / 'quickly' from a rate and two thresholds."""
    if amount_per_second < slow:
        return "slowly"
    if amount_per_second > fast:
        return "quickly"
    return "steadily"


def describe_move(
    move_type: str,
    motion: tuple[float, float, float],
    rotate: tuple[float, float, float],
    orbit: float,
    fov: float,
    fov_end: float,
    shake: float,
    duration_s: float,
    subject_name: str | None,
) -> str:
    """English camera-move phrase, e.g. 'the camera slowly dollies in toward Lin'."""
    x, y, z = motion
    pan, tilt, roll = rotate
    name = quote_name(subject_name) if subject_name else ""
    toward = f" toward {name}" if name else ""
    around = f" around {name}" if name else ""
    d = max(duration_s, 1e-6)
    phrases: list[str] = []
    if move_type == "follow":
        phrases.append("the camera follows the subject, tracking its movement")
    if z:
        verb = "dollies in" + toward if z < 0 else "pulls back"
        if move_type == "dolly_zoom":
            verb = "performs a dolly zoom (vertigo effect), " + ("dollying in" if z < 0 else "dollying out")
        phrases.append(f"the camera {_speed(abs(z) / d, 0.3, 1.0)} {verb}")
    if x:
        phrases.append(f"the camera {_speed(abs(x) / d, 0.3, 1.2)} trucks {'right' if x > 0 else 'left'}")
    if y:
        verb = "cranes" if move_type == "crane" else "rises" if y > 0 else "lowers"
        if move_type == "crane":
            verb += " up" if y > 0 else " down"
        phrases.append(f"the camera {_speed(abs(y) / d, 0.3, 1.0)} {verb}")
    if pan:
        phrases.append(f"the camera {_speed(abs(pan) / d, 8, 30)} pans {'right' if pan > 0 else 'left'}")
    if tilt:
        phrases.append(f"the camera {_speed(abs(tilt) / d, 5, 20)} tilts {'up' if tilt > 0 else 'down'}")
    if roll:
        phrases.append(f"the camera rolls {'clockwise' if roll > 0 else 'counter-clockwise'}")
    if orbit:
        phrases.append(f"the camera {_speed(abs(orbit) / d, 10, 40)} orbits {'right' if orbit > 0 else 'left'}{around}")
    if fov_end != fov and move_type != "dolly_zoom":
        phrases.append(f"the lens {_speed(abs(fov_end - fov) / d, 5, 20)} zooms {'in' if fov_end < fov else 'out'}")
    if shake:
        phrases.append("handheld camera with natural shake")
    if not phrases:
        return "static camera, locked-off tripod shot"
    return _join_moves(phrases)


def _join_moves(phrases: list[str]) -> str:
    """'the camera pans left' + 'the camera tilts up' → 'the camera pans left and tilts up'."""
    subject = "the camera "
    merged = [phrases[0]] + [
        p[len(subject):] if p.startswith(subject) and phrases[0].startswith(subject) else p for p in phrases[1:]
    ]
    if len(merged) == 1:
        return merged[0]
    return ", ".join(merged[:-1]) + " and " + merged[-1]


def compose_prompt(
    framing: str,
    angle: str,
    subject_name: str | None,
    subject_appearance: str,
    others: list[tuple[str, str]],
    scene_name: str,
    scene_description: str,
    time_of_day: str,
    move_phrase: str,
    action: str,
    extra: str,
) -> str:
    """The English prompt for one shot: framing, who, where, when, camera, action, extras."""
    names = [n for n in [subject_name, *(name for name, _ in others)] if n]
    who = f" of {character_phrase(subject_name, subject_appearance)}" if subject_name else ""
    first = [f"{FRAMING_WORDS[framing]}{who}", ANGLE_WORDS[angle]]
    if others:
        first.append("with " + ", ".join(character_phrase(name, look) for name, look in others))
    where = f"in {_with_article(_sentence(scene_name, names))}" if scene_name else ""
    if scene_description:
        described = _sentence(scene_description, names)
        where = f"{where} ({described})" if where else described
    first.append(f"{where} {TIME_WORDS[time_of_day]}".strip())
    parts = [", ".join(first)]
    if action:
        parts.append(_capitalised(_sentence(action, names)))
    parts.append(move_phrase[0].upper() + move_phrase[1:])
    if extra:
        parts.append(_sentence(extra, names))
    return ". ".join(p for p in parts if p) + "."


def quote_name(name: str) -> str:
    """A name as it appears in prompts: ASCII names bare, others in double quotes."""
    return name if name.isascii() else f'"{name}"'


def character_phrase(name: str, appearance: str) -> str:
    """The one phrase that describes a character in every shot, e.g. 'Lin (a tall man)'."""
    look = appearance.strip().rstrip(".。 ")
    return f"{quote_name(name)} ({look})" if look else quote_name(name)


def quote_names_in(text: str, names: list[str]) -> str:
    """Quote every bare occurrence of a non-ASCII name in free text (already quoted ones stay)."""
    for name in sorted({n for n in names if n and not n.isascii()}, key=len, reverse=True):
        # A name right after or before a double quote is already quoted; leave it alone.
        text = re.sub(rf'(?<!")({re.escape(name)})(?!")', r'"\1"', text)
    return text


def _with_article(place: str) -> str:
    """'office' → 'the office'; places with an article, a capital or non-English words stay."""
    first = place.split(" ", 1)[0].lower()
    if not place.isascii() or first in ("a", "an", "the") or place[:1].isupper():
        return place
    return f"the {place}"


def _capitalised(text: str) -> str:
    """First letter upper-case, so every prompt sentence reads as one."""
    return text[:1].upper() + text[1:]


def _sentence(text: str, names: list[str]) -> str:
    """Author's words as one prompt fragment: trailing stops dropped, names quoted."""
    return quote_names_in(text.strip().rstrip(".。 "), names)


def compose_negative(extra: str) -> str:
    """Default negative prompt plus the shot's own negative words."""
    return f"{DEFAULT_NEGATIVE}, {extra}" if extra else DEFAULT_NEGATIVE


_WORD = re.compile(r"[A-Za-z0-9'’-]+|[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff]|[^\sA-Za-z0-9]")
_CAMERA_SENTENCE = re.compile(r"^(The camera|The lens|Static camera|Handheld camera)")


def estimate_tokens(text: str, budget: PromptBudget = WAN_PROMPT) -> int:
    """Approximate T5 token count: words × ratio, one per CJK character or symbol, plus end token."""
    words = punctuation = 0
    for match in _WORD.finditer(text):
        piece = match.group(0)
        if piece[0].isalnum() and piece.isascii():
            words += 1
        else:
            punctuation += 1
    return int(math.ceil(words * budget.tokens_per_word)) + punctuation + 1


def budget_for(model: str) -> PromptBudget:
    """The budget of a model family ('wan', 'wan-vace', 'ltx', …) or a catalog model; unknown names get Wan's."""
    budgets = catalog.prompt_budgets()
    row = catalog.model_row(model)
    if row is not None:
        return budgets[row.family]
    key = model.lower().split(":")[0].split("-")[0]
    return budgets.get(model.lower(), budgets.get(key, WAN_PROMPT))


def fit_prompt(text: str, model: str | PromptBudget = "wan") -> str:
    """Shorten a prompt to a model's budget, keeping the first sentence and the camera move.

    Sentences are dropped from the end (the author's extra words, then the action); if the
    kept ones are still too long, the text is cut at a word boundary.
    """
    budget = model if isinstance(model, PromptBudget) else budget_for(model)
    if estimate_tokens(text, budget) <= budget.max_tokens:
        return text
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]
    keep = [i == 0 or bool(_CAMERA_SENTENCE.match(s)) for i, s in enumerate(sentences)]
    # Earlier sentences matter more (subject, action), so they are added back first.
    for index in range(len(sentences)):
        if keep[index]:
            continue
        keep[index] = True
        if estimate_tokens(" ".join(s for s, k in zip(sentences, keep) if k), budget) > budget.max_tokens:
            keep[index] = False
    kept = " ".join(s for s, k in zip(sentences, keep) if k)
    return _cut_words(kept, budget)


def _cut_words(text: str, budget: PromptBudget) -> str:
    """Cut text at a word boundary so its estimate fits the budget."""
    if estimate_tokens(text, budget) <= budget.max_tokens:
        return text
    words = text.split()
    low, high = 0, len(words)
    while low < high:  # binary search for the most words that fit
        mid = (low + high + 1) // 2
        if estimate_tokens(" ".join(words[:mid]), budget) <= budget.max_tokens:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low]).rstrip(",;:") + ("." if low else "")
