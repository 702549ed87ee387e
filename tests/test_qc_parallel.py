"""QC beside the render: the check registry, and worker processes that give the same qc.json as
checking every shot in one process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daotai.events import Progress
from daotai.plan.model import Plan
from daotai.plan.planner import plan_script
from daotai.qc import checks
from daotai.qc.parallel import ShotChecks, seconds_before
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.retakes import TakePolicy
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

SCRIPT = {"fps": 24, "size": "320x180", "seed": 5,
          "characters": [{"id": "ana"}, {"id": "bo", "position": [0.8, -1.0]}],
          "shots": [{"shot_id": "s1", "duration": 1, "subject": "ana", "camera": "push_in"},
                    {"shot_id": "s2", "duration": 1, "subject": "bo", "camera": "pan_left",
                     "transition": {"type": "crossfade", "duration": 0.25}},
                    {"shot_id": "s3", "duration": 1, "subject": "ana", "camera": "static",
                     "blocking": [{"character": "ana", "to": [0.6, 0.2]}]}]}


def _render(out: Path, workers: int):
    plan = plan_script(validate_script(SCRIPT))
    events = list(run(plan, out, PipelineSettings(qc_workers=workers)))
    assert isinstance(events[-1], Finished)
    return plan, events


def test_registry_names_every_verdict_and_the_retake_groups():
    assert checks.NAMES == ("file", "format", "frames", "camera", "camera_path", "judder", "subject", "framing",
                            "fidelity", "audio", "identity", "continuity")
    assert TakePolicy(retake_on=("motion",)).checks == {"frames", "judder"}
    assert TakePolicy(retake_on=("camera", "fidelity")).checks == {"camera", "camera_path", "fidelity"}
    with pytest.raises(KeyError, match="registry"):
        checks.check_named("sharpness")
    with pytest.raises(ValueError, match="cost"):
        checks.Check("x", None, "free", "nothing", "nowhere")


@pytest.mark.slow
def test_workers_give_the_same_report_as_one_process(tmp_path):
    _, alone = _render(tmp_path / "alone", 0)
    plan, beside = _render(tmp_path / "beside", 2)
    report = (tmp_path / "beside" / "qc.json").read_bytes()
    assert report == (tmp_path / "alone" / "qc.json").read_bytes()
    entries = json.loads(report)["shots"]
    assert [e["shot_id"] for e in entries] == ["s1", "s2", "s3"]
    named = {v["check"] for e in entries for v in e["verdicts"]}
    assert {"camera", "subject", "fidelity"} <= named <= set(checks.NAMES)
    # each stage after the render says what it does: a qc event per shot, then the sequence, then deliver
    said = [(e.stage, e.shot_id, e.message) for e in beside if isinstance(e, Progress) and e.stage != "render"]
    assert ("qc", "s2", "checking shot 2 of 3") in said
    assert ("qc", None, "checking the sequence") in said
    assert any(stage == "deliver" for stage, _, _ in said)
    assert said.index(("qc", "s3", "checking shot 3 of 3")) > said.index(("qc", "s1", "checking shot 1 of 3"))


def test_checks_run_here_without_workers_and_after_a_cancel(tmp_path):
    plan = plan_script(validate_script(SCRIPT))
    with ShotChecks(plan, workers=0) as pool:
        pool.submit("twice", _double, (21,))
        assert pool.result("twice") == 42
    pool = ShotChecks(plan, workers=1, preload=())
    pool.submit("twice", _double, (4,))
    assert pool.result("twice") == 8  # a worker cannot import this test module: the work is done here
    pool.close(cancel=True)


OFFICE = Path(__file__).resolve().parents[1] / "examples" / "office.json"


@pytest.mark.slow
def test_shots_are_checked_while_later_shots_render(tmp_path):
    """The example office scene (four shots) rendered with two QC workers: the first shots are
    checked while the last ones render. A hand-in that read the executor's list of finished shots
    before the render replaced it checked nothing until the whole render was done (0 s beside it)."""
    data = json.loads(OFFICE.read_text(encoding="utf-8"))
    data["size"] = "320x180"
    plan = plan_script(validate_script(data))
    events = list(run(plan, tmp_path / "out", PipelineSettings(qc_workers=2)))
    assert isinstance(events[-1], Finished)
    timings = events[-1].result.timings
    # the first shots' checks (about a second each here) overlap the last shots' render
    assert timings["qc_beside_render_s"] > 0.0, timings
    # summed over the two workers, so at most twice the render's span (both busy the whole time)
    assert timings["qc_beside_render_s"] <= 2 * timings["render_and_encode_s"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["timings_s"]["qc_beside_render_s"] == pytest.approx(timings["qc_beside_render_s"], abs=1e-3)


def test_workers_start_before_the_first_job_and_say_when_each_job_ran(tmp_path):
    plan = plan_script(validate_script(SCRIPT))
    with ShotChecks(plan, workers=1, preload=()) as pool:
        pool.start()
        assert len(pool._pool) == 1 and pool._pool[0].process.poll() is None  # running, no job yet
        pool.submit("shot:s1", _first_shot, (3,))
        assert pool.result("shot:s1") == "s1s1s1"
        began, ended = pool.spans["shot:s1"]
        assert began <= ended
    assert seconds_before(pool.spans, began) == 0.0
    assert seconds_before(pool.spans, ended) == pytest.approx(ended - began)
    assert seconds_before(pool.spans, ended, "sequence") == 0.0
    assert seconds_before({"shot:a": (1.0, 3.0), "shot:b": (2.0, 5.0), "sequence": (0.0, 9.0)}, 4.0, "shot:") == 4.0


def _first_shot(plan: Plan, times: int) -> str:
    return plan.shots[0].shot_id * times


def _double(plan, value):
    assert plan.shots[0].shot_id == "s1"
    return 2 * value


def _pid_after(plan, seconds: float) -> int:
    import os
    import time

    time.sleep(seconds)
    return os.getpid()


def _until_a_worker_took(pool: ShotChecks, key: str) -> None:
    import time

    future = pool._jobs[key][0]
    deadline = time.monotonic() + 30
    while not future.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert future.running()


def test_waiting_for_a_running_job_runs_the_jobs_no_worker_has_taken_here():
    """The caller's core would idle while it waits on a worker; the jobs still queued behind
    that worker (the sequence behind the last shots) run in the caller meanwhile."""
    import os

    plan = plan_script(validate_script(SCRIPT))
    with ShotChecks(plan, workers=1, preload=()) as pool:
        pool.start()
        pool.submit("shot:s1", _pid_after, (1.0,))
        _until_a_worker_took(pool, "shot:s1")
        pool.submit("shot:s2", _pid_after, (0.0,))
        pool.submit("sequence", _double, (21,))
        worker = pool.result("shot:s1")
        assert worker != os.getpid()
        assert pool.result("shot:s2") == os.getpid()  # taken here while s1 ran
        assert pool.result("sequence") == 42
        assert pool.spans["sequence"][1] <= pool.spans["shot:s1"][1]
    with ShotChecks(plan, workers=1, preload=()) as pool:  # a job that fails here raises from its result
        pool.start()
        pool.submit("shot:s1", _pid_after, (0.5,))
        _until_a_worker_took(pool, "shot:s1")
        pool.submit("shot:s2", _first_shot, ("twice",))
        pool.result("shot:s1")
        with pytest.raises(TypeError):
            pool.result("shot:s2")


def _thread_budget(plan) -> tuple[int, int]:
    from daotai.qc.camera_adherence import tracking_threads
    from daotai.qc.threads import check_threads

    return check_threads(), tracking_threads()


def test_workers_share_the_cores_between_them_and_the_checks_keep_to_their_share(monkeypatch):
    """Each worker's camera checks use its share of the cores, so the workers together use about
    every core once (not every core each) and the render's own threads are not crowded out."""
    from daotai.qc import threads

    monkeypatch.setattr(threads, "usable_cores", lambda: 16)
    assert [threads.worker_share(n) for n in (1, 2, 3, 4, 32)] == [16, 8, 5, 4, 1]
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    assert threads.check_threads() == 16  # checks in the rendering process: every core
    for value, expected in (("3", 3), ("0", 16), ("many", 16), ("", 16)):
        monkeypatch.setenv(threads.THREADS_ENV, value)
        assert threads.check_threads() == expected
    monkeypatch.undo()
    plan = plan_script(validate_script(SCRIPT))
    with ShotChecks(plan, workers=2, preload=()) as pool:
        pool.start()
        pool.submit("shot:s1", _thread_budget, ())
        _until_a_worker_took(pool, "shot:s1")  # (a job still queued when its result is asked runs here)
        share = threads.worker_share(2)
        assert pool.result("shot:s1") == (share, max(1, min(8, share)))


def test_waiting_until_the_workers_took_every_job():
    import threading
    import time

    plan = plan_script(validate_script(SCRIPT))
    with ShotChecks(plan, workers=1, preload=()) as pool:
        pool.start()
        pool.submit("shot:s1", _pid_after, (0.6,))
        _until_a_worker_took(pool, "shot:s1")
        pool.submit("shot:s2", _pid_after, (0.0,))
        stop = threading.Event()
        stop.set()
        began = time.monotonic()
        pool.wait_until_taken(stop)  # told to stop: at once
        pool.wait_until_taken(max_wait_s=0.05)  # given up after its limit
        assert time.monotonic() - began < 0.4 and not pool._queue.empty()
        pool.wait_until_taken()
        taken = pool._jobs["shot:s2"][0]
        assert pool._queue.empty() and (taken.running() or taken.done())  # s1 done, s2 taken
        assert time.monotonic() - began > 0.3
    ShotChecks(plan, workers=0).wait_until_taken()  # no workers: nothing to wait for


@pytest.mark.parametrize("on_cpu", [True, False])
def test_a_render_drawn_by_this_machines_cores_waits_for_each_shot_to_be_taken(tmp_path, monkeypatch, on_cpu):
    """Render and checks share the cores when the frames are drawn on them: the next shot starts
    once a worker has taken the last one, so checks do not pile up behind the render. A render
    drawn elsewhere (a GPU, a cluster) never waits."""
    from daotai.render.previz.backend import PrevizBackend

    monkeypatch.setattr(PrevizBackend, "renders_on_cpu", lambda self: on_cpu)
    waits = []
    plain = ShotChecks.wait_until_taken

    def spy(self, cancel=None, max_wait_s=60.0):
        plain(self, cancel, max_wait_s)
        waits.append(self._queue.empty())

    monkeypatch.setattr(ShotChecks, "wait_until_taken", spy)
    _render(tmp_path / "out", 2)
    assert waits == ([True, True] if on_cpu else [])  # after s1 and s2, not after the last shot


def test_a_shots_camera_path_checked_as_a_job_of_its_own_gives_the_same_entry(tmp_path):
    from daotai.qc.report import hand_in_file, shot_result
    from daotai.qc.shot import PartialShot, check_shot

    plan, _ = _render(tmp_path / "out", 0)
    files = {s.shot_id: tmp_path / "out" / "shots" / f"{s.shot_id}.mp4" for s in plan.shots}
    with ShotChecks(plan, workers=3) as pool:
        assert pool.split_paths  # three workers and more: the camera path goes apart
        for shot in plan.shots:
            hand_in_file(pool, shot.shot_id, files[shot.shot_id], None)
        apart = [shot_result(pool, shot.shot_id) for shot in plan.shots]
        assert {key for key in pool.spans if key.startswith("path:")} == {"path:s1", "path:s2", "path:s3"}
    whole = [check_shot(plan, shot, files[shot.shot_id], None) for shot in plan.shots]
    assert json.dumps(apart) == json.dumps(whole)  # the same entry, key order included
    assert all("camera_path" in entry and "judder" in entry for entry in apart)
    assert isinstance(check_shot(plan, plan.shots[0], files["s1"], None, path_apart=True), PartialShot)
    assert not ShotChecks(plan, workers=2).split_paths


def test_a_sequence_checked_alone_starts_no_workers_and_one_after_shots_goes_to_them(tmp_path):
    """A render whose every shot was reused checks only its sequence: starting the worker
    interpreters for that one job cost more than the check (1.6 s of QC in a fully cached run on a
    16-core box); it is checked here. Handed in after shots, it goes to the running workers."""
    from daotai.qc.report import check_sequence, hand_in_file, hand_in_sequence, shot_result

    plan, _ = _render(tmp_path / "out", 0)
    sequence = tmp_path / "out" / "sequence.mp4"
    with ShotChecks(plan, workers=2) as pool:
        hand_in_sequence(pool, sequence)
        assert pool._pool == []  # nothing started
        assert pool.result("sequence") == check_sequence(plan, sequence)
        assert "sequence" in pool.spans
    with ShotChecks(plan, workers=2) as pool:
        hand_in_file(pool, "s1", tmp_path / "out" / "shots" / "s1.mp4", None)
        hand_in_sequence(pool, sequence)
        assert len(pool._pool) == 2 and pool._jobs["sequence"][0] is not None  # a worker's job
        assert shot_result(pool, "s1")["shot_id"] == "s1"
        assert pool.result("sequence") == check_sequence(plan, sequence)


def test_frames_drawn_by_a_software_rasteriser_are_drawn_on_this_machines_cores():
    from daotai.render.base import renders_on_cpu
    from daotai.render.previz.backend import PrevizBackend
    from daotai.render.previz.gl import PrevizRenderer

    renderer = PrevizRenderer.__new__(PrevizRenderer)  # only its description is read
    renderer._description = "llvmpipe (LLVM 15.0.6, 256 bits); OpenGL 4.5 (Core Profile) Mesa 22.3.6 (egl context)"
    assert renderer.software
    renderer._description = "NVIDIA H100 80GB HBM3/PCIe/SSE2; OpenGL 4.6.0 NVIDIA 570.86 (egl context)"
    assert not renderer.software
    backend = PrevizBackend()
    assert not backend.renders_on_cpu()  # nothing known before its first shot made the context
    backend._renderer = renderer
    assert not renders_on_cpu(backend)
    backend._renderer = None
    assert not renders_on_cpu(object())  # a backend that does not say
