"""``bench/neural.py --model ltx2 --tiny``: the released-size bench's code path runs on the CPU, and our backend's
exact mode reproduces diffusers' stock condition pipeline, frames and sound, at the same request and seed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_tiny_bench_runs_and_exact_matches_stock(tmp_path):
    report = tmp_path / "ltx2.json"
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "neural.py"), "--model", "ltx2", "--tiny",
                             "--steps", "3", "--contenders", "stock,exact", "--json", str(report)],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "contender    s/step  vs stock" in result.stdout
    data = json.loads(report.read_text())
    assert data["tiny"] and data["device"] == "cpu" and data["steps"] == 3
    rows = {r["contender"]: r for r in data["rows"]}
    assert set(rows) == {"stock", "exact"}
    assert math.isinf(rows["exact"]["psnr_frames_vs_stock"]) and math.isinf(rows["exact"]["psnr_sound_vs_stock"])
    assert all(r["s_per_step"] > 0 and r["total_s"] > 0 for r in rows.values())
    assert "speed exact: no levers" in rows["exact"]["notices"]
