"""Cluster rendering on a real local Ray cluster: same bytes as a local render, retries, cancel."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from daotai.cluster import RayExecutor, executor_for
from daotai.cluster.runner import ActorResources, actor_resources, check_address, worker_count
from daotai.cluster.worker import TEMP_ROOT, sweep_stale
from daotai.errors import BackendError, Cancelled
from daotai.events import Notice, Progress
from daotai.plan.planner import plan_script
from daotai.render.base import RunContext
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

SMALL = {"fps": 24, "size": "320x180", "scene": {"name": "test stage", "set_pieces": []}}
SCRIPT = dict(
    SMALL,
    characters=[{"id": "red", "colour": [0.9, 0.1, 0.1]},
                {"id": "blue", "colour": [0.1, 0.2, 0.9], "position": [0.6, -1.5]}],
    shots=[
        {"shot_id": "wide", "duration": 1.0, "subject": "red", "framing": "wide", "camera": "static"},
        {"shot_id": "push", "duration": 2.5, "subject": "red", "camera": {"type": "dolly", "motion": [0, 0, -0.8]}},
        {"shot_id": "pan", "duration": 1.0, "subject": "blue", "camera": "pan_right",
         "transition": {"type": "crossfade", "duration": 0.5}},
        {"shot_id": "orbit", "duration": 1.5, "subject": "blue", "camera": "orbit_left"},
    ],
)
BYTE_EQUAL = ("sequence.mp4", "shots/wide.mp4", "shots/push.mp4", "shots/pan.mp4", "shots/orbit.mp4", "plan.json",
              "control/index.json")


def _run(plan, out: Path, ctx: RunContext | None = None, on_event=None, **settings):
    """Run the pipeline to the end; returns (result, events)."""
    events, result = [], None
    settings = PipelineSettings(**settings)
    for event in run(plan, out, settings, ctx, executor=executor_for(settings)):
        events.append(event)
        if on_event is not None:
            on_event(event)
        if isinstance(event, Finished):
            result = event.result
    return result, events


def _files(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}


def _decoded_gray(path: Path) -> np.ndarray:
    from daotai.encode.read import decode_gray

    return np.stack(list(decode_gray(path)))  # (N, H, W) uint8 or uint16


def _decoded_rgb(path: Path) -> np.ndarray:
    from daotai.encode.read import decode_frames

    return np.stack(list(decode_frames(path)))  # (N, H, W, 3) uint8


def _assert_same_render(local: Path, other: Path) -> None:
    """Shots, sequence, plan and index byte-identical; lossless control channels identical once decoded."""
    assert _files(local) == _files(other)
    qc = [json.loads((folder / "qc.json").read_text(encoding="utf-8"))["failures"] for folder in (local, other)]
    assert qc[0] == qc[1]
    for rel in BYTE_EQUAL:
        assert (local / rel).read_bytes() == (other / rel).read_bytes(), rel
    # FFV1 .mkv files carry random segment ids, so their pixels are compared, not their bytes.
    for mkv in sorted((local / "control").glob("*.mkv")):
        assert np.array_equal(_decoded_gray(mkv), _decoded_gray(other / "control" / mkv.name)), mkv.name


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def plan():
    return plan_script(validate_script(SCRIPT))


@pytest.fixture(scope="module")
def local_render(plan, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    result, _ = _run(plan, out)
    assert result is not None
    return out


# ------------------------------------------------------------------ pure parts (no Ray)


def test_address_forms():
    for ok in ("local", "auto", "ray://10.0.0.5:10001", "127.0.0.1:6379", " local "):
        assert check_address(ok) == ok.strip()
    for bad in ("", "lokal", "ray://host", "host:99999", "ray://:10001"):
        with pytest.raises(BackendError, match="--cluster"):
            check_address(bad)


def test_actor_resources_follow_backend_and_memory_planner():
    assert actor_resources("previz", None) == ActorResources(num_cpus=1, num_gpus=0, memory_bytes=0)
    wan = actor_resources("wan", None)
    assert wan.num_gpus == 1
    # Wan2.1 1.3B: 1.42 + 5.68 + 0.13 billion parameters at 2 bytes each.
    assert wan.memory_bytes == pytest.approx(7.23e9 * 2, rel=1e-6)
    big = actor_resources("wan", "wan2.1-t2v-14b")
    assert big.memory_bytes > 2.5 * wan.memory_bytes
    assert actor_resources("ltx", "/models/some-local-folder").memory_bytes == 0
    # MLX runs on the Mac's GPU or a Linux CPU: never a CUDA GPU slot
    assert actor_resources("wan-mlx", None) == ActorResources(num_cpus=1, num_gpus=0, memory_bytes=0)


def test_run_refuses_a_cluster_address_without_an_executor(tmp_path):
    with pytest.raises(ValueError, match="executor"):
        list(run(plan_script(validate_script(SCRIPT)), tmp_path, PipelineSettings(cluster="local")))


def test_worker_count_caps():
    cpu = ActorResources(1, 0, 0)
    gpu = ActorResources(1, 1, 0)
    assert worker_count(cpu, {"CPU": 8.0}, shots=3, wanted=0) == 3
    assert worker_count(cpu, {"CPU": 8.0}, shots=10, wanted=2) == 2
    assert worker_count(gpu, {"CPU": 64.0, "GPU": 4.0}, shots=10, wanted=0) == 4
    with pytest.raises(BackendError, match="no free slot"):
        worker_count(gpu, {"CPU": 64.0}, shots=10, wanted=0)


def test_importing_the_cluster_package_does_not_import_ray():
    code = "import sys, daotai.cluster.runner, daotai.cluster.worker, daotai.run.pipeline; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_sweep_removes_only_dead_workers_folders(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{dead.pid}-shot-abc"
    live = tmp_path / f"{os.getpid()}-shot-def"
    for folder in (stale, live):
        (folder / "shots").mkdir(parents=True)
    assert sweep_stale(tmp_path) == [stale]
    assert live.is_dir() and not stale.exists()


# ------------------------------------------------------------------ on a real Ray cluster


def test_cluster_render_equals_local_render(ray_cluster, plan, local_render, tmp_path):
    out = tmp_path / "cluster"
    result, events = _run(plan, out, cluster="local")
    assert result is not None
    _assert_same_render(local_render, out)
    # Both workers were used (no barrier: 4 shots over 2 actors) and progress streamed back.
    pids = {m.group(1) for e in events if isinstance(e, Notice) for m in [re.search(r"pid (\d+)\)$", e.text)] if m}
    assert len(pids) == 2
    streamed = {e.shot_id for e in events if isinstance(e, Progress) and e.stage == "render" and e.done > 0}
    assert streamed == {"wide", "push", "pan", "orbit"}
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["cluster"] == "local"
    assert all(any("attempt 1" in n for n in s["notices"]) for s in manifest["shots"])
    # Shots are handed to the QC workers as they land, not after the last one: the first two
    # of the four finish while the others still render (0.0 when the executor had no `finished`).
    assert manifest["timings_s"]["qc_beside_render_s"] > 0.0, manifest["timings_s"]


@pytest.mark.slow
def test_worker_killed_mid_shot_is_retried(ray_cluster, plan, local_render, tmp_path):
    out = tmp_path / "killed"
    where: dict[str, int] = {}
    killed: list[int] = []

    def on_event(event):
        if isinstance(event, Notice) and event.shot_id == "push" and "attempt 1 on worker" in event.text:
            where["push"] = int(re.search(r"pid (\d+)\)$", event.text).group(1))
        if (isinstance(event, Progress) and event.stage == "render" and event.shot_id == "push"
                and event.done >= 12 and not killed):
            os.kill(where["push"], signal.SIGKILL)  # the worker process dies mid-shot
            killed.append(where["push"])

    result, events = _run(plan, out, on_event=on_event, cluster="local")
    assert killed, "the shot finished before the worker could be killed"
    warnings = [e.text for e in events if isinstance(e, Notice) and e.level == "warning" and "retrying" in e.text]
    assert len(warnings) == 1 and "push" in warnings[0]
    assert result is not None
    _assert_same_render(local_render, out)  # the retried shot is complete and identical
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    notes = {s["shot_id"]: s["notices"] for s in manifest["shots"]}
    assert any(f"pid {killed[0]}) died during attempt 1; retried" in n for n in notes["push"])
    assert any("attempt 2" in n for n in notes["push"])
    # The dead worker's temp folder was swept by its replacement.
    assert not list((Path(tempfile.gettempdir()) / TEMP_ROOT).glob(f"{killed[0]}-*"))


@pytest.mark.slow
def test_cancel_leaves_no_partial_files(ray_cluster, tmp_path):
    long_script = dict(SMALL, characters=[{"id": "a"}],
                       shots=[{"shot_id": f"long{i}", "duration": 4.0, "camera": "pan_right"} for i in range(3)])
    long_plan = plan_script(validate_script(long_script))
    out = tmp_path / "cancelled"
    ctx = RunContext()
    pids: set[int] = set()

    def on_event(event):
        if isinstance(event, Notice) and (m := re.search(r"pid (\d+)\)$", event.text)):
            pids.add(int(m.group(1)))
        if isinstance(event, Progress) and event.stage == "render" and event.done >= 12:
            ctx.cancel.set()

    with pytest.raises(Cancelled):
        _run(long_plan, out, ctx, on_event=on_event, cluster="local")
    # the render filled a staging folder beside ``out``; stopped, it removed it and never made ``out``
    assert list(tmp_path.iterdir()) == []
    # The busy workers stopped cleanly: their temp folders are gone.
    root = Path(tempfile.gettempdir()) / TEMP_ROOT
    assert pids and not [p for pid in pids for p in root.glob(f"{pid}-*")]
    assert _all_exit(pids), "worker processes outlived the cancelled run"


@pytest.mark.slow
def test_retries_are_bounded(ray_cluster, tmp_path):
    from daotai.cluster.runner import ClusterConfig, render_shots

    one = plan_script(validate_script(dict(SMALL, characters=[{"id": "a"}],
                                           shots=[{"shot_id": "only", "duration": 4.0, "camera": "pan_right"}])))
    out = tmp_path / "gave_up"
    pid: list[int] = []
    events = render_shots(one, out, PipelineSettings(cluster="local"), RunContext(),
                          config=ClusterConfig(max_retries=0))
    with pytest.raises(BackendError, match=r"only: worker 1 .* died during attempt 1; gave up after 1 attempts"):
        for event in events:
            if isinstance(event, Notice) and (m := re.search(r"pid (\d+)\)$", event.text)):
                pid.append(int(m.group(1)))
            if isinstance(event, Progress) and event.done >= 12 and len(pid) == 1:
                os.kill(pid[0], signal.SIGKILL)
                pid.append(0)
    assert not out.exists() or _files(out) == set()


@pytest.mark.slow
def test_interrupt_stops_workers_and_leaves_no_partial_files(ray_cluster, tmp_path):
    import _thread

    long_shots = [{"shot_id": f"i{i}", "duration": 10.0, "camera": "dolly_in"} for i in range(2)]
    two = plan_script(validate_script(dict(SMALL, characters=[{"id": "a"}], shots=long_shots)))
    # long shots: both workers must have reported their pid before either finishes (the run is
    # interrupted early, so the length costs nothing)
    out = tmp_path / "interrupted"
    pids: set[int] = set()
    events = run(two, out, PipelineSettings(cluster="local"), executor=RayExecutor("local"))
    try:
        with pytest.raises(KeyboardInterrupt):
            for event in events:  # Ctrl-C arrives wherever the main thread is, as in a terminal
                if isinstance(event, Notice) and (m := re.search(r"pid (\d+)\)$", event.text)):
                    pids.add(int(m.group(1)))
                if isinstance(event, Progress) and event.done >= 12 and len(pids) == 2:
                    pids.add(-1)
                    _thread.interrupt_main()
    finally:
        events.close()  # what the interpreter does to an abandoned generator
    pids.discard(-1)
    assert list(tmp_path.iterdir()) == []  # no output folder, no staging folder
    root = Path(tempfile.gettempdir()) / TEMP_ROOT
    assert not [p for pid in pids for p in root.glob(f"{pid}-*")]
    assert _all_exit(pids), "worker processes outlived the interrupted run"


def _all_exit(pids: set[int], within_s: float = 10.0) -> bool:
    """Whether every process in ``pids`` has exited (waiting up to ``within_s``)."""
    import time

    deadline = time.monotonic() + within_s
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
