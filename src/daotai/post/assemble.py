"""Join shot clips into one sequence with cuts, crossfades and fades.

Frames stream through decode → blend → encode; at most one crossfade's worth of frames of
the previous clip is held in memory, never a whole clip.

Transition semantics (``ClipSpec.transition_in`` joins the previous clip to this one):

* ``cut``: plain concatenation.
* ``crossfade`` of d seconds: n = round(d·fps) frames; the last n frames of the previous
  clip and the first n frames of this one are shown blended, frame j of the overlap
  (0-based) weighting this clip by (j + 1) / (n + 1). The sequence is n frames shorter
  than the sum of the clips. On the first clip a crossfade has nothing to blend with and
  is ignored.
* ``fade`` of d seconds (dip to black): k = round(d·fps / 2); the previous clip fades to
  black over its last k frames (its last frame is black) and this clip fades in from black
  over its first k frames (its first frame is black). Nothing overlaps, so the total length
  is unchanged. On the first clip it is a fade-in from black.

Rounding is half up, computed exactly on the decimal duration and the rational rate.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from daotai.encode.video import EncodeSettings, VideoWriter, as_fps, decode_frames, probe
from daotai.errors import EncodeError

__all__ = [
    "KINDS",
    "AssemblyResult",
    "ClipSpec",
    "Transition",
    "assemble",
    "planned_frame_count",
    "transition_frames",
]

KINDS = ("cut", "crossfade", "fade")

ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class Transition:
    """How a clip is joined to the one before it: cut, crossfade or fade (dip to black)."""

    kind: str = "cut"
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise EncodeError(f"transition.kind: {self.kind!r} must be one of {', '.join(KINDS)}")
        d = self.duration_s
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d):
            raise EncodeError(f"transition.duration_s: {d!r} must be a finite number of seconds")
        if self.kind == "cut" and d != 0:
            raise EncodeError(f"transition.duration_s: {d!r} must be 0 for a cut")
        if self.kind != "cut" and d <= 0:
            raise EncodeError(f"transition.duration_s: {d!r} must be > 0 for a {self.kind}")


CUT = Transition()


@dataclass(frozen=True)
class ClipSpec:
    """One clip of the sequence and the transition that leads into it."""

    path: Path
    transition_in: Transition = field(default=CUT)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        if not isinstance(self.transition_in, Transition):
            raise EncodeError(
                f"clip {str(self.path)!r}: transition_in {self.transition_in!r} must be a "
                "Transition"
            )


@dataclass(frozen=True)
class AssemblyResult:
    """The written sequence and where each clip landed in it."""

    path: Path
    frames: int
    fps: Fraction
    duration_s: float
    width: int
    height: int
    clip_starts: tuple[int, ...]  # output frame index of each clip's first frame


@dataclass(frozen=True)
class _Join:
    """Frames a clip spends on transitions: crossfade overlap in, fade in and fade out."""

    overlap_in: int
    fade_in: int
    fade_out: int
    overlap_out: int


def _half_up(value: Fraction) -> int:
    """Round a non-negative rational half up."""
    return math.floor(value + Fraction(1, 2))


def transition_frames(transition: Transition, fps: int | float | str | Fraction) -> int:
    """Frames a transition uses: crossfade overlap n = round(d·fps), fade k = round(d·fps/2)."""
    rate = as_fps(fps)
    exact = Fraction(repr(float(transition.duration_s))) * rate  # the decimal the user wrote
    if transition.kind == "crossfade":
        return _half_up(exact)
    if transition.kind == "fade":
        return _half_up(exact / 2)
    return 0


def _joins(
    frame_counts: Sequence[int], transitions: Sequence[Transition], fps: Fraction
) -> list[_Join]:
    """Validate the clip list and work out every clip's transition frames."""
    if len(frame_counts) != len(transitions):
        raise EncodeError(
            f"transitions: {len(transitions)} given for {len(frame_counts)} clips; "
            "need one per clip"
        )
    if not frame_counts:
        raise EncodeError("clips: empty; need at least one clip")
    for i, count in enumerate(frame_counts):
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
            raise EncodeError(f"clips[{i}]: frame count {count!r} must be an integer >= 1")
    overlaps = [0] * len(frame_counts)  # overlaps[i]: crossfade frames between i-1 and i
    fades = [0] * len(frame_counts)  # fades[i]: fade-out of i-1 and fade-in of i, each
    for i, transition in enumerate(transitions):
        n = transition_frames(transition, fps)
        if transition.kind == "crossfade" and i > 0:
            for side, count in ((i - 1, frame_counts[i - 1]), (i, frame_counts[i])):
                if n > count:
                    raise EncodeError(
                        f"clips[{i}].transition_in: crossfade of {transition.duration_s} s "
                        f"({n} frames at {fps} fps) is longer than clip {side} "
                        f"({count} frames)"
                    )
            overlaps[i] = n
        elif transition.kind == "fade":
            fades[i] = n
            sides = ((i - 1, frame_counts[i - 1]),) if i > 0 else ()
            for side, count in (*sides, (i, frame_counts[i])):
                if n > count:
                    raise EncodeError(
                        f"clips[{i}].transition_in: fade of {transition.duration_s} s "
                        f"({n} frames at {fps} fps each side) is longer than clip {side} "
                        f"({count} frames)"
                    )
    joins = []
    last = len(frame_counts) - 1
    for i, count in enumerate(frame_counts):
        fade_out = fades[i + 1] if i < last else 0
        overlap_out = overlaps[i + 1] if i < last else 0
        used_in, used_out = overlaps[i] + fades[i], overlap_out + fade_out
        if used_in + used_out > count:
            raise EncodeError(
                f"clips[{i}]: its transitions in ({used_in} frames) and out ({used_out} "
                f"frames) overlap; the clip has only {count} frames"
            )
        joins.append(_Join(overlaps[i], fades[i], fade_out, overlap_out))
    return joins


def planned_frame_count(
    frame_counts: Sequence[int],
    transitions: Sequence[Transition],
    fps: int | float | str | Fraction,
) -> int:
    """Frames the assembled sequence will have: the sum of the clips minus crossfade overlaps.

    ``transitions[i]`` leads into clip i. Raises EncodeError for the same problems
    ``assemble`` rejects.
    """
    joins = _joins(frame_counts, transitions, as_fps(fps))
    return int(sum(frame_counts)) - sum(join.overlap_in for join in joins)


def _clip_starts(frame_counts: Sequence[int], joins: Sequence[_Join]) -> tuple[int, ...]:
    """Output frame index of each clip's first frame."""
    starts = [0]
    for i in range(1, len(frame_counts)):
        starts.append(starts[-1] + int(frame_counts[i - 1]) - joins[i].overlap_in)
    return tuple(starts)


def _gain(index: int, count: int, join: _Join) -> float:
    """Brightness of a clip's frame under its fade-in and fade-out (1 = untouched)."""
    gain = 1.0
    if index < join.fade_in:
        gain *= index / join.fade_in  # first frame black
    from_end = count - 1 - index
    if from_end < join.fade_out:
        gain *= from_end / join.fade_out  # last frame black
    return gain


def _scale(frame: np.ndarray, gain: float) -> np.ndarray:
    """Frame times gain in [0, 1], in 8.8 fixed point: (H, W, 3) uint8 in and out."""
    weight = round(gain * 256)
    out = frame.astype(np.uint16)  # 255 * 256 + 128 still fits in 16 bits
    out *= weight
    out += 128
    out >>= 8
    return out.astype(np.uint8)


def _mix(old: np.ndarray, new: np.ndarray, alpha: float) -> np.ndarray:
    """(1 − alpha)·old + alpha·new, rounded, for (H, W, 3) uint8 frames."""
    weight = round(alpha * 256)
    out = old.astype(np.uint16)
    out *= 256 - weight
    mixed = new.astype(np.uint16)
    mixed *= weight
    out += mixed
    out += 128
    out >>= 8
    return out.astype(np.uint8)


def _clip_frames(clip: ClipSpec, index: int, count: int) -> Iterator[np.ndarray]:
    """Decoded frames of one clip, checked against the count its probe promised."""
    seen = 0
    for frame in decode_frames(clip.path):
        if seen == count:
            raise EncodeError(
                f"clips[{index}]: {str(clip.path)!r} decoded more than the {count} frames "
                "its header reports"
            )
        seen += 1
        yield frame
    if seen != count:
        raise EncodeError(
            f"clips[{index}]: {str(clip.path)!r} decoded {seen} frames but its header "
            f"reports {count}"
        )


def _sequence(
    clips: Sequence[ClipSpec], counts: Sequence[int], joins: Sequence[_Join]
) -> Iterator[np.ndarray]:
    """The assembled frames in order, holding back only the frames of pending crossfades."""
    tail: list[np.ndarray] = []  # last overlap_out frames of the previous clip
    for i, clip in enumerate(clips):
        join, count = joins[i], counts[i]
        held: list[np.ndarray] = []
        for j, frame in enumerate(_clip_frames(clip, i, count)):
            gain = _gain(j, count, join)
            if gain < 1.0:
                frame = _scale(frame, gain)
            if j < join.overlap_in:
                frame = _mix(tail[j], frame, (j + 1) / (join.overlap_in + 1))
            if j >= count - join.overlap_out:
                held.append(frame)
            else:
                yield frame
        tail = held


def assemble(
    clips: Sequence[ClipSpec],
    out_path: str | os.PathLike[str],
    fps: int | float | str | Fraction,
    settings: EncodeSettings | None = None,
    on_progress: ProgressCallback | None = None,
) -> AssemblyResult:
    """Write the clips as one video at out_path, joined by their transitions (see module doc).

    All clips must have the same size and frame rate ``fps``. ``on_progress(done, total)``
    is called after every written frame; raising from it (e.g. Cancelled) stops the work
    and leaves nothing at out_path.
    """
    rate = as_fps(fps)
    if not clips:
        raise EncodeError("clips: empty; need at least one clip")
    infos = []
    for i, clip in enumerate(clips):
        if not isinstance(clip, ClipSpec):
            raise EncodeError(f"clips[{i}]: {clip!r} must be a ClipSpec")
        info = probe(clip.path)
        if info.fps != rate:
            raise EncodeError(
                f"clips[{i}]: {str(clip.path)!r} runs at {info.fps} fps; the sequence is "
                f"{rate} fps and clips are not resampled"
            )
        first = infos[0] if infos else info
        if (info.width, info.height) != (first.width, first.height):
            raise EncodeError(
                f"clips[{i}]: {str(clip.path)!r} is {info.width}x{info.height}; every clip "
                f"must match clip 0 ({first.width}x{first.height})"
            )
        infos.append(info)
    counts = [info.frames for info in infos]
    joins = _joins(counts, [clip.transition_in for clip in clips], rate)
    total = int(sum(counts)) - sum(join.overlap_in for join in joins)
    width, height = infos[0].width, infos[0].height
    with VideoWriter(out_path, width, height, rate, settings) as writer:
        for frame in _sequence(clips, counts, joins):
            writer.write(frame)
            if on_progress is not None:
                on_progress(writer.frames_written, total)
        if writer.frames_written != total:  # guards the bookkeeping above
            raise EncodeError(
                f"{str(out_path)!r}: wrote {writer.frames_written} frames, planned {total}"
            )
    return AssemblyResult(
        path=Path(out_path),
        frames=total,
        fps=rate,
        duration_s=float(total / rate),
        width=width,
        height=height,
        clip_starts=_clip_starts(counts, joins),
    )
