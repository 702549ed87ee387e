"""Held poses from words: lean, lie, kneel and hold, in English and Chinese, for everyone a sentence
names; drawn as their own figure poses, carried across cuts, checked by continuity QC and written
into the prompts where the shot's own words do not say them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from daotai.plan import blocking
from daotai.plan.planner import plan_script
from daotai.plan.shot_camera import LYING_VIEW_DEG
from daotai.plan.staging import yaw_toward
from daotai.qc.continuity import continuity_report
from daotai.qc.framing import measure_framing
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, frame_states, set_pieces_for_plan
from daotai.render.previz.meshes import (
    HEAD_C,
    HIP_Y,
    LIE_BACK,
    PRIMITIVES,
    _kneeling_drop,
    figure_instances,
    hand_point,
    head_drop,
)
from daotai.render.previz.scene import Figure
from daotai.script.load import validate_script

W, H = 320, 180
PAIR = [{"id": "mia", "name": "Mia"}, {"id": "tom", "name": "汤姆"}]
NAMES = {"mia": "Mia", "tom": "汤姆"}


def _plan(*shots, characters=PAIR, description="a kitchen"):
    return plan_script(validate_script({
        "size": {"width": W, "height": H}, "fps": 12, "scene": {"name": "kitchen", "description": description},
        "characters": characters,
        "shots": [{"shot_id": f"s{i}", "duration": 1.0, "subject": "mia", **s} for i, s in enumerate(shots)],
    }))


def _me(shot, frame=0, who="mia"):
    return next(p for p in shot.character_frames[frame] if p.id == who)


@pytest.mark.parametrize(("text", "postures"), [
    ("Mia leans on the counter", {"mia": "lean"}),
    ("Mia and 汤姆 lie on the bed", {"mia": "lie", "tom": "lie"}),
    ("Mia kneels while 汤姆 holds a cup", {"mia": "kneel"}),
    ("Mia holds a cup and 汤姆 kneels", {"tom": "kneel"}),
    ("Mia lies down. 汤姆 stands", {"mia": "lie", "tom": "stand"}),
    ("Mia靠着柜台", {"mia": "lean"}),
    ("他们躺在床上", {"mia": "lie", "tom": "lie"}),
    ("汤姆跪下", {"tom": "kneel"}),
    ("Mia is on her knees", {"mia": "kneel"}),
    ("she lies to him", {}),  # a lie told is no pose
    ("汤姆靠近Mia", {}),  # 靠近 comes near, it does not lean
    ("Mia走进卧室", {}),  # 卧室 is a bedroom, nobody lies in the word
    ("Mia仰卧在沙发上", {"mia": "lie"}),
])
def test_lean_lie_and_kneel_are_read_for_everyone_the_sentence_names(text, postures):
    said = blocking.postures_said(text, ("mia", "tom"), NAMES, "mia")
    assert {c: posture for c, (posture, _) in said.items()} == postures


@pytest.mark.parametrize(("text", "held"), [
    ("Mia holds a cup", {"mia": "cup"}),
    ("Mia sits holding a mug of tea", {"mia": "cup"}),
    ("Mia and 汤姆 hold glasses of wine", {"mia": "glass", "tom": "glass"}),
    ("Mia kneels while 汤姆 holds a phone", {"tom": "phone"}),
    ("汤姆拿着手机", {"tom": "phone"}),
    ("Mia握着一杯咖啡", {"mia": "cup"}),
    ("他们都端着杯子", {"mia": "cup", "tom": "cup"}),
    ("Mia puts down the cup", {"mia": None}),
    ("汤姆放下手机", {"tom": None}),
    ("Mia holds his gaze", {}),  # nothing in hand: no held pose
])
def test_hold_puts_the_named_thing_in_the_hands_of_whoever_is_named_before_the_verb(text, held):
    assert blocking.holds_said(text, ("mia", "tom"), NAMES, "mia") == held


def test_the_planner_gives_the_poses_to_everyone_named_and_the_thing_to_the_hand():
    shot = _plan({"action": "Mia and 汤姆 kneel. 汤姆 holds a book"}).shots[0]
    assert (_me(shot).pose, _me(shot, who="tom").pose) == ("kneel", "kneel")
    assert (_me(shot).held, _me(shot, who="tom").held) == (None, "book")
    zh = _plan({"action": "Mia拿着杯子，汤姆靠着柜台"}).shots[0]
    assert (_me(zh).pose, _me(zh).held) == ("hold", "cup")  # standing with a cup
    assert _me(zh, who="tom").pose == "lean"


def _figure(pose=None, **fields):
    return Figure(char_id="mia", label="Mia", colour=(0.2, 0.3, 0.8), height_m=1.75, position=(0.0, 0.0), pose=pose,
                  **fields)


def _hips(fig):
    """World point (3,) metres of the middle of the figure's hips (the legs' pivot height)."""
    models, _, prims = figure_instances(fig)
    return (models[list(prims).index(PRIMITIVES.index("hips"))] @ np.array([0.0, HIP_Y, 0.0, 1.0]))[:3]


def _hips_y(fig):
    return float(_hips(fig)[1])


def _extent(fig):
    """(horizontal, vertical) metres spanned by the figure's part centres."""
    models, _, _ = figure_instances(fig)
    centres = models[:, :3, 3]  # (P, 3) metres
    span = centres.max(axis=0) - centres.min(axis=0)
    return float(max(span[0], span[2])), float(span[1])


def test_figure_geometry_of_each_held_pose():
    standing_w, standing_h = _extent(_figure())
    assert standing_h > 1.4 and standing_w < 0.6
    lying = _figure("lie", pose_dir_deg=90.0, rest_height_m=0.5)
    across, up = _extent(lying)
    assert across > 1.4 and up < 0.35  # horizontal, on the bed's top
    models, _, _ = figure_instances(lying)
    assert models[:, 1, 3].min() > 0.5 - 0.02  # nothing sinks into the bed
    assert models[:, 0, 3].max() > 1.4  # the feet toward +x: 90 degrees to the figure's left of facing +z
    # the lying head's centre is LIE_HEAD_SHARE above the bed, over the figure's place
    assert blocking.LIE_HEAD_SHARE == pytest.approx(LIE_BACK + HEAD_C[2])
    assert head_drop(lying) == pytest.approx(blocking.head_drop_share("lie", False, 1.0, 0.5 / 1.75))
    kneeling = _figure("kneel")
    assert _hips_y(kneeling) < _hips_y(_figure()) - 0.3  # hips lowered by the shins' length
    assert blocking.KNEEL_DROP_SHARE == pytest.approx(_kneeling_drop(), abs=5e-4)  # the plan's number is the rig's
    assert head_drop(kneeling) == pytest.approx(blocking.head_drop_share("kneel", False, 1.0), abs=5e-4)
    # a lean tilts toward pose_dir, turning about the head: the head stays over the place, the hips go the other way
    leaning = _figure("lean", pose_dir_deg=-90.0)  # toward the figure's right: -x
    models, _, prims = figure_instances(leaning)
    head = models[list(prims).index(PRIMITIVES.index("head"))][:3, 3]
    assert abs(head[0]) < 0.01 and abs(head[2]) < 0.03
    assert _hips_y(leaning) < _hips_y(_figure())
    assert _hips(leaning)[0] > 0.08  # the feet stepped out away from what it leans on
    assert head_drop(leaning) == pytest.approx(blocking.head_drop_share("lean", False, 1.0), abs=1e-6)


def test_a_held_thing_is_drawn_at_the_hand_held_forward():
    holding = _figure("hold", held="cup")
    models, colours, prims = figure_instances(holding)
    assert len(prims) == len(figure_instances(_figure())[2]) + 1 and prims[-1] == PRIMITIVES.index("cylinder")
    hand = hand_point(holding)
    cup = models[-1][:3, 3]
    assert math.dist(cup[[0, 2]], hand[[0, 2]]) < 0.01 and 0.0 < cup[1] - hand[1] < 0.06
    assert hand[2] > 0.35 and 1.05 < hand[1] < 1.35  # forward of the body (facing +z), in front of the chest
    seated = figure_instances(_figure("sit", held="phone"))
    assert len(seated[2]) == len(prims) + 1  # the seat and the phone both go with the sitter


def _render(plan, shot_index, frame=-1):
    shot = plan.shots[shot_index]
    state = list(frame_states(plan, shot))[frame]
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for_plan(plan), set_pieces_for_plan(plan)) as r:
        return r.render(state)


def test_a_lying_figure_renders_horizontal_on_the_bed_the_words_put_under_it():
    plan = _plan({"framing": "full"}, {"action": "Mia lies on the bed", "framing": "full"},
                 characters=[{"id": "mia", "name": "Mia", "facing": 0}], description="a bedroom")
    lying = _me(plan.shots[1])
    beds = [p for p in plan.scene.set_pieces if p.name == "bed"]
    assert beds and lying.pose == "lie" and lying.rest_height == 0.5
    # the bed stands under her: its top's footprint holds where her feet point
    feet = np.array(lying.position) + 1.4 * np.array([math.sin(math.radians(lying.facing + lying.pose_dir)),
                                                       math.cos(math.radians(lying.facing + lying.pose_dir))])
    assert min(math.dist(feet, (b.position[0], b.position[2])) for b in beds) < 1.0
    standing, down = _render(plan, 0), _render(plan, 1)
    rows, cols = np.nonzero(standing.masks == 1)
    assert np.ptp(rows) > np.ptp(cols)  # upright: taller than wide
    rows, cols = np.nonzero(down.masks == 1)
    assert np.ptp(cols) > 2 * np.ptp(rows)  # lying: wide, not tall


def test_held_poses_carry_across_cuts_until_an_action_changes_them():
    plan = _plan({"action": "Mia kneels. 汤姆 leans on the counter holding a cup"}, {"framing": "close_up"},
                 {"action": "汤姆放下杯子"}, {"action": "Mia stands up and 汤姆 stands", "duration": 1.5})
    kept = plan.shots[1]
    assert (_me(kept).pose, _me(kept, who="tom").pose, _me(kept, who="tom").held) == ("kneel", "lean", "cup")
    put_down = plan.shots[2]
    assert _me(put_down).pose == "kneel" and _me(put_down, who="tom").held is None
    assert _me(put_down, who="tom").pose == "lean"
    up = plan.shots[3]
    assert _me(up).pose == "kneel" and _me(up).pose_weight == 1.0  # getting up starts from the knees ...
    assert _me(up, -1).pose_weight == pytest.approx(0.0, abs=0.01)  # ... and ends standing
    assert _me(up, who="tom").pose is None
    assert continuity_report(plan) == {}  # every change was said


def test_continuity_flags_an_unexplained_change_of_held_pose_and_of_hand():
    plan = _plan({"action": "Mia lies on the floor"}, {"pose": "kneel"})
    found = continuity_report(plan)
    assert found == {"s1": ["Mia is lying at the end of s0 and kneeling at the start of s1 with no action saying so"]}
    assert any("Mia kneels at the cut (shots[1].pose)" in w for w in plan.shots[1].warnings)
    said = _plan({"action": "Mia lies on the floor"}, {"pose": "kneel", "action": "Mia kneels"})
    assert continuity_report(said) == {}
    kept = _plan({"action": "Mia holds a cup"}, {"pose": "hold"}, {"pose": "hold", "subject": "tom"})
    assert [_me(s).held for s in kept.shots] == ["cup", "cup", "cup"]  # `pose: hold` holds what she holds
    assert _me(kept.shots[2], who="tom").held == "object"  # ... and something, for someone empty-handed
    assert continuity_report(kept) == {"s2": [
        "汤姆 has empty hands at the end of s1 and holds an object at the start of s2 with no action saying so"]}
    assert any("汤姆 has something in hand at the cut (shots[2].pose 'hold')" in w for w in kept.shots[2].warnings)
    assert not any("in hand" in w for w in kept.shots[1].warnings)
    # a plan edited by hand: the cup is gone at the cut with no action saying so
    frames = kept.shots[1].character_frames
    emptied = tuple(tuple(p.model_copy(update={"held": None}) if p.id == "mia" else p for p in f) for f in frames)
    edited = kept.model_copy(update={"shots": (kept.shots[0], kept.shots[1].model_copy(
        update={"character_frames": emptied}), kept.shots[2])})
    assert continuity_report(edited) == {
        "s1": ["Mia holds a cup at the end of s0 and has empty hands at the start of s1 with no action saying so"],
        "s2": ["Mia has empty hands at the end of s1 and holds a cup at the start of s2 with no action saying so",
               "汤姆 has empty hands at the end of s1 and holds an object at the start of s2 with no action saying so"]}
    said = kept.model_copy(update={"shots": (kept.shots[0], kept.shots[1].model_copy(
        update={"character_frames": emptied, "action": "Mia puts down the cup"}), kept.shots[2])})
    assert "s1" not in continuity_report(said)


def test_a_walk_stands_a_kneeler_up_with_a_notice():
    plan = _plan({"action": "Mia kneels"},
                 {"blocking": [{"character": "mia", "to": [0.0, 1.5]}], "action": "Mia walks"})
    assert _me(plan.shots[1]).pose is None
    assert any("was kneeling at the end of the last shot and walks" in w for w in plan.shots[1].warnings)


def test_a_lean_tilts_toward_the_prop_it_leans_on():
    plan = _plan({"action": "Mia leans on the counter"}, characters=[{"id": "mia", "name": "Mia", "facing": 0}])
    mia = _me(plan.shots[0])
    counters = [p for p in plan.scene.set_pieces if p.name == "counter"]
    nearest = min(counters, key=lambda p: math.dist(mia.position, (p.position[0], p.position[2])))
    toward = yaw_toward(mia.position, (nearest.position[0], nearest.position[2]))
    assert abs((mia.facing + mia.pose_dir - toward + 180.0) % 360.0 - 180.0) < 15.0


def test_prompts_say_kept_poses_the_shot_does_not_say():
    plan = _plan({"action": "Mia lies on the bed. 汤姆 kneels holding flowers"}, {"framing": "close_up"},
                 description="a bedroom")
    first, second = plan.shots
    assert "Mia lies on the bed" in first.prompt and " is lying" not in first.prompt
    assert 'Mia is lying on the bed; "汤姆" is kneeling and holding some flowers.' in second.prompt
    explicit = _plan({"pose": "kneel"}).shots[0]
    assert "Mia is kneeling." in explicit.prompt
    plain = _plan({"action": "Mia sits"}, {}).shots[1]
    assert " is " not in plain.prompt  # sitting is written as before: by the action's words only


@pytest.mark.parametrize("framing", ["close_up", "medium", "full"])
def test_a_lying_subject_is_framed_from_their_side_looking_down_and_framing_qc_measures_its_size(framing):
    plan = _plan({"action": "Mia lies on the bed. 汤姆 kneels", "framing": "wide"}, {"framing": framing},
                 description="a bedroom")
    shot = plan.shots[1]
    mia = _me(shot)
    cam = np.array(shot.cameras[0].cam_to_world).reshape(4, 4)
    view = -cam[:3, 2]  # (3,) the lens's forward axis
    assert math.degrees(math.asin(-view[1])) == pytest.approx(LYING_VIEW_DEG, abs=0.5)  # looks down at her
    feet = math.radians(mia.facing + mia.pose_dir)
    along = abs(view[0] * math.sin(feet) + view[2] * math.cos(feet)) / math.hypot(view[0], view[2])
    assert along < 0.05  # square to the body: all of it across the frame
    head = np.array([mia.position[0], mia.rest_height + blocking.LIE_HEAD_SHARE * 1.75, mia.position[1]])
    assert math.dist(cam[:3, 3], head) == pytest.approx(shot.subject_distance, rel=0.1)
    frame = _render(plan, 1, 0)
    entry = measure_framing(plan, shot, frame.masks, frame.depth)
    assert entry["ok"], entry["problems"]
    assert entry["method"] == "mask_depth"  # a lying body's mask height says nothing of its size


def test_a_bed_the_scene_names_stands_under_whoever_a_shot_lays_on_it():
    plan = _plan({"framing": "wide"}, {"action": "Mia lies down on the bed", "framing": "wide"},
                 description="a bedroom with a bed")
    mia = _me(plan.shots[1])
    assert mia.pose == "lie" and mia.rest_height == 0.5  # on the bed, not on the floor beside it
