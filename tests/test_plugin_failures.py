"""A plugin that fails to load is skipped and reported; the rest, previz included, work; a switch turns plugins off.

The broken packages are written into a temporary folder with their own ``.dist-info`` (as an
installed package has): one whose import raises, one whose entry point gives the wrong kind of
object, one whose model row names a family nobody has. ``tests/plugins`` (the working tint
backend) sits beside them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "plugins"
SCRIPT = {"fps": 24, "size": "160x96", "characters": [{"id": "hero"}],
          "shots": [{"shot_id": "a", "duration": 0.5, "subject": "hero"}]}


def write_package(folder: Path, name: str, source: str, entry_points: str) -> None:
    (folder / name).mkdir()
    (folder / name / "__init__.py").write_text(source)
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    write_package(folder, "daotai_broken", 'raise ImportError("daotai_broken needs libsparkle, which is not installed")\n',
                  "[daotai.backends]\nbroken = daotai_broken:SPEC\n\n[daotai.models]\nbroken = daotai_broken:ROWS\n")
    write_package(folder, "daotai_wrongtype", "SPEC = 42\n", "[daotai.backends]\nwrongtype = daotai_wrongtype:SPEC\n")
    write_package(folder, "daotai_orphan", "from daotai import catalog\n"
                  "FOOTPRINT = catalog.ModelFootprint('orphan-1b', 0.0, 0.0, 0.0, 8, 1, 8, 0.0)\n"
                  "ROWS = [catalog.ModelRow('orphan-1b', 'x/orphan', None, 'no-such-family', 'P', FOOTPRINT, 0.0,"
                  " 'none')]\n",
                  "[daotai.models]\norphan = daotai_orphan:ROWS\n")
    return folder


def env_with(*folders: Path, **extra: str) -> dict[str, str]:
    path = os.pathsep.join([*(str(f) for f in folders), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "DAOTAI_DEBUG": "", "COLUMNS": "200", **extra}


def daotai(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


@pytest.fixture
def installed(broken, monkeypatch):
    """The broken packages and the working tint backend visible to this process."""
    from daotai import catalog
    from daotai.render import registry

    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.syspath_prepend(str(broken))
    monkeypatch.delenv("DAOTAI_NO_PLUGINS", raising=False)
    catalog.reload()
    registry.reload()
    yield
    catalog.reload()
    registry.reload()
    for name in ("daotai_tint", "daotai_broken", "daotai_wrongtype", "daotai_orphan"):
        sys.modules.pop(name, None)


def test_a_broken_plugin_is_skipped_and_the_others_load(installed):
    from daotai import catalog
    from daotai.plugins import skipped
    from daotai.render.registry import backend_names, spec_for

    names = backend_names()
    assert {"previz", "tint"} <= set(names) and not {"broken", "wrongtype"} & set(names)
    assert spec_for("previz").name == "previz"
    assert "tint-stripes" in catalog.models()  # the working plugin's rows joined
    assert "orphan-1b" not in catalog.models()
    problems = {(p.group, p.name): p for p in skipped()}
    assert set(problems) == {("daotai.backends", "broken"), ("daotai.models", "broken"),
                             ("daotai.backends", "wrongtype"), ("daotai.models", "orphan-1b")}, problems
    backend = problems["daotai.backends", "broken"]
    assert "ImportError: daotai_broken needs libsparkle" in backend.error
    assert "libsparkle" in problems["daotai.models", "broken"].error
    assert "gave int, not a daotai.render.spec.BackendSpec" in problems["daotai.backends", "wrongtype"].error
    assert "family 'no-such-family' is not in the catalog" in problems["daotai.models", "orphan-1b"].error
    assert str(backend).startswith("plugin 'broken' (daotai.backends: daotai_broken:SPEC) skipped:")


def test_doctor_reports_the_skipped_plugins(installed):
    from daotai.doctor import plugin_check

    check = plugin_check()
    assert check.name == "plugins" and not check.ok
    assert "tint" in check.value.split(";")[0] and "libsparkle" in check.value and "wrongtype" in check.value


def test_plugins_switched_off_load_nothing(installed, monkeypatch):
    from daotai import catalog
    from daotai.doctor import plugin_check
    from daotai.plugins import skipped
    from daotai.render import registry

    monkeypatch.setenv("DAOTAI_NO_PLUGINS", "1")
    registry.reload()
    catalog.reload()
    assert "tint" not in registry.backend_names() and "previz" in registry.backend_names()
    assert "tint-stripes" not in catalog.models()
    assert skipped() == ()
    check = plugin_check()
    assert check.ok and "DAOTAI_NO_PLUGINS" in check.value


def test_cli_lists_backends_and_renders_previz_beside_a_broken_plugin(broken, tmp_path):
    env = env_with(broken, PLUGINS)
    listed = daotai("backends", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    names = [row["name"] for row in json.loads(listed.stdout)]
    assert "previz" in names and "tint" in names and "broken" not in names
    assert "plugin 'broken'" in listed.stderr and "libsparkle" in listed.stderr
    text = daotai("backends", env=env)
    assert text.returncode == 0 and "plugin 'wrongtype'" in text.stderr and "previz" in text.stdout

    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    done = daotai("render", str(script), "-o", str(tmp_path / "out"), env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "out" / "sequence.mp4").is_file()

    off = daotai("backends", "--json", env=env_with(broken, PLUGINS, DAOTAI_NO_PLUGINS="1"))
    assert off.returncode == 0, off.stderr
    assert "tint" not in [row["name"] for row in json.loads(off.stdout)]
    assert "plugins are off" in off.stderr and "libsparkle" not in off.stderr
