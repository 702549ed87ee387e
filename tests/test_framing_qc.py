"""Framing QC from the masks: each shot's subject at the size its framing asks for, everyone the
framing names in the picture, an over-the-shoulder's foreground person present and cut by the frame;
reported in qc.json beside the camera check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from daotai.plan.planner import plan_script
from daotai.qc.framing import SIZES, band, measure_framing, nominal_share
from daotai.qc.shot import check_shot
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, frame_states
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

ROOT = Path(__file__).resolve().parent.parent
W, H = 320, 180


def _first_frames(plan):
    """Each shot's frame its framing is measured on: the first, or the last of a push that lands on it."""
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for_plan(plan)) as r:
        return {s.shot_id: r.render(list(frame_states(plan, s))[s.framing_frame]) for s in plan.shots}


def _measure_all(data):
    plan = plan_script(validate_script(data))
    frames = _first_frames(plan)
    return plan, {s.shot_id: measure_framing(plan, s, frames[s.shot_id].masks, frames[s.shot_id].depth)
                  for s in plan.shots}


def test_bands_meet_and_tighten_in_order():
    for height in (1.2, 1.75, 1.95):
        bands = [band(f, height) for f in SIZES]
        assert bands[0][1] == np.inf and bands[-1][0] == 0.0
        assert all(a[0] == pytest.approx(b[1]) for a, b in zip(bands, bands[1:], strict=False))
        assert all(lo < nominal_share(f, height) < hi for f, (lo, hi) in zip(SIZES, bands, strict=True))


def test_every_framing_of_the_camera_grammar_example_lands_in_its_band():
    data = json.loads((ROOT / "examples" / "all_moves.json").read_text(encoding="utf-8"))
    data["size"] = {"width": W, "height": H}
    _, entries = _measure_all(data)
    for shot_id, entry in entries.items():
        assert entry["ok"], (shot_id, entry)


@pytest.mark.parametrize("angle", ["eye_level", "high", "low"])
def test_every_size_and_shot_type_lands_in_its_band(angle):
    shots = [{"shot_id": f, "duration": 0.2, "framing": f, "angle": angle, "subject": "a"} for f in SIZES]
    shots += [{"shot_id": f"{f}_{who}", "duration": 0.2, "framing": f, "subject": who}
              for f in ("over_the_shoulder", "two_shot") for who in ("a", "b")]
    data = {"size": {"width": W, "height": H}, "scene": {"name": "diner"},
            "characters": [{"id": "a", "appearance": "red coat"}, {"id": "b", "height": 1.85}], "shots": shots}
    _, entries = _measure_all(data)
    for shot_id, entry in entries.items():
        assert entry["ok"], (shot_id, entry)
        assert entry["measured_as"] == shot_id or shot_id not in SIZES
    assert entries["wide"]["characters"]["named"] == ["a", "b"]  # a master names everyone
    assert entries["over_the_shoulder_a"]["foreground"]["id"] == "b"
    assert entries["over_the_shoulder_a"]["foreground"]["cut_by"]


def test_a_wrong_framing_is_flagged_with_what_it_measures_as():
    data = {"size": {"width": W, "height": H}, "scene": {"name": "stage", "set_pieces": []},
            "characters": [{"id": "a"}], "shots": [{"shot_id": "s", "duration": 0.2, "framing": "close_up"}]}
    plan = plan_script(validate_script(data))
    frame = _first_frames(plan)["s"]
    asked_wide = plan.shots[0].model_copy(update={"framing": "wide"})
    entry = measure_framing(plan, asked_wide, frame.masks, frame.depth)
    assert not entry["ok"] and entry["measured_as"] == "close_up"
    assert "asked wide" in entry["problems"][0] and "a close_up" in entry["problems"][0]


def test_a_missing_partner_and_an_uncut_foreground_are_flagged():
    data = {"size": {"width": W, "height": H}, "scene": {"name": "stage", "set_pieces": []},
            "characters": [{"id": "a"}, {"id": "b"}],
            "shots": [{"shot_id": "ots", "duration": 0.2, "framing": "OTS", "subject": "a"},
                      {"shot_id": "two", "duration": 0.2, "framing": "two_shot", "subject": "a"}]}
    plan = plan_script(validate_script(data))
    frames = _first_frames(plan)
    for shot in plan.shots:
        masks = frames[shot.shot_id].masks.copy()
        masks[masks == 2] = 0  # b is gone
        entry = measure_framing(plan, shot, masks, frames[shot.shot_id].depth)
        assert not entry["ok"] and entry["characters"]["missing"] == ["b"], shot.shot_id
    ots = plan.shots[0]
    masks = frames["ots"].masks.copy()
    masks[:, [0, -1]] = np.where(masks[:, [0, -1]] == 2, 0, masks[:, [0, -1]])
    masks[-1] = np.where(masks[-1] == 2, 0, masks[-1])
    masks[0] = np.where(masks[0] == 2, 0, masks[0])
    entry = measure_framing(plan, ots, masks, frames["ots"].depth)
    assert not entry["ok"] and "not cut by the frame" in entry["problems"][0]


def test_qc_json_reports_framing_and_fails_a_wrong_one(tmp_path: Path):
    data = {"size": {"width": W, "height": H}, "fps": 12, "scene": {"name": "stage", "set_pieces": []},
            "characters": [{"id": "a"}, {"id": "b"}],
            "shots": [{"shot_id": "ots", "duration": 1.0, "framing": "OTS", "subject": "a"},
                      {"shot_id": "cu", "duration": 1.0, "framing": "close_up", "subject": "b"}]}
    plan = plan_script(validate_script(data))
    assert [e for e in run(plan, tmp_path, PipelineSettings()) if isinstance(e, Finished)]
    qc = json.loads((tmp_path / "qc.json").read_text(encoding="utf-8"))
    for entry in qc["shots"]:
        assert entry["framing"]["ok"], entry["framing"]
        assert any(v["check"] == "framing" and v["ok"] for v in entry["verdicts"])
    wrong = plan.shots[1].model_copy(update={"framing": "full"})
    shot_file = next((tmp_path / "shots").glob("*cu*"))
    entry = check_shot(plan, wrong, shot_file, None, camera=False)
    assert not entry["ok"] and any(f.startswith("framing: asked full") for f in entry["failures"])


def test_a_subject_missing_from_the_first_frame_is_not_measured():
    data = {"size": {"width": W, "height": H}, "scene": {"name": "stage", "set_pieces": []},
            "characters": [{"id": "a"}], "shots": [{"shot_id": "s", "duration": 0.2, "framing": "medium", "subject": "a"}]}
    plan = plan_script(validate_script(data))
    frames = _first_frames(plan)
    masks = frames["s"].masks.copy()
    masks[masks == 1] = 0  # a is gone
    entry = measure_framing(plan, plan.shots[0], masks, frames["s"].depth)
    assert not entry["ok"] and entry["share"] is None and entry["size_ok"] is False
    assert entry["problems"] == ["subject a not in the picture at the start, so its framing cannot be seen"]
