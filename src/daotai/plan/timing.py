"""Timing and size arithmetic: seconds <-> frames, backend frame/size snapping.

Everything here is a small pure function. Snapping only *reports* what a backend
would need (``SnapResult.changed``); nothing in this module alters a request behind
the user's back — the caller decides whether to apply, warn or refuse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from daotai.catalog import SnapRule
from daotai.errors import PlanError

# Products within this distance of a half are treated as exactly a half, so that
# e.g. 0.1 s at 25 fps (2.5000000000000004 in binary floating point) and an exact
# 2.5 both round up to 3.
_HALF_TOLERANCE = 1e-9


def _require_positive(name: str, value: float) -> None:
    """Raise PlanError unless ``value`` is a finite number > 0."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise PlanError(f"{name}: {value!r} must be a finite number > 0")


def _require_int_at_least(name: str, value: int, low: int) -> None:
    """Raise PlanError unless ``value`` is an int >= ``low`` (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PlanError(f"{name}: {value!r} must be an integer >= {low}")


def frames_for(duration_s: float, fps: float) -> int:
    """Frame count of a shot: ``duration_s * fps`` rounded half up, at least 1."""
    _require_positive("duration_s", duration_s)
    _require_positive("fps", fps)
    exact = duration_s * fps
    nearest_half = math.floor(exact * 2.0 + 0.5) / 2.0
    if abs(exact - nearest_half) <= _HALF_TOLERANCE * max(1.0, exact):
        exact = nearest_half
    return max(1, math.floor(exact + 0.5))


def seconds_for(frames: int, fps: float) -> float:
    """Duration in seconds of ``frames`` frames at ``fps``."""
    _require_int_at_least("frames", frames, 0)
    _require_positive("fps", fps)
    return frames / fps


def _exact(value: int | float | Fraction, name: str) -> Fraction:
    """``value`` as an exact Fraction: a float is read as the decimal it prints as (0.1, not 0.1000…0555)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise PlanError(f"{name}: {value!r} must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise PlanError(f"{name}: {value!r} must be a finite number")
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def transition_length(seconds: float, fps: int | float | Fraction, overlaps: bool) -> int:
    """Frames a transition of ``seconds`` takes: an overlap (crossfade, wipe, the closing fade) runs
    d·fps frames, a dip to black (fade) d·fps/2 frames on each side; at least one, 0 for 0 s.

    The one rounding rule of every transition length (the planner's and the assembly's): half up,
    computed exactly on the decimal seconds and the rational rate. Half up rather than half to
    even because shot lengths already round half up (:func:`frames_for`) and a user who writes a
    0.5 s crossfade at 25 fps reads 12.5 frames as 13; the banker's rule only pays off when many
    rounded values are summed, and a transition is rounded once.
    """
    exact = _exact(seconds, "seconds")
    rate = _exact(fps, "fps")
    if exact < 0 or rate <= 0:
        raise PlanError(f"transition: {seconds!r} s at {fps!r} fps must be >= 0 s at > 0 fps")
    if exact == 0:
        return 0
    span = exact * rate if overlaps else exact * rate / 2
    return max(1, math.floor(span + Fraction(1, 2)))


def transition_seconds(frames: int, fps: int | float | Fraction, overlaps: bool) -> float:
    """The inverse of :func:`transition_length`: the seconds a planned transition of ``frames`` spans
    (a fade's frames are per side, so it spans twice as many)."""
    _require_int_at_least("frames", frames, 0)
    return (frames if overlaps else 2 * frames) / float(_exact(fps, "fps"))


def snap_frames(frames: int, step: int, offset: int = 1) -> int:
    """Smallest count of the form ``step*k + offset`` (k >= 1) that is >= ``frames``."""
    _require_int_at_least("frames", frames, 1)
    _require_int_at_least("step", step, 1)
    _require_int_at_least("offset", offset, 0)
    k = max(1, -(-(frames - offset) // step))  # ceil((frames - offset) / step), at least one step
    return step * k + offset


def is_snapped(frames: int, step: int, offset: int = 1) -> bool:
    """True when ``frames`` already has the form ``step*k + offset`` with k >= 1."""
    _require_int_at_least("step", step, 1)
    return frames >= step + offset and (frames - offset) % step == 0


def round_to_multiple(value: int, multiple: int) -> int:
    """Nearest multiple of ``multiple`` to ``value`` (half up), never below one multiple."""
    _require_int_at_least("size", value, 1)
    _require_int_at_least("multiple", multiple, 1)
    # floor(value / multiple + 1/2) in integer arithmetic, so no float rounding creeps in.
    return max(1, (2 * value + multiple) // (2 * multiple)) * multiple


def round_size(width: int, height: int, multiple: int) -> tuple[int, int]:
    """Nearest multiples of ``multiple`` to (width, height); e.g. 1920x1080 @16 -> 1920x1088."""
    return round_to_multiple(width, multiple), round_to_multiple(height, multiple)


def is_even_size(width: int, height: int) -> bool:
    """True when both sides are even (H.264 yuv420p needs it)."""
    return width % 2 == 0 and height % 2 == 0


@dataclass(frozen=True)
class SnapResult:
    """A request next to what a backend rule would turn it into."""

    rule: str
    requested_width: int
    requested_height: int
    requested_frames: int
    width: int
    height: int
    frames: int
    changed: bool

    def describe(self) -> str:
        """One line naming each value the rule would change, or that none changes."""
        parts = []
        if (self.width, self.height) != (self.requested_width, self.requested_height):
            parts.append(
                f"size {self.requested_width}x{self.requested_height} -> {self.width}x{self.height}"
            )
        if self.frames != self.requested_frames:
            parts.append(f"frames {self.requested_frames} -> {self.frames}")
        if not parts:
            return f"{self.rule}: request fits as is"
        return f"{self.rule}: " + ", ".join(parts)


def snap_for(rule: SnapRule, width: int, height: int, frames: int) -> SnapResult:
    """What ``rule`` would need for a (width, height, frames) request; the request is untouched."""
    snapped_w, snapped_h = round_size(width, height, rule.size_multiple)
    _require_int_at_least("frames", frames, 1)
    snapped_f = frames if rule.frame_step is None else snap_frames(frames, rule.frame_step, rule.frame_offset)
    changed = (snapped_w, snapped_h, snapped_f) != (width, height, frames)
    return SnapResult(rule.name, width, height, frames, snapped_w, snapped_h, snapped_f, changed)


@dataclass(frozen=True)
class Segment:
    """One generation of a shot made in pieces: which output frames it covers and how many it makes."""

    index: int
    start: int  # first output frame (native rate) this segment supplies
    keep: int  # output frames it supplies (its first frame repeats the previous segment's last one when index > 0)
    frames: int  # frames generated (snapped; >= keep, plus one for the shared frame after the first segment)


def plan_segments(duration_s: float, fps: float, step: int, offset: int, min_s: float, max_s: float) -> list[Segment]:
    """Generations that make a shot of ``duration_s`` at ``fps`` under a model's frame and duration rules.

    A shot shorter than ``min_s`` is one generation of the shortest snapped length (then trimmed);
    a longer one than a generation can make is split into the fewest segments of one equal length
    (the shortest that covers the shot), each starting on the previous segment's last frame (so one
    frame of each join is shared, not shown twice), with the shot's frames spread evenly over them.
    """
    _require_positive("duration_s", duration_s)
    _require_positive("fps", fps)
    if not 0 < min_s <= max_s:
        raise PlanError(f"segments: minimum {min_s!r} s and maximum {max_s!r} s must satisfy 0 < min <= max")
    wanted = frames_for(duration_s, fps)
    lowest = snap_frames(max(1, math.ceil(min_s * fps - 1e-9)), step, offset)
    longest = snap_frames(1, step, offset)
    while snap_frames(longest + 1, step, offset) <= max_s * fps + 1e-9:
        longest = snap_frames(longest + 1, step, offset)
    if lowest > max_s * fps + 1e-9:
        raise PlanError(f"segments: no frame count of the form {step}k+{offset} lies within {min_s:g}-{max_s:g} s at {fps:g} fps")
    if wanted <= longest:
        return [Segment(0, 0, wanted, max(lowest, snap_frames(wanted, step, offset)))]
    # n segments of F frames supply F + (n - 1) * (F - 1) frames: the joins share one frame each.
    count = 2
    while longest + (count - 1) * (longest - 1) < wanted:
        count += 1
    frames = lowest
    while frames + (count - 1) * (frames - 1) < wanted:
        frames = snap_frames(frames + 1, step, offset)
    segments, start = [], 0
    for index in range(count):
        capacity = frames if index == 0 else frames - 1  # later segments regenerate the shared frame
        share = min(capacity, -(-(wanted - start) // (count - index)))  # ceil: spread evenly over what is left
        segments.append(Segment(index, start, share, frames))
        start += share
    return segments


def fps_fraction(fps: float) -> tuple[int, int]:
    """Exact frame rate as a fraction; 23.976 / 29.97 / 59.94 mean the NTSC x/1.001 rates."""
    for nominal in (24, 30, 48, 60, 120):
        ntsc = nominal * 1000 / 1001
        if abs(fps - ntsc) < 0.005 and abs(fps - nominal) > 0.005:
            return nominal * 1000, 1001
    frac = Fraction(fps).limit_denominator(1001)
    return frac.numerator, frac.denominator

