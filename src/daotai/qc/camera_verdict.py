"""The camera check's verdict in words: per-component checks, what drives each move, the summary.

A shot's planned and measured totals per component (daotai.qc.camera_similarity.COMPONENTS)
become ``ComponentCheck``s: significant or not, direction right or wrong, unplanned motion; the
planned move is named after what drives it (a pan or a truck, a tilt or a pedestal, a zoom or a
dolly), and the shot's outcome becomes one line in camera language. The measuring is in
daotai.qc.camera_adherence; this is the reading of its numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from daotai.qc.camera_similarity import COMPONENTS

__all__ = ["ComponentCheck", "component_checks", "component_px", "small_move_text", "summary_text"]


_UNITS = {"horizontal": "px", "vertical": "px", "roll": "deg", "scale": "log"}


@dataclass(frozen=True)
class ComponentCheck:
    """Planned versus measured total of one motion component over the shot."""

    name: str  # one of COMPONENTS
    unit: str  # "px", "deg" or "log"
    expected_total: float
    measured_total: float
    expected_px: float  # |expected| as pixels moved (at the image corner for roll and scale)
    measured_px: float
    significant: bool  # the plan moves this component by more than the significance threshold
    direction_ok: bool | None  # sign agreement; None = not applicable (plan keeps it still)
    unplanned: bool  # plan keeps it still but the video moves it clearly
    ratio: float | None  # measured / expected when significant
    words: str  # the planned move in camera language, e.g. "pan right"; "hold still"
    cause: str  # what drives the planned move: "rotation" (pan/tilt/roll/zoom), "translation"
    #             (truck/pedestal/dolly), "other" (a side effect of another move: the picture
    #             of a down-tilted camera turns as it pans, the picture of a low-angle push-in
    #             slides down) or "none" when the plan keeps it still; see _cause


_WORDS = {
    # component: (cause rotation/zoom, cause translation, cause unknown), each (+ verb, - verb)
    "horizontal": (("pan right", "pan left"), ("truck right", "truck left"),
                   ("move right", "move left")),
    "vertical": (("tilt up", "tilt down"), ("pedestal up", "pedestal down"),
                 ("move up", "move down")),
    "roll": (("roll clockwise", "roll counter-clockwise"),)
    + (("turn the picture counter-clockwise", "turn the picture clockwise"),) * 2,
    "scale": (("zoom in", "zoom out"), ("dolly in", "dolly out"), ("grow", "shrink")),
}


def _words(name: str, value: float, cause: str) -> str:
    """Camera-language verb (base form) for a component total given what drives it."""
    kind = {"rotation": 0, "translation": 1}.get(cause, 2)
    return _WORDS[name][kind][0 if value >= 0 else 1]


def _third_person(phrase: str) -> str:
    """'dolly in' -> 'dollies in', 'pan right' -> 'pans right'."""
    verb, _, rest = phrase.partition(" ")
    if verb.endswith("y"):
        verb = verb[:-1] + "ies"
    elif verb.endswith("sh"):
        verb += "es"
    else:
        verb += "s"
    return f"{verb} {rest}".strip()


def _amount(name: str, value: float) -> str:
    """Human-readable magnitude of a component total."""
    if name == "roll":
        return f"{abs(value):.1f}°"
    if name == "scale":
        return f"{abs(math.expm1(value)) * 100:.0f}%"
    return f"{abs(value):.0f} px"


def component_px(name: str, value: float, half_diag: float) -> float:
    """Pixels moved by a component total (image corner for roll and scale)."""
    if name == "roll":
        return abs(math.radians(value)) * half_diag
    if name == "scale":
        return abs(value) * half_diag
    return abs(value)


# The camera-local translation axis whose move is named after each component (truck along x,
# pedestal along y, dolly along z); see _cause.
_OWN_AXIS = {"horizontal": "x", "vertical": "y", "scale": "z"}


def _cause(name: str, expected: float, causes: dict[str, dict[str, float]]) -> str:
    """What drives a component's planned total: "rotation", "translation" or "other".

    ``causes`` holds, per driver, the part of the planned total it explains: "turn" (the
    camera's rotation: pixels at infinity move by it too), "zoom" (its change of field of
    view), "x", "y", "z" (its travel along its own axes). The driver explaining most of the
    planned direction names it: a pan or a truck, a tilt or a pedestal, a zoom or a dolly; any
    other driver is "other" (the picture of a low-angle push-in also slides down: parallax of
    the dolly, no pedestal; the picture of a pan grows on one side: perspective, no zoom).
    For roll the "turn" part is the camera's own roll against the horizon: the picture of a
    down-tilted camera also turns when it pans or orbits, which is no roll.
    """
    if name == "roll":
        share = causes["turn"][name] / expected if expected != 0 else 0.0
        return "rotation" if share >= 0.5 else "other"
    sign = 1.0 if expected >= 0 else -1.0
    parts = {driver: sign * part[name] for driver, part in causes.items()}
    driver = max(parts, key=parts.__getitem__)
    if driver == ("zoom" if name == "scale" else "turn"):
        return "rotation"
    return "translation" if driver == _OWN_AXIS[name] else "other"


def component_checks(expected: dict[str, float], measured: dict[str, float],
                      causes: dict[str, dict[str, float]], half_diag: float,
                      significant_px: float, unplanned_factor: float) -> tuple[ComponentCheck, ...]:
    """Compare shot totals per component."""
    checks = []
    for name in COMPONENTS:
        exp_v, meas_v = expected[name], measured[name]
        exp_px, meas_px = component_px(name, exp_v, half_diag), component_px(name, meas_v, half_diag)
        significant = exp_px > significant_px
        cause = _cause(name, exp_v, causes) if significant else "none"
        checks.append(ComponentCheck(
            name=name,
            unit=_UNITS[name],
            expected_total=exp_v,
            measured_total=meas_v,
            expected_px=exp_px,
            measured_px=meas_px,
            significant=significant,
            direction_ok=(exp_v * meas_v > 0) if significant else None,
            unplanned=(not significant) and meas_px > unplanned_factor * significant_px,
            ratio=(meas_v / exp_v) if significant else None,
            words=_words(name, exp_v, cause) if significant else "hold still",
            cause=cause,
        ))
    return tuple(checks)


def _describe(c: ComponentCheck, flat: bool = False) -> str:
    """One component's outcome in words. ``flat``: the picture lacks the plan's parallax, so a
    component the camera's travel drives is told as what the picture did, not as that travel."""
    if c.significant and c.direction_ok and flat and c.cause == "translation":
        picture = _third_person(_words(c.name, c.measured_total, "other"))
        return f"the picture {picture} {_amount(c.name, c.measured_total)} as planned"
    if c.significant and c.direction_ok:
        return f"{_third_person(c.words)} {_amount(c.name, c.measured_total)} as planned"
    if c.significant:
        moved = _third_person(_words(c.name, c.measured_total, c.cause))
        return (f"planned to {c.words} {_amount(c.name, c.expected_total)} but {moved} "
                f"{_amount(c.name, c.measured_total)}")
    moved = _third_person(_words(c.name, c.measured_total, "unknown"))
    return f"unplanned: {moved} {_amount(c.name, c.measured_total)}"


def summary_text(checks: tuple[ComponentCheck, ...], error: float, limit: float, stride: int,
             evaluated: int, skipped: int, small_move: str | None = None,
             flat: str | None = None) -> str:
    """One line in plain words for the report: what is wrong first, then what went as planned.

    ``small_move``: the plan's largest motion in words when the plan moves the camera but no
    component reaches the significance threshold (never "holds still" for a planned move).
    ``flat``: why the picture lacks the plan's parallax, when it does.
    """
    if evaluated + skipped == 0:
        return "camera not checked: the video has fewer than two frames to compare"
    if evaluated == 0:
        return f"camera not checked: none of {skipped} frame pairs had enough texture to track"
    per = "px/frame" if stride == 1 else f"px/frame (checked every {stride} frames)"
    failed = [c for c in checks if c.direction_ok is False or c.unplanned]
    parts = [_describe(c) for c in failed] + ([flat] if flat else [])
    if error > limit:
        parts.append(f"error {error:.2f} {per}, over the {limit:.2f} limit")
    # Side effects of the main move (the picture of a down-tilted camera turns as it pans, the
    # picture of a low-angle push-in slides down) are checked like any component, but named
    # only when they are the main effect (an orbit around a point on the ground).
    planned = [c for c in checks if c.significant and c not in failed]
    main_px = max((c.expected_px for c in checks if c.significant), default=0.0)
    shown = [c for c in planned if c.expected_px >= (main_px if c.cause == "other" else 0.5 * main_px)]
    parts += [_describe(c, flat is not None) for c in shown]
    if not failed and not shown:
        parts.append(small_move or "holds still as planned")
    if error <= limit:
        parts.append(f"error {error:.2f} {per}")
    text = "; ".join(parts)
    if skipped:
        text += f"; {skipped} of {evaluated + skipped} frame pairs skipped (too little texture)"
    return text


def small_move_text(checks: tuple[ComponentCheck, ...], causes: dict[str, dict[str, float]],
                significant_px: float, partial: bool) -> str | None:
    """The largest planned component in words when the plan moves but none is significant.

    ``partial``: some frame pairs were skipped, so the totals cover only the pairs checked.
    """
    largest = max(checks, key=lambda c: c.expected_px)
    if largest.significant or largest.expected_px <= 0.0:
        return None
    words = _words(largest.name, largest.expected_total,
                   _cause(largest.name, largest.expected_total, causes))
    where = " over the frame pairs checked" if partial else ""
    return (f"planned to {words} {_amount(largest.name, largest.expected_total)}{where}, too "
            f"small a move to check its direction (under {significant_px:.0f} px)")
