"""End to end: previz dolly-in and orbit through the pipeline, camera QC from the rendered depth."""

from __future__ import annotations

import json

import pytest

from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

SCRIPT = {
    "title": "depth-map camera qc",
    "fps": 24,
    "size": "480x270",
    "seed": 5,
    "scene": {"name": "backlot", "time_of_day": "day"},
    "characters": [
        {"id": "hero", "name": "Hero", "appearance": "orange jumpsuit", "colour": "#e8742a",
         "position": [0, 0]},
        {"id": "extra", "name": "Extra", "appearance": "dark clothes", "colour": "#2f3a4a",
         "position": [2.0, -2.0]},
    ],
    "shots": [
        {"shot_id": "dolly_in", "duration": 1, "subject": "hero", "framing": "full",
         "camera": {"type": "dolly", "motion": [0, 0, -0.8]}},
        {"shot_id": "orbit", "duration": 1, "subject": "hero", "framing": "full",
         "camera": {"type": "orbit", "orbit": 24}},
    ],
}


@pytest.fixture(scope="module")
def qc(tmp_path_factory) -> dict:
    """qc.json of a two-shot previz render with control channels."""
    out = tmp_path_factory.mktemp("depthmap_qc")
    plan = plan_script(validate_script(SCRIPT))
    finished = [e for e in run(plan, out, PipelineSettings(backend="previz")) if isinstance(e, Finished)]
    assert finished
    assert (out / "control" / "orbit_depth.mkv").is_file()
    return json.loads((out / "qc.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("shot_id, component", [("dolly_in", "scale"), ("orbit", "horizontal")])
def test_depth_map_qc_is_exact_on_previz(qc, shot_id, component):
    entry = next(s for s in qc["shots"] if s["shot_id"] == shot_id)
    camera = entry["camera"]
    assert camera["depth_source"] == "control_depth"
    assert camera["depth_file"] == f"{shot_id}_depth.mkv"
    pairs = camera["pairs_evaluated"] + camera["pairs_skipped"]  # 23 dense, 7 sampling every third frame
    assert camera["pairs_evaluated"] >= 0.85 * pairs, camera["summary"]
    assert camera["error_mean_px"] <= 0.5, camera["summary"]
    checks = {c["name"]: c for c in camera["components"]}
    assert checks[component]["significant"] and checks[component]["direction_ok"] is True
    assert all(c["direction_ok"] is not False and not c["unplanned"] for c in checks.values())
    assert 0.8 < checks[component]["ratio"] < 1.25, checks[component]
    assert camera["ok"] and entry["ok"], entry["failures"]
