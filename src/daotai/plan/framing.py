"""Shot sizes and angles as numbers: how much of a subject each framing shows, where the lens aims,
how far back that puts the camera, and how high each angle lifts it.

Tables and pure functions, kept apart from the staging (``daotai.plan.staging``, which places the
camera among the people) because more than the staging reads them: the headroom and viewpoint rules,
the shot's camera, and the framing check (``daotai.qc.framing``), which measures a render against
these same rules. Distances in metres, angles in degrees (docs/conventions.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class FramingRule:
    """How much of a standing subject fills the frame height, and where the camera aims."""

    visible_m: float  # subject height that fills the frame vertically, for a 1.75 m person
    aim_fraction: float  # aim point height as a fraction of the subject's height
    scale_with_height: bool = True  # tight shots scale with the person; wide shots with the set


FRAMING_RULES = MappingProxyType(
    {
        # close sizes aim so the eyes sit about the upper third (daotai.plan.headroom.HEADROOM): there
        # aim_fraction = 0.934 - visible_m / 1.75 / 6; a close-up aims a little higher, for its headroom
        "extreme_close_up": FramingRule(0.22, 0.913),
        "close_up": FramingRule(0.45, 0.90),
        "medium_close_up": FramingRule(0.75, 0.86),
        "medium": FramingRule(1.10, 0.83),
        "medium_full": FramingRule(1.50, 0.68),  # the knees at the bottom edge, headroom seen from above too
        "full": FramingRule(2.20, 0.52),
        "wide": FramingRule(5.50, 0.50, scale_with_height=False),
        "extreme_wide": FramingRule(16.0, 0.45, scale_with_height=False),
        # two-person shot types: the subject's size in them (the other person is staged too)
        "over_the_shoulder": FramingRule(0.95, 0.86),
        "two_shot": FramingRule(1.60, 0.62),
    }
)
# The shot size a two-person shot type is closest to (prompts name sizes).
FRAMING_SIZE = MappingProxyType({"over_the_shoulder": "medium_close_up", "two_shot": "medium_full"})
GROUP_FRAMINGS = ("wide", "extreme_wide")  # with several characters present these frame them all

# Elevation of the camera above the aim point (positive = camera looks down), and roll.
ANGLE_ELEVATION = MappingProxyType(
    {"eye_level": 0.0, "high": 25.0, "low": -20.0, "birds_eye": 80.0, "worms_eye": -45.0, "dutch": 0.0}
)
DUTCH_ROLL_DEG = 15.0
MIN_CAMERA_HEIGHT_M = 0.12  # a worm's-eye camera sits on the floor, not under it
REFERENCE_HEIGHT_M = 1.75
ANIMAL_FRAMING_SCALE = 2.5  # a close size of an animal shows this many times what it shows of a person's height


def framing_distance(framing: str, fov_deg: float, subject_height: float) -> float:
    """Camera-to-aim distance (m) at which the framing's visible height fills the vertical fov."""
    rule = FRAMING_RULES[framing]
    visible = rule.visible_m * (subject_height / REFERENCE_HEIGHT_M if rule.scale_with_height else 1.0)
    return visible / (2.0 * math.tan(math.radians(fov_deg) / 2.0))


SIZES = ("extreme_close_up", "close_up", "medium_close_up", "medium", "medium_full", "full", "wide", "extreme_wide")


def size_at(distance: float, fov_deg: float, subject_height: float, close_scale: float = 1.0) -> str:
    """The shot size a camera ``distance`` m from the aim with a vertical ``fov_deg`` makes of a subject:
    the one whose visible height is nearest (by ratio) to what the frame shows there. ``close_scale``:
    how many times a person's share a close size shows of this subject (an animal's)."""
    shows = 2.0 * distance * math.tan(math.radians(fov_deg) / 2.0)  # metres of frame height at the aim

    def visible(size: str) -> float:
        rule = FRAMING_RULES[size]
        if not rule.scale_with_height:
            return rule.visible_m
        return rule.visible_m * subject_height / REFERENCE_HEIGHT_M * close_scale

    return min(SIZES, key=lambda size: abs(math.log(shows / visible(size))))
