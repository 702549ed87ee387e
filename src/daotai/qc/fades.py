"""Which frames of the assembled sequence the plan itself takes through black.

A fade the script asks for (a shot's ``fade`` transition, the film's ``fade_out``) dims the
picture to black on purpose, so a black frame inside one is not a fault; a black frame that
no fade explains still is (a dropped render, a broken decode). The windows follow the
assembly exactly (daotai.post.assemble): a k-frame ``fade`` into shot i darkens the last k
frames of shot i-1 and the first k frames of shot i (on the first shot only its first k);
the film's ``fade_out`` of m frames darkens the sequence's last m frames.
"""

from __future__ import annotations

from daotai.plan.model import Plan


def planned_fade_frames(plan: Plan) -> frozenset[int]:
    """Sequence frame indices inside a planned fade to or from black."""
    dark: set[int] = set()
    for shot in plan.shots:
        if shot.transition.type != "fade":
            continue
        k = shot.transition.frames
        dark.update(range(shot.start_frame, shot.start_frame + k))  # fade in from black
        if shot.index > 0:
            dark.update(range(max(0, shot.start_frame - k), shot.start_frame))  # the shot before fades out
    if plan.fade_out is not None:
        dark.update(range(max(0, plan.total_frames - plan.fade_out.frames), plan.total_frames))
    return frozenset(dark)


def unexplained_black(black_frames: tuple[int, ...] | list[int], plan: Plan) -> list[int]:
    """The black frames of the sequence that no planned fade accounts for, in order."""
    dark = planned_fade_frames(plan)
    return [frame for frame in black_frames if frame not in dark]
