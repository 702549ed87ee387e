"""Retakes: a backend that follows the camera only on some seeds, rendered with --takes.

``tests/plugins/daotai_fickle`` (found through its entry point) draws previz frames in order on
the seeds it is told and backwards on the others, so the camera check fails on every other take.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from daotai.errors import OptionError
from daotai.run.retakes import TakePolicy, parse_budget, take_seed

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "plugins"
SCRIPT = {
    "fps": 24, "size": "320x180",
    "scene": {"name": "yard", "set_pieces": [{"kind": "box", "position": [1.5, -3.0], "size": [1.0, 1.2, 1.0]},
                                            {"kind": "box", "position": [-1.8, -4.0], "size": [0.8, 2.0, 0.8]}]},
    "characters": [{"id": "hero", "position": [0.0, -3.5]}],
    "shots": [{"shot_id": "pan", "duration": 1.5, "subject": "hero", "framing": "wide",
               "camera": {"type": "pan", "rotate": [20, 0, 0]}}],
}


@pytest.fixture
def installed(monkeypatch):
    """The fickle backend visible to this process (and to the processes it starts)."""
    from daotai.render import registry

    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH")) if p))
    registry.reload()
    yield
    registry.reload()


def plan_seed(tmp_path: Path) -> tuple[Path, int]:
    """The script file and the pan shot's planned seed."""
    from daotai.plan.planner import plan_script
    from daotai.script.load import validate_script

    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    return path, plan_script(validate_script(SCRIPT)).shot("pan").seed


def test_takes_3_keeps_the_first_passing_take_and_records_all_three(installed, tmp_path):
    script, seed = plan_seed(tmp_path)
    seeds = [take_seed(seed, k) for k in (1, 2, 3)]
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "daotai.cli", "render", str(script), "-o", str(out), "--backend", "fickle",
         "-O", f"follows={seeds[2]}", "--takes", "3", "--retake-on", "camera", "--no-cache"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "DAOTAI_DEBUG": ""}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    takes = manifest["shots"][0]["takes"]
    assert [(t["take"], t["seed"], t["passed"], t["kept"]) for t in takes] == [
        (1, seeds[0], False, False), (2, seeds[1], False, False), (3, seeds[2], True, True)]
    assert all("camera" in " ".join(t["failing"]) for t in takes[:2])
    assert manifest["settings"]["retakes"]["takes"] == 3
    qc = json.loads((out / "qc.json").read_text())["shots"][0]
    assert qc["ok"] and qc["camera"]["ok"] and qc["camera_path"]["ok"], qc["failures"]
    assert not (out / "takes").exists()  # takes not chosen are deleted unless --keep-takes
    assert "take 3" in done.stderr and "passed" in done.stderr


def test_when_no_take_passes_the_best_is_kept_and_the_others_under_takes(installed, tmp_path):
    from daotai.events import Notice
    from daotai.plan.planner import plan_script
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings
    from daotai.script.load import validate_script

    plan = plan_script(validate_script(SCRIPT))
    settings = PipelineSettings(backend="fickle", controls=False,
                                retakes=TakePolicy(takes=2, retake_on=("camera",), keep_takes=True))
    events = list(run(plan, tmp_path, settings))
    assert isinstance(events[-1], Finished) and not events[-1].result.qc_ok
    takes = json.loads((tmp_path / "manifest.json").read_text())["shots"][0]["takes"]
    assert [t["passed"] for t in takes] == [False, False] and sum(t["kept"] for t in takes) == 1
    others = [t for t in takes if not t["kept"]]
    assert others[0]["files"] and all((tmp_path / f).is_file() for f in others[0]["files"])
    assert any(isinstance(e, Notice) and "none of 2 take(s) passed" in e.text for e in events)


def test_the_take_budget_stops_retakes(installed, tmp_path):
    from daotai.events import Notice
    from daotai.plan.planner import plan_script
    from daotai.run.pipeline import run
    from daotai.run.settings import PipelineSettings
    from daotai.script.load import validate_script

    plan = plan_script(validate_script(SCRIPT))
    settings = PipelineSettings(backend="fickle", controls=False, camera_qc=True,
                                retakes=TakePolicy(takes=3, budget_s=0.01))
    events = list(run(plan, tmp_path, settings))
    takes = json.loads((tmp_path / "manifest.json").read_text())["shots"][0]["takes"]
    assert len(takes) == 2  # the second take spent the budget
    assert any(isinstance(e, Notice) and "take budget spent" in e.text for e in events)


def test_policy_and_budget_are_checked():
    assert parse_budget("10m") == 600 and parse_budget("90") == 90 and parse_budget("1.5h") == 5400
    assert parse_budget(None) is None
    with pytest.raises(OptionError, match="--take-budget"):
        parse_budget("soon")
    with pytest.raises(OptionError, match="--takes"):
        TakePolicy(takes=0)
    with pytest.raises(OptionError, match="--retake-on"):
        TakePolicy(takes=2, retake_on=("camra",))
    assert TakePolicy(retake_on=("camera", "subject")).checks == {"camera", "camera_path", "subject"}
    assert TakePolicy(retake_on=("any",)).checks is None
    assert len({take_seed(7, k) for k in range(1, 17)}) == 16 and take_seed(7, 1) == 7


def test_takes_with_a_cluster_are_refused_before_any_work(tmp_path):
    from typer.testing import CliRunner

    from daotai import cli

    script, _ = plan_seed(tmp_path)
    result = CliRunner().invoke(cli.app, ["render", str(script), "-o", str(tmp_path / "out"), "--takes", "2",
                                          "--cluster", "local"])
    assert isinstance(result.exception, OptionError) and "--cluster" in str(result.exception)
    assert not (tmp_path / "out").exists()


def test_a_shot_rendered_once_is_not_reused_for_a_run_with_takes(installed):
    from daotai.plan.planner import plan_script
    from daotai.run.reuse import shot_keys
    from daotai.run.settings import PipelineSettings, encode_settings_for
    from daotai.script.load import validate_script

    plan = plan_script(validate_script(SCRIPT))
    once = PipelineSettings(backend="fickle", controls=False)
    thrice = PipelineSettings(backend="fickle", controls=False, retakes=TakePolicy(takes=3))
    budgeted = PipelineSettings(backend="fickle", controls=False, retakes=TakePolicy(takes=3, budget_s=60.0))
    keys = [shot_keys(plan, s, encode_settings_for(s), None)["pan"] for s in (once, thrice, budgeted)]
    assert keys[0] != keys[1] == keys[2]
