"""Props and blocking from words, seated continuity across cuts, and the continuity QC check.

The render test reads the previz's own control channels: every mask pixel of a character and
every pixel of the table is put back into the world through the depth, so "the table between
them" and "seated" are measured, not assumed from the plan.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from daotai.errors import ScriptError
from daotai.plan import geometry
from daotai.plan.blocking import SEAT_HEIGHT_SHARE, SEATED_DROP_SHARE, postures_said, says_moves
from daotai.plan.planner import plan_script
from daotai.plan.props import props_in
from daotai.qc import checks
from daotai.qc.continuity import check_cut, continuity_report
from daotai.script.load import validate_script

NAMES = {"mia": "Mia", "tom": "Tom"}
ZH_NAMES = {"mia": "米娅", "tom": "汤姆"}
PAIR = ("mia", "tom")
W, H = 320, 180


def _script(*shots, scene=None, characters=None):
    return {
        "size": {"width": W, "height": H}, "fps": 12,
        "scene": scene or {"name": "kitchen", "description": "A small kitchen, a table between them."},
        "characters": characters or [{"id": "mia", "name": "Mia"}, {"id": "tom", "name": "Tom"}],
        "shots": [{"shot_id": f"s{i}", "duration": 0.5, **s} for i, s in enumerate(shots)],
    }


def _plan(*shots, **kw):
    return plan_script(validate_script(_script(*shots, **kw)))


def _pieces(plan, name):
    return [p for p in plan.scene.set_pieces if p.name == name]


def _centre(plan, name):
    """Ground centre (x, z) of a prop's pieces."""
    pts = np.array([(p.position[0], p.position[2]) for p in _pieces(plan, name)])
    assert len(pts), f"no {name} in the set"
    return pts.mean(axis=0)


def _who(shot, char_id, frame=0):
    return next(p for p in shot.character_frames[frame] if p.id == char_id)


# ---------------------------------------------------------------- words


@pytest.mark.parametrize(("text", "names", "subject", "expected"), [
    ("Mia and Tom sit across the table.", NAMES, "mia", {"mia": ("sit", None), "tom": ("sit", None)}),
    ("They both sit down.", NAMES, "mia", {"mia": ("sit", "in"), "tom": ("sit", "in")}),
    ("Tom stands up while Mia stays seated.", NAMES, "mia", {"tom": ("stand", "out"), "mia": ("sit", None)}),
    ("She stands.", NAMES, "tom", {"tom": ("stand", None)}),
    ("Mia waits.", NAMES, "mia", {}),
    ("米娅和汤姆坐在桌子两边。", ZH_NAMES, "mia", {"mia": ("sit", None), "tom": ("sit", None)}),
    ("两人坐下", ZH_NAMES, "tom", {"mia": ("sit", "in"), "tom": ("sit", "in")}),
    ("汤姆站起来，米娅还坐着。", ZH_NAMES, "mia", {"tom": ("stand", "out"), "mia": ("sit", None)}),
])
def test_posture_verbs_apply_to_every_character_named(text, names, subject, expected):
    assert postures_said(text, PAIR, names, subject) == expected


def test_prop_nouns_in_english_and_chinese():
    assert [k for _, k in props_in("a bar counter, two stools and a lamp behind her")] == ["bar_counter", "stool", "lamp"]
    assert [k for _, k in props_in("厨房里，桌子在他们中间，窗户旁边有一盏灯")] == ["table", "window", "lamp"]
    assert props_in("they meet at the train station, 车站外") == []  # a station names no car, 车站 no 车
    assert [k for _, k in props_in("She opens the door and sits on the sofa")] == ["door", "sofa"]
    assert [k for _, k in props_in("她望向窗外")] == ["window"]


def test_a_counter_without_words_of_place_stands_behind_the_pair_not_between_them():
    plan = _plan({"framing": "wide", "action": "Mia and Tom lean on the bar counter."}, scene={"name": "bar"})
    mia, tom = (np.array(_who(plan.shots[0], c).position) for c in PAIR)
    counter = _centre(plan, "bar counter")
    assert counter[0] == pytest.approx((mia + tom)[0] / 2, abs=1e-6) and counter[1] == pytest.approx(-1.1, abs=0.05)
    assert np.linalg.norm(tom - mia) == pytest.approx(1.2)  # nobody sits across it: the usual spacing


def test_move_words_name_who_moves():
    assert says_moves("Mia walks to the window.", "mia", PAIR, NAMES, "tom")
    assert not says_moves("Mia walks to the window.", "tom", PAIR, NAMES, "tom")
    assert says_moves("两人换位", "tom", PAIR, ZH_NAMES, "mia")


# ---------------------------------------------------------------- placement


def test_a_table_between_them_stands_between_them_and_they_sit_across_it():
    plan = _plan({"framing": "wide", "action": "Mia and Tom sit across the table."})
    mia, tom = (np.array(_who(plan.shots[0], c).position) for c in PAIR)
    table = _centre(plan, "table")
    assert np.allclose(table, (mia + tom) / 2, atol=1e-6)
    assert 1.5 <= np.linalg.norm(tom - mia) <= 1.7  # moved apart so knees go under the top
    top = max(_pieces(plan, "table"), key=lambda p: p.position[1])
    assert top.position[1] + top.size[1] == pytest.approx(0.74)
    for c in PAIR:  # each sits on a chair placed where they sit
        assert _who(plan.shots[0], c).pose == "sit"
        chairs = [p for p in _pieces(plan, "chair") if math.dist((p.position[0], p.position[2]),
                                                                 _who(plan.shots[0], c).position) < 0.3]
        assert chairs and min(p.size[1] for p in chairs) == pytest.approx(SEAT_HEIGHT_SHARE * 1.75)


def test_behind_her_and_at_the_window_place_props_by_the_person_the_sentence_names():
    chars = [{"id": "mia", "name": "Mia", "position": [0, 0], "facing": 0},
             {"id": "tom", "name": "Tom", "position": [3, 0], "facing": -90}]
    plan = _plan({"subject": "mia", "action": "A lamp glows behind her."},
                 {"subject": "tom", "action": "Tom waits at the window."},
                 scene={"name": "room", "set_pieces": []}, characters=chars)
    lamp = _centre(plan, "lamp")
    assert lamp == pytest.approx((0.0, -0.9), abs=1e-6)  # 0.9 m behind Mia, who faces +z
    window = _centre(plan, "window")
    assert 0.5 < math.dist(window, (3.0, 0.0)) < 1.3  # beside Tom
    assert window[0] > 3.0 and window[1] < 0.0  # away from Mia and from the audience side (+z)


def test_a_prop_placed_in_the_lens_way_is_kept_and_warned_about():
    lone = [{"id": "mia", "facing": 0}]
    blocked = _plan({"framing": "FS", "action": "A lamp stands in front of her."}, characters=lone,
                    scene={"name": "room", "set_pieces": []})
    assert _centre(blocked, "lamp") == pytest.approx((0.0, 0.8), abs=1e-6)
    assert blocked.shots[0].warnings == ("the lamp at [0.0, 0.8] m stands between the camera and mia's head",)
    # a medium's lens, 0.95 m in front of her at 1.45 m (aimed for the upper-third eye line), is in the shade
    held = _plan({"framing": "MS", "action": "A lamp stands in front of her."}, characters=lone,
                 scene={"name": "room", "set_pieces": []})
    assert held.shots[0].warnings == ("the lamp at [0.0, 0.8] m holds the camera",)
    clear = _plan({"framing": "MS", "action": "A lamp stands behind her."}, characters=lone,
                  scene={"name": "room", "set_pieces": []})
    assert clear.shots[0].warnings == ()


def test_chinese_scene_words_place_a_table_between_the_two():
    plan = _plan({"framing": "wide", "action": "两人坐下"},
                 scene={"name": "厨房", "description": "桌子在他们中间"},
                 characters=[{"id": "mia", "name": "米娅"}, {"id": "tom", "name": "汤姆"}])
    mia, tom = (np.array(_who(plan.shots[0], c).position) for c in PAIR)
    assert np.allclose(_centre(plan, "table"), (mia + tom) / 2, atol=1e-6)
    assert all(_who(plan.shots[0], c, -1).pose == "sit" for c in PAIR)


def test_explicit_props_are_placed_as_given_and_an_unknown_type_is_refused_by_name():
    plan = _plan({}, scene={"name": "kitchen", "description": "a table between them", "set_pieces": [],
                            "props": [{"type": "沙发", "position": [1.0, -2.0], "facing": 90}]})
    assert _centre(plan, "sofa") == pytest.approx((1.0, -2.0), abs=0.2)
    assert not _pieces(plan, "table")  # the script's own list replaces the words'
    assert not _pieces(_plan({}, scene={"name": "k", "description": "a table", "set_pieces": [], "props": []}), "table")
    with pytest.raises(ScriptError) as err:
        validate_script(_script({}, scene={"name": "k", "props": [{"type": "piano", "position": [0, 0]}]}))
    text = str(err.value)
    assert "scene.props[0].type" in text and "'piano'" in text and "table, desk, counter" in text
    with pytest.raises(ScriptError, match=r"scene.props\[0\].position"):
        validate_script(_script({}, scene={"name": "k", "props": [{"type": "table"}]}))


def test_sitting_at_the_table_puts_it_between_the_sitters():
    plan = _plan({"framing": "wide", "action": "Mia and Tom sit at the table."}, scene={"name": "kitchen"})
    mia, tom = (np.array(_who(plan.shots[0], c).position) for c in PAIR)
    assert np.allclose(_centre(plan, "table"), (mia + tom) / 2, atol=1e-6) and np.linalg.norm(tom - mia) > 1.5


def test_walk_to_words_walk_the_named_character_to_the_prop_or_the_person():
    shots = ({"framing": "wide", "action": "Mia and Tom sit at the table."},
             {"framing": "wide", "duration": 3, "action": "Mia gets up and walks to the window."},
             {"framing": "wide", "duration": 3, "action": "汤姆走到Mia身边。", "subject": "tom"})
    cast = [{"id": "mia", "name": "Mia"}, {"id": "tom", "name": "汤姆"}]
    plan = _plan(*shots, scene={"name": "kitchen"}, characters=cast)
    # the kitchen kit has windows of its own all round: the one the words place is the one they place
    # in a bare set, and it stands in the kitchen too
    placed = _pieces(_plan(*shots, scene={"name": "kitchen", "set_pieces": []}, characters=cast), "window")
    assert placed and all(p in plan.scene.set_pieces for p in placed)
    window = np.array([(p.position[0], p.position[2]) for p in placed]).mean(axis=0)
    walk = plan.shots[1]
    assert _who(walk, "mia").walking and _who(walk, "mia").pose is None  # up from the seat and off
    end = np.array(_who(walk, "mia", -1).position)
    assert 0.4 < math.dist(end, window) < 0.7 and not _who(walk, "mia", -1).walking
    assert _who(walk, "tom", -1).pose == "sit" and not walk.warnings  # Tom stays at the table
    to_her = plan.shots[2]
    assert math.dist(_who(to_her, "tom", -1).position, end) == pytest.approx(0.9, abs=1e-6)
    assert any("汤姆 was seated" in w for w in to_her.warnings)  # no word got him up: the plan says so


def test_a_prop_walked_to_stands_where_the_scripts_walk_ends_and_plural_words_place_none():
    plan = _plan({"framing": "full", "subject": "mia", "action": "Mia walks to her desk",
                  "blocking": [{"character": "mia", "to": [-2.0, -1.0]}]},
                 scene={"name": "office", "description": "an open-plan office with desks and large windows",
                        "set_pieces": []})
    end = _who(plan.shots[0], "mia", -1)
    heading = math.atan2(end.position[0] - _who(plan.shots[0], "mia").position[0],
                         end.position[1] - _who(plan.shots[0], "mia").position[1])
    ahead = np.array(end.position) + 1.15 * np.array([math.sin(heading), math.cos(heading)])
    assert _centre(plan, "desk") == pytest.approx(ahead, abs=0.35)  # ahead of her where she stops
    assert not _pieces(plan, "window")  # "large windows" dress the set: the kit's work


# ---------------------------------------------------------------- continuity in the plan


def test_seated_people_stay_seated_across_cuts_until_an_action_gets_them_up():
    plan = _plan({"framing": "wide", "action": "Mia and Tom sit at the table."},
                 {"framing": "CU", "subject": "mia", "dialogue": [{"character": "mia", "line": "Well?"}]},
                 {"framing": "CU", "subject": "tom"},
                 {"framing": "two_shot", "action": "Tom stands up.", "duration": 1.0},
                 {"framing": "two_shot"})
    for shot in plan.shots[:3]:
        for c in PAIR:
            assert all(_who(shot, c, i).pose == "sit" and _who(shot, c, i).pose_weight == 1.0
                       for i in range(shot.frames)), (shot.shot_id, c)
    up = plan.shots[3]
    assert _who(up, "tom").pose_weight == 1.0 and _who(up, "tom", -1).pose_weight == pytest.approx(0.0, abs=0.01)
    assert _who(plan.shots[4], "tom").pose is None and _who(plan.shots[4], "mia").pose == "sit"
    assert not any(s.warnings for s in plan.shots)
    # the close-ups come down with the seated head: aimed 0.4 m lower than a standing one
    standing = _plan({"framing": "CU", "subject": "mia"})
    assert plan.shots[1].aim_point[1] == pytest.approx(standing.shots[0].aim_point[1] - SEATED_DROP_SHARE * 1.75)


def test_a_sitting_dog_gets_no_chair_and_no_lowered_camera():
    plan = _plan({"framing": "MS", "subject": "rex", "action": "Rex sits."},
                 characters=[{"id": "rex", "appearance": "a small brown dog", "height": 0.5}],
                 scene={"name": "room", "set_pieces": []})
    standing = _plan({"framing": "MS", "subject": "rex"}, characters=[{"id": "rex", "appearance": "a small brown dog",
                                                                       "height": 0.5}],
                     scene={"name": "room", "set_pieces": []})
    assert not _pieces(plan, "chair") and plan.shots[0].aim_point == standing.shots[0].aim_point


def test_the_plan_says_where_it_had_to_break_continuity():
    plan = _plan({"framing": "wide", "action": "Mia and Tom sit."},
                 {"framing": "wide", "blocking": [{"character": "mia", "to": [0.0, 1.5]}]},
                 {"framing": "wide", "pose": {"tom": "stand"}})
    assert any("Mia was seated" in w and "shots[1].blocking" in w for w in plan.shots[1].warnings)
    assert any("Tom stands at the cut" in w and "shots[2].pose" in w for w in plan.shots[2].warnings)
    gesture = _plan({"framing": "wide", "action": "Mia and Tom sit."}, {"framing": "wide", "pose": {"tom": "point"}})
    assert _who(gesture.shots[1], "tom").pose == "sit"  # a gesture does not get him up
    assert any("Tom stays seated" in w for w in gesture.shots[1].warnings)


# ---------------------------------------------------------------- continuity QC


def test_continuity_is_a_registered_check():
    row = checks.check_named("continuity")
    assert row.cost == "plan" and row.function == "daotai.qc.continuity:check_cut"


def test_qc_flags_a_pose_change_no_action_says_and_passes_it_when_one_does():
    base = ({"framing": "wide", "action": "Mia and Tom sit at the table."}, {"framing": "CU", "subject": "mia"})
    unsaid = _plan(*base, {"framing": "two_shot", "pose": {"mia": "stand"}})
    problems, _ = check_cut(unsaid, unsaid.shots[2])
    assert len(problems) == 1 and "Mia" in problems[0] and "s2" in problems[0] and "seated" in problems[0]
    said = _plan(*base, {"framing": "two_shot", "action": "Mia stands.", "pose": {"mia": "stand"}})
    assert check_cut(said, said.shots[2]) == ([], "positions, poses and the line kept at the cut")
    assert check_cut(said, said.shots[0]) == ([], None)  # the first shot has no cut in
    assert continuity_report(said) == {}


def test_qc_flags_a_jump_unless_the_action_moves_them():
    def jumped(action: str):
        plan = _plan({"framing": "wide"}, {"framing": "wide", "action": action})
        shot = plan.shots[1]
        moved = tuple(tuple(p.model_copy(update={"position": (p.position[0], p.position[1] + 1.0)})
                            if p.id == "tom" else p for p in frame) for frame in shot.character_frames)
        return plan.model_copy(update={"shots": (plan.shots[0], shot.model_copy(update={"character_frames": moved}))})

    plan = jumped("Mia looks at him.")
    problems, _ = check_cut(plan, plan.shots[1])
    assert len(problems) == 1 and problems[0].startswith("Tom jumps 1.00 m") and "s1" in problems[0]
    plan = jumped("Tom walks over to the door.")
    assert check_cut(plan, plan.shots[1])[0] == []


def test_qc_flags_a_camera_that_crosses_the_line_between_two_people_talking():
    # Mia at (-0.8, 0) faces Tom at (0.8, 0); the audience side is +z, this camera stands at -z
    crossed = _plan({"framing": "two_shot"},
                    {"framing": "CU", "subject": "mia", "camera": {"position": [0.0, 1.2, -2.5], "aim": "mia"}})
    problems, _ = check_cut(crossed, crossed.shots[1])
    assert any("crosses the line between Mia and Tom" in p and "s1" in p for p in problems)
    kept = _plan({"framing": "two_shot"}, {"framing": "CU", "subject": "mia"}, {"framing": "OTS", "subject": "tom"})
    assert continuity_report(kept) == {}


# ---------------------------------------------------------------- rendered


def test_rendered_kitchen_dialogue_keeps_the_table_between_two_seated_people_in_every_shot():
    from daotai.render.previz import PrevizRenderer, RenderSettings
    from daotai.render.previz.backend import environment_for_plan, frame_states, set_pieces_for_plan
    from daotai.render.previz.meshes import SEAT_H, _sitting_drop

    assert SEATED_DROP_SHARE == pytest.approx(_sitting_drop(), abs=5e-4)  # the plan's number is the rig's
    assert SEAT_HEIGHT_SHARE == SEAT_H
    plan = _plan({"framing": "wide", "action": "Mia and Tom sit across the table."},
                 {"framing": "OTS", "subject": "mia", "dialogue": [{"character": "mia", "line": "You came."}]},
                 {"framing": "OTS", "subject": "tom"},
                 {"framing": "CU", "subject": "mia"},
                 {"framing": "CU", "subject": "tom"},
                 {"framing": "two_shot"},
                 scene={"name": "kitchen", "description": "A small kitchen at night. A table between them."})
    mia_xz, tom_xz = (np.array(_who(plan.shots[0], c).position) for c in PAIR)
    line = (tom_xz - mia_xz) / np.linalg.norm(tom_xz - mia_xz)
    top = max(_pieces(plan, "table"), key=lambda p: p.position[1])
    crown = (1.0 - SEATED_DROP_SHARE) * 1.75  # a seated 1.75 m person's crown, metres
    uv = geometry.pixel_centres(W, H).reshape(-1, 2)
    table_seen = {}
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for_plan(plan), set_pieces_for_plan(plan)) as r:
        for shot in plan.shots:
            states = list(frame_states(plan, shot))
            for i in (0, shot.frames - 1):
                frame = r.render(states[i])
                cam = shot.cameras[i]
                depth = np.where(np.isfinite(frame.depth), frame.depth, 1e6).reshape(-1)  # the sky: far away
                world = geometry.unproject(uv, depth, np.reshape(cam.cam_to_world, (4, 4)),
                                           geometry.intrinsics_from_matrix(np.reshape(cam.K, (3, 3))))  # (H*W, 3)
                masks = frame.masks.reshape(-1)
                along = (world[:, [0, 2]] - mia_xz) @ line  # 0 at Mia, 1.6 at Tom
                for j, c in enumerate(shot.characters):
                    mine = masks == j + 1
                    if c == shot.subject:
                        assert mine.sum() > 200, (shot.shot_id, c)
                    if mine.sum() < 50:
                        continue
                    heights = world[mine, 1]
                    # seated: nothing of them above a seated crown, and the head there (not cut away)
                    assert heights.max() < crown + 0.06 and heights.max() > crown - 0.45, (shot.shot_id, c,
                                                                                            heights.max())
                # the table's top: pixels of no one, on the top's surface
                on_top = (masks == 0) & (np.abs(world[:, 1] - (top.position[1] + top.size[1])) < 0.02) & (
                    np.abs(world[:, 0] - top.position[0]) < top.size[2] / 2) & (
                    np.abs(world[:, 2] - top.position[2]) < top.size[0] / 2)
                table_seen[shot.shot_id] = max(table_seen.get(shot.shot_id, 0), int(on_top.sum()))
                if on_top.sum() >= 20:
                    sides = [np.median(along[masks == j + 1]) for j in range(2) if (masks == j + 1).sum() >= 50]
                    assert np.all((along[on_top] > 0.2) & (along[on_top] < 1.4)), shot.shot_id
                    if len(sides) == 2:  # both in frame: the table's top lies between them
                        assert min(sides) < along[on_top].min() and along[on_top].max() < max(sides)
    assert table_seen["s0"] >= 20 and table_seen["s5"] >= 20, table_seen  # the master and the two-shot show it
