"""scripts/mac-check.sh --quick runs here as it would on a Mac and writes its report (so it cannot rot)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from daotai.maccheck import markdown

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("machine", "doctor", "previz", "mlx_parity", "wan_mlx", "encode")


# The whole quick check runs once for the module: ~65 s on two busy cores, most of it importing torch,
# diffusers and MLX and building the tiny models.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mac_check") / "report"
    env = {**os.environ, "DAOTAI_CHECK_SKIP_SETUP": "1"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "mac-check.sh"), "--quick", "--report", str(folder)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "report:" in done.stdout
    return json.loads((folder / "mac-check.json").read_text()), folder


def test_every_section_is_reported(report):
    data, folder = report
    assert data["report_version"] == 1 and data["quick"] is True
    for name in SECTIONS:
        assert data[name]["status"] in ("ok", "skipped", "error") and "seconds" in data[name]
    # on this machine everything the quick check does is installed, so each section must succeed
    assert [name for name in SECTIONS if data[name]["status"] != "ok"] == [], {
        name: data[name].get("error") or data[name].get("reason") for name in SECTIONS}
    assert (folder / "mac-check.md").read_text() == markdown(data)


def test_machine_doctor_and_previz(report):
    data, _ = report
    assert data["machine"]["result"]["os"].split()[0] in ("Linux", "Darwin", "Windows")
    assert data["machine"]["result"]["libraries"]["av"]
    names = {row["name"] for row in data["doctor"]["result"]}
    assert {"os", "previz OpenGL", "hardware encoders (--encoder)"} <= names
    [previz] = data["previz"]["result"]  # quick: minimal.json's first shot
    assert previz["example"] == "minimal.json" and previz["size"] == "320x180"
    assert previz["frames"] == 24  # the first second at the example's 24 fps
    assert previz["fps"] > 0 and previz["qc_ok"] is True


def test_mlx_parity_and_timed_renders(report):
    data, _ = report
    parity = data["mlx_parity"]["result"]
    assert parity["ok"] and set(parity["parts"]) == {"transformer", "vae_decode", "umt5"}
    assert all(part["rel_l2"] < part["bound"] for part in parity["parts"].values())
    wan = data["wan_mlx"]["result"]
    runs = [r for r in wan["runs"] if r["backend"] == "wan-mlx"]
    assert [r["precision"] for r in runs] == ["float32", "4-bit g64"]
    for run in runs:
        assert run["status"] == "ok" and run["wall_s"] > 0 and run["steps"] == 2
        assert run["estimate_gib"] > 0 and run["mlx_peak_gib"] > 0
        assert [s["stage"] for s in run["stages"]] == ["load, text encoder, first half of denoising",
                                                      "second half of denoising, VAE decode"]
    vace = [r for r in wan["runs"] if r["backend"] == "wan-vace-mlx"]
    assert bool(vace) == wan["wan_vace_mlx_registered"]  # timed exactly when the backend is there


def test_encoders(report):
    data, _ = report
    encode = data["encode"]["result"]
    software = encode["encoders"][0]
    assert software["encoder"] == "libx264" and software["gate_ok"] and software["psnr_mean_db"] >= 38.5
    opened = [p["name"] for p in encode["probes"] if p["opens"]]
    assert encode["hardware"] == (", ".join(opened) if opened else "not available")
    if sys.platform == "darwin":
        assert {p["name"] for p in encode["probes"]} == {"h264_videotoolbox", "hevc_videotoolbox"}
