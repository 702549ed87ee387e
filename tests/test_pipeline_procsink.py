"""Encoder processes behind the pipeline's sinks: same bytes as threads, and safe when things break."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest

from daotai.encode.procsink import EncoderPool, StreamJob
from daotai.encode.read import decode_frames, decode_gray
from daotai.encode.video import EncodeSettings
from daotai.errors import EncodeError
from daotai.events import Frame, Progress
from daotai.plan.planner import plan_script
from daotai.render.base import RenderJob, RunContext
from daotai.run.records import ShotRecord
from daotai.run.settings import PipelineSettings
from daotai.run.shots import render_shot, shot_files
from daotai.script.load import validate_script

SCRIPT = {
    "fps": 24,
    "size": "320x180",
    "scene": {"name": "test stage", "set_pieces": []},
    "characters": [{"id": "red", "colour": [0.9, 0.1, 0.1], "position": [0.0, 0.0]}],
    "shots": [
        {"shot_id": "push", "duration": 1.0, "subject": "red", "framing": "full",
         "camera": {"type": "dolly", "motion": [0, 0, -0.8]}},
        {"shot_id": "wide", "duration": 0.5, "subject": "red", "framing": "wide", "camera": "static"},
    ],
}


class Synthetic:
    """A minimal backend: moving gradient frames with depth and mask; ``hook(i)`` runs before frame i."""

    name = "synthetic"

    def __init__(self, hook: Callable[[int], None] = lambda i: None):
        self.hook = hook

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator:
        h, w = job.plan.height, job.plan.width
        ramp = np.linspace(0, 255, w, dtype=np.float32)  # (W,) float32
        for i in range(job.shot.frames):
            ctx.check()
            self.hook(i)
            rgb = np.empty((h, w, 3), np.uint8)  # (H, W, 3) uint8
            rgb[..., 0] = (ramp + 7 * i) % 256
            rgb[..., 1] = np.arange(h, dtype=np.uint8)[:, None]
            rgb[..., 2] = 40
            depth = np.full((h, w), 2.0 + 0.01 * i, np.float32)  # (H, W) float32 metres
            depth[: h // 4] = np.inf  # sky
            mask = np.zeros((h, w), np.uint8)  # (H, W) uint8
            mask[h // 3: h // 2, w // 3: w // 2] = 1
            yield Progress("render", job.shot.shot_id, i, job.shot.frames)
            yield Frame(job.shot.shot_id, i, rgb, depth, mask)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def plan():
    return plan_script(validate_script(SCRIPT))


@pytest.fixture(scope="module")
def pool():
    with EncoderPool() as encoders:
        encoders.start("shot", "depth", "depth_preview", "mask")
        yield encoders


def _out(base: Path) -> Path:
    for sub in ("shots", "control"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    return base


def _render(backend, plan, shot, out: Path, encoders, controls: bool = True) -> ShotRecord:
    record = ShotRecord(shot.shot_id)
    for _ in render_shot(backend, plan, shot, out, PipelineSettings(controls=controls), RunContext(), record, encoders):
        pass
    return record


def _leftovers(out: Path) -> list[str]:
    """Every file under out (temp files are hidden names ending .partial.<ext>)."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_processes_write_the_same_files_as_threads(plan, pool, tmp_path):
    """Shot and preview bytes identical to the thread sinks; lossless FFV1 identical once decoded."""
    backend = Synthetic()
    threads, procs = _out(tmp_path / "threads"), _out(tmp_path / "procs")
    for shot in plan.shots:
        _render(backend, plan, shot, threads, None)
        _render(backend, plan, shot, procs, pool)
    for shot in plan.shots:
        files = shot_files(shot.shot_id, PipelineSettings())
        for kind in ("shot", "depth_preview"):
            assert _sha(procs / files[kind]) == _sha(threads / files[kind]), files[kind]
        for kind in ("depth", "mask"):  # matroska carries a random segment id: compare pixels
            a, b = list(decode_gray(threads / files[kind])), list(decode_gray(procs / files[kind]))
            assert len(a) == len(b) == shot.frames
            assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True)), files[kind]
    first = next(iter(decode_frames(procs / "shots" / "push.mp4")))
    assert first.shape == (plan.height, plan.width, 3)
    assert sorted(_leftovers(procs)) == sorted(_leftovers(threads))


def test_processes_are_reused_across_shots(plan, pool, tmp_path):
    out = _out(tmp_path)
    before = pool.pids()
    for shot in plan.shots:
        _render(Synthetic(), plan, shot, out, pool)
    assert pool.pids() == before and set(before) == {"shot", "depth", "depth_preview", "mask"}


def test_killed_encoder_is_a_clear_error_and_leaves_nothing(plan, pool, tmp_path):
    out = _out(tmp_path)
    shm_before = _shm()
    shot = plan.shots[0]
    victim = pool.pids()["shot"]

    def kill_at_frame_5(i: int) -> None:
        if i == 5:
            os.kill(victim, signal.SIGKILL)
            time.sleep(0.2)

    with pytest.raises(EncodeError, match=r"push video: encoder process exited unexpectedly"):
        _render(Synthetic(kill_at_frame_5), plan, shot, out, pool)
    assert _leftovers(out) == []  # no shot file, no control files, no temp files
    assert _shm() <= shm_before
    # The pool replaces the dead process; the next shot renders normally.
    record = _render(Synthetic(), plan, shot, out, pool)
    assert pool.pids()["shot"] != victim
    assert sorted(_leftovers(out)) == sorted(record.files.values())


@pytest.mark.parametrize("error", [RuntimeError("backend fell over"), KeyboardInterrupt()])
def test_parent_exception_mid_shot_leaves_nothing(plan, pool, tmp_path, error):
    out = _out(tmp_path)
    shm_before = _shm()

    def fail_at_frame_7(i: int) -> None:
        if i == 7:
            raise error

    with pytest.raises(type(error)):
        _render(Synthetic(fail_at_frame_7), plan, plan.shots[0], out, pool)
    assert _leftovers(out) == []
    assert _shm() <= shm_before
    assert set(pool.pids()) == {"shot", "depth", "depth_preview", "mask"}  # children survive an abort


def test_child_side_encode_error_names_the_stream(pool, tmp_path):
    """An error raised inside the child (here: a missing folder) reaches the parent as EncodeError."""
    job = StreamJob("gray8", tmp_path / "missing" / "m.mkv", 64, 32, Fraction(24))
    sink = pool.open("mask", "m1 mask", job)
    with pytest.raises(EncodeError, match=r"m1 mask: EncodeError: path: folder .* does not exist"):
        for _ in range(20):
            sink.put(np.zeros((32, 64), np.uint8))
        sink.finish()
    sink.abort()
    # The same process takes the next stream.
    good = pool.open("mask", "m2 mask", StreamJob("gray8", tmp_path / "m.mkv", 64, 32, Fraction(24)))
    for i in range(3):
        good.put(np.full((32, 64), i, np.uint8))
    good.finish()
    assert [int(f[0, 0]) for f in decode_gray(tmp_path / "m.mkv")] == [0, 1, 2]


def test_rgb_stream_matches_settings(pool, tmp_path):
    settings = EncodeSettings(codec="h264", crf=14, preset="veryfast", threads=8)
    sink = pool.open("shot", "clip video", StreamJob("rgb", tmp_path / "c.mp4", 64, 48, Fraction(30), settings))
    frames = [np.full((48, 64, 3), 30 * i, np.uint8) for i in range(4)]  # (H, W, 3) uint8
    for frame in frames:
        sink.put(frame)
    sink.finish()
    decoded = list(decode_frames(tmp_path / "c.mp4"))
    assert len(decoded) == 4
    assert all(abs(int(d.mean()) - int(f.mean())) <= 2 for d, f in zip(decoded, frames, strict=True))
    with pytest.raises(EncodeError, match="frame shape"):
        bad = pool.open("shot", "bad video", StreamJob("rgb", tmp_path / "d.mp4", 64, 48, Fraction(30), settings))
        bad.put(np.zeros((10, 10, 3), np.uint8))
    bad.abort()
    assert not (tmp_path / "d.mp4").exists()


CHILD_OF_DYING_PARENT = """
import os, sys
from daotai.encode.procsink import EncoderPool
if __name__ == "__main__":
    pool = EncoderPool()
    pool.start("shot", "mask")
    print(" ".join(str(p) for p in pool.pids().values()), flush=True)
    sys.stdin.readline()
    os._exit(3)  # no cleanup at all: the children must notice on their own
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_children_exit_when_the_parent_dies(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(CHILD_OF_DYING_PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    parent.stdin.write("\n")
    parent.stdin.flush()
    assert parent.wait(10) == 3
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def test_close_stops_every_process_and_frees_memory(tmp_path):
    shm_before = _shm()
    pool = EncoderPool(slots=2)
    sink = pool.open("mask", "x mask", StreamJob("gray8", tmp_path / "x.mkv", 16, 16, Fraction(24)))
    sink.put(np.zeros((16, 16), np.uint8))
    sink.finish()
    pids = list(pool.pids().values())
    pool.close()
    assert pids and not any(_alive(p) for p in pids)
    assert _shm() <= shm_before


def test_long_runs_choose_processes(plan):
    from daotai.run import encoders

    assert not encoders.use_encoder_processes(plan)  # 36 frames at 320x180: threads start faster
    long = plan.model_copy(update={"width": 1920, "height": 1080, "shots": plan.shots * 5})
    assert sum(s.frames for s in long.shots) == 180 and encoders.use_encoder_processes(long)


def test_whole_run_through_processes_matches_threads(plan, tmp_path, monkeypatch):
    """run() with encoder processes: same shot bytes as with threads, and no process left behind."""
    from daotai.run import encoders, pipeline
    from daotai.run.records import Finished

    def shots(out: Path) -> dict[str, str]:
        settings = PipelineSettings(controls=False, camera_qc=False)
        events = list(pipeline.run(plan, out, settings))
        assert isinstance(events[-1], Finished)
        return {p.name: _sha(p) for p in sorted((out / "shots").iterdir())}

    threads = shots(tmp_path / "threads")
    monkeypatch.setattr(encoders, "ENCODER_PROCESS_MIN_PIXELS", 0)
    assert encoders.use_encoder_processes(plan)  # the patch reaches the run's choice
    before = set(multiprocessing.active_children())
    assert shots(tmp_path / "procs") == threads
    assert set(multiprocessing.active_children()) <= before
