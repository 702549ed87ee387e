"""Rendering outside the server process.

The server's :class:`Dispatcher` thread claims queued jobs from the store and starts one
worker process per job (``python -m daotai.server.worker DATA_DIR JOB_ID ATTEMPT``). The
worker runs :func:`daotai.pipeline.run` into a private ``work-<attempt>`` folder, streams
progress into the store, and publishes the folder as ``out/`` in the same transaction
that marks the job completed. A worker that dies without finishing its job leaves the job
``failed`` with code ``worker_lost``; its work folder is removed, so no partial file ever
sits where a finished one would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from daotai.server.store import JobStore, OutputFile

PROGRESS_INTERVAL_S = 0.25  # at most four progress writes a second per job
SPRITE_COLUMNS = 5
SPRITE_TILES = 25
SPRITE_TILE_SIDE = 160  # pixels, longer side of one tile


@dataclass(frozen=True)
class DispatcherConfig:
    """How many jobs run at once and how quickly cancellations are enforced."""

    concurrency: int = 1
    poll_s: float = 0.1
    cancel_grace_s: float = 5.0  # a cancelled worker that has not stopped by then is killed


# ------------------------------------------------------------------ server side


@dataclass
class _Running:
    proc: subprocess.Popen
    attempt: int
    cancel_seen_at: float | None = None


class Dispatcher:
    """Claims queued jobs and runs each in its own worker process; reaps dead workers."""

    def __init__(self, store: JobStore, config: DispatcherConfig = DispatcherConfig()):
        self.store = store
        self.config = config
        self.running: dict[str, _Running] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the dispatch loop in a daemon thread."""
        self._thread = threading.Thread(target=self._loop, name="daotai-dispatcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop dispatching and end the workers; their jobs are re-queued at the next start."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        with self._lock:
            for running in self.running.values():
                if running.proc.poll() is None:
                    running.proc.kill()
                    running.proc.wait(timeout=10.0)
            self.running.clear()

    def worker_pids(self) -> dict[str, int]:
        """Job id → pid of its worker process."""
        with self._lock:
            return {job_id: r.proc.pid for job_id, r in self.running.items()}

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as exc:  # keep dispatching; the store is retried next tick
                print(f"daotai dispatcher: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._stop.wait(self.config.poll_s)

    def tick(self) -> None:
        """One round: reap finished workers, enforce cancellations, start new jobs."""
        with self._lock:
            self._reap()
            self._enforce_cancels()
            while len(self.running) < self.config.concurrency and not self._stop.is_set():
                job = self.store.claim_next()
                if job is None:
                    break
                self._launch(job.id, job.attempts)

    def _launch(self, job_id: str, attempt: int) -> None:
        job_dir = self.store.job_dir(job_id)
        job_dir.mkdir(parents=True, exist_ok=True)
        with open(job_dir / "worker.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "daotai.server.worker", str(self.store.data_dir), job_id, str(attempt)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(job_dir),
                start_new_session=True,  # a Ctrl-C in the server's terminal is the server's to handle
            )
        self.running[job_id] = _Running(proc, attempt)
        self.store.set_worker(job_id, proc.pid)

    def _reap(self) -> None:
        for job_id, running in list(self.running.items()):
            code = running.proc.poll()
            if code is None:
                continue
            del self.running[job_id]
            # The worker finishes its own job; if it is still active, the worker died.
            self.store.finish(
                job_id, "failed", "worker_lost",
                f"the worker process (pid {running.proc.pid}) exited with code {code} before finishing",
                attempt=running.attempt,
            )
            shutil.rmtree(self.store.job_dir(job_id) / f"work-{running.attempt}", ignore_errors=True)
            job = self.store.get(job_id, include_deleted=True)
            if job.deleted:
                shutil.rmtree(self.store.job_dir(job_id) / "out", ignore_errors=True)

    def _enforce_cancels(self) -> None:
        now = time.monotonic()
        for job_id, running in self.running.items():
            if running.cancel_seen_at is None:
                if self.store.get(job_id, include_deleted=True).cancel_requested:
                    running.cancel_seen_at = now
            elif now - running.cancel_seen_at > self.config.cancel_grace_s and running.proc.poll() is None:
                running.proc.kill()


# ------------------------------------------------------------------ worker side


def _die_with_parent() -> None:
    """Ask Linux to kill this process when the server dies (so no orphan keeps rendering)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _watch_cancel(store: JobStore, job_id: str, parent: int, cancel: threading.Event, done: threading.Event) -> None:
    """Set ``cancel`` when the job is cancelled or the server process goes away."""
    while not done.wait(PROGRESS_INTERVAL_S):
        try:
            if os.getppid() != parent or store.cancel_requested(job_id):
                cancel.set()
                return
        except Exception:  # a busy database is retried on the next tick
            continue


def output_name(relpath: str) -> str | None:
    """The public name of a deliverable (``video``, ``shot.s01`` …) from its path in out/."""
    fixed = {
        "sequence.mp4": "video", "sequence.mov": "video", "thumbnail.jpg": "thumbnail",
        "spritesheet.jpg": "spritesheet", "contact_sheet.png": "contact_sheet", "manifest.json": "manifest",
        "qc.json": "qc", "timeline.otio": "timeline", "plan.json": "plan", "control/index.json": "control_index",
    }
    if relpath in fixed:
        return fixed[relpath]
    parts = relpath.split("/")
    if len(parts) == 2 and parts[0] == "shots":
        return "shot." + parts[1].rsplit(".", 1)[0]
    if len(parts) == 2 and parts[0] == "control":
        stem = parts[1].rsplit(".", 1)[0]
        for suffix in ("_depth_preview", "_depth", "_mask"):
            if stem.endswith(suffix):
                return f"{suffix[1:]}.{stem[: -len(suffix)]}"
    return None


def collect_outputs(folder: Path) -> list[OutputFile]:
    """Every deliverable in a finished work folder, with its checksum."""
    from daotai.deliver.files import sha256_file

    found = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(folder).as_posix()
        name = output_name(rel)
        if name is not None:
            found.append(OutputFile(name, rel, sha256_file(path), path.stat().st_size))
    return found


def write_previews(video: Path, frames: int, folder: Path) -> None:
    """thumbnail.jpg (the middle frame) and spritesheet.jpg (a grid of frames) of a video."""
    import numpy as np
    from PIL import Image

    from daotai.deliver.files import atomic_write_bytes
    from daotai.encode.video import decode_frames

    tiles: list[np.ndarray] = []  # each (h, w, 3) uint8
    middle: np.ndarray | None = None
    step_wanted = {int(round(i)) for i in np.linspace(0, max(frames - 1, 0), min(SPRITE_TILES, max(frames, 1)))}
    for index, rgb in enumerate(decode_frames(video)):
        if index == frames // 2:
            middle = rgb
        if index in step_wanted:
            tiles.append(rgb)
    if middle is None and tiles:
        middle = tiles[len(tiles) // 2]
    if middle is None:
        return
    atomic_write_bytes(folder / "thumbnail.jpg", _jpeg(Image.fromarray(middle)))
    height, width = tiles[0].shape[:2]
    scale = SPRITE_TILE_SIDE / max(height, width)
    tw, th = max(1, round(width * scale)), max(1, round(height * scale))
    columns = min(SPRITE_COLUMNS, len(tiles))
    rows = (len(tiles) + columns - 1) // columns
    sheet = Image.new("RGB", (columns * tw, rows * th))
    for i, tile in enumerate(tiles):
        sheet.paste(Image.fromarray(tile).resize((tw, th)), ((i % columns) * tw, (i // columns) * th))
    atomic_write_bytes(folder / "spritesheet.jpg", _jpeg(sheet))


def _jpeg(image) -> bytes:
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


def _progress_percent(stage: str, frames_done: int, total_frames: int) -> int:
    """Overall percent: rendering is most of the work, then assembly, qc and delivery."""
    if stage == "render":
        return int(85 * frames_done / max(total_frames, 1))
    return {"encode": 85, "assemble": 88, "qc": 92, "deliver": 97}.get(stage, 0)


def run_job(data_dir: str | Path, job_id: str, attempt: int) -> int:
    """Run one claimed job to completion in this process; returns an exit code."""
    from daotai.errors import Cancelled, DaotaiError
    from daotai.pipeline import Finished, PipelineSettings, run
    from daotai.plan.planner import plan_script
    from daotai.render.base import Notice, Output, Progress, RunContext
    from daotai.script.load import validate_script
    from daotai.script.presets import apply_preset

    store = JobStore(data_dir)
    job = store.get(job_id, include_deleted=True)
    work = store.job_dir(job_id) / f"work-{attempt}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ctx = RunContext()
    done = threading.Event()
    watcher = threading.Thread(
        target=_watch_cancel, args=(store, job_id, os.getppid(), ctx.cancel, done), daemon=True
    )
    watcher.start()
    try:
        script = validate_script(json.loads(job.script), source="job")
        if job.preset:
            script = apply_preset(script, job.preset)
        plan = plan_script(script)
        frames = {shot.shot_id: shot.frames for shot in plan.shots}
        shot_state = {sid: (0, n, "queued") for sid, n in frames.items()}
        store.update_progress(job_id, attempt, 0, shot_state, ("planned", {"frames": plan.total_frames}))
        settings = PipelineSettings(backend=job.model, controls=job.kind == "script")
        last_write = 0.0
        rendered: dict[str, int] = {}
        finished = False
        for event in run(plan, work, settings, ctx):
            if isinstance(event, Finished):
                finished = True
                break
            if isinstance(event, Progress):
                if event.stage == "render" and event.shot_id:
                    rendered[event.shot_id] = event.done
                    status = "completed" if event.done >= event.total else "in_progress"
                    shot_state[event.shot_id] = (event.done, frames.get(event.shot_id, event.total), status)
                now = time.monotonic()
                boundary = event.stage != "render" or event.done in (0, event.total)
                if boundary or now - last_write >= PROGRESS_INTERVAL_S:
                    last_write = now
                    percent = _progress_percent(event.stage, sum(rendered.values()), plan.total_frames)
                    payload = {"stage": event.stage, "shot_id": event.shot_id, "done": event.done,
                               "total": event.total, "progress": percent}
                    if not store.update_progress(job_id, attempt, percent, dict(shot_state), ("progress", payload)):
                        ctx.cancel.set()  # this attempt is no longer the current one
            elif isinstance(event, Notice):
                store.add_event(job_id, "notice", {"level": event.level, "text": event.text, "shot_id": event.shot_id})
            elif isinstance(event, Output):
                rel = Path(event.path).resolve().relative_to(work.resolve()).as_posix()
                store.add_event(job_id, "output", {"kind": event.kind, "name": output_name(rel), "shot_id": event.shot_id})
            ctx.check()
        if not finished:
            raise Cancelled("the pipeline stopped before finishing")
        ctx.check()
        store.update_progress(job_id, attempt, 97, None, ("progress", {"stage": "deliver", "progress": 97}))
        sequence = next((p for p in (work / "sequence.mp4", work / "sequence.mov") if p.is_file()), None)
        if sequence is not None:
            write_previews(sequence, plan.total_frames, work)
        if not store.complete(job_id, attempt, work, collect_outputs(work)):
            shutil.rmtree(work, ignore_errors=True)
        return 0
    except Cancelled as exc:
        shutil.rmtree(work, ignore_errors=True)
        store.finish(job_id, "cancelled", "cancelled", str(exc) or "cancelled", attempt=attempt)
        return 0
    except DaotaiError as exc:
        shutil.rmtree(work, ignore_errors=True)
        code = type(exc).__name__.replace("Error", "").lower() + "_error"
        store.finish(job_id, "failed", code, str(exc).splitlines()[0][:2000], attempt=attempt)
        return 0
    except BaseException as exc:
        shutil.rmtree(work, ignore_errors=True)
        store.finish(job_id, "failed", "internal_error", f"{type(exc).__name__}: {exc}"[:2000], attempt=attempt)
        raise
    finally:
        done.set()


def main(argv: list[str] | None = None) -> int:
    """``python -m daotai.server.worker DATA_DIR JOB_ID ATTEMPT``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m daotai.server.worker DATA_DIR JOB_ID ATTEMPT", file=sys.stderr)
        return 2
    _die_with_parent()
    return run_job(args[0], args[1], int(args[2]))


if __name__ == "__main__":
    sys.exit(main())
