"""Subtitles of the script's dialogue: SubRip (.srt) and WebVTT (.vtt), for the sequence and each shot.

Timing comes from the plan in frames, the arithmetic assembly uses (daotai.post.assemble): shot i
starts at ``start_frame`` on the sequence; a crossfade of k frames into it overlaps the last k
frames of the shot before. Each shot owns the stretch of the sequence from the middle of the
crossfade into it (k // 2 frames in) to the middle of the crossfade out of it: the cut point of
the .otio timeline, so cues, markers and clips agree, and no two cues overlap. A fade to black
overlaps nothing. In a shot's own file the shot owns all its frames.

A shot's lines share its stretch in order, each getting frames in proportion to the time it needs
at the reading rate (daotai.plan.reading: for lines in one language, in proportion to their length),
cut on whole frames so each cue ends where the next starts. A stretch with fewer frames than lines
shows the lines together as one cue. Times are frame starts rounded to the millisecond.

Each cue reads ``MIA: Where were you?``: the speaker's name in capitals and a colon, the way
subtitles for the deaf and hard of hearing name a speaker, so a listener knows who talks in a
shot of two. Long lines are wrapped (SUBTITLE_LINE_CHARS, or SUBTITLE_LINE_CJK for Chinese,
Japanese and Korean text).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

from daotai.files import atomic_write_text
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.reading import cjk_characters, needed_seconds
from daotai.script.vocab import OVERLAPPING_TRANSITIONS

SUBTITLE_LINE_CHARS = 42  # characters a subtitle line holds in Latin scripts (the common broadcast limit)
SUBTITLE_LINE_CJK = 16  # characters a line holds in Chinese, Japanese and Korean


@dataclass(frozen=True)
class Cue:
    """One line of dialogue on a timeline: frames [start, end) at the plan's rate."""

    shot_id: str
    line_index: int  # its place among the shot's lines (0-based)
    character: str  # character id
    speaker: str  # the character's name as the script gives it
    line: str
    language: str | None
    start: int
    end: int

    @property
    def label(self) -> str:
        """The cue's text on one line: ``MIA: Where were you?``."""
        return f"{self.speaker.upper()}: {' '.join(self.line.split())}"


def shot_windows(plan: Plan) -> list[tuple[int, int]]:
    """Sequence frames [first, end) each shot's dialogue is shown over (module doc)."""
    shots = list(plan.shots)
    windows = []
    for i, shot in enumerate(shots):
        first = shot.start_frame + (_overlap(shot) // 2 if i > 0 else 0)
        end = shot.start_frame + shot.frames
        if i + 1 < len(shots):
            after = shots[i + 1]
            end = after.start_frame + _overlap(after) // 2
        windows.append((first, end))
    return windows


def _overlap(shot: ShotPlan) -> int:
    """Frames the crossfade or wipe into ``shot`` overlaps the shot before (0 for cuts and fades)."""
    return shot.transition.frames if shot.transition.type in OVERLAPPING_TRANSITIONS else 0


def split_frames(first: int, end: int, weights: Sequence[float]) -> list[tuple[int, int]]:
    """[first, end) cut into len(weights) abutting pieces in proportion to the weights, on whole frames.

    Each piece gets at least one frame (the caller joins the lines when there are fewer frames than pieces)."""
    count, span = len(weights), end - first
    if count == 0:
        return []
    if span < count:
        raise ValueError(f"{span} frames cannot hold {count} cues")
    total = sum(weights)
    bounds, running = [first], 0.0
    for k, weight in enumerate(weights[:-1]):
        running += weight
        share = running / total if total > 0 else (k + 1) / count
        at = first + math.floor(span * share + 0.5)  # half up, as frame counts are rounded everywhere
        at = max(bounds[-1] + 1, min(at, end - (count - k - 1)))  # each piece keeps a frame, and so do those after
        bounds.append(at)
    bounds.append(end)
    return list(pairwise(bounds))


def _cues(plan: Plan, shot: ShotPlan, first: int, end: int) -> list[Cue]:
    lines = shot.sound.dialogue if shot.sound is not None else ()
    if not lines or end <= first:
        return []
    names = {c.id: c.name or c.id for c in plan.characters}
    if end - first < len(lines):  # too short to show them in turn: all at once
        joined = " / ".join(f"{names.get(d.character, d.character).upper()}: {' '.join(d.line.split())}" for d in lines)
        return [_JoinedCue(shot.shot_id, 0, lines[0].character, "", joined, lines[0].language, first, end)]
    pieces = split_frames(first, end, [max(needed_seconds(d.line), 1e-3) for d in lines])
    return [Cue(shot.shot_id, k, d.character, names.get(d.character, d.character), d.line, d.language, a, b)
            for k, (d, (a, b)) in enumerate(zip(lines, pieces, strict=True))]


@dataclass(frozen=True)
class _JoinedCue(Cue):
    """Several lines shown as one cue (its ``line`` already names each speaker)."""

    @property
    def label(self) -> str:
        return " ".join(self.line.split())


def sequence_cues(plan: Plan) -> list[Cue]:
    """Every line of dialogue on the assembled sequence's timeline, in order."""
    return [cue for shot, (first, end) in zip(plan.shots, shot_windows(plan), strict=True)
            for cue in _cues(plan, shot, first, end)]


def shot_cues(plan: Plan, shot: ShotPlan) -> list[Cue]:
    """A shot's lines on its own file's timeline (frame 0 = the shot's first frame)."""
    return _cues(plan, shot, 0, shot.frames)


def frame_ms(frame: int, fps: Fraction) -> int:
    """Milliseconds from the start to ``frame`` at ``fps``, rounded half up (exact rational arithmetic)."""
    exact = Fraction(frame) * 1000 / fps
    return int(exact + Fraction(1, 2)) if exact >= 0 else -int(-exact + Fraction(1, 2))


def _clock(ms: int, separator: str) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{separator}{millis:03d}"


def wrapped(text: str) -> list[str]:
    """A cue's text in subtitle lines (SUBTITLE_LINE_CHARS, or SUBTITLE_LINE_CJK for mostly CJK text)."""
    flat = " ".join(text.split())
    if cjk_characters(flat) * 2 > len(flat.replace(" ", "")):
        return [flat[i:i + SUBTITLE_LINE_CJK] for i in range(0, len(flat), SUBTITLE_LINE_CJK)]
    return textwrap.wrap(flat, SUBTITLE_LINE_CHARS, break_long_words=True) or [flat]


def to_srt(cues: Sequence[Cue], fps: Fraction) -> str:
    """SubRip text: numbered cues, ``HH:MM:SS,mmm --> HH:MM:SS,mmm``, a blank line after each."""
    blocks = []
    for number, cue in enumerate(cues, start=1):
        # "-->" inside the text would read as a timing line
        text = "\n".join(line.replace("-->", "->") for line in wrapped(cue.label))
        blocks.append(f"{number}\n{_clock(frame_ms(cue.start, fps), ',')} --> {_clock(frame_ms(cue.end, fps), ',')}\n"
                      f"{text}\n")
    return "\n".join(blocks)


def to_vtt(cues: Sequence[Cue], fps: Fraction) -> str:
    """WebVTT text: the ``WEBVTT`` header, then cues with ``HH:MM:SS.mmm`` times (``&``, ``<``, ``>`` escaped)."""
    blocks = ["WEBVTT\n"]
    for number, cue in enumerate(cues, start=1):
        lines = [line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for line in wrapped(cue.label)]
        blocks.append(f"{cue.shot_id}-{number}\n{_clock(frame_ms(cue.start, fps), '.')} --> "
                      f"{_clock(frame_ms(cue.end, fps), '.')}\n" + "\n".join(lines) + "\n")
    return "\n".join(blocks)


def has_dialogue(plan: Plan) -> bool:
    """Whether any shot of the plan has lines (only then are subtitles written)."""
    return any(shot.sound is not None and shot.sound.dialogue for shot in plan.shots)


def write_subtitles(plan: Plan, layout: RenderLayout) -> list[Path]:
    """sequence.srt / .vtt and shots/<id>.srt / .vtt of the shots with lines; nothing without dialogue."""
    if not has_dialogue(plan):
        return []
    fps = Fraction(*plan.fps_fraction)
    cues = sequence_cues(plan)
    written = [layout.path("srt"), layout.path("vtt")]
    atomic_write_text(written[0], to_srt(cues, fps))
    atomic_write_text(written[1], to_vtt(cues, fps))
    for shot in plan.shots:
        own = shot_cues(plan, shot)
        if own:
            srt, vtt = layout.path("shot_srt", shot.shot_id), layout.path("shot_vtt", shot.shot_id)
            atomic_write_text(srt, to_srt(own, fps))
            atomic_write_text(vtt, to_vtt(own, fps))
            written += [srt, vtt]
    return written


__all__ = ["Cue", "frame_ms", "has_dialogue", "sequence_cues", "shot_cues", "shot_windows", "split_frames",
           "to_srt", "to_vtt", "write_subtitles"]
