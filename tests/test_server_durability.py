"""Crash safety of the video service: kill -9 of a worker, kill -9 of the server, restarts."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from builders import wait_for
from daotai.server.store import JobStore, NewJob  # noqa: E402
from daotai.server.testing import ServerProcess  # noqa: E402

LONG_SCRIPT = {  # long enough (several seconds of rendering) to be killed mid-way
    "size": "320x180",
    "characters": [{"id": "hero"}],
    "shots": [{"shot_id": f"s{i}", "duration": 4, "camera": {"type": "orbit", "orbit": 40}} for i in range(4)],
}


def files_match_store(store: JobStore, job_id: str) -> bool:
    """Every output of a completed job is on disk with the checksum the store recorded."""
    job = store.get(job_id, include_deleted=True)
    out = store.job_dir(job_id) / "out"
    return bool(job.outputs) and all(
        (out / o.relpath).is_file() and hashlib.sha256((out / o.relpath).read_bytes()).hexdigest() == o.sha256
        for o in job.outputs.values()
    )


@pytest.mark.slow
def test_kill9_worker_mid_job_fails_job_and_server_keeps_answering(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    try:
        store = JobStore(server.data_dir)
        job_id = httpx.post(f"{server.url}/v1/jobs", json=LONG_SCRIPT).json()["id"]
        wait_for(lambda: store.get(job_id).status == "in_progress" and store.get(job_id).progress > 0, 30)
        pid = store.get(job_id).worker_pid
        assert pid and pid != server.proc.pid
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        assert httpx.get(f"{server.url}/health", timeout=1.0).status_code == 200
        assert time.monotonic() - started < 1.0
        job = wait_for(lambda: (j := httpx.get(f"{server.url}/v1/videos/{job_id}").json())["status"] == "failed" and j,
                       30)
        assert job["error"]["code"] == "worker_lost"
        folder = store.job_dir(job_id)
        assert not (folder / "out").exists()  # nothing where a finished file would be
        assert not list(folder.glob("work-*"))
        content = httpx.get(f"{server.url}/v1/videos/{job_id}/content")
        assert content.status_code == 409
        # The server still takes and finishes work after the crash.
        ok = httpx.post(f"{server.url}/v1/videos", json={"prompt": "after", "seconds": "1", "size": "128x72"}).json()
        wait_for(lambda: store.get(ok["id"]).status == "completed", 60, 0.2)
        assert files_match_store(store, ok["id"])
    finally:
        server.stop()


@pytest.mark.slow
def test_kill9_server_with_jobs_queued_then_restart_loses_nothing(tmp_path):
    data = tmp_path / "data"
    server = ServerProcess(data).start()
    count = 5
    try:
        # The first job is long enough to be surely running when the server dies.
        first = {**LONG_SCRIPT, "shots": [{**LONG_SCRIPT["shots"][0], "duration": 10}], "size": "160x96"}
        ids = [httpx.post(f"{server.url}/v1/jobs", json=first).json()["id"]]
        ids += [httpx.post(f"{server.url}/v1/videos",
                           json={"prompt": f"job {i}", "seconds": "1", "size": "128x72"}).json()["id"]
                for i in range(count - 1)]
        store = JobStore(data)
        wait_for(lambda: store.get(ids[0]).progress > 0, 30)
        server.kill9()
    finally:
        server.stop()
    # While the server is down: every job is present, and "completed" always means files + checksum.
    store = JobStore(data)
    states = {i: store.get(i).status for i in ids}
    assert set(states.values()) <= {"queued", "in_progress", "completed"}
    for job_id, status in states.items():
        if status == "completed":
            assert files_match_store(store, job_id)
    # The worker of the killed server does not outlive it (no orphan finishing a stale attempt).
    running = [store.get(i).worker_pid for i in ids if states[i] == "in_progress"]
    for pid in filter(None, running):
        wait_for(lambda pid=pid: not os.path.exists(f"/proc/{pid}")
                 or open(f"/proc/{pid}/stat").read().split()[2] == "Z", 10)

    restarted = ServerProcess(data).start()
    try:
        listed = httpx.get(f"{restarted.url}/v1/videos", params={"limit": 100}).json()["data"]
        assert sorted(v["id"] for v in listed) == sorted(ids)
        for video in listed:
            assert video["status"] in ("queued", "in_progress", "completed")
        wait_for(lambda: all(store.get(i).status == "completed" for i in ids), 90, 0.25)
        for job_id in ids:
            assert files_match_store(store, job_id)
        interrupted = [i for i in ids if states[i] == "in_progress"]
        assert interrupted == ids[:1]
        for job_id in interrupted:  # re-queued once after the restart, and the retry is recorded
            job = store.get(job_id)
            assert job.attempts == 2
            assert any(e["kind"] == "requeued" for e in store.events(job_id))
    finally:
        restarted.stop()


def test_recover_requeues_once_then_fails_interrupted_and_checks_completed(tmp_path):
    store = JobStore(tmp_path)
    script = json.dumps({"shots": [{"shot_id": "a"}]})
    job, _ = store.create(NewJob("script", "previz", "4", "1280x720", script))
    for expected_status, expected_code in (("queued", None), ("failed", "interrupted")):
        claimed = store.claim_next()
        assert claimed is not None and claimed.id == job.id
        store.recover()  # as if the server died while the job ran
        after = store.get(job.id)
        assert (after.status, after.error_code) == (expected_status, expected_code)
    # A completed job whose files vanished is not reported completed after a restart.
    other, _ = store.create(NewJob("script", "previz", "4", "1280x720", script))
    claimed = store.claim_next()
    work = store.job_dir(other.id) / f"work-{claimed.attempts}"
    work.mkdir(parents=True)
    (work / "sequence.mp4").write_bytes(b"data")
    from daotai.server.worker import collect_outputs

    assert store.complete(other.id, claimed.attempts, work, collect_outputs(work))
    assert store.get(other.id).status == "completed"
    assert not store.complete(other.id, claimed.attempts, work, [])  # a stale attempt cannot publish twice
    (store.job_dir(other.id) / "out" / "sequence.mp4").unlink()
    store.recover()
    assert (store.get(other.id).status, store.get(other.id).error_code) == ("failed", "output_missing")


def test_cancel_running_job_leaves_no_output(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    try:
        store = JobStore(server.data_dir)
        job_id = httpx.post(f"{server.url}/v1/jobs", json=LONG_SCRIPT).json()["id"]
        wait_for(lambda: store.get(job_id).progress > 0, 30)
        assert httpx.delete(f"{server.url}/v1/jobs/{job_id}").status_code == 200
        job = wait_for(lambda: (j := store.get(job_id)).status == "cancelled" and j, 15)
        assert job.error_code == "cancelled"
        assert not (store.job_dir(job_id) / "out").exists()
        assert httpx.get(f"{server.url}/v1/videos/{job_id}").json()["error"]["code"] == "cancelled"
    finally:
        server.stop()


def test_warm_worker_serves_jobs_in_turn_and_model_switch_restarts_it(tmp_path):
    from daotai.server.worker import Dispatcher, DispatcherConfig

    store = JobStore(tmp_path)
    script = json.dumps({"size": "128x72", "shots": [{"shot_id": "a", "duration": 0.5}]})
    models = ["previz", "previz", "not-a-backend", "previz"]
    ids = [store.create(NewJob("script", model, "0.5", "128x72", script))[0].id for model in models]
    dispatcher = Dispatcher(store, DispatcherConfig(concurrency=1))
    dispatcher.start()
    try:
        wait_for(lambda: all(store.get(i).status in ("completed", "failed") for i in ids), 60, 0.1)
    finally:
        dispatcher.stop()
    pids = [next(e["data"]["worker_pid"] for e in store.events(i) if e["kind"] == "planned") for i in ids]
    assert [store.get(i).status for i in ids] == ["completed", "completed", "failed", "completed"]
    assert store.get(ids[2]).error_code == "option_error"  # an unknown backend is a bad option (HTTP 422), not a failing backend
    assert pids[0] == pids[1]  # the same warm process ran both previz jobs
    assert pids[2] != pids[1] and pids[3] != pids[2]  # a model switch starts a fresh process
    assert not os.path.exists(f"/proc/{pids[0]}")  # and the replaced one is gone
