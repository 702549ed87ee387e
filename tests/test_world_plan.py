"""The world round a dialogue, checked on the plan (fast): a named table leaves the room's walls
and ceiling standing, the scene model that judges a hidden subject without controls sees past an
over-the-shoulder's near shoulder yet not past someone standing in the way, and the example of
every camera move keeps continuity at each cut."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from daotai.plan.planner import plan_script
from daotai.plan.props import PlacedProp, footprint_overlaps
from daotai.plan.set_pieces import PieceSpec
from daotai.qc.continuity import continuity_report
from daotai.qc.subject import check_subject
from daotai.script.load import load_script, validate_script

ROOT = Path(__file__).resolve().parent.parent
KITCHEN = {
    "size": "320x180", "fps": 12,
    "scene": {"name": "kitchen", "description": "A small kitchen at night. A table between them."},
    "characters": [{"id": "mia", "name": "Mia"}, {"id": "tom", "name": "Tom"}],
    "shots": [
        {"shot_id": "master", "duration": 0.5, "framing": "wide", "action": "Mia and Tom sit across the table."},
        {"shot_id": "ots_mia", "duration": 0.5, "framing": "OTS", "subject": "mia"},
        {"shot_id": "ots_tom", "duration": 0.5, "framing": "OTS", "subject": "tom"},
    ],
}


def _piece(name, position, size, yaw=0.0):
    return PieceSpec("box", name, position, size, (0.5, 0.5, 0.5), yaw)


def test_a_named_table_leaves_the_walls_and_the_ceiling_standing():
    for sitting in ("Mia and Tom sit across the table.", ""):
        shots = [dict(KITCHEN["shots"][0], action=sitting), *KITCHEN["shots"][1:]]
        plan = plan_script(validate_script(dict(KITCHEN, shots=shots)))
        names = Counter(p.name for p in plan.scene.set_pieces)
        assert names["wall"] == 4 and names["ceiling"] == 1, names
        assert names["table"] == 5  # the named table (a top on four legs), and no kit table beside it


def test_a_kit_piece_is_left_out_only_where_its_footprint_meets_the_props():
    table = PlacedProp("table", (0.0, 0.0), 90.0)  # 1.2 m long across z, 0.75 m deep across x
    assert footprint_overlaps(_piece("table", (0.3, 0.0, 0.4), (1.2, 0.74, 0.75)), table)
    assert footprint_overlaps(_piece("stool", (0.0, 0.0, 0.85), (0.36, 0.68, 0.36)), table)  # 0.05 m off its end
    assert not footprint_overlaps(_piece("stool", (0.0, 0.0, 1.3), (0.36, 0.68, 0.36)), table)
    # a wall 12 m long whose middle is 2 m away, measured face to face, not middle to middle
    assert not footprint_overlaps(_piece("wall", (0.0, 0.0, -2.1), (12.0, 2.8, 0.2)), table)
    assert footprint_overlaps(_piece("wall", (0.0, 0.0, -0.8), (12.0, 2.8, 0.2)), table)
    # hung above the table's top: a ceiling over all of it, a ceiling light right over it
    assert not footprint_overlaps(_piece("ceiling", (0.0, 2.8, 0.0), (12.0, 0.12, 12.0)), table)
    assert not footprint_overlaps(_piece("ceiling light", (0.0, 2.76, 0.0), (0.6, 0.04, 0.6)), table)


@pytest.mark.parametrize("sitting", ["Mia and Tom sit across the table.", ""])
def test_the_scene_model_sees_past_the_near_shoulder_of_an_over_the_shoulder(sitting):
    shots = [dict(KITCHEN["shots"][0], action=sitting), *KITCHEN["shots"][1:]]
    plan = plan_script(validate_script(dict(KITCHEN, shots=shots)))
    for shot in plan.shots[1:]:
        subject = check_subject(plan, shot)  # no controls: the plan's geometry
        assert subject["source"] == "scene_model"
        assert subject["ok"] and subject["frames_hidden"] == 0 and subject["visible_share_min"] > 0.8, subject


def test_the_scene_model_still_finds_a_subject_someone_stands_in_front_of():
    plan = plan_script(validate_script({
        "size": "480x270", "scene": {"name": "office"},
        "characters": [{"id": "a", "position": [0, 0], "facing": 90}, {"id": "b", "position": [1.2, 0], "facing": -90}],
        "shots": [{"shot_id": "clear", "duration": 1.5, "subject": "a", "framing": "wide",
                   "camera": {"type": "orbit", "orbit": -90}},
                  {"shot_id": "hidden", "duration": 1.5, "subject": "a", "framing": "wide",  # b steps in front of a
                   "blocking": [{"character": "b", "to": [0.18, 1.43], "start": 0, "end": 0.3}]}],
    }))
    assert check_subject(plan, plan.shots[0])["ok"]
    subject = check_subject(plan, plan.shots[1])
    assert not subject["ok"] and subject["blocked_by"] == "b", subject


def test_every_camera_move_example_keeps_continuity_at_each_cut():
    plan = plan_script(load_script(ROOT / "examples" / "all_moves.json"))
    assert continuity_report(plan) == {}
