"""Poses: run, sit (on a seat), talk, point, look at someone, turn; read from a shot's action verbs
(English and Chinese), its dialogue, or explicit `pose` / `look_at`; walk and run cycles advance with
the ground covered."""

from __future__ import annotations

import math

import numpy as np
import pytest

from daotai.errors import PlanError
from daotai.plan.continuity import RUN_STRIDE_M, STRIDE_M
from daotai.plan.geometry import intrinsics_from_matrix, project
from daotai.plan.planner import plan_script
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, frame_states, set_pieces_for_plan
from daotai.script.load import validate_script

W, H = 320, 180
PAIR = [{"id": "lin", "name": "Lin", "position": [-0.8, 0.0]}, {"id": "wei", "name": "小魏", "position": [0.8, 0.0]}]


def _plan(*shots, characters=PAIR):
    return plan_script(validate_script({
        "size": {"width": W, "height": H}, "fps": 12, "scene": {"name": "stage", "set_pieces": []},
        "characters": characters,
        "shots": [{"shot_id": f"s{i}", "duration": 1.0, "subject": "lin", **s} for i, s in enumerate(shots)],
    }))


def _me(shot, frame=0, who="lin"):
    return next(p for p in shot.character_frames[frame] if p.id == who)


@pytest.mark.parametrize(("action", "pose"), [
    ("Lin sits down", "sit"), ("林坐在那里", "sit"), ("Lin explains the plan", "talk"), ("林说：走吧", "talk"),
    ("Lin points at the door", "point"), ("林指着门", "point"), ("Lin waits", None),
])
def test_action_verbs_choose_the_subjects_pose(action, pose):
    shot = _plan({"action": action}).shots[0]
    assert _me(shot).pose == pose and _me(shot, who="wei").pose is None


def test_speakers_talk_and_explicit_poses_win():
    shot = _plan({"dialogue": [{"character": "wei", "line": "hi"}], "action": "Lin sits",
                  "pose": {"lin": "point"}}).shots[0]
    assert _me(shot).pose == "point" and _me(shot, who="wei").pose == "talk"
    assert _me(shot, 3, "wei").pose_phase > _me(shot, 0, "wei").pose_phase  # the hands keep moving


def test_look_at_turns_the_head_toward_someone_named_in_the_action():
    turned = _plan({"action": "Lin looks at 小魏", "characters": ["lin", "wei"]},
                   characters=[{**PAIR[0], "facing": 0}, PAIR[1]]).shots[0]
    assert _me(turned).head_turn == pytest.approx(70.0)  # wei is 90° to her left: as far as a head turns
    point = _plan({"look_at": [-0.8, 1.6, 1.0]}, characters=[{**PAIR[0], "facing": 30}, PAIR[1]]).shots[0]
    assert _me(point).head_turn == pytest.approx(-30.0)


def test_turn_faces_the_named_character_or_turns_half_round():
    lone = [{"id": "lin", "facing": 0}]
    half = _plan({"action": "Lin turns around"}, characters=lone).shots[0]
    assert _me(half).facing == 0 and _me(half, -1).facing == pytest.approx(180.0)
    to = _plan({"action": "林转身看着小魏"}, characters=[{**PAIR[0], "facing": 180}, PAIR[1]]).shots[0]
    assert _me(to, -1).facing == pytest.approx(90.0)  # wei stands at +x


def test_run_is_asked_or_read_from_the_pace_and_its_cycle_follows_the_ground():
    to = {"blocking": [{"character": "lin", "to": [-0.8, 4.0]}]}
    walk = _plan(to).shots[0]  # 4 m in 1 s ... fast enough to be a run
    stroll = _plan({"blocking": [{"character": "lin", "to": [-0.8, 1.5]}]}).shots[0]
    asked = _plan({"action": "林跑过去", "blocking": [{"character": "lin", "to": [-0.8, 1.5]}]}).shots[0]
    assert _me(walk, 5).pose == "run" and _me(stroll, 5).pose is None and _me(asked, 5).pose == "run"
    for shot, stride in ((walk, RUN_STRIDE_M), (stroll, STRIDE_M), (asked, RUN_STRIDE_M)):
        a, b = _me(shot, 2), _me(shot, 6)
        covered = math.dist(a.position, b.position)
        assert b.walk_phase - a.walk_phase == pytest.approx(covered / stride * math.pi, rel=1e-6)


def test_a_pose_for_someone_not_in_the_shot_is_refused():
    with pytest.raises(PlanError, match=r"shots\[0\].pose.wei"):
        _plan({"characters": ["lin"], "pose": {"wei": "sit"}})
    with pytest.raises(PlanError, match=r"shots\[0\].look_at"):
        _plan({"characters": ["lin"], "look_at": "wei"})


def _render(plan, shot_index=0, frame=0):
    shot = plan.shots[shot_index]
    state = list(frame_states(plan, shot))[frame]
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for_plan(plan), set_pieces_for_plan(plan)) as r:
        return r.render(state)


def test_a_sitter_is_lower_and_sits_on_a_seat_and_poses_render_the_same_twice():
    plan = _plan({"framing": "full"}, {"framing": "full", "pose": "sit"}, {"framing": "full", "action": "Lin stands and points"},
                 {"framing": "full", "action": "Lin talks", "look_at": [2.0, 1.6, 1.0]},
                 characters=[{**PAIR[0], "facing": 0}])
    standing, sitting = _render(plan, 0), _render(plan, 1)
    # the camera of a seated full shot comes down with the sitter (framed at the seated height), so the
    # head is measured against where a standing crown would be in the same camera, and the soles
    # against the floor under the sitter
    rows = np.nonzero((sitting.masks == 1).any(axis=1))[0]
    cam = plan.shots[1].cameras[0]
    x, z = _me(plan.shots[1]).position
    uv, _ = project(np.array([[x, 1.0 * 1.75, z], [x, 0.0, z]]), np.array(cam.cam_to_world).reshape(4, 4),
                    intrinsics_from_matrix(np.array(cam.K).reshape(3, 3)))
    assert rows.min() > uv[0, 1] + 0.15 * H  # the head is well lower
    assert rows.max() >= uv[1, 1] - 3  # seat and feet reach the floor
    seat = np.all(np.abs(sitting.rgb.astype(int) - [107, 77, 56]) < 60, axis=2) & (sitting.masks == 1)
    assert seat.sum() > 30  # the seat's brown shows under the sitter
    for i in range(4):
        assert _render(plan, i, 3).rgb.tobytes() == _render(plan, i, 3).rgb.tobytes()
    pointing = _render(plan, 2)
    assert ((pointing.masks == 1) != (standing.masks == 1)).sum() > 100  # the arm comes up toward the lens


def test_sitting_down_getting_up_and_settling_after_a_walk_are_gradual():
    lone = [{"id": "lin", "facing": 0}]
    down = _plan({"action": "Lin sits down", "framing": "full"}, {"action": "林站起来", "framing": "full"},
                 {"action": "Lin walks to the chair and sits", "framing": "full", "duration": 1.5,
                  "blocking": [{"character": "lin", "to": [0.5, 0.5], "end": 0.4}]}, characters=lone)
    weights = [[_me(s, i).pose_weight for i in range(s.frames)] for s in down.shots]
    assert weights[0][0] == 0.0 and weights[0][-1] == pytest.approx(1.0, abs=0.01)
    assert all(a <= b for a, b in zip(weights[0], weights[0][1:], strict=False))  # down, never back up
    assert weights[1][0] == 1.0 and weights[1][-1] == pytest.approx(0.0, abs=0.01)
    walking = [_me(down.shots[2], i).walking for i in range(down.shots[2].frames)]
    after = walking.index(False)
    assert weights[2][after] < 0.1 and weights[2][-1] == pytest.approx(1.0)  # settles once the walk is over
    tops = []
    for frame in (0, down.shots[0].frames // 2, down.shots[0].frames - 1):
        masks = _render(down, 0, frame).masks
        tops.append(int(np.nonzero((masks == 1).any(axis=1))[0].min()))
    assert tops[0] < tops[1] < tops[2]  # the head goes down as she sits
