"""Staging across shots: dialogue facing, singles off the line, over-the-shoulder, two-shots, masters.

Plans are checked from their numbers, and the previz renders of a two-person dialogue from
their masks: who is visible, who is in the foreground, and on which side of the line each camera
stands.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from daotai.errors import PlanError
from daotai.plan import geometry
from daotai.plan.planner import plan_script
from daotai.plan.staging import Body, hidden_by, line_of_action, stage_camera
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, frame_states, set_pieces_for_plan
from daotai.render.previz.meshes import HEAD_C
from daotai.script.load import validate_script

W, H = 320, 180

DIALOGUE = {
    "size": {"width": W, "height": H},
    "scene": {"name": "set", "set_pieces": []},
    "characters": [
        {"id": "ann", "appearance": "a woman in a red coat"},
        {"id": "bo", "appearance": "a man in a blue shirt", "height": 1.85},
    ],
    "shots": [
        {"shot_id": "master", "duration": 0.5, "framing": "master", "subject": "ann"},
        {"shot_id": "ots_ann", "duration": 0.5, "framing": "OTS", "subject": "ann"},
        {"shot_id": "ots_bo", "duration": 0.5, "framing": "过肩", "subject": "bo"},
        {"shot_id": "mcu_ann", "duration": 0.5, "framing": "MCU", "subject": "ann"},
        {"shot_id": "mcu_bo", "duration": 0.5, "framing": "CU", "subject": "bo"},
        {"shot_id": "two", "duration": 0.5, "framing": "two_shot", "subject": "bo"},
    ],
}


def _plan(data):
    return plan_script(validate_script(data))


@pytest.fixture(scope="module")
def dialogue():
    """The plan and, per shot, the first frame rendered: {shot_id: RenderedFrame}."""
    plan = _plan(DIALOGUE)
    frames = {}
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for_plan(plan), set_pieces_for_plan(plan)) as r:
        for shot in plan.shots:
            frames[shot.shot_id] = r.render(next(frame_states(plan, shot)))
    return plan, frames


def _head_pixel(plan, shot, char_id):
    """Pixel (u, v) of a character's head centre at the shot's first frame, and its depth."""
    person = next(p for p in shot.character_frames[0] if p.id == char_id)
    height = next(c.height for c in plan.characters if c.id == char_id)
    point = np.array([[person.position[0], HEAD_C[1] * height, person.position[1]]])
    cam = shot.cameras[0]
    intr = geometry.intrinsics_from_matrix(np.array(cam.K).reshape(3, 3))
    uv, depth = geometry.project(point, np.array(cam.cam_to_world).reshape(4, 4), intr)
    return uv[0], depth[0]


def _index(shot, char_id):
    return shot.characters.index(char_id) + 1


def test_two_characters_face_each_other_by_default(dialogue):
    plan, _ = dialogue
    ann, bo = plan.shots[0].character_frames[0]
    assert ann.facing == pytest.approx(90.0) and bo.facing == pytest.approx(-90.0)  # ann at -x, bo at +x


def test_explicit_facing_and_position_win():
    data = {**DIALOGUE, "characters": [
        {"id": "ann", "position": [0, 0], "facing": 10},
        {"id": "bo", "position": [2, -1]},
    ]}
    plan = _plan(data)
    ann, bo = plan.shots[0].character_frames[0]
    assert ann.facing == pytest.approx(10.0) and ann.position == (0.0, 0.0)
    assert bo.position == (2.0, -1.0)
    assert bo.facing == pytest.approx(math.degrees(math.atan2(-2.0, 1.0)))  # toward ann


def test_three_characters_keep_their_default_facing():
    data = {**DIALOGUE, "characters": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
            "shots": [{"shot_id": "s", "duration": 0.5}]}
    assert [p.facing for p in _plan(data).shots[0].character_frames[0]] == [0.0, 0.0, 0.0]


def test_a_pair_in_a_shot_of_a_larger_cast_turns_to_each_other():
    data = {**DIALOGUE, "characters": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
            "shots": [{"shot_id": "s", "duration": 0.5, "characters": ["a", "c"], "framing": "OTS"}]}
    a, c = _plan(data).shots[0].character_frames[0]
    assert a.facing == pytest.approx(90.0) and c.facing == pytest.approx(-90.0)


def test_master_and_two_shot_show_both(dialogue):
    plan, frames = dialogue
    for shot_id in ("master", "two"):
        shot = plan.shot(shot_id)
        masks = frames[shot_id].masks
        for char_id in ("ann", "bo"):
            assert np.count_nonzero(masks == _index(shot, char_id)) > 30, (shot_id, char_id)
            (u, v), _ = _head_pixel(plan, shot, char_id)
            assert 0 <= u < W and 0 <= v < H, (shot_id, char_id)


def test_over_the_shoulder_puts_the_other_shoulder_in_the_foreground(dialogue):
    plan, frames = dialogue
    for shot_id, subject, near in (("ots_ann", "ann", "bo"), ("ots_bo", "bo", "ann")):
        shot = plan.shot(shot_id)
        frame = frames[shot_id]
        (u, v), _ = _head_pixel(plan, shot, subject)
        assert frame.masks[int(v), int(u)] == _index(shot, subject), shot_id  # the subject's face is clear
        fg = frame.masks == _index(shot, near)
        share = fg.mean()
        assert 0.04 < share < 0.45, (shot_id, share)  # a shoulder and head, not the whole frame
        cols = np.nonzero(fg.any(axis=0))[0]
        assert cols.min() == 0 or cols.max() == W - 1, shot_id  # cut by the frame edge
        sub = frame.masks == _index(shot, subject)
        assert np.median(frame.depth[fg]) < 0.6 * np.median(frame.depth[sub])  # nearer the lens
    # without a script fov the lens is longer than the default 60 degrees
    assert 20.0 < plan.shot("ots_ann").move.fov < 45.0


def test_singles_in_a_dialogue_keep_the_partner_out_of_the_way(dialogue):
    plan, frames = dialogue
    for shot_id, subject in (("mcu_ann", "ann"), ("mcu_bo", "bo")):
        shot = plan.shot(shot_id)
        (u, v), _ = _head_pixel(plan, shot, subject)
        assert frames[shot_id].masks[int(v), int(u)] == _index(shot, subject)
        assert not shot.warnings


def test_every_camera_stays_on_one_side_of_the_line(dialogue):
    plan, _ = dialogue
    ann, bo = plan.shots[0].character_frames[0]
    a, b = np.array(ann.position), np.array(bo.position)
    sides = []
    for shot in plan.shots:
        eye = np.array(shot.cameras[0].cam_to_world).reshape(4, 4)[[0, 2], 3]
        d, e = b - a, eye - a
        sides.append(np.sign(d[0] * e[1] - d[1] * e[0]))
    assert len(set(sides)) == 1 and sides[0] != 0
    # singles look across the line: ann (on the left) looks screen right, bo screen left
    for shot_id, subject, partner, sign in (("mcu_ann", "ann", "bo", 1), ("mcu_bo", "bo", "ann", -1)):
        shot = plan.shot(shot_id)
        (us, _), _ = _head_pixel(plan, shot, subject)
        (up, _), dp = _head_pixel(plan, shot, partner)
        assert dp < 0 or np.sign(up - us) == sign or not (0 <= up < W), shot_id


def test_over_the_shoulder_needs_a_second_character():
    data = {**DIALOGUE, "characters": [{"id": "ann"}], "shots": [{"shot_id": "s", "framing": "OTS"}]}
    with pytest.raises(PlanError, match=r"shots\[0\]\.framing"):
        _plan(data)


def test_explicit_fov_is_kept_in_an_over_the_shoulder():
    data = {**DIALOGUE, "shots": [{"shot_id": "s", "framing": "OTS", "subject": "ann", "camera": {"fov": 50}}]}
    shot = _plan(data).shots[0]
    assert shot.move.fov == 50.0 and shot.cameras[0].fov == 50.0


def test_prompt_names_the_shot_type():
    plan = _plan(DIALOGUE)
    assert plan.shot("ots_ann").prompt.startswith("Over-the-shoulder medium close-up of ann")
    assert plan.shot("two").prompt.startswith("Two-shot, medium full shot of bo")


def test_someone_in_the_way_is_walked_around():
    """A third person standing in front of the subject: the camera swings until the subject is clear."""
    subject = Body("a", (0.0, 0.0), 1.75, 0.0)
    blocker = Body("c", (0.0, 0.6), 1.75, 180.0)
    placement, _, _ = stage_camera("medium", "eye_level", 60.0, 16 / 9, subject, (blocker,))
    assert hidden_by(placement, subject, (blocker,)) == ()
    eye = np.asarray(placement.cam_to_world)[:3, 3]
    assert eye[2] > 0.3  # still in front of the subject
    straight = stage_camera("medium", "eye_level", 60.0, 16 / 9, subject, ())[0]
    assert hidden_by(straight, subject, (blocker,)) == ("c",)


def test_line_of_action_normal_faces_the_audience():
    for a, b in (((-1, 0), (1, 0)), ((1, 0), (-1, 0)), ((0, 0), (1, 1))):
        _, _, n = line_of_action((Body("a", a, 1.7, 0), Body("b", b, 1.7, 0)))
        assert n[1] > 0


def test_master_of_a_wide_group_fits_everyone():
    data = {"size": {"width": W, "height": H}, "scene": {"name": "set", "set_pieces": []},
            "characters": [{"id": "a", "position": [-6, 0]}, {"id": "b", "position": [0, -1]},
                           {"id": "c", "position": [6, 0.5]}],
            "shots": [{"shot_id": "s", "duration": 0.5, "framing": "wide", "subject": "b"}]}
    plan = _plan(data)
    shot = plan.shots[0]
    for char_id in "abc":
        (u, v), depth = _head_pixel(plan, shot, char_id)
        assert depth > 0 and 0 <= u < W and 0 <= v < H, char_id
