"""A waiting director always reads what the run is doing: the stage and the shot's number, in the
CLI's output and in the server's job events, from a real render."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from daotai.events import Progress
from daotai.plan.planner import plan_script
from daotai.run.progress_labels import ShotOrder
from daotai.script.load import validate_script

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = {
    "size": "160x96",
    "fps": 12,
    "characters": [{"id": "hero", "appearance": "red coat"}],
    "shots": [
        {"shot_id": "a", "duration": 1, "camera": {"type": "dolly", "motion": [0, 0, -0.3]}},
        {"shot_id": "b", "duration": 1, "framing": "close_up"},
    ],
}
# What a render of SCRIPT says, in this order (each label once at least).
IN_ORDER = ("rendering shot 1/2 (a)", "rendering shot 2/2 (b)", "assembling", "checking shot 1/2 (a)",
            "checking shot 2/2 (b)", "checking the sequence", "delivering")


def in_order(lines: list[str], wanted: tuple[str, ...]) -> list[str]:
    """The first line starting with each wanted label, in order; AssertionError naming what is missing."""
    found, at = [], 0
    for label in wanted:
        for i in range(at, len(lines)):
            if lines[i].startswith(label):
                found.append(lines[i])
                at = i + 1
                break
        else:
            raise AssertionError(f"{label!r} not found after {found[-1:] or 'the start'} in {lines}")
    return found


def test_labels_name_the_stage_and_number_the_shot():
    order = ShotOrder.of(plan_script(validate_script(SCRIPT)))
    assert order.count == 2 and order.numbers == {"a": 1, "b": 2}
    said = [order.label(e) for e in (
        Progress("render", "b", 3, 12),
        Progress("render", "a", 0, 12, "take 2 of 3, seed 7"),
        Progress("encode", "a", 0, 1, "finishing encoders"),
        Progress("qc", "b", 1, 2, "checking shot 2 of 2"),  # the message says again what the label says
        Progress("qc", None, 2, 2, "checking the sequence"),
        Progress("assemble", None, 0, 24, "2 shots into the sequence"),
        Progress("deliver", None, 3, 3),
        Progress("denoise", "a", 4, 20, "step 4/20 0.51 s"),
        Progress("render", "elsewhere", 1, 2),  # not in the plan (another run's shot): named, not numbered
    )]
    assert said == ["rendering shot 2/2 (b)", "rendering shot 1/2 (a): take 2 of 3, seed 7",
                    "encoding shot 1/2 (a): finishing encoders", "checking shot 2/2 (b)", "checking the sequence",
                    "assembling: 2 shots into the sequence", "delivering", "denoising shot 1/2 (a): step 4/20 0.51 s",
                    "rendering shot elsewhere"]


def test_cli_render_prints_each_stage_and_shot_in_order(tmp_path):
    script = tmp_path / "two.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(script), "-o", str(tmp_path / "out"),
                             "--no-cache"], capture_output=True, text=True, cwd=ROOT,
                            env=dict(os.environ, COLUMNS="200"), timeout=300)
    assert result.returncode == 0, result.stderr
    lines = [line.strip() for line in result.stderr.splitlines()]
    found = in_order(lines, IN_ORDER)
    assert found[2] == "assembling: 2 shots into the sequence…"


def test_server_job_events_label_stage_and_shot_in_order(tmp_path):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from daotai.server.testing import ServerProcess

    server = ServerProcess(tmp_path / "serve").start()
    try:
        reply = httpx.post(f"{server.url}/v1/jobs", json=SCRIPT)
        assert reply.status_code == 202, reply.text
        job_id = reply.json()["id"]
        progress, event = [], None
        with httpx.stream("GET", f"{server.url}/v1/jobs/{job_id}/events", timeout=120) as stream:
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "progress":
                    progress.append(json.loads(line[6:]))
        assert httpx.get(f"{server.url}/v1/jobs/{job_id}").json()["status"] == "completed"
    finally:
        server.stop()
    assert [p for p in progress if not (p.get("label") and p.get("stage"))] == []  # never a bare percentage
    in_order([p["label"] for p in progress], IN_ORDER)
    numbered = {(p["shot_id"], p["shot"], p["shots"]) for p in progress if p["shot_id"]}
    assert numbered == {("a", 1, 2), ("b", 2, 2)}
    percents = [p["progress"] for p in progress]
    assert percents == sorted(percents)  # the percentage never goes back while the labels move on
