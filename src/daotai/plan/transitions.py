"""Each shot's transition in and the film's closing fade, in frames; one that cannot be made is a problem
of the plan (and planned as a cut)."""

from __future__ import annotations

from fractions import Fraction

from daotai.errors import Issue
from daotai.plan.model import TransitionPlan
from daotai.plan.stable import rounded
from daotai.plan.timing import fps_fraction, transition_length, transition_seconds
from daotai.script.schema import Shot
from daotai.script.vocab import OVERLAPPING_TRANSITIONS

CUT = TransitionPlan(type="cut", duration_s=0.0, frames=0)



def transition_in(shot: Shot, index: int, fps: float, prev_frames: int | None, frames: int,
                problems: list[Issue]) -> TransitionPlan:
    """The shot's transition in; one that cannot be made is added to ``problems`` and planned as a cut."""
    kind = shot.transition.type.value
    seconds = shot.transition.seconds
    if kind == "cut":
        return CUT
    overlapping = kind in OVERLAPPING_TRANSITIONS  # a crossfade or a wipe: the shots overlap
    count = transition_length(seconds, Fraction(*fps_fraction(fps)), overlapping)
    where = f"shots[{index}].transition"
    problem = None
    if overlapping:
        if prev_frames is None:
            joins = "blend" if kind == "crossfade" else "wipe"
            problem = Issue(f"{where}.type", kind, f"needs a previous shot to {joins} from; use 'fade' or 'cut' "
                            "on the first shot")
        elif count > min(prev_frames, frames):
            problem = Issue(f"{where}.duration", seconds, f"s ({count} frames) must not exceed either adjacent "
                            f"shot ({prev_frames} and {frames} frames)")
    elif count > frames or (prev_frames is not None and count > prev_frames):
        problem = Issue(f"{where}.duration", seconds, "s of fade must fit inside the adjacent shots")
    if problem is not None:
        problems.append(problem)
        return CUT
    return TransitionPlan(type=kind, duration_s=rounded(transition_seconds(count, fps, overlapping)), frames=count)



def closing_fade(seconds: float | None, shot_id: str, frames: int, incoming: TransitionPlan, fps: float,
                  problems: list[Issue]) -> TransitionPlan | None:
    """The film's fade to black at its end, on the last shot's last frames; None for no fade (or one
    that does not fit, added to ``problems``).

    It takes round(seconds·fps) frames (at least one) and must fit in the last shot beside the
    frames its own transition in already uses."""
    if not seconds:
        return None
    count = transition_length(seconds, Fraction(*fps_fraction(fps)), overlaps=True)
    if count + incoming.frames > frames:
        used = f", {incoming.frames} of them used by its {incoming.type} in" if incoming.frames else ""
        problems.append(Issue("fade_out", seconds, f"s ({count} frames) must fit inside the last shot "
                              f"{shot_id!r} ({frames} frames{used})"))
        return None
    return TransitionPlan(type="fade", duration_s=rounded(transition_seconds(count, fps, overlaps=True)), frames=count)
