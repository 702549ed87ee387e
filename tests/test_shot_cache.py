"""Incremental renders: unchanged shots come from the cache, byte for byte what a full render makes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from daotai.plan.planner import plan_script
from daotai.run.cache import ShotCache, key_fields, shot_key
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

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
    from daotai.events import Progress

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
    import daotai.run.cache as shotcache

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


@pytest.mark.slow
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
    import daotai.run.cache as shotcache

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


def test_shots_are_one_file_in_the_cache_and_every_render_and_neither_side_can_spoil_the_other(tmp_path):
    import shutil
    import stat

    script = {**SCRIPT, "shots": SCRIPT["shots"][:2]}
    cache = tmp_path / "cache"
    render(script, tmp_path / "first", cache)
    render(script, tmp_path / "second", cache)
    entries = {json.loads((e / "record.json").read_text())["shot_id"]: e for e in (cache / "entries").iterdir()}
    made = {rel: digest(tmp_path / "first" / rel) for rel in ("shots/s0.mp4", "control/s0_depth.mkv")}
    for folder in ("first", "second"):  # linked both ways: rendered into the cache, reused from it
        assert (tmp_path / folder / "shots/s0.mp4").stat().st_ino == (entries["s0"] / "shot").stat().st_ino
    entry = entries["s0"] / "shot"
    assert entry.stat().st_nlink == 3 and not entry.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)

    shutil.rmtree(tmp_path / "first")  # a render deleted: the cache and the other render keep the shot
    assert len(ShotCache(cache, cap_bytes=0).evict()) == 2  # the cache emptied: the render keeps every byte
    assert {rel: digest(tmp_path / "second" / rel) for rel in made} == made

    render(script, tmp_path / "third", cache)  # fresh entries, linked into a third render
    old = {json.loads((e / "record.json").read_text())["shot_id"]: e.name for e in (cache / "entries").iterdir()}
    changed = json.loads(json.dumps(script))
    changed["shots"][1]["camera"] = "tilt_down"
    render(changed, tmp_path / "third", cache)  # the render replaced: s1 drawn again, s0 reused
    assert (tmp_path / "third/shots/s1.mp4").stat().st_ino != (cache / "entries" / old["s1"] / "shot").stat().st_ino
    kept = ShotCache(cache).get(old["s1"], tmp_path / "probe")
    assert kept is not None and "damaged" not in kept  # replacing the render's files left the old entry whole
    assert {rel: digest(tmp_path / "second" / rel) for rel in made} == made


def test_a_render_file_edited_in_place_is_not_reused_from_the_cache(tmp_path):
    script = {**SCRIPT, "shots": SCRIPT["shots"][:2]}
    cache = tmp_path / "cache"
    render(script, tmp_path / "first", cache)
    edited = tmp_path / "first" / "shots" / "s1.mp4"
    with open(edited, "r+b") as handle:  # another program writes into the file itself (as root may)
        handle.seek(-64, os.SEEK_END)
        handle.write(b"\0" * 64)
    again = render(script, tmp_path / "again", cache)
    assert [s["render"] for s in again["shots"]] == ["reused", "rendered"]  # the entry's sha256 caught it
    assert digest(tmp_path / "again" / "shots" / "s1.mp4") != digest(edited)


def test_the_server_keeps_its_cache_under_serve_cache_size(tmp_path, monkeypatch):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from daotai.server.store import JobStore
    from daotai.server.testing import ServerProcess

    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)
    cap = 450_000  # bytes: room for two of the four shots (about 195 kB each)
    server = ServerProcess(tmp_path / "data", extra_args=("--cache-size", f"{cap / 1024**3:.9f}")).start()
    try:
        store = JobStore(server.data_dir)
        job_id = httpx.post(f"{server.url}/v1/jobs", json={**SCRIPT, "shots": SCRIPT["shots"][:4]}).json()["id"]
        deadline = time.monotonic() + 120
        while store.get(job_id).status not in ("completed", "failed") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert store.get(job_id).status == "completed", store.get(job_id).error_message
        cache = ShotCache(server.data_dir / "cache")
        assert 0 < cache.size_bytes() <= cap and len(list((server.data_dir / "cache" / "entries").iterdir())) < 4
    finally:
        server.stop()


def test_the_estimate_is_told_the_shots_a_render_will_reuse(tmp_path):
    from daotai.run.reuse import reusable_shots

    cache = tmp_path / "cache"
    settings = PipelineSettings(cache=str(cache))
    everything = {f"s{i}" for i in range(len(MOVES))}
    assert reusable_shots(plan_script(validate_script(SCRIPT)), settings) == frozenset()  # an empty cache
    render(SCRIPT, tmp_path / "first", cache)
    assert reusable_shots(plan_script(validate_script(SCRIPT)), settings) == everything
    told = reusable_shots(plan_script(validate_script(changed_script())), settings)
    assert told == everything - {"s5"}
    again = render(changed_script(), tmp_path / "again", cache)
    assert {s["shot_id"] for s in again["shots"] if s["render"] == "reused"} == told  # what the render did
    assert reusable_shots(plan_script(validate_script(SCRIPT)), PipelineSettings(cache=None)) == frozenset()
