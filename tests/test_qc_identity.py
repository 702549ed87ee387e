"""Identity QC: each character's look (hair, face, top, bottom) measured per shot from the masks of
real previz renders, compared across shots: an unchanged script passes across close-ups, wides and
the back of a figure; a character whose clothes change colour in one shot is caught, named with the
shot and the shot it was compared with."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from daotai.plan.layout import RenderLayout
from daotai.plan.planner import plan_script
from daotai.qc import checks
from daotai.qc.identity import (
    LOOK_DISTANCE_MAX,
    LookSampler,
    apply_identity,
    compare_looks,
    look_distance,
    sampled_frames,
    shot_looks,
)
from daotai.qc.shot import check_shot, finish_shot
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, frame_states
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

W, H = 320, 180

SCRIPT = {
    "size": {"width": W, "height": H}, "fps": 12, "scene": {"name": "stage", "set_pieces": []},
    "characters": [{"id": "lin", "appearance": "red shirt, blue jeans, black hair"},
                   {"id": "bo", "appearance": "white shirt, black trousers, grey hair"}],
    "shots": [
        {"shot_id": "wide", "duration": 1.0, "framing": "wide", "subject": "lin"},
        {"shot_id": "cu", "duration": 1.0, "framing": "close_up", "subject": "lin", "angle": "high"},
        {"shot_id": "back", "duration": 1.0, "framing": "medium_full", "subject": "lin",
         "camera": {"side": "back"}},
    ],
}


def _with_look(data: dict, char_id: str, appearance: str) -> dict:
    changed = copy.deepcopy(data)
    next(c for c in changed["characters"] if c["id"] == char_id)["appearance"] = appearance
    return changed


def _render(data: dict, out: Path):
    plan = plan_script(validate_script(data))
    assert [e for e in run(plan, out, PipelineSettings()) if isinstance(e, Finished)]
    return plan, json.loads((out / "qc.json").read_text(encoding="utf-8")), out


@pytest.fixture(scope="module")
def unchanged(tmp_path_factory):
    return _render(SCRIPT, tmp_path_factory.mktemp("same"))


@pytest.fixture(scope="module")
def swapped_shot(tmp_path_factory):
    """The "back" shot alone, rendered with lin's shirt and jeans colours swapped: its qc entry."""
    data = _with_look(SCRIPT, "lin", "blue shirt, red jeans, black hair")
    data["shots"] = [s for s in data["shots"] if s["shot_id"] == "back"]
    _, qc, _ = _render(data, tmp_path_factory.mktemp("swapped"))
    return qc["shots"][0]


def test_colour_distance_forgives_light_not_a_change_of_colour():
    red = [28.5, 43.2, 29.8]  # previz's red shirt from the front (measured)
    assert look_distance(red, red) == pytest.approx(0.0, abs=1e-3)
    in_shadow = [18.3, 31.7, 20.9]  # the same shirt from behind, away from the key light (measured)
    assert look_distance(red, in_shadow) < 3.0
    assert look_distance(red, [32.0, 10.0, -50.0]) > 4 * LOOK_DISTANCE_MAX  # blue
    assert look_distance([95.0, 0.0, 0.0], [5.0, 0.0, 0.0]) > 2 * LOOK_DISTANCE_MAX  # white against black
    assert look_distance(red, in_shadow) == pytest.approx(look_distance(in_shadow, red), abs=1e-6)


def test_sampled_frames_spread_over_the_shot():
    assert sampled_frames(12) == (0, 3, 6, 8, 11)
    assert sampled_frames(2) == (0, 1)
    assert sampled_frames(0) == ()


def test_parts_are_found_by_height_whatever_the_framing():
    """Rendered frames straight from previz: a close-up shows face, hair and top; a full shot the legs too;
    from behind there is no face, and the back of the head is hair."""
    data = copy.deepcopy(SCRIPT)
    data["shots"] = [{"shot_id": "cu", "duration": 0.2, "framing": "close_up", "subject": "lin"},
                     {"shot_id": "full", "duration": 0.2, "framing": "full", "subject": "lin"},
                     {"shot_id": "back", "duration": 0.2, "framing": "medium", "subject": "lin",
                      "camera": {"side": "back"}}]
    plan = plan_script(validate_script(data))
    looks = {}
    with PrevizRenderer(RenderSettings(W, H, labels=True), environment_for_plan(plan)) as renderer:
        for shot in plan.shots:
            sampler = LookSampler(plan, shot)
            for index, state in enumerate(frame_states(plan, shot)):
                frame = renderer.render(state)
                depth_mm = np.where(np.isfinite(frame.depth), np.clip(np.round(frame.depth * 1000), 0, 65534),
                                    65535).astype(np.uint16)  # (H, W) as the depth control stores it
                sampler.add(index, frame.rgb, frame.masks, depth_mm)
            looks[shot.shot_id] = sampler.finish()["characters"]["lin"]
    assert {"face", "hair", "top"} <= set(looks["cu"]) and "bottom" not in looks["cu"]
    assert {"top", "bottom"} <= set(looks["full"])
    assert "face" not in looks["back"] and {"hair", "top"} <= set(looks["back"])
    red, blue, black = looks["full"]["top"]["lab"], looks["full"]["bottom"]["lab"], looks["back"]["hair"]["lab"]
    assert red[1] > 30 and blue[2] < -30 and black[0] < 15  # a* red, b* blue, L* dark
    assert look_distance(looks["cu"]["top"]["lab"], looks["back"]["top"]["lab"]) < LOOK_DISTANCE_MAX / 3


def test_an_unchanged_script_passes_across_framings(unchanged):
    _, qc, _ = unchanged
    assert qc["ok"], qc["failures"]
    section = qc["identity"]
    assert section["threshold"] == LOOK_DISTANCE_MAX and "at most" in section["rule"]
    lin = section["characters"]["lin"]
    assert lin["shots"] == ["wide", "cu", "back"] and lin["ok"] and lin["changed_in"] == {}
    assert 0.0 <= lin["score"] < LOOK_DISTANCE_MAX / 2
    assert {tuple(p["shots"]) for p in lin["pairs"]} == {("wide", "cu"), ("wide", "back"), ("cu", "back")}
    for entry in qc["shots"]:
        assert "lin" in entry["identity"]["characters"]
        verdict = next(v for v in entry["verdicts"] if v["check"] == "identity")
        assert verdict["ok"] and "lin" in verdict["text"] and "as in the other shots" in verdict["text"]
        assert {v["check"] for v in entry["verdicts"]} <= set(checks.NAMES)


def test_clothes_swapped_in_one_shot_are_caught_naming_character_and_shots(unchanged, swapped_shot):
    _, qc, _ = unchanged
    entries = [swapped_shot if e["shot_id"] == "back" else copy.deepcopy(e) for e in qc["shots"]]
    section = apply_identity(entries, finish_shot)
    lin = section["characters"]["lin"]
    assert not lin["ok"] and lin["score"] > 2 * LOOK_DISTANCE_MAX
    assert list(lin["changed_in"]) == ["back"]  # it differs from both other shots; they agree
    why = lin["changed_in"]["back"]
    assert why["part"] in ("top", "bottom") and why["compared_with"] in ("wide", "cu")
    back = next(e for e in entries if e["shot_id"] == "back")
    assert not back["ok"]
    failure = next(f for f in back["failures"] if f.startswith("identity:"))
    assert "lin's" in failure and f"than in {why['compared_with']}" in failure
    assert back["summary"].startswith("identity:")  # failing checks first
    for other in (e for e in entries if e["shot_id"] != "back"):
        assert other["ok"], other["failures"]
    # again on the same entries: one identity verdict each, the same result
    again = apply_identity(entries, finish_shot)
    assert again == section
    assert sum(v["check"] == "identity" for v in back["verdicts"]) == 1


def test_two_shots_flag_the_later_one(unchanged, swapped_shot):
    _, qc, _ = unchanged
    first = copy.deepcopy(next(e for e in qc["shots"] if e["shot_id"] == "wide"))
    section = compare_looks([first, swapped_shot])
    assert section["characters"]["lin"]["changed_in"] == {
        "back": {"compared_with": "wide", "part": section["characters"]["lin"]["changed_in"]["back"]["part"],
                 "distance": section["characters"]["lin"]["score"]}}


def test_looks_from_the_files_match_the_shared_decode(unchanged):
    """shot_looks (its own decode) and check_shot (the decodes the other checks make) agree."""
    plan, qc, out = unchanged
    layout = RenderLayout.find(out)
    for entry in qc["shots"]:
        shot = plan.shot(entry["shot_id"])
        alone = shot_looks(plan, shot, out / "shots" / entry["file"], layout.depth(shot.shot_id),
                           layout.mask(shot.shot_id))
        assert alone == entry["identity"]
    entry = qc["shots"][1]
    rechecked = check_shot(plan, plan.shot(entry["shot_id"]), out / "shots" / entry["file"], None, camera=False)
    assert rechecked["identity"] == entry["identity"]
