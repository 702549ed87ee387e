"""How long a line of dialogue takes to say and to read: the rule behind subtitle timing and the
planner's warning that a shot is too short for its lines.

The rule (the usual figures of subtitling and speech, not measured here):

* Chinese, Japanese and Korean characters count one syllable each and go at CJK_CHARS_PER_S
  (4.5: the middle of the 4-5 syllables a second of ordinary Mandarin speech).
* Everything else takes the longer of speaking it at WORDS_PER_S (3 words a second: 180 a
  minute, brisk film dialogue) and reading it at CHARS_PER_S (17 characters a second, spaces
  left out: the adult reading speed broadcast and streaming subtitle guides ask for).
* A line mixing both adds the two parts.

Pure functions of the text; no language tag is needed (the characters say which rule applies).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

CJK_CHARS_PER_S = 4.5
WORDS_PER_S = 3.0
CHARS_PER_S = 17.0
# Han ideographs (with extension A and compatibility forms), kana and hangul: a syllable each.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# Marks that are not read: CJK punctuation and full-width forms, ASCII punctuation.
_SILENT = re.compile(r"[\s\u3000-\u303f\uff00-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65!-/:-@\[-`{-~，。！？、…“”‘’—]")

RULE = (f"{WORDS_PER_S:g} words/s or {CHARS_PER_S:g} characters/s, whichever is slower; "
        f"Chinese, Japanese, Korean {CJK_CHARS_PER_S:g} characters/s")


def cjk_characters(text: str) -> int:
    """Chinese, Japanese and Korean characters in ``text`` (each a syllable)."""
    return len(_CJK.findall(text))


def needed_seconds(text: str) -> float:
    """Seconds a line needs at the reading rate (module doc): CJK part plus the rest."""
    cjk = cjk_characters(text)
    rest = _CJK.sub(" ", text)
    words = len([w for w in _SILENT.split(rest) if w])
    letters = len(_SILENT.sub("", rest))
    return cjk / CJK_CHARS_PER_S + max(words / WORDS_PER_S, letters / CHARS_PER_S)


def dialogue_warning(lines: Sequence[tuple[str, str]], duration_s: float) -> str | None:
    """The planner's warning when a shot's lines (speaker, text) need more than its ``duration_s``, else None.

    Names each line's needed seconds and the shot's, and says what would fix it."""
    needs = [needed_seconds(text) for _, text in lines]
    total = sum(needs)
    if total <= duration_s + 1e-9:
        return None
    each = "; ".join(f"line {i + 1} ({speaker}) needs {need:.1f} s"
                     for i, ((speaker, _), need) in enumerate(zip(lines, needs, strict=True)))
    return (f"dialogue needs {total:.1f} s but the shot lasts {duration_s:g} s ({each}; reading rate: {RULE}): "
            "lengthen the shot, shorten the lines or spread them over more shots")


__all__ = ["CHARS_PER_S", "CJK_CHARS_PER_S", "RULE", "WORDS_PER_S", "cjk_characters", "dialogue_warning",
           "needed_seconds"]
