"""Output folders are whole or untouched: a render fills a staging folder beside its output
folder and swaps it in at the end; a render stopped at any stage leaves the earlier render (or
no folder), never a mix; a folder that is not a render of the script needs --force; `daotai qc`
checks every file against the manifest and names replaced, stray and foreign files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import daotai.deliver.manifest
import daotai.files
import daotai.qc.report
import daotai.run.executors as executors
import daotai.run.finish as finish
from daotai.errors import OptionError
from daotai.events import Progress
from daotai.files import STAGING_MARK, sha256_file, staging_folder, swap_folder
from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.recheck import check_files, check_folder
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

ROOT = Path(__file__).resolve().parent.parent
TINY = {"fps": 12, "size": "320x180", "scene": {"name": "test stage", "set_pieces": []}, "characters": [{"id": "a"}]}
MOVES = ("pan_right", "pan_left", "tilt_up")


def script(*shot_ids: str, title: str | None = None, duration: float = 0.75) -> dict:
    data = dict(TINY, shots=[{"shot_id": sid, "duration": duration, "subject": "a", "camera": MOVES[i % 3]}
                             for i, sid in enumerate(shot_ids)])
    return {**data, "title": title} if title else data


def render(data: dict, out: Path, **settings) -> None:
    plan = plan_script(validate_script(data))
    events = list(run(plan, out, PipelineSettings(camera_qc=False, **settings)))
    assert isinstance(events[-1], Finished)


def hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) → sha256."""
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def whole(folder: Path) -> dict:
    """The folder checked against its manifest (what `daotai qc` checks first)."""
    from daotai.plan.layout import RenderLayout

    layout = RenderLayout.find(folder)
    return check_files(layout, json.loads(layout.manifest.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def old_render(tmp_path_factory) -> Path:
    """A complete render of three shots (copied by each test)."""
    out = tmp_path_factory.mktemp("old") / "out"
    render(script("s1", "s2", "s3"), out)
    return out


# ------------------------------------------------------------------ stopped at every stage


def _stop_in_shot(monkeypatch, shot_id: str) -> None:
    """Raise inside the render of ``shot_id``, after its first frames were encoded."""
    original = executors.render_shot

    def failing(backend, plan, shot, *args, **kwargs):
        for event in original(backend, plan, shot, *args, **kwargs):
            yield event
            if shot.shot_id == shot_id and isinstance(event, Progress) and event.done >= 3:
                raise KeyboardInterrupt

    monkeypatch.setattr(executors, "render_shot", failing)  # where LocalExecutor looks it up


def _stop_at(monkeypatch, stage: str) -> None:
    """Make one stage of the pipeline fail (each through the function the pipeline calls for it)."""
    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    if stage == "plan":  # plan.json written into the staging folder, no shot started
        monkeypatch.setattr(executors.LocalExecutor, "render_shots", boom)
    elif stage == "first shot":
        _stop_in_shot(monkeypatch, "s1")
    elif stage == "middle shot":
        _stop_in_shot(monkeypatch, "s2")
    elif stage == "assembly":
        monkeypatch.setattr(finish, "assemble_sequence", boom)
    elif stage == "qc":
        monkeypatch.setattr(daotai.qc.report, "check_render", boom)
    elif stage == "manifest":  # the manifest is written whole, then the run dies before the swap
        original = daotai.deliver.manifest.write_manifest

        def written_then_stopped(*args, **kwargs):
            original(*args, **kwargs)
            raise KeyboardInterrupt

        monkeypatch.setattr(daotai.deliver.manifest, "write_manifest", written_then_stopped)
    elif stage == "swap":
        monkeypatch.setattr(daotai.files, "swap_folder", boom)
    else:
        raise AssertionError(stage)


STAGES = ("plan", "first shot", "middle shot", "assembly", "qc", "manifest", "swap")
SAID = {"plan": "before the first shot", "first shot": "while rendering shot s1", "middle shot":
        "while rendering shot s2", "assembly": "while assembling", "qc": "during the quality checks",
        "manifest": "while writing the manifest", "swap": "while putting the new render in place"}


@pytest.mark.parametrize("stage", STAGES)
def test_a_rerender_stopped_at_any_stage_leaves_the_earlier_render_whole(stage, old_render, tmp_path, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(old_render, out)
    before = hashes(out)
    _stop_at(monkeypatch, stage)
    edited = script("s1", "s2", "s4")  # the same script, edited: s3 became s4
    with pytest.raises(KeyboardInterrupt) as stopped:
        render(edited, out)
    assert hashes(out) == before  # untouched, byte for byte
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # the staging folder is gone
    assert whole(out)["ok"], whole(out)["problems"]
    note = stopped.value.__notes__[-1]
    assert SAID[stage] in note and "is untouched: it still holds the earlier render" in note, note
    assert ("1 of 3 shot(s) finished (s1)" in note) == (stage == "middle shot"), note

    monkeypatch.undo()  # the same render again, not stopped: the new render, whole
    render(edited, out)
    report = check_folder(out)
    assert report.files["ok"], report.files["problems"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["files"]) | {"manifest.json"} == set(hashes(out))  # nothing else in the folder
    assert "shots/s4.mp4" in manifest["files"] and not (out / "shots" / "s3.mp4").exists()


def test_an_error_before_any_shot_ran_says_nothing_about_resuming(tmp_path, monkeypatch, capsys):
    """A backend that fails before its first shot (its model, its licence) left nothing to resume: the error alone."""
    from daotai import cli
    from daotai.errors import BackendError

    def refuses(*args, **kwargs):
        raise BackendError("the backend refused before its first shot")

    monkeypatch.setattr(executors.LocalExecutor, "render_shots", refuses)
    with pytest.raises(BackendError) as failed:
        render(script("s1", "s2"), tmp_path / "out")
    assert not getattr(failed.value, "__notes__", None) and list(tmp_path.iterdir()) == []
    (tmp_path / "film.json").write_text(json.dumps(script("s1")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["daotai", "render", "film.json", "-o", "out", "--no-cache"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    said = capsys.readouterr().err
    assert exited.value.code == BackendError.exit_code and "the backend refused before its first shot" in said
    assert "to resume" not in said and "Render stopped" not in said, said


def _wrapped_ctrl_c(*args, **kwargs):
    """A Ctrl-C that landed inside a pydantic serializer: pydantic-core wraps it in its own error."""
    import pydantic

    class Dumped(pydantic.BaseModel):
        value: int = 1

        @pydantic.field_serializer("value")
        def _dump(self, value: int) -> int:
            raise KeyboardInterrupt

    Dumped().model_dump_json()


def test_a_ctrl_c_wrapped_by_a_library_still_says_what_stopped_and_how_to_resume(tmp_path, monkeypatch, capsys):
    from daotai import cli

    monkeypatch.setattr(executors.LocalExecutor, "render_shots", _wrapped_ctrl_c)
    (tmp_path / "film.json").write_text(json.dumps(script("s1", "s2")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["daotai", "render", "film.json", "-o", "out", "--no-cache"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    said = " ".join(capsys.readouterr().err.split())
    assert exited.value.code == 130, said
    assert "cancelled" in said and "Render stopped before the first shot" in said, said
    assert "to resume: daotai render film.json -o out --no-cache" in said, said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["film.json"]


@pytest.mark.parametrize("stage", ["first shot", "manifest"])
def test_a_first_render_stopped_leaves_no_folder(stage, tmp_path, monkeypatch):
    _stop_at(monkeypatch, stage)
    with pytest.raises(KeyboardInterrupt) as stopped:
        render(script("s1", "s2"), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
    assert "was not created" in stopped.value.__notes__[-1]


def test_a_render_into_an_empty_folder_stopped_leaves_it_empty(tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    _stop_at(monkeypatch, "assembly")
    with pytest.raises(KeyboardInterrupt) as stopped:
        render(script("s1"), tmp_path / "out")
    assert [p.name for p in tmp_path.iterdir()] == ["out"] and list((tmp_path / "out").iterdir()) == []
    assert "is untouched (it was empty)" in stopped.value.__notes__[-1]


def test_finished_shots_of_a_stopped_render_are_cached_and_the_next_render_resumes(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    _stop_in_shot(monkeypatch, "s3")
    with pytest.raises(KeyboardInterrupt) as stopped:
        render(script("s1", "s2", "s3"), tmp_path / "out", cache=str(cache))
    note = stopped.value.__notes__[-1]
    assert "2 of 3 shot(s) finished (s1, s2)" in note and "shot cache" in note and "resume" in note, note
    monkeypatch.undo()
    render(script("s1", "s2", "s3"), tmp_path / "out", cache=str(cache))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {s["shot_id"]: s["render"] for s in manifest["shots"]} == {"s1": "reused", "s2": "reused",
                                                                      "s3": "rendered"}
    render(script("s1", "s2", "s3"), tmp_path / "fresh")  # resumed shots are the bytes of a render from scratch
    fresh = json.loads((tmp_path / "fresh" / "manifest.json").read_text())
    for rel in ("shots/s1.mp4", "shots/s2.mp4", "shots/s3.mp4", "sequence.mp4", "contact_sheet.png", "timeline.otio"):
        assert manifest["files"][rel] == fresh["files"][rel], rel


def test_a_staging_folder_left_by_a_killed_render_is_removed(tmp_path, old_render):
    out = tmp_path / "out"
    shutil.copytree(old_render, out)
    dead = staging_folder(out)
    dead.mkdir()
    (dead / ".daotai-render-in-progress.json").write_text(json.dumps({"pid": 2**22 + 12345, "host":
                                                                       __import__("socket").gethostname()}))
    render(script("s1", "s2", "s3"), out)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_swap_puts_the_old_folder_back_when_the_new_one_cannot_go_in(tmp_path, monkeypatch):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")
    staging = staging_folder(target)
    staging.mkdir()
    (staging / "new.txt").write_text("new")
    monkeypatch.setattr(daotai.files, "exchange_paths", lambda a, b: False)  # an OS without an atomic exchange
    real_replace = os.replace

    def refuse_staging(src, dst):
        if Path(src) == staging:
            raise OSError("no room")
        return real_replace(src, dst)

    monkeypatch.setattr(daotai.files.os, "replace", refuse_staging)
    with pytest.raises(OSError, match="no room"):
        swap_folder(staging, target)
    assert (target / "old.txt").read_text() == "old"
    monkeypatch.setattr(daotai.files.os, "replace", real_replace)
    swap_folder(staging, target)
    assert [p.name for p in target.iterdir()] == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# ------------------------------------------------------------------ another script, foreign files


def test_another_script_is_refused_without_force_and_replaces_the_folder_with_it(tmp_path, old_render):
    out = tmp_path / "out"
    shutil.copytree(old_render, out)
    before = hashes(out)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(script("x1", title="Another film")))
    plan = plan_script(validate_script(json.loads(other.read_text())))
    with pytest.raises(OptionError, match=r"--output: .* is a render of another script.*--force"):
        list(run(plan, out, PipelineSettings(camera_qc=False), source=other))
    assert hashes(out) == before
    list(run(plan, out, PipelineSettings(camera_qc=False, force=True), source=other))
    assert sorted(p.name for p in (out / "shots").iterdir()) == ["x1.mp4"]
    assert whole(out)["ok"] and [p.name for p in tmp_path.iterdir()] == sorted(["out", "other.json"])


def test_an_edited_script_file_renders_into_its_folder_without_force(tmp_path):
    source = tmp_path / "film.json"
    source.write_text(json.dumps(script("a1", "a2", title="A film")))
    out = tmp_path / "out"
    for shots in (("a1", "a2"), ("a1", "b2")):  # edited between the renders: another hash, the same file
        source.write_text(json.dumps(script(*shots, title="A film")))
        plan = plan_script(validate_script(json.loads(source.read_text())))
        list(run(plan, out, PipelineSettings(camera_qc=False), source=source))
    assert sorted(p.name for p in (out / "shots").iterdir()) == ["a1.mp4", "b2.mp4"]


def test_a_folder_with_foreign_files_is_refused_and_kept_whole_with_force(tmp_path, old_render):
    out = tmp_path / "out"
    shutil.copytree(old_render, out)
    (out / "notes.txt").write_text("the director's notes")
    plan = plan_script(validate_script(script("s1", "s2", "s3")))
    with pytest.raises(OptionError, match=r"holds 1 file\(s\) daotai did not write \(notes.txt\)"):
        list(run(plan, out, PipelineSettings(camera_qc=False)))
    before = hashes(out)
    events = list(run(plan, out, PipelineSettings(camera_qc=False, force=True)))
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("out.replaced-")]
    assert len(kept) == 1 and hashes(kept[0]) == before  # never deleted: the old folder, whole, beside
    assert not (out / "notes.txt").exists() and whole(out)["ok"]
    assert any(str(kept[0]) in getattr(e, "text", "") for e in events)


def test_a_folder_that_is_no_render_needs_force(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "holiday.mp4").write_bytes(b"not ours")
    plan = plan_script(validate_script(script("s1")))
    with pytest.raises(OptionError, match="not a daotai render: it has files but no manifest.json"):
        list(run(plan, out, PipelineSettings(camera_qc=False)))
    assert (out / "holiday.mp4").read_bytes() == b"not ours"
    empty = tmp_path / "empty"
    (empty / "shots").mkdir(parents=True)
    (empty / ".DS_Store").write_bytes(b"a desktop's folder cache")
    render(script("s1"), empty)  # an empty folder needs nothing
    assert whole(empty)["ok"]


def daotai_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", DAOTAI_NO_CACHE="1")
    return subprocess.run([sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_the_command_line_refuses_another_script_without_force(tmp_path, old_render):
    shutil.copytree(old_render, tmp_path / "out")
    (tmp_path / "other.json").write_text(json.dumps(script("x1", title="Another film")))
    refused = daotai_cli("render", "other.json", "-o", "out", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    message = " ".join(refused.stderr.split())
    assert "is a render of another script" in message and "--force" in message and "Traceback" not in message
    forced = daotai_cli("render", "other.json", "-o", "out", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert sorted(p.name for p in (tmp_path / "out" / "shots").iterdir()) == ["x1.mp4"]


def test_the_command_line_says_what_a_stopped_render_finished_and_how_to_resume(tmp_path, monkeypatch, capsys):
    from daotai import cli

    (tmp_path / "film.json").write_text(json.dumps(script("s1", "s2")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)
    _stop_in_shot(monkeypatch, "s2")
    monkeypatch.setattr(sys, "argv", ["daotai", "render", "film.json", "-o", "out", "--cache", "cache"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 130
    said = " ".join(capsys.readouterr().err.split())
    assert "while rendering shot s2; 1 of 2 shot(s) finished (s1)" in said, said
    assert "out was not created" in said and "kept in the shot cache (cache)" in said
    assert "to resume: daotai render film.json -o out --cache cache" in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "film.json"]


# ------------------------------------------------------------------ daotai qc


def test_qc_flags_a_replaced_shot_a_stray_shot_and_a_foreign_file(tmp_path, old_render):
    out = tmp_path / "out"
    shutil.copytree(old_render, out)
    (out / "shots" / "s2.mp4").write_bytes((out / "shots" / "s1.mp4").read_bytes())
    (out / "shots" / "stray.mp4").write_bytes((out / "shots" / "s1.mp4").read_bytes())
    (out / "notes.txt").write_text("not daotai's")
    report = check_folder(out)
    assert not report.ok
    files = report.files
    assert files["changed"] == ["shots/s2.mp4"] and files["unlisted"] == ["shots/stray.mp4"]
    assert files["foreign"] == ["notes.txt"]
    text = report.summary_text()
    assert "changed since manifest.json" in text and "notes.txt" in text


def test_the_command_line_qc_fails_on_a_replaced_shot(tmp_path, old_render):
    out = tmp_path / "out"
    shutil.copytree(old_render, out)
    (out / "shots" / "s3.mp4").write_bytes((out / "shots" / "s1.mp4").read_bytes())
    checked = daotai_cli("qc", "out", "--strict", cwd=tmp_path)
    assert checked.returncode == 7, checked.stderr
    assert "shots/s3.mp4" in checked.stdout + checked.stderr


def test_staging_folders_are_hidden_siblings_on_the_same_file_system(tmp_path):
    staging = staging_folder(tmp_path / "out")
    assert staging.parent == tmp_path and staging.name.startswith(f".out{STAGING_MARK}")


def test_ctrl_c_in_the_command_line_exits_130_with_what_was_finished(tmp_path):
    import signal
    import time

    # Long enough that this process, starved of the cores on a busy machine, still sees the staging
    # folder while the render runs (3 s shots were once drawn, checked and delivered in that time)
    (tmp_path / "film.json").write_text(json.dumps(script("s1", "s2", "s3", duration=8.0)))
    env = dict(os.environ, COLUMNS="200", DAOTAI_NO_CACHE="1")

    def as_from_a_terminal() -> None:
        # A shell starts a command with Ctrl-C delivered; a test worker may have had SIGINT ignored
        # or blocked by what ran before in it, and a child inherits both.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    proc = subprocess.Popen([sys.executable, "-m", "daotai.cli", "render", "film.json", "-o", "out"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_from_a_terminal)  # noqa: PLW1509 - a test's own child, no threads in it yet
    deadline = time.monotonic() + 120
    while not any((p / "plan.json").is_file() for p in tmp_path.glob(f".out{STAGING_MARK}*")):
        assert proc.poll() is None and time.monotonic() < deadline, "the render never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C in a terminal sends
    _, stderr = proc.communicate(timeout=120)
    said = " ".join(stderr.split())
    assert proc.returncode == 130, (f"{stderr}\nthis worker: SIGINT handler {signal.getsignal(signal.SIGINT)}, "
                                    f"blocked {signal.pthread_sigmask(signal.SIG_BLOCK, [])}")
    assert "cancelled" in said and "Render stopped" in said, said
    assert "to resume: daotai render film.json -o out" in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["film.json"]


def test_the_manifest_names_every_file_by_its_path_in_the_folder(tmp_path):
    # Two shots' files of one name in different folders must both be listed (and checked).
    from daotai.deliver.manifest import output_files

    for rel in ("sequence.mp4", "shots/a.mp4", "enhanced/shots/a.mp4", "shots/.a.mp4.tmp"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(rel.encode())
    (tmp_path / "manifest.json").write_text("{}")
    assert output_files(tmp_path) == {rel: sha256_file(tmp_path / rel)
                                      for rel in ("enhanced/shots/a.mp4", "sequence.mp4", "shots/a.mp4")}


def test_glimpses_while_rendering_change_no_output_and_shot_files_are_announced_where_they_are_now(tmp_path):
    """A live view (the server's console) asks for glimpses and shows each shot's file from the
    staging folder before the swap; the render's files are the same byte for byte either way."""
    from daotai.events import GLIMPSE_WIDTH, Glimpse, Output
    from daotai.render.base import RunContext

    data = script("s1", "s2", "s3")
    data["size"] = "640x360"
    plain = tmp_path / "plain"
    render(data, plain)
    plan = plan_script(validate_script(data))
    out = tmp_path / "out"
    glimpses, announced = [], {}
    for event in run(plan, out, PipelineSettings(camera_qc=False), RunContext(glimpse_every_s=0.05)):
        if isinstance(event, Glimpse):
            glimpses.append(event)
        elif isinstance(event, Output) and event.kind == "shot":
            assert Path(event.path) == out / "shots" / f"{event.shot_id}.mp4"
            assert Path(event.written).parent.parent.name.startswith(".out.")  # the staging sibling
            announced[event.shot_id] = sha256_file(event.written)  # complete when announced
    assert {(g.shot_id, g.index) for g in glimpses} >= {("s1", 0), ("s2", 0), ("s3", 0)}
    assert all(g.rgb.shape == (180, GLIMPSE_WIDTH, 3) and g.rgb.dtype == np.uint8 for g in glimpses)
    timed = {"manifest.json"}  # its timings_s differ from run to run; every other file is the same
    assert {k: v for k, v in hashes(out).items() if k not in timed} == \
        {k: v for k, v in hashes(plain).items() if k not in timed}
    assert announced == {sid: sha256_file(out / "shots" / f"{sid}.mp4") for sid in ("s1", "s2", "s3")}
    no_glimpse = [e for e in run(plan, tmp_path / "again", PipelineSettings(camera_qc=False)) if isinstance(e, Glimpse)]
    assert no_glimpse == []
