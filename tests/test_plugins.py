"""A backend and a model family from another package, found through entry points only.

``tests/plugins`` holds a test-only package (``daotai_tint``) with a ``.dist-info`` folder
whose ``entry_points.txt`` declares a ``daotai.backends`` spec and ``daotai.models`` rows.
With that folder on the path it renders through the CLI, the server and a local Ray cluster;
nothing inside daotai names it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "plugins"
DAOTAI = [sys.executable, "-m", "daotai.cli"]
SCRIPT = {
    "fps": 24, "size": "160x96", "scene": {"name": "plugin stage", "set_pieces": []},
    "characters": [{"id": "hero"}],
    "shots": [{"shot_id": "a", "duration": 0.5, "subject": "hero"},
              {"shot_id": "b", "duration": 0.5, "subject": "hero", "camera": "pan_left"}],
}


def plugin_env() -> dict[str, str]:
    """The environment with the plugin folder on PYTHONPATH (as if the package were installed)."""
    path = os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "DAOTAI_DEBUG": ""}


def daotai(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*DAOTAI, *args], capture_output=True, text=True, cwd=ROOT, env=plugin_env(),
                          timeout=timeout)


@pytest.fixture
def script(tmp_path) -> Path:
    path = tmp_path / "plugin.json"
    path.write_text(json.dumps(SCRIPT))
    return path


@pytest.fixture
def installed(monkeypatch):
    """The plugin visible to this process (and to the processes it starts)."""
    from daotai import catalog
    from daotai.render import registry

    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("PYTHONPATH", plugin_env()["PYTHONPATH"])
    catalog.reload()
    registry.reload()
    yield
    catalog.reload()
    registry.reload()
    sys.modules.pop("daotai_tint", None)


def first_frame(path: Path) -> np.ndarray:
    from daotai.encode.read import decode_frames

    return next(iter(decode_frames(path)))  # (H, W, 3) uint8


def assert_tint_render(out: Path, colour: tuple[int, int, int], stripes: int) -> dict:
    """Both shots delivered, striped as the model row says, in the asked colour; options recorded."""
    frame = first_frame(out / "shots" / "a.mp4")
    lit = frame.mean(axis=(0, 2)) > 40  # (W,) columns inside a stripe
    assert int(np.count_nonzero(np.diff(lit.astype(int)) == 1)) + int(lit[0]) == (stripes + 1) // 2
    centre = frame[frame.shape[0] // 2, np.argmax(lit) + 4].astype(int)
    assert np.abs(centre - np.array(colour)).max() <= 12, centre
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["backend"] == "tint"
    plan = json.loads((out / "plan.json").read_text())
    assert "tint" in {s["backend"] for s in plan["shots"][0]["snapping"]}  # the family's snap rule reached the planner
    return manifest


def test_not_visible_without_the_package():
    from daotai.render.registry import backend_names

    assert "tint" not in backend_names()


def test_cli_lists_renders_and_checks_options_of_an_entry_point_backend(script, tmp_path):
    listed = daotai("backends", "--json")
    assert listed.returncode == 0, listed.stderr
    tint = next(b for b in json.loads(listed.stdout) if b["name"] == "tint")
    assert tint["device_class"] == "cpu" and "colour" in tint["options"]

    out = tmp_path / "out"
    done = daotai("render", str(script), "-o", str(out), "--backend", "tint", "-O", "colour=#3366cc")
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = assert_tint_render(out, (0x33, 0x66, 0xCC), stripes=3)  # 3: the tint-stripes row's steps override
    assert manifest["settings"]["options"]["colour"] == "#3366cc"

    refused = daotai("render", str(script), "-o", str(tmp_path / "bad"), "--backend", "tint", "-O", "colour=blue")
    assert refused.returncode == 2 and "options.colour: 'blue'" in refused.stderr
    assert "valid options: colour, guidance" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "bad").exists()  # refused before any output folder was made


def test_server_renders_an_entry_point_backend(installed, script, tmp_path):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from daotai.server.testing import ServerProcess  # a real `daotai serve` process on loopback

    server = ServerProcess(tmp_path / "data").start()
    try:
        body = json.loads(script.read_text())
        refused = httpx.post(f"{server.url}/v1/jobs", params={"backend": "tint"},
                             json={**body, "options": {"colour": "blue", "sped": 1}})
        assert refused.status_code == 422, refused.text
        paths = {i["path"] for i in refused.json()["issues"]}
        assert paths == {"options.colour", "options.sped"} and "colour" in refused.json()["error"]["message"]
        reply = httpx.post(f"{server.url}/v1/jobs", params={"backend": "tint"},
                           json={**body, "options": {"colour": "#3366cc"}})
        assert reply.status_code == 202, reply.text
        job_id = reply.json()["id"]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            job = httpx.get(f"{server.url}/v1/jobs/{job_id}").json()
            if job["status"] in ("completed", "failed"):
                break
            time.sleep(0.3)
        assert job["status"] == "completed", job
        manifest = httpx.get(f"{server.url}/v1/jobs/{job_id}/files/manifest").json()
        assert manifest["settings"]["backend"] == "tint"
        assert manifest["settings"]["options"]["colour"] == "#3366cc"
    finally:
        server.stop()


@pytest.mark.slow
def test_cluster_renders_an_entry_point_backend_on_cpu_slots(script, tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "out"
    done = daotai("render", str(script), "-o", str(out), "--backend", "tint", "--cluster", "local", timeout=420)
    assert done.returncode == 0, done.stderr[-2000:]
    assert_tint_render(out, (0xC8, 0x3C, 0x28), stripes=3)


def test_entry_point_rows_join_the_catalog(installed):
    from daotai import catalog
    from daotai.cluster.runner import actor_resources

    assert catalog.model_row("tint-stripes").family == "tint"
    assert "tint" in catalog.snap_rules() and list(catalog.snap_rules())[:3] == ["previz", "wan", "ltx"]
    assert actor_resources("tint", None).num_gpus == 0  # a cpu backend never asks Ray for a GPU
