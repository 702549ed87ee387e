"""The OpenGL context previz opens on each platform, and GLX renders matching EGL's.

macOS (CGL) and Windows (WGL) cannot run here; what can be checked is that the selection gives
them moderngl's platform context (a core profile that compiles ``#version 330`` shaders, which
default to the core profile) and that the non-EGL code path renders on Linux under Xvfb/GLX.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from daotai.errors import BackendError
from daotai.render.previz.gl_context import context_backend

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = {"fps": 24, "size": "320x180", "characters": [{"id": "ana", "colour": "#3366cc"}],
          "shots": [{"shot_id": "orbit", "duration": 0.5, "subject": "ana", "camera": "orbit_left"}]}


@pytest.mark.parametrize("system, choice, expected", [
    ("Linux", "", "egl"), ("Linux", "egl", "egl"), ("Linux", "glx", None), ("Linux", "default", None),
    ("Darwin", "", None), ("Windows", "", None), ("Darwin", "default", None),
])
def test_context_backend_per_platform(system, choice, expected):
    assert context_backend(system, choice) == expected


def test_unknown_context_choice_is_refused():
    with pytest.raises(BackendError, match="DAOTAI_GL: 'vulkan' must be one of egl, glx, default"):
        context_backend("Linux", "vulkan")


def test_shaders_declare_glsl_330():
    from daotai.render.previz import shaders

    sources = [v for k, v in vars(shaders).items() if k.endswith(("_VS", "_FS")) and isinstance(v, str)]
    assert sources and all(s.lstrip().startswith("#version 330") for s in sources)


def _render(out: Path, **env: str) -> subprocess.CompletedProcess:
    script = out.parent / f"{out.name}.json"
    script.write_text(json.dumps(SCRIPT))
    return subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(script), "-o", str(out), "--no-controls"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "DAOTAI_DEBUG": "", **env})


def _frames(path: Path) -> np.ndarray:
    from daotai.encode.read import decode_frames

    return np.stack(list(decode_frames(path))).astype(np.float64)  # (F, H, W, 3)


def test_glx_under_xvfb_matches_egl(tmp_path):
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.skip("Xvfb is not installed (scripts/setup.sh installs it on Debian)")
    display = f":{90 + os.getpid() % 100}"
    server = subprocess.Popen([xvfb, display, "-screen", "0", "640x480x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        glx = _render(tmp_path / "glx", DISPLAY=display, DAOTAI_GL="glx")
        assert glx.returncode == 0, glx.stderr[-2000:]
        egl = _render(tmp_path / "egl", DAOTAI_GL="egl")
        assert egl.returncode == 0, egl.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=10)
    notices = [n for s in json.loads((tmp_path / "glx" / "manifest.json").read_text())["shots"] for n in s["notices"]]
    assert any("previz OpenGL" in n and "platform default context" in n for n in notices), notices
    a, b = _frames(tmp_path / "glx" / "shots" / "orbit.mp4"), _frames(tmp_path / "egl" / "shots" / "orbit.mp4")
    mse = float(np.mean((a - b) ** 2))
    psnr = 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)
    # Both are Mesa's llvmpipe here, so the pixels are expected to agree exactly (seen: identical files).
    assert psnr >= 50.0, psnr
