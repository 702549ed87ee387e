"""The script's command-line flags: validate --normalised, schema --accepted, --resolution on
plan and render, render --open (the opener injected: no desktop needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import daotai.cli as cli
from daotai.cli import common, rendering
from daotai.script.load import validate_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FORGIVING = {
    "resolution": "UHD",
    "characters": [{"id": "lin", "color": "brown", "look": "short hair"}],
    "shots": [{"id": "s1", "character": "lin", "shot": "MS", "move": "slow push in", "duration": "2.5 s"},
              {"shot_id": "s2", "camera": "pan left 20°", "duration": "1m30s"}],
}


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def _write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def test_validate_normalised_prints_the_canonical_script(runner, tmp_path):
    result = runner.invoke(cli.app, ["validate", "--normalised", str(_write(tmp_path, FORGIVING))])
    assert result.exit_code == 0, result.output
    canonical = json.loads(result.stdout)
    assert canonical["size"] == {"width": 3840, "height": 2160}
    assert canonical["characters"][0]["appearance"] == "short hair"
    assert canonical["characters"][0]["colour"] == [0.45, 0.29, 0.17]
    first, second = canonical["shots"]
    assert (first["shot_id"], first["subject"], first["framing"], first["duration"]) == ("s1", "lin", "medium", 2.5)
    assert first["camera"]["type"] == "dolly" and first["camera"]["direction"] == "in"
    assert second["camera"]["rotate"] == [-20.0, 0.0, 0.0] and second["duration"] == 90.0
    # the canonical form is itself a script, and reads back as the same script
    assert validate_script(canonical) == validate_script(FORGIVING)


def test_validate_normalised_with_json_adds_the_script(runner, tmp_path):
    result = runner.invoke(cli.app, ["validate", "--json", "--normalised", str(_write(tmp_path, FORGIVING))])
    payload = json.loads(result.stdout)
    assert payload["ok"] is True and payload["script"]["shots"][1]["camera"]["type"] == "pan"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_examples_normalise_to_what_they_always_meant(runner, path):
    result = runner.invoke(cli.app, ["validate", "--normalised", str(path)])
    from daotai.script.load import load_script

    assert json.loads(result.stdout) == load_script(path).model_dump(mode="json")


def test_schema_accepted_is_a_wider_schema(runner):
    canonical = json.loads(runner.invoke(cli.app, ["schema"]).stdout)
    accepted = json.loads(runner.invoke(cli.app, ["schema", "--accepted"]).stdout)
    assert "color" in accepted["$defs"]["Character"]["properties"]
    assert "color" not in canonical["$defs"]["Character"]["properties"]
    assert accepted["$id"] != canonical["$id"]


def test_plan_resolution_sets_the_size(runner, tmp_path):
    out = tmp_path / "plan.json"
    result = runner.invoke(cli.app, ["plan", str(EXAMPLES / "minimal.json"), "-o", str(out), "--resolution", "4K"])
    assert result.exit_code == 0, result.output
    plan = json.loads(out.read_text(encoding="utf-8"))
    assert (plan["width"], plan["height"]) == (3840, 2160)


def test_resolution_refusals_name_the_flag(tmp_path):
    from daotai.errors import OptionError, PlanError, ScriptError

    with pytest.raises(ScriptError) as info:
        common.read_script(EXAMPLES / "minimal.json", None, "2K")
    assert str(info.value.issues[0]).startswith("--resolution: '2K' is ambiguous")
    with pytest.raises(ScriptError) as info:
        common.read_script(EXAMPLES / "minimal.json", None, "641x360")
    assert str(info.value.issues[0]) == "--resolution.width: 641 must be even (H.264 4:2:0 video needs even sizes)"
    with pytest.raises(OptionError, match="both set the frame size"):
        common.read_script(EXAMPLES / "minimal.json", "final", "4K")
    plan = tmp_path / "plan.json"
    CliRunner().invoke(cli.app, ["plan", str(EXAMPLES / "minimal.json"), "-o", str(plan)])
    result = CliRunner().invoke(cli.app, ["render", str(plan), "-o", str(tmp_path / "out"), "--resolution", "720p"])
    assert isinstance(result.exception, PlanError) and "cannot resize an existing plan" in str(result.exception)


@pytest.mark.parametrize("platform, command", [
    ("darwin", ["open"]), ("linux", ["xdg-open"]), ("freebsd14", ["xdg-open"]), ("win32", ["cmd", "/c", "start", ""]),
])
def test_open_with_system_uses_the_platform_opener(platform, command, tmp_path):
    calls = []
    assert rendering.open_with_system(tmp_path / "sequence.mp4", platform, lambda argv, **kw: calls.append(argv)) is None
    assert calls == [[*command, str(tmp_path / "sequence.mp4")]]


def test_a_missing_opener_is_a_note_not_a_failure(tmp_path):
    def missing(argv, **kw):
        raise FileNotFoundError(2, "No such file or directory")

    note = rendering.open_with_system(tmp_path / "sequence.mp4", "linux", missing)
    assert note.startswith("could not open") and "xdg-open" in note


def test_render_open_opens_the_sequence_when_done(runner, tmp_path, monkeypatch):
    opened = []
    # render looks the opener up in its own module
    monkeypatch.setattr(rendering, "open_with_system", lambda path, *a, **kw: opened.append(Path(path)))
    tiny = _write(tmp_path, {"size": "128x72", "fps": 12, "shots": [{"shot_id": "s1", "duration": "0.5s"}]})
    out = tmp_path / "out"
    result = runner.invoke(cli.app, ["render", str(tiny), "-o", str(out), "--no-controls", "--open"])
    assert result.exit_code == 0, result.output
    assert opened == [out / "sequence.mp4"] and opened[0].is_file()
