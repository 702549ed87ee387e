"""A full disk, on a real small file system (a size-limited tmpfs mounted for the test).

A render too large for the disk is refused before it writes anything; a disk that fills up
while rendering stops the render as disk_full with nothing half-written; the server answers 507
where it cannot take work, fails such a job as disk_full, keeps serving what it finished and
starts again. Mounting needs root (or CAP_SYS_ADMIN): elsewhere these tests are skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builders import wait_for
from daotai.errors import DiskFull
from daotai.events import Output
from daotai.files import STAGING_MARK, TEMP_MARK
from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

MiB = 1024**2


def script(shots: int, seconds: float, size: str, title: str = "disk", seed: int = 5) -> dict:
    """A previz script of ``shots`` shots (two characters, moving cameras)."""
    moves = ["push_in", "orbit_left", "pan_left", "crane_up", "pull_back"]
    return {"title": title, "size": size, "fps": 24, "seed": seed,
            "characters": [{"id": "lin", "colour": "#3366cc"}, {"id": "bo", "colour": "#cc6633", "position": [0.8, -1.0]}],
            "shots": [{"shot_id": f"s{i + 1}", "duration": seconds, "subject": "lin" if i % 2 else "bo",
                       "camera": moves[i % len(moves)]} for i in range(shots)]}


@pytest.fixture()
def small_disk(tmp_path):
    """Mount a tmpfs of the size asked for at a fresh folder; unmounted after the test."""
    mounted: list[Path] = []

    def mount(size_mib: int) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        try:
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(folder)],
                                  capture_output=True, text=True, timeout=30)
        except FileNotFoundError:
            pytest.skip("no mount command on this machine: a small file system cannot be made for the test")
        if done.returncode != 0:
            pytest.skip(f"this machine cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in reversed(mounted):
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)


def fill(disk: Path) -> Path:
    """Write a ballast file until the disk refuses more (a real ENOSPC); returns its path.

    Appends, so a ballast made empty beforehand needs no new directory entry: a render can fill the
    last blocks itself first, and creating the file would then fail before a byte is written."""
    ballast = disk / "ballast"
    with open(ballast, "ab") as handle:
        try:
            while True:
                handle.write(b"\0" * (256 * 1024))
                handle.flush()
        except OSError as exc:
            assert exc.errno == 28, exc  # ENOSPC, from the file system itself
    return ballast


def leftovers(folder: Path) -> list[str]:
    """Temp files and staging folders under ``folder``: what a half-finished write leaves."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if TEMP_MARK in p.name or STAGING_MARK in p.name)


def disk_bytes(*folders: Path) -> int:
    """Bytes of the files under ``folders``, a file with several names counted once (as du does)."""
    seen: dict[tuple[int, int], int] = {}
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file():
                info = path.stat()
                seen[(info.st_dev, info.st_ino)] = info.st_size
    return sum(seen.values())


@pytest.mark.parametrize("size", ["320x180", "1280x720"])
def test_the_estimate_covers_what_a_render_writes_without_asking_for_far_more(tmp_path, size):
    from daotai.diskspace import bytes_needed, render_bytes

    plan = plan_script(validate_script(script(2, 1, size)))
    out, cache = tmp_path / "out", tmp_path / "cache"
    list(run(plan, out, PipelineSettings(cache=str(cache))))
    estimate = render_bytes(plan.width, plan.height, {s.shot_id: s.frames for s in plan.shots}, True)
    needed = bytes_needed(estimate, out, cache, set())[out]
    written = disk_bytes(out, cache)
    assert written <= needed <= 2.5 * written, (written, needed)


def test_a_render_too_large_for_the_disk_is_refused_before_anything_is_written(small_disk):
    disk = small_disk(8)
    plan = plan_script(validate_script(script(3, 4, "1280x720")))
    settings = PipelineSettings(cache=str(disk / "cache"))
    with pytest.raises(DiskFull) as caught:
        list(run(plan, disk / "out", settings))
    exc = caught.value
    assert exc.folder == str(disk / "out") and exc.needed > exc.free and exc.free <= 8 * MiB
    text = str(exc)
    assert text.startswith(f"not enough disk space in {disk / 'out'}: ")
    assert "MiB free; this render (3 shots, 288 frames at 1280x720 with controls) needs about" in text
    assert exc.exit_code == 8 and exc.http_status == 507 and exc.code == "disk_full"
    assert list(disk.iterdir()) == []  # nothing written: no output, no staging folder, no cache entry


@pytest.mark.slow
def test_a_disk_that_fills_during_a_render_stops_it_as_disk_full_and_leaves_nothing_half_written(small_disk):
    disk = small_disk(24)
    plan = plan_script(validate_script(script(3, 2, "640x360")))
    settings = PipelineSettings(cache=str(disk / "cache"))
    ballast = None
    with pytest.raises(DiskFull) as caught:
        for event in run(plan, disk / "out", settings):
            if isinstance(event, Output) and event.kind == "shot" and ballast is None:
                ballast = fill(disk)  # another program takes the rest of the disk after the first shot
    exc = caught.value
    assert ballast is not None and exc.writing is not None
    assert str(exc).startswith(f"disk full: {disk / 'out'} ran out of space while writing ")
    assert "nothing was left half-written" in str(exc) and "needs about" in str(exc)
    assert "Render stopped while rendering shot s2; 1 of 3 shot(s) finished (s1)" in " ".join(exc.__notes__)
    assert not (disk / "out").exists() and leftovers(disk) == []
    ballast.unlink()  # room again: the same render finishes
    events = list(run(plan, disk / "out", settings))
    assert isinstance(events[-1], Finished) and (disk / "out" / "sequence.mp4").is_file()
    assert leftovers(disk) == []


def test_the_cache_gives_up_old_entries_before_a_render_is_refused(small_disk):
    from daotai.diskspace import bytes_needed, free_bytes, render_bytes

    disk = small_disk(32)
    settings = PipelineSettings(cache=str(disk / "cache"))
    first = plan_script(validate_script(script(2, 1, "640x360", "first")))
    list(run(first, disk / "first", settings))
    shutil.rmtree(disk / "first")  # the render is gone; its shots stay in the cache, on the disk once
    held = sum(p.stat().st_size for p in (disk / "cache").rglob("*") if p.is_file())
    second = plan_script(validate_script(script(2, 1, "640x360", "second", seed=6)))  # no shot in common
    estimate = render_bytes(640, 360, {s.shot_id: s.frames for s in second.shots}, True)
    needed = bytes_needed(estimate, disk / "second", disk / "cache", set())[disk / "second"]
    # the disk now has room for the second render only once the cache gives up its entries
    (disk / "ballast").write_bytes(b"\0" * (free_bytes(disk) - needed + held // 2))
    assert free_bytes(disk) < needed <= free_bytes(disk) + held
    events = list(run(second, disk / "second", settings))
    assert isinstance(events[-1], Finished)
    gave = [e.text for e in events if getattr(e, "text", "").startswith("the shot cache gave up")]
    assert gave and gave[0].endswith("of its least recently used shots to make room for this render")


def test_render_into_a_nearly_full_folder_exits_8_with_the_reason_and_no_traceback(small_disk, tmp_path):
    disk = small_disk(16)
    path = tmp_path / "film.json"
    path.write_text(json.dumps(script(3, 2, "640x360")))
    ballast = disk / "ballast"
    ballast.write_bytes(b"\0" * (13 * MiB))  # the folder is nearly full
    env = {k: v for k, v in os.environ.items() if k != "DAOTAI_NO_CACHE"}
    env.update(DAOTAI_CACHE_DIR=str(disk / "cache"), COLUMNS="300")
    done = subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(path), "-o", str(disk / "out")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == DiskFull.exit_code == 8, done.stderr[-2000:]
    message = " ".join(done.stderr.split())
    assert f"error not enough disk space in {disk / 'out'}: " in message and "needs about" in message
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert sorted(p.name for p in disk.iterdir()) == ["ballast"]


def test_a_cache_on_another_file_system_is_copied_from_and_kept_to_a_quarter_of_its_disk(small_disk, tmp_path):
    from daotai.run.cache import ShotCache

    disk = small_disk(2)  # the cache's own small file system; the renders go to another one
    settings = PipelineSettings(cache=str(disk / "cache"))
    cache = ShotCache(disk / "cache")
    assert cache.effective_cap() == 512 * 1024  # a quarter of 2 MiB, however large the cap asked for
    plan = plan_script(validate_script(script(2, 1, "320x180")))
    first = list(run(plan, tmp_path / "a", settings))
    second = list(run(plan, tmp_path / "b", settings))
    assert isinstance(first[-1], Finished) and isinstance(second[-1], Finished)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    reused = [s["shot_id"] for s in manifest["shots"] if s["render"] == "reused"]
    assert reused  # what the small cache could keep was reused …
    for sid in reused:  # … copied across file systems, byte for byte
        shot = tmp_path / "b" / "shots" / f"{sid}.mp4"
        assert shot.stat().st_nlink == 1 and shot.read_bytes() == (tmp_path / "a" / "shots" / f"{sid}.mp4").read_bytes()
    assert cache.size_bytes() <= cache.effective_cap()
    for seed in (7, 8):  # more shots than the cap holds: the least recently used go
        list(run(plan_script(validate_script(script(2, 1, "320x180", seed=seed))), tmp_path / f"s{seed}", settings))
        assert cache.size_bytes() <= cache.effective_cap()


# ------------------------------------------------------------------ the server


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def noise_png() -> bytes:
    """A 160x160 PNG of random pixels (about 77 kB: it does not compress)."""
    import io

    import numpy as np
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (160, 160, 3), dtype=np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.slow
def test_the_server_on_a_full_disk_refuses_fails_cleanly_keeps_what_it_finished_and_restarts(small_disk, monkeypatch):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from daotai.server.store import JobStore
    from daotai.server.testing import ServerProcess

    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)  # the server's shot cache, as users run it
    disk = small_disk(40)
    data = disk / "data"
    server = ServerProcess(data).start()
    try:
        store = JobStore(data)
        # 1. a job that fits finishes; its shots are linked into the cache, not copied
        done_id = httpx.post(f"{server.url}/v1/jobs", json=script(2, 1, "320x180", "finished")).json()["id"]
        wait_for(lambda: store.get(done_id).status in ("completed", "failed"), 120, 0.2)
        assert store.get(done_id).status == "completed", store.get(done_id).error_message
        video = httpx.get(f"{server.url}/v1/jobs/{done_id}/files/video")
        assert video.status_code == 200 and sha256(video.content) == store.get(done_id).outputs["video"].sha256
        shot = store.job_dir(done_id) / "out" / "shots" / "s1.mp4"
        assert shot.stat().st_nlink == 2  # one file in the job's folder and in the shot cache

        # 2. a job larger than the disk is refused at once: 507 disk_full, where, free and needed
        big = httpx.post(f"{server.url}/v1/jobs", json=script(5, 10, "1280x720", "big"))
        assert big.status_code == 507, big.text
        error = big.json()["error"]
        assert error["code"] == "disk_full" and error["type"] == "server_error"
        assert error["message"].startswith(f"not enough disk space in {data}: ") and "needs about" in error["message"]

        # 3. a job that fits, until another program fills the disk while it renders
        long = script(4, 3, "640x360", "filled")
        (disk / "ballast").touch()  # made now, while there is room; fill() appends to it
        job_id = httpx.post(f"{server.url}/v1/jobs", json=long).json()["id"]
        wait_for(lambda: store.get(job_id).status == "in_progress" and store.get(job_id).progress > 0, 120, 0.02)
        ballast = fill(disk)
        job = wait_for(lambda: (j := store.get(job_id)).status in ("completed", "failed") and j, 120, 0.2)
        assert job.status == "failed" and job.error_code == "disk_full", (job.error_code, job.error_message)
        assert job.error_message.startswith("disk full: ") and "ran out of space while writing" in job.error_message
        assert "OSError" not in job.error_message and "Errno" not in job.error_message
        assert not list(store.job_dir(job_id).glob("work-*")) and not (store.job_dir(job_id) / "out").exists()
        assert leftovers(data) == []

        # 4. the server is healthy, refuses new work while the disk is full, and still serves the finished job
        assert httpx.get(f"{server.url}/health", timeout=2.0).status_code == 200
        refused = httpx.post(f"{server.url}/v1/videos", json={"prompt": "a cat", "seconds": "1", "size": "128x72"})
        assert refused.status_code == 507 and refused.json()["error"]["code"] == "disk_full"
        fill(disk)  # the failed job's space is taken too: an upload cannot be kept either
        upload = httpx.post(f"{server.url}/v1/uploads", files={"file": ("ref.png", noise_png(), "image/png")})
        assert upload.status_code == 507 and upload.json()["error"]["code"] == "disk_full", upload.text
        assert not list((data / "staging").glob("*")) and not (data / "uploads").exists()
        again = httpx.get(f"{server.url}/v1/jobs/{done_id}/files/video")
        assert again.status_code == 200 and again.content == video.content
    finally:
        server.stop()

    # 5. a restart, with room again: nothing was lost, new work is taken
    ballast.unlink()
    server = ServerProcess(data).start()
    try:
        assert store.get(done_id).status == "completed" and store.get(job_id).error_code == "disk_full"
        assert httpx.get(f"{server.url}/v1/jobs/{done_id}/files/video").content == video.content
        new_id = httpx.post(f"{server.url}/v1/jobs", json=script(1, 1, "320x180", "after")).json()["id"]
        wait_for(lambda: store.get(new_id).status in ("completed", "failed"), 120, 0.2)
        assert store.get(new_id).status == "completed", store.get(new_id).error_message
    finally:
        server.stop()
