"""The exception tree as users meet it: one exit code and one HTTP status per class.

The CLI's ``main`` and the server's one handler read ``exit_code``/``http_status`` from the
classes; these tests run the real command line (in-process through ``main`` and as a
subprocess) and a real server on loopback, and check the drawing in ``daotai.errors``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from daotai import errors
from daotai.errors import (
    NO_VALUE,
    BackendError,
    Cancelled,
    DaotaiError,
    DependencyMissing,
    DiskFull,
    EncodeError,
    Issue,
    OptionError,
    PlanError,
    QualityError,
    ScriptError,
)

ROOT = Path(__file__).resolve().parent.parent
INTERNAL = 70  # daotai.cli.INTERNAL_ERROR_EXIT

# class → (exit code, HTTP status): the table this file holds the code to.
TABLE = {
    DaotaiError: (1, 500),
    ScriptError: (2, 422),
    OptionError: (2, 422),
    PlanError: (2, 422),
    BackendError: (4, 500),
    DependencyMissing: (5, 501),
    EncodeError: (6, 500),
    QualityError: (7, 500),
    DiskFull: (8, 507),
    Cancelled: (130, 409),
}


def sample(kind: type[DaotaiError]) -> DaotaiError:
    """One instance of each class, built the way daotai builds them."""
    if kind is ScriptError:
        return ScriptError([Issue("shots[0].camera.fov", 190, "must be between 1 and 170")], "body")
    if kind is OptionError:
        return OptionError.at("options.steps", 0, "must be >= 1", ("steps", "guidance"))
    if kind is PlanError:
        return PlanError.at("shots[0].transition.type", "crossfade", "needs a previous shot to blend from")
    if kind is DependencyMissing:
        return DependencyMissing("uvicorn", "server", "daotai serve")
    if kind is DiskFull:
        return DiskFull("/data/out", 12 * 1024**2, 44 * 1024**2, "this render (3 shots, 288 frames at 1280x720)")
    return kind(f"a {kind.__name__} for the test")


def daotai(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=300)


def crossfade_first(tmp_path: Path) -> Path:
    """A valid script the planner refuses: a crossfade into the first shot."""
    path = tmp_path / "crossfade.json"
    path.write_text(json.dumps({"size": "160x96", "shots": [
        {"shot_id": "a", "duration": 1, "transition": {"type": "crossfade"}}, {"shot_id": "b", "duration": 1}]}))
    return path


# ------------------------------------------------------------------ the tree itself


def test_every_class_has_its_exit_code_and_http_status():
    for kind, (code, status) in TABLE.items():
        assert (kind.exit_code, kind.http_status) == (code, status), kind
        assert re.fullmatch(r"[a-z_]+", kind.code), kind
    assert OptionError.__bases__ == (DaotaiError,) and issubclass(DependencyMissing, BackendError)


def test_the_docstring_drawing_matches_the_classes():
    drawn = {}
    for line in errors.__doc__.splitlines():
        found = re.search(r"(\w+Error|DependencyMissing|DiskFull|Cancelled)\s+exit (\d+)\s+HTTP (\d+)", line)
        if found:
            drawn[found.group(1)] = (int(found.group(2)), int(found.group(3)))
    assert drawn == {kind.__name__: pair for kind, pair in TABLE.items()}


def test_errors_import_without_pydantic_and_cli_without_fastapi():
    code = ("import sys, daotai.errors; assert 'pydantic' not in sys.modules, 'pydantic'; "
            "import daotai.cli; assert 'fastapi' not in sys.modules, 'fastapi'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_option_error_message_names_the_valid_options():
    one = OptionError.at("--enhance", "sharpen", "is not a step", ("upscale", "interpolate"))
    assert str(one) == "--enhance: 'sharpen' is not a step; valid options: upscale, interpolate"
    assert one.issues == (Issue("--enhance", "sharpen", "is not a step"),) and one.valid == ("upscale", "interpolate")
    two = OptionError([Issue("options.a", 1, "must be > 2"), Issue("options.b", NO_VALUE, "is required")], ("a", "b"))
    assert str(two).splitlines() == ["2 problems in the options", "  options.a: 1 must be > 2",
                                     "  options.b: is required", "  valid options: a, b"]


def test_option_error_from_pydantic_keeps_every_problem_with_its_path_and_value():
    from pydantic import BaseModel, ConfigDict, Field, ValidationError

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        steps: int = Field(30, ge=1)
        shift: float = 5.0
        sizes: list[int] = []

    with pytest.raises(ValidationError) as caught:
        Options(steps=0, shfit=3, shift="x", sizes=[1, "big"])
    exc = OptionError.from_pydantic(caught.value, "options", tuple(Options.model_fields))
    assert exc.exit_code == 2 and exc.valid == ("steps", "shift", "sizes")
    by_path = {i.path: i for i in exc.issues}
    assert set(by_path) == {"options.steps", "options.shfit", "options.shift", "options.sizes[1]"}
    assert by_path["options.steps"].value == 0 and by_path["options.steps"].rule.startswith("must be greater")
    assert by_path["options.shfit"].value == 3 and by_path["options.shfit"].rule == "is not a known option"
    assert by_path["options.sizes[1]"].value == "big"
    assert "valid options: steps, shift, sizes" in str(exc)
    with pytest.raises(TypeError):
        OptionError.from_pydantic(ValueError("not pydantic"), "options", ())


def test_plan_error_carries_its_path():
    exc = PlanError.at("shots[0].transition.type", "crossfade", "needs a previous shot")
    assert exc.path == "shots[0].transition.type"
    assert str(exc) == "shots[0].transition.type: 'crossfade' needs a previous shot"
    assert PlanError("no path here").path is None and PlanError("no path here").issues == ()


def test_disk_full_says_where_how_much_is_free_and_how_much_is_needed():
    before = DiskFull("/data/out", 12 * 1024**2, 44 * 1024**2 + 300 * 1024, "this render (3 shots)")
    assert str(before) == ("not enough disk space in /data/out: 12.0 MiB free; this render (3 shots) needs about "
                           "44.3 MiB; free some space there (or choose a folder on another disk) and try again")
    during = DiskFull("/data/out", 900, 5 * 1024**3, "this render", writing="shots/s1.mp4")
    assert str(during).startswith("disk full: /data/out ran out of space while writing shots/s1.mp4 (900 bytes "
                                  "free now; this render needs about 5.0 GiB); nothing was left half-written; ")
    assert "needs" not in str(DiskFull("/data", 0, writing="jobs.sqlite3")).split(";")[0]


def test_disk_full_cause_finds_no_space_anywhere_in_the_chain():
    import errno

    full = OSError(errno.ENOSPC, "No space left on device", "/data/.s1.mp4.1f0c9a3e.partial.mp4")
    try:
        try:
            raise full
        except OSError as exc:
            raise EncodeError("encoding frame 3 failed") from exc
    except EncodeError as wrapped:
        assert errors.disk_full_cause(wrapped) is full
    assert errors.disk_full_cause(OSError(errno.EDQUOT, "Disk quota exceeded")) is not None
    assert errors.disk_full_cause(OSError(errno.EACCES, "Permission denied")) is None
    assert errors.disk_full_cause(ValueError("x")) is None and errors.disk_full_cause(None) is None


# ------------------------------------------------------------------ the command line


@pytest.fixture()
def raising_command():
    """A hidden command on the real CLI app that raises what the test puts in ``box``."""
    from daotai import cli

    box: dict[str, BaseException] = {}

    def boom() -> None:
        raise box["exc"]

    cli.app.command(name="raise-for-test", hidden=True)(boom)
    try:
        yield box
    finally:
        cli.app.registered_commands[:] = [c for c in cli.app.registered_commands if c.callback is not boom]


def run_main(monkeypatch, capsys, *argv: str) -> tuple[int, str]:
    from daotai import cli

    monkeypatch.setattr(sys, "argv", ["daotai", *argv])
    with pytest.raises(SystemExit) as done:
        cli.main()
    return done.value.code, capsys.readouterr().err


@pytest.mark.parametrize("kind", list(TABLE), ids=lambda k: k.__name__)
def test_cli_exit_code_per_class(kind, raising_command, monkeypatch, capsys):
    raising_command["exc"] = sample(kind)
    code, err = run_main(monkeypatch, capsys, "raise-for-test")
    assert code == kind.exit_code
    assert "Traceback" not in err and str(raising_command["exc"]).splitlines()[0] in " ".join(err.split())


def test_cli_reports_anything_else_as_a_bug_with_its_own_exit_code(raising_command, monkeypatch, capsys):
    monkeypatch.delenv("DAOTAI_DEBUG", raising=False)
    raising_command["exc"] = ValueError("first line\nsecond line")
    code, err = run_main(monkeypatch, capsys, "raise-for-test")
    assert code == INTERNAL and code not in {c for c, _ in TABLE.values()}
    assert "internal error ValueError: first line" in err and "this is a bug" in err
    assert "second line" not in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_enhance_spec_out_of_range_is_an_option_error(tmp_path):
    done = daotai("render", "examples/minimal.json", "-o", str(tmp_path / "out"), "--enhance", "upscale=3")
    assert done.returncode == 2, done.stderr
    assert "upscale: '3' must be 2 or 4" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_enhance_command_flags_are_option_errors(tmp_path):
    bad = tmp_path / "in.mp4"
    bad.write_bytes(b"\0" * 1000)
    out = str(tmp_path / "out.mp4")
    method = daotai("enhance", str(bad), "-o", out, "--upscale", "2", "--method", "magic")
    assert method.returncode == 2 and "upscale.method: 'magic' must be one of" in method.stderr
    nothing = daotai("enhance", str(bad), "-o", out)
    assert nothing.returncode == 2 and "no step given" in nothing.stderr
    unreadable = daotai("enhance", str(bad), "-o", out, "--upscale", "2")  # valid flags, broken video
    assert unreadable.returncode == EncodeError.exit_code and "is not a readable video" in unreadable.stderr


def test_unknown_speed_mode_is_an_option_error(tmp_path):
    done = daotai("render", "examples/minimal.json", "-o", str(tmp_path / "out"), "--speed", "fsat")
    assert done.returncode == 2 and "speed: 'fsat' must be one of off, exact, fast" in done.stderr


def test_unplannable_script_exits_2_with_the_path(tmp_path):
    done = daotai("plan", str(crossfade_first(tmp_path)), "-o", str(tmp_path / "plan.json"))
    assert done.returncode == PlanError.exit_code
    assert "shots[0].transition.type: 'crossfade' needs a previous shot" in done.stderr


# ------------------------------------------------------------------ the server


@pytest.fixture()
def server(tmp_path):
    """A live server on loopback (dispatcher off) with one extra route that raises the class it is named."""
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from daotai.server.app import create_app
    from daotai.server.testing import thread_server

    app = create_app(tmp_path / "data", start_dispatcher=False)
    by_name = {kind.__name__: kind for kind in TABLE}

    @app.get("/test/raise/{name}", include_in_schema=False)
    def raise_named(name: str):
        if name == "ValueError":
            raise ValueError("internal detail 42")
        raise sample(by_name[name])

    with thread_server(app) as url:
        yield url, httpx


@pytest.mark.parametrize("kind", list(TABLE), ids=lambda k: k.__name__)
def test_http_status_per_class(kind, server):
    url, httpx = server
    reply = httpx.get(f"{url}/test/raise/{kind.__name__}")
    assert reply.status_code == kind.http_status
    body = reply.json()
    assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["code"] == kind.code
    assert "\n" not in body["error"]["message"]
    if kind.http_status == 422:
        exc = sample(kind)
        assert body["error"]["param"] == exc.issues[0].path
        assert body["issues"] == [{"path": i.path, "value": repr(i.value), "rule": i.rule} for i in exc.issues]
    else:
        assert body["error"]["message"] == str(sample(kind)).splitlines()[0]
        assert body["error"]["type"] == ("server_error" if kind.http_status >= 500 else "invalid_request_error")
    if kind is OptionError:
        assert body["error"]["message"].endswith("; valid options: steps, guidance")


def test_http_anything_else_is_an_internal_error(server):
    url, httpx = server
    reply = httpx.get(f"{url}/test/raise/ValueError")
    assert reply.status_code == 500
    error = reply.json()["error"]
    assert error["code"] == "internal_error" and "a bug in daotai" in error["message"]
    assert "internal detail 42" not in error["message"]  # details go to the server log, not to the client


def test_plan_preview_of_an_unplannable_script_is_422_with_the_path(server, tmp_path):
    url, httpx = server
    script = crossfade_first(tmp_path).read_bytes()
    json_type = {"content-type": "application/json"}
    assert httpx.post(f"{url}/v1/scripts/validate", content=script, headers=json_type).json()["valid"] is True
    reply = httpx.post(f"{url}/v1/plan", content=script, headers=json_type)
    assert reply.status_code == 422, reply.text
    body = reply.json()
    assert body["error"]["code"] == "unplannable_script"
    assert body["error"]["param"] == "shots[0].transition.type"
    assert body["issues"][0]["path"] == "shots[0].transition.type" and body["issues"][0]["value"] == "'crossfade'"
    document = httpx.get(f"{url}/openapi.json").json()
    assert "422" in document["paths"]["/v1/plan"]["post"]["responses"]


def test_invalid_script_job_is_422_and_unknown_job_is_404(server):
    url, httpx = server
    bad = {"shots": [{"shot_id": "a", "camera": {"fov": 190}}]}
    reply = httpx.post(f"{url}/v1/jobs", json=bad)
    assert reply.status_code == 422 and reply.json()["error"]["code"] == "invalid_script"
    assert reply.json()["issues"][0]["path"] == "shots[0].camera.fov"
    missing = httpx.get(f"{url}/v1/jobs/video_{'0' * 32}")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
