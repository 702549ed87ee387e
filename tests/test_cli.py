"""The command line as a user meets it: exit codes, one-line errors, never a traceback."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def daotai(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="120")
    return subprocess.run(
        [sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True, cwd=cwd or ROOT, env=env,
        timeout=300,
    )


def test_validate_ok():
    result = daotai("validate", "examples/office.json")
    assert result.returncode == 0
    assert "ok" in result.stdout and "4 shots" in result.stdout


def test_validate_bad_script_lists_every_problem_without_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"shots": [{"shot_id": "a", "camera": {"fov": 190}}, {"shot_id": "a", "duration": 0}],
                               "extra": 1}))
    result = daotai("validate", str(bad))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    assert "shots[0].camera.fov: 190 must be between 1 and 170" in result.stderr
    assert "shots[1].shot_id: 'a' is a duplicate" in result.stderr
    assert "shots[1].duration: 0 must be between 0 and 120" in result.stderr
    assert "extra: 1 is not a known field" in result.stderr


def test_validate_json_output(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"shots": [{"shot_id": "a", "duration": NaN}]}')
    result = daotai("validate", "--json", str(bad))
    assert result.returncode == 2
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and payload["issues"][0]["path"] == "shots[0].duration"


def test_validate_plans_too_and_exits_like_render(tmp_path):
    """A script validate passes also plans: a plan problem fails validate with its path, exit 2 (as render)."""
    script = tmp_path / "xfade.json"
    script.write_text(json.dumps({"characters": [{"id": "a"}],
                                  "shots": [{"shot_id": "s1", "duration": 1, "transition": {"type": "crossfade",
                                                                                           "duration": 0.5}},
                                            {"shot_id": "s2", "duration": 1}]}))
    result = daotai("validate", str(script))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "shots[0].transition.type: 'crossfade' needs a previous shot" in result.stderr
    assert "Traceback" not in result.stderr
    as_json = daotai("validate", "--json", str(script))
    payload = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and payload["ok"] is False and payload["stage"] == "plan"
    assert payload["issues"][0]["path"] == "shots[0].transition.type"
    rendered = daotai("render", str(script), "-o", str(tmp_path / "out"))
    assert rendered.returncode == 2 and "shots[0].transition.type" in rendered.stderr


def test_validate_plan_and_render_list_every_plan_problem_at_once(tmp_path):
    """Three shots with a plan problem each and a closing fade too long: all four named, exit 2, nothing written."""
    script = tmp_path / "many.json"
    script.write_text(json.dumps({"size": "160x96", "characters": [{"id": "a"}, {"id": "b"}], "fade_out": 5,
                                  "shots": [{"shot_id": "s1", "duration": 1, "transition": {"type": "crossfade"}},
                                            {"shot_id": "s2", "duration": 1, "characters": ["a"],
                                             "framing": "two_shot"},
                                            {"shot_id": "s3", "duration": 1, "camera": {"aim": "zz"}}]}))
    expected = ["shots[0].transition.type: 'crossfade' needs a previous shot",
                "shots[1].framing: 'two_shot' needs a second character",
                "shots[2].camera.aim: 'zz' must be 'subject' or the id of a character",
                "fade_out: 5.0 s (120 frames) must fit inside the last shot 's3'"]
    for args in (("validate", str(script)), ("plan", str(script), "-o", str(tmp_path / "plan.json")),
                 ("render", str(script), "-o", str(tmp_path / "out"))):
        done = daotai(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "4 problems in the script (found while planning it)" in done.stderr, done.stderr
        positions = [done.stderr.find(line) for line in expected]
        assert -1 not in positions and positions == sorted(positions), done.stderr
        assert "Traceback" not in done.stderr and "to resume" not in done.stderr
    as_json = json.loads(daotai("validate", "--json", str(script)).stdout)
    assert as_json["stage"] == "plan"
    assert [i["path"] for i in as_json["issues"]] == ["shots[0].transition.type", "shots[1].framing",
                                                      "shots[2].camera.aim", "fade_out"]
    assert not (tmp_path / "plan.json").exists() and not (tmp_path / "out").exists()


def test_validate_loads_no_torch():
    code = ("import sys; from daotai.cli import main; sys.argv = ['daotai', 'validate', 'examples/office.json']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'diffusers', 'cv2', 'av') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_missing_file_and_unknown_backend_are_clear(tmp_path):
    missing = daotai("validate", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    result = daotai("render", "examples/minimal.json", "-o", str(tmp_path / "o"), "--backend", "nonsense")
    assert result.returncode == 2  # a typo in an option, not a backend that failed
    assert "not a known backend" in result.stderr and "Traceback" not in result.stderr
    typo = daotai("render", "examples/minimal.json", "-o", str(tmp_path / "o"), "--backend", "preivz")
    assert typo.returncode == 2 and "did you mean 'previz'" in typo.stderr
    assert not (tmp_path / "o").exists()


def _without_models(tmp_path: Path) -> dict[str, str]:
    """An environment whose Hugging Face cache and licence records are empty folders."""
    return {"HF_HUB_CACHE": str(tmp_path / "hub"), "DAOTAI_CONFIG_DIR": str(tmp_path / "config")}


@pytest.mark.parametrize("backend, command", [
    ("wan", "daotai models pull wan2.1-t2v-1.3b"),
    ("ltx", "daotai models pull ltx-video-2b"),
    ("h3", "daotai models pull minimax-h3 --accept-licence"),  # the catalog's one model with a licence to accept
])
def test_a_model_not_downloaded_is_the_first_and_only_thing_said(backend, command, tmp_path):
    """Before the estimate (over 30 min on a CPU, so it would warn), the controls notice and the progress bar;
    with the command that pulls it; and no resume line, since nothing ran."""
    env = dict(os.environ, COLUMNS="400", **_without_models(tmp_path))
    done = subprocess.run([sys.executable, "-m", "daotai.cli", "render", "examples/minimal.json", "-o",
                           str(tmp_path / "out"), "--backend", backend], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error backend {backend} (its default model): "), done.stderr
    assert "is not downloaded" in lines[0] and lines[0].split("with: ")[1].startswith(command), lines[0]
    assert ("--accept-licence" in lines[0]) == (backend == "h3")
    assert done.stdout == "" and not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]  # no staging folder either


def test_a_dry_run_names_the_missing_model_before_its_estimate(tmp_path):
    env = dict(os.environ, COLUMNS="400", **_without_models(tmp_path))
    done = subprocess.run([sys.executable, "-m", "daotai.cli", "render", "examples/minimal.json", "-o",
                           str(tmp_path / "out"), "--backend", "wan", "--dry-run"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("warning backend wan (its default model): wan2.1-t2v-1.3b is not downloaded")
    assert "daotai models pull wan2.1-t2v-1.3b" in done.stderr and "estimate:" in done.stdout


def test_schema_is_json_with_defs():
    result = daotai("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert "Shot" in schema["$defs"]


def test_plan_is_written_and_byte_identical(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert daotai("plan", "examples/street_zh.json", "-o", str(first)).returncode == 0
    assert daotai("plan", "examples/street_zh.json", "-o", str(second)).returncode == 0
    assert first.read_bytes() == second.read_bytes()
    assert json.loads(first.read_text())["total_frames"] > 0


def test_preset_overrides_size(tmp_path):
    out = tmp_path / "p.json"
    assert daotai("plan", "examples/minimal.json", "-o", str(out), "--preset", "preview").returncode == 0
    plan = json.loads(out.read_text())
    assert (plan["width"], plan["height"]) == (640, 360)
    bad = daotai("plan", "examples/minimal.json", "-o", str(out), "--preset", "huge")
    assert bad.returncode == 2 and "--preset: 'huge' must be one of" in bad.stderr


def test_doctor_reports_machine():
    result = daotai("doctor")
    assert result.returncode == 0
    for word in ("cpu cores", "memory", "video encoders", "libx264", "previz OpenGL"):
        assert word in result.stdout
    if importlib.util.find_spec("torch") is not None:
        import torch

        from daotai.render.speed import levers_for, resolve_levers

        # the speed modes' levers on this machine's device, as the render would resolve them
        kind = "cuda" if torch.cuda.is_available() else "cpu"
        words = result.stdout.split()  # the table wraps long cells, at spaces
        for mode in ("exact", "fast"):
            text = resolve_levers(levers_for(mode, kind), kind).levers_text()
            assert f"speed {mode}" in result.stdout
            for lever in text.replace(",", " ").split():  # each lever of the row, wherever the cell wrapped
                assert lever in words or f"{lever}," in words, (mode, lever)
        if kind == "cpu":  # on a CPU, exact changes nothing and fast caches steps
            assert "no levers" in result.stdout and "cache=interval" in result.stdout
        # Wan's fast mode has its own cadence (every 4th step, guidance every 2nd): its own row says so
        wan = resolve_levers(levers_for("fast", kind, "wan"), kind).levers_text()
        assert "speed fast (wan)" in result.stdout and "guidance every 2" in " ".join(words)
        assert wan != resolve_levers(levers_for("fast", kind), kind).levers_text()


@pytest.mark.slow
def test_render_then_qc_folder(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({
        "size": "320x180", "fps": 12, "scene": "office",
        "characters": [{"id": "a", "name": "Lin"}],
        "shots": [{"shot_id": "s1", "duration": 1.5, "camera": "pan_left"},
                  {"shot_id": "s2", "duration": 1, "transition": "fade"}],
    }))
    out = tmp_path / "out"
    result = daotai("render", str(script), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert (out / "sequence.mp4").is_file() and "done" in result.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seeds"]["shots"].keys() == {"s1", "s2"}
    assert all(len(h) == 64 for h in manifest["files"].values())
    assert "shots/s1.mp4" in manifest["files"]
    checked = daotai("qc", str(out))
    assert checked.returncode == 0 and "s1" in checked.stdout
    # render accepts a plan file too, and --shots picks shots
    again = daotai("render", str(out / "plan.json"), "-o", str(tmp_path / "again"), "--shots", "s2", "--no-controls")
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in (tmp_path / "again" / "shots").iterdir()) == ["s2.mp4"]
