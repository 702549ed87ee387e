"""bench/qc_speed.py: one render folder checked by this tree and by a git revision, the same entries asked."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("qc_speed", ROOT / "bench" / "qc_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _render(tmp_path: Path) -> Path:
    from daotai.plan.planner import plan_script
    from daotai.run.pipeline import run
    from daotai.run.settings import PipelineSettings
    from daotai.script.load import validate_script

    data = json.loads((ROOT / "examples" / "minimal.json").read_text(encoding="utf-8"))
    data["size"] = "320x180"
    out = tmp_path / "render"
    list(run(plan_script(validate_script(data)), out, PipelineSettings(controls=False, cache=None, force=True)))
    return out


@pytest.mark.slow
def test_the_qc_speed_bench_times_a_folder_against_a_revision_and_compares_the_entries(tmp_path, capsys):
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    folder = _render(tmp_path)
    bench = _bench()
    assert bench.main([str(folder), "--against", "HEAD", "--repeat", "1"]) == 0
    printed = capsys.readouterr().out
    assert "ratio" in printed and "entries identical" in printed and "this tree" in printed
    seconds, text = bench.check_folder(folder)
    entries = json.loads(text)
    plan = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
    assert seconds > 0 and [e["shot_id"] for e in entries] == [s["shot_id"] for s in plan["shots"]]
    assert all(e["camera"]["depth_source"] == "scene_model" for e in entries)  # no controls: the scene model
