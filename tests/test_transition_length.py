"""One transition-length rule: the planner and the assembly count a transition's frames alike.

The case that used to split them is a half frame: a 0.5 s crossfade at 25 fps is 12.5 frames,
which the planner rounded half to even (12) and the assembly half up (13).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from daotai.encode.read import probe
from daotai.encode.video import VideoWriter
from daotai.errors import PlanError
from daotai.plan.planner import plan_script
from daotai.plan.timing import transition_length, transition_seconds
from daotai.post.assemble import (
    ClipSpec,
    Transition,
    assemble,
    closing_fade_seconds,
    end_fade_frames,
    planned_frame_count,
    transition_frames,
)
from daotai.script.load import validate_script


def script_at(fps: float, transition: dict, fade_out: float | None = None):
    data = {
        "fps": fps, "size": "96x64", "scene": {"name": "room"}, "characters": [{"id": "a"}],
        "shots": [{"shot_id": "s1", "duration": 2, "subject": "a"},
                  {"shot_id": "s2", "duration": 2, "subject": "a", "transition": transition}],
    }
    if fade_out is not None:
        data["fade_out"] = fade_out
    return validate_script(data)


@pytest.mark.parametrize(("seconds", "fps", "overlaps", "frames"), [
    (0.5, 25, True, 13),  # 12.5: half up
    (1.0, 25, False, 13),  # a fade's 12.5 frames a side: half up
    (0.5, 24, True, 12),
    (0.1, 25, True, 3),  # exactly 2.5 on the decimal, not 2.5000000000000004 or 2.4999…
    (0.02, 24, True, 1),  # under a frame: still one
    (0.0, 24, True, 0),
    (1.0, Fraction(24000, 1001), True, 24),
    (0.6, 24, False, 7),
])
def test_transition_length_rounds_half_up(seconds, fps, overlaps, frames):
    assert transition_length(seconds, fps, overlaps) == frames


def test_transition_length_refuses_what_is_not_a_duration():
    for seconds, fps in ((-0.5, 24), (0.5, 0), (float("nan"), 24), ("0.5", 24), (True, 24)):
        with pytest.raises(PlanError):
            transition_length(seconds, fps, True)


@given(st.integers(0, 300), st.sampled_from([24, 25, 30, 50, Fraction(24000, 1001), Fraction(30000, 1001)]),
       st.booleans())
def test_seconds_count_back_to_the_same_frames(frames, fps, overlaps):
    assert transition_length(transition_seconds(frames, fps, overlaps), fps, overlaps) == frames
    kind = "crossfade" if overlaps else "fade"
    if frames:
        assert transition_frames(Transition.planned(kind, frames, fps), fps) == frames


@pytest.mark.parametrize(("transition", "frames", "seconds"), [
    ({"type": "crossfade", "duration": 0.5}, 13, 0.52),
    ({"type": "wipe_left", "duration": 0.5}, 13, 0.52),
    ({"type": "fade", "duration": 1.0}, 13, 1.04),
])
def test_half_a_frame_at_25_fps_is_planned_and_assembled_alike(transition, frames, seconds):
    plan = plan_script(script_at(25, transition))
    planned = plan.shots[1].transition
    assert (planned.frames, planned.duration_s) == (frames, seconds)
    fps = Fraction(*plan.fps_fraction)
    # the assembly's own count of the script's seconds, and of what the pipeline hands it, agree with the plan
    assert transition_frames(Transition(transition["type"], transition["duration"]), fps) == frames
    assert transition_frames(Transition.planned(planned.type, planned.frames, fps), fps) == frames
    transitions = [Transition(), Transition(transition["type"], transition["duration"])]
    assert planned_frame_count([s.frames for s in plan.shots], transitions, fps) == plan.total_frames


def test_closing_fade_of_half_a_frame_is_planned_and_assembled_alike():
    plan = plan_script(script_at(25, "cut", fade_out=0.5))
    assert plan.fade_out is not None and plan.fade_out.frames == 13
    assert end_fade_frames(0.5, 25) == 13
    assert end_fade_frames(closing_fade_seconds(plan.fade_out.frames, 25), 25) == 13


def test_assembled_crossfade_of_half_a_frame_is_as_long_as_the_plan(tmp_path):
    """A real assembly of two 50-frame clips with a 0.5 s crossfade at 25 fps: 100 - 13 frames."""
    plan = plan_script(script_at(25, {"type": "crossfade", "duration": 0.5}))
    paths = []
    for index, shot in enumerate(plan.shots):
        path = tmp_path / f"{shot.shot_id}.mp4"
        with VideoWriter(path, 96, 64, 25) as writer:
            for _ in range(shot.frames):
                writer.write(np.full((64, 96, 3), 60 + 120 * index, np.uint8))  # (H, W, 3) uint8
        paths.append(path)
    fps = Fraction(*plan.fps_fraction)
    clips = [ClipSpec(p, Transition.planned(s.transition.type, s.transition.frames, fps))
             for p, s in zip(paths, plan.shots, strict=True)]
    result = assemble(clips, tmp_path / "sequence.mp4", fps)
    assert result.frames == plan.total_frames == 100 - 13
    assert probe(result.path).frames == plan.total_frames
