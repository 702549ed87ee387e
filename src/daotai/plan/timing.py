"""Timing and size arithmetic: seconds <-> frames, backend frame/size snapping.

Everything here is a small pure function. Snapping only *reports* what a backend
would need (``SnapResult.changed``); nothing in this module alters a request behind
the user's back — the caller decides whether to apply, warn or refuse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


def snap_frames(frames: int, step: int) -> int:
    """Smallest count of the form ``step*k + 1`` (k >= 1) that is >= ``frames``."""
    _require_int_at_least("frames", frames, 1)
    _require_int_at_least("step", step, 1)
    k = max(1, -(-(frames - 1) // step))  # ceil((frames - 1) / step), at least one step
    return step * k + 1


def is_snapped(frames: int, step: int) -> bool:
    """True when ``frames`` already has the form ``step*k + 1`` with k >= 1."""
    _require_int_at_least("step", step, 1)
    return frames >= step + 1 and (frames - 1) % step == 0


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
    snapped_f = frames if rule.frame_step is None else snap_frames(frames, rule.frame_step)
    changed = (snapped_w, snapped_h, snapped_f) != (width, height, frames)
    return SnapResult(rule.name, width, height, frames, snapped_w, snapped_h, snapped_f, changed)
