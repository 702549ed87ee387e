"""`daotai serve --warm BACKEND[:MODEL]`: the backend is loaded before the first request, so the
first job takes as long as a later one (a real `daotai serve` on loopback, jobs timed end to end)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from daotai.server.testing import ServerProcess  # noqa: E402

# The first job of a warm server may take this much longer than the median of the later ones:
# a quarter, plus 0.5 s of scheduling noise on a busy two-core machine (measured: the first job
# of a server started without --warm pays the imports and the GL or model load, 1.7x a later one).
MARGIN_RATIO = 0.25
MARGIN_S = 0.5
# A tiny neural model on the CPU: torch's kernels are primed per tensor shape, and a job's prompt
# is tokenised to another length than the warm-up's, so its first text encoding pays ~1 s
# (against the ~60-80 s of imports and model load a server without --warm puts on its first job).
NEURAL_MARGIN_S = 1.5
SCRIPT = {"fps": 24, "size": "320x180", "characters": [{"id": "ana", "colour": "#3366cc"}],
          "shots": [{"shot_id": "a", "duration": 0.5, "subject": "ana", "camera": "push_in"},
                    {"shot_id": "b", "duration": 0.5, "subject": "ana", "camera": "pan_left"}]}


def wait_warm(server: ServerProcess, timeout_s: float = 300.0) -> dict:
    """Poll /health until every warm worker is ready; its entry for the first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        warm = httpx.get(f"{server.url}/health").json()["warm"]
        assert not any(w["error"] for w in warm), [w["error"] for w in warm]  # the errors whole: a repr cuts them
        if warm and all(w["ready"] for w in warm):
            return warm[0]
        time.sleep(0.1)
    raise AssertionError("the warm worker did not become ready")


def job_seconds(server: ServerProcess, script: dict, backend: str = "previz") -> float:
    """Seconds from POST /v1/jobs to the job reading completed (polled every 20 ms)."""
    started = time.perf_counter()
    job = httpx.post(f"{server.url}/v1/jobs", params={"backend": backend}, json=script, timeout=30).json()
    server.job_ids = [*getattr(server, "job_ids", []), job["id"]]
    while True:
        status = httpx.get(f"{server.url}/v1/jobs/{job['id']}").json()
        if status["status"] in ("completed", "failed", "cancelled"):
            assert status["status"] == "completed", status
            return time.perf_counter() - started
        time.sleep(0.02)


def seeded(seed: int, script: dict = SCRIPT) -> dict:
    """The script with its own seed: each job renders from scratch (the suite runs without a shot cache)."""
    return {**json.loads(json.dumps(script)), "seed": seed}


def first_and_warm(server: ServerProcess, script: dict, backend: str = "previz", later: int = 3) -> tuple[float, float]:
    first = job_seconds(server, seeded(1, script), backend)
    warm = statistics.median(job_seconds(server, seeded(2 + i, script), backend) for i in range(later))
    return first, warm


@pytest.mark.slow
def test_a_warm_previz_server_serves_its_first_job_as_fast_as_the_next(tmp_path):
    server = ServerProcess(tmp_path / "warm", extra_args=("--warm", "previz")).start()
    try:
        state = wait_warm(server)
        assert state["spec"] == "previz" and state["seconds"] > 0
        first, warm = first_and_warm(server, SCRIPT)
        # one backend served every job, and every manifest still says which rasteriser drew it
        for job_id in server.job_ids:
            manifest = httpx.get(f"{server.url}/v1/jobs/{job_id}/files/manifest").json()
            assert any("previz OpenGL" in n for s in manifest["shots"] for n in s["notices"]), job_id
    finally:
        server.stop()
    print(f"\npreviz --warm: first job {first:.2f} s, later jobs (median of 3) {warm:.2f} s, "
          f"warm-up {state['seconds']:.2f} s")
    assert first <= warm * (1 + MARGIN_RATIO) + MARGIN_S, (first, warm)


@pytest.mark.slow
def test_a_cold_server_pays_on_its_first_job(tmp_path):
    """The baseline the warm server is measured against: without --warm the first job is slower."""
    server = ServerProcess(tmp_path / "cold").start()
    try:
        first, warm = first_and_warm(server, SCRIPT, later=2)
    finally:
        server.stop()
    print(f"\npreviz, no --warm: first job {first:.2f} s, later jobs (median of 2) {warm:.2f} s")
    assert first > warm, (first, warm)


@pytest.mark.slow
def test_a_warm_neural_server_loads_its_model_before_the_first_job(tmp_path, tiny_wan):
    script = {**SCRIPT, "size": "64x64", "shots": [{**SCRIPT["shots"][0], "duration": 0.25}]}
    script["options"] = {"model": str(tiny_wan)}
    server = ServerProcess(tmp_path / "warm", extra_args=("--warm", f"wan:{tiny_wan}@64x64")).start()
    try:
        state = wait_warm(server)
        first, warm = first_and_warm(server, script, backend="wan", later=3)
        log = (tmp_path / "warm" / "worker.log").read_text()
    finally:
        server.stop()
    print(f"\nwan (tiny) --warm: first job {first:.2f} s, later jobs (median of 3) {warm:.2f} s, "
          f"warm-up {state['seconds']:.2f} s")
    assert "warm in" in log
    assert first <= warm * (1 + MARGIN_RATIO) + NEURAL_MARGIN_S, (first, warm)


def test_warm_refuses_an_unknown_backend_before_serving(tmp_path):
    done = subprocess.run([sys.executable, "-c", "from daotai.cli import main; main()", "serve", "--port", "1",
                           "--data-dir", str(tmp_path), "--warm", "prevz"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--warm" in done.stderr and "previz" in done.stderr
    done = subprocess.run([sys.executable, "-c", "from daotai.cli import main; main()", "serve", "--port", "1",
                           "--data-dir", str(tmp_path), "--warm", "previz:some-model"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "takes no model" in done.stderr
    done = subprocess.run([sys.executable, "-c", "from daotai.cli import main; main()", "serve", "--port", "1",
                           "--data-dir", str(tmp_path), "--warm", "previz@big"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "832x480" in done.stderr


def test_a_held_backend_renders_each_job_as_a_fresh_one_would(tmp_path):
    """Jobs through one held previz backend (sizes and scenes changing between them) give the
    bytes a fresh backend gives."""
    import hashlib

    from daotai.plan.planner import plan_script
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings
    from daotai.script.load import validate_script
    from daotai.server.worker import HeldBackendExecutor

    other = {**seeded(4), "size": "160x96", "scene": {"time_of_day": "night"}}

    def render(script: dict, out, executor=None) -> dict[str, str]:
        plan = plan_script(validate_script(script))
        events = list(run(plan, out, PipelineSettings(), executor=executor))
        assert isinstance(events[-1], Finished)
        return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(out.rglob("*")) if p.is_file() and p.suffix in (".mp4", ".png")}  # .mkv: random ids

    held = HeldBackendExecutor()
    try:
        first = render(seeded(3), tmp_path / "held-1", held)
        backend = held._held[1]
        assert render(other, tmp_path / "held-2", held) == render(other, tmp_path / "fresh-2")
        again = render(seeded(3), tmp_path / "held-3", held)
        assert held._held[1] is backend  # one backend served all three jobs
    finally:
        held.close()
    assert first == again == render(seeded(3), tmp_path / "fresh-1")
    assert any(name.startswith("shots/") for name in first)


@pytest.mark.slow
def test_a_warm_worker_comes_back_after_a_job_for_another_backend(tmp_path):
    """One slot, --warm previz: a job for another backend replaces the warm worker; once the queue
    is empty the warm worker is started (and warmed) again."""
    from daotai.server.store import JobStore, NewJob
    from daotai.server.worker import Dispatcher, DispatcherConfig

    store = JobStore(tmp_path / "data")
    dispatcher = Dispatcher(store, DispatcherConfig(concurrency=1, warm=("previz",), rewarm_after_s=0.5))
    dispatcher.start()
    try:
        def ready_pid(timeout_s: float = 120.0) -> int:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                warm = dispatcher.warm_workers()
                if warm and warm[0]["ready"]:
                    return warm[0]["pid"]
                assert not (warm and warm[0]["error"]), warm
                time.sleep(0.1)
            raise AssertionError("no warm previz worker became ready")

        first = ready_pid()
        script = seeded(1, {**SCRIPT, "size": "64x64"})
        job, _ = store.create(NewJob("script", "wan", "1", "64x64", json.dumps(script),
                                     options=json.dumps({"model": str(tmp_path / "no-such-model")})))
        deadline = time.monotonic() + 120
        while store.get(job.id).status not in ("completed", "failed", "cancelled") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.get(job.id).status == "failed"  # no such model: it ran, in a wan worker
        assert ready_pid() != first  # the previz worker made room, then came back warm
        assert [s.model for s in dispatcher.slots] == ["previz"]
    finally:
        dispatcher.stop()
