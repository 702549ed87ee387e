"""Incremental renders: unchanged shots come from the cache, byte for byte what a full render makes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from daotai.pipeline import Finished, PipelineSettings, run
from daotai.plan.planner import plan_script
from daotai.script.load import validate_script
from daotai.shotcache import ShotCache, key_fields, shot_key

MOVES = ["static", "pan_left", "pan_right", "push_in", "pull_back", "tilt_up", "orbit_left", "crane_up"]
SCRIPT = {
    "fps": 24, "size": "160x96", "seed": 3,
    "characters": [{"id": "ana", "colour": "#3366cc"}, {"id": "bo", "colour": "#cc6633", "position": [0.8, -1.0]}],
    "shots": [{"shot_id": f"s{i}", "duration": 0.5, "subject": "ana" if i % 2 else "bo", "camera": move}
              for i, move in enumerate(MOVES)],
}
COMPARED = ["sequence.mp4", "plan.json", "contact_sheet.png", "timeline.otio", "control/index.json",
            *(f"shots/s{i}.mp4" for i in range(len(MOVES)))]


def changed_script() -> dict:
    script = json.loads(json.dumps(SCRIPT))
    script["shots"][5]["camera"] = "tilt_down"
    return script


def render(script: dict, out: Path, cache: Path | None, checked: list[str] | None = None) -> dict:
    """Render into ``out``; ``checked`` collects the shots QC checked (from its progress events)."""
    from daotai.render.base import Progress

    plan = plan_script(validate_script(script))
    events = list(run(plan, out, PipelineSettings(cache=str(cache) if cache else None)))
    assert isinstance(events[-1], Finished)
    if checked is not None:
        checked += [e.shot_id for e in events if isinstance(e, Progress) and e.stage == "qc" and e.shot_id]
    return json.loads((out / "manifest.json").read_text())


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_one_changed_shot_renders_again_and_the_result_equals_a_full_render(tmp_path):
    cache = tmp_path / "cache"
    first = render(SCRIPT, tmp_path / "first", cache)
    assert {s["render"] for s in first["shots"]} == {"rendered"}
    checked: list[str] = []
    again = render(changed_script(), tmp_path / "again", cache, checked)
    rendered = [s["shot_id"] for s in again["shots"] if s["render"] == "rendered"]
    assert rendered == ["s5"]
    assert checked == ["s5"]
    assert all(s["render"] == "reused" for s in again["shots"] if s["shot_id"] != "s5")
    fresh = tmp_path / "fresh"
    render(changed_script(), fresh, None)
    for rel in COMPARED:
        assert digest(tmp_path / "again" / rel) == digest(fresh / rel), rel
    # QC checked only the changed shot; the reused ones kept their verdicts, and qc.json reads as a full check's
    assert (tmp_path / "again" / "qc.json").read_bytes() == (fresh / "qc.json").read_bytes()


def test_a_damaged_entry_is_found_and_rendered_again(tmp_path):
    cache = tmp_path / "cache"
    render(SCRIPT, tmp_path / "first", cache)
    made = {rel: digest(tmp_path / "first" / rel) for rel in COMPARED}
    victim = next((cache / "entries").glob("*/shot"))
    # Damage in place (a disk's bit rot): the entry shares its file with first/ (a hard link), so
    # both names see it; the entry's sha256 catches it before the shot is reused.
    victim.write_bytes(victim.read_bytes()[:-100] + b"\0" * 100)  # same size, other bytes
    again = render(SCRIPT, tmp_path / "again", cache)
    assert sum(s["render"] == "rendered" for s in again["shots"]) == 1
    damaged = [n for s in again["shots"] for n in s["notices"]]
    assert not any("damaged" in n for n in damaged)  # the warning goes to the run, not to a shot's record
    for rel in COMPARED:
        assert digest(tmp_path / "again" / rel) == made[rel], rel


def fields_for(script: dict, **change) -> str:
    from dataclasses import replace

    from daotai.encode.video import EncodeSettings

    plan = plan_script(validate_script(script))
    args = dict(backend="previz", options={"labels": True}, controls=True, encode=EncodeSettings(), source=None,
                model=None)
    args.update(change)
    encode = args.pop("encode")
    if "crf" in args:
        encode = replace(encode, crf=args.pop("crf"))
    return shot_key(key_fields(plan, plan.shots[0], encode=encode, memo={}, **args))


def test_the_key_follows_what_determines_the_files(tmp_path, monkeypatch):
    base = fields_for(SCRIPT)
    assert fields_for(SCRIPT) == base
    assert fields_for(SCRIPT, options={"labels": False}) != base  # an option
    assert fields_for(SCRIPT, controls=False) != base  # what is written
    assert fields_for(SCRIPT, crf=20) != base  # encode settings
    other = json.loads(json.dumps(SCRIPT))
    other["characters"][0]["colour"] = "#00ff00"
    assert fields_for(other) != base  # a character's look
    assert fields_for(changed_script()) == base  # another shot's camera does not touch shot 0
    import daotai.shotcache as shotcache

    monkeypatch.setattr(shotcache, "__version__", "99.0")
    assert fields_for(SCRIPT) != base  # daotai's version
    monkeypatch.undo()
    folder = tmp_path / "model"
    (folder / "transformer").mkdir(parents=True)
    weights = folder / "transformer" / "w.safetensors"
    weights.write_bytes(b"a" * 64)
    with_model = fields_for(SCRIPT, model=str(folder))
    os.utime(weights, ns=(1, 1))
    weights.write_bytes(b"b" * 64)
    assert fields_for(SCRIPT, model=str(folder)) != with_model  # the model's files
    (folder / ".daotai-sha256.json").write_text(json.dumps({"files": {"transformer/w.safetensors": {"sha256": "x"}}}))
    recorded = fields_for(SCRIPT, model=str(folder))
    (folder / ".daotai-sha256.json").write_text(json.dumps({"files": {"transformer/w.safetensors": {"sha256": "y"}}}))
    assert fields_for(SCRIPT, model=str(folder)) != recorded  # by the recorded sha256 when there is a manifest


def test_least_recently_used_entries_go_first(tmp_path):
    cache = tmp_path / "cache"
    render(SCRIPT, tmp_path / "first", cache)
    store = ShotCache(cache)
    entries = sorted((cache / "entries").iterdir(), key=lambda p: p.stat().st_mtime)
    sizes = {e.name: sum(p.stat().st_size for p in e.rglob("*") if p.is_file()) for e in entries}
    for age, entry in enumerate(entries):  # make the order explicit: the first listed is the oldest
        os.utime(entry, (1_000_000 + age, 1_000_000 + age))
    store.cap_bytes = sum(sizes.values()) - sizes[entries[0].name] - 1
    removed = store.evict()
    assert removed == [entries[0].name, entries[1].name] and store.size_bytes() <= store.cap_bytes


def test_the_command_line_says_which_shots_it_reused(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k != "DAOTAI_NO_CACHE"}
    env["DAOTAI_CACHE_DIR"] = str(tmp_path / "cache")

    def cli(out: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(script), "-o", str(tmp_path / out)],
                              capture_output=True, text=True, env=env, timeout=300)

    assert cli("one").returncode == 0
    script.write_text(json.dumps(changed_script()))
    done = cli("two")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 of 8 shots rendered, 7 reused unchanged (s0, s1, s2, s3, s4, s6, s7)" in done.stderr
    off = subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(script), "-o", str(tmp_path / "three"),
                          "--no-cache"], capture_output=True, text=True, env=env, timeout=300)
    assert off.returncode == 0 and "reused" not in off.stderr


def test_the_server_reuses_unchanged_shots_of_a_resubmitted_script(tmp_path, monkeypatch):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from daotai.server.app import create_app
    from daotai.server.testing import thread_server
    from daotai.server.worker import run_job

    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)
    app = create_app(tmp_path / "data", start_dispatcher=False)
    store = app.state.store
    monkeypatch.chdir(tmp_path)  # run_job changes the current folder: restored after
    manifests = []
    for script in (SCRIPT, changed_script()):
        with thread_server(app) as url:
            assert httpx.post(f"{url}/v1/jobs", json=script).status_code == 202
        job = store.claim_next()
        assert run_job(store.data_dir, job.id, job.attempts) == 0
        assert store.get(job.id).status == "completed"
        manifests.append(json.loads((store.job_dir(job.id) / "out" / "manifest.json").read_text()))
    assert [s["shot_id"] for s in manifests[1]["shots"] if s["render"] == "rendered"] == ["s5"]


def test_reused_shots_are_checked_again_when_the_qc_code_changes(tmp_path, monkeypatch):
    import daotai.shotcache as shotcache

    script = {**SCRIPT, "shots": SCRIPT["shots"][:2]}
    cache = tmp_path / "cache"
    render(script, tmp_path / "first", cache)
    checked: list[str] = []
    render(script, tmp_path / "same", cache, checked)
    assert checked == []  # nothing changed: every verdict kept
    monkeypatch.setattr(shotcache, "qc_code_fingerprint", lambda: "other checks")
    render(script, tmp_path / "new-qc", cache, checked)
    assert checked == ["s0", "s1"]  # the files are reused, the verdicts are not
    assert (tmp_path / "new-qc" / "qc.json").read_bytes() == (tmp_path / "first" / "qc.json").read_bytes()
