"""Rendering outside the server process.

The server's :class:`Dispatcher` thread claims queued jobs from the store and hands them to
warm worker processes (``python -m daotai.server.worker DATA_DIR``, one job id per line on
stdin; one per model and concurrency slot). For each job the worker runs :func:`daotai.run.pipeline.run` into a private ``work-<attempt>`` folder, streams
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

from daotai.plan.layout import RenderLayout
from daotai.server.store import JobStore, OutputFile

PROGRESS_INTERVAL_S = 0.25  # at most four progress writes a second per job
SPRITE_COLUMNS = 5
SPRITE_TILES = 25
SPRITE_TILE_SIDE = 160  # pixels, longer side of one tile
WARM_FOLDER = "warm"  # <data>/warm/<pid>.json: a warm worker's state (loading, ready, failed)
# The warm-up render: one shot this long at the script's default size, through the whole
# pipeline (imports, GL context or model load and placement, encoders, QC, delivery), so the
# first job finds everything a later job would.
WARM_SHOT_S = 0.25


@dataclass(frozen=True)
class DispatcherConfig:
    """How many jobs run at once, how long warm workers wait, how quickly cancels are enforced."""

    concurrency: int = 1
    poll_s: float = 0.1
    cancel_grace_s: float = 5.0  # a cancelled worker that has not stopped by then is killed
    idle_exit_s: float = 300.0  # a warm worker with nothing to do for this long is stopped
    cluster: str | None = None  # Ray address: workers render their jobs' shots on the cluster
    speed: str | None = None  # neural backends' speed mode for every job (None: the backends' default, exact)
    # BACKEND[:MODEL] per warm worker, started with the server and loaded before the first job
    # (`daotai serve --warm`); one per concurrency slot at most, kept however long they idle.
    warm: tuple[str, ...] = ()
    rewarm_after_s: float = 60.0  # a --warm worker replaced by another backend's comes back, once idle, after this
    cache_bytes: int | None = None  # the shot cache's cap (None: the default, daotai.run.cache.DEFAULT_CAP_BYTES)


# ------------------------------------------------------------------ server side


@dataclass
class _Slot:
    """One warm worker process: the model it has loaded and the job it runs (if any)."""

    proc: subprocess.Popen
    model: str
    job_id: str | None = None
    attempt: int = 0
    cancel_seen_at: float | None = None
    idle_since: float = 0.0
    warm: str | None = None  # the --warm spec it was started with: it stays however long it idles


class Dispatcher:
    """Claims queued jobs and hands them to warm worker processes; reaps dead workers.

    A worker serves one model and runs jobs one after another, so imports and loaded
    pipelines stay warm between jobs. A job for another model replaces an idle worker with
    a fresh process (the old one exits, so its memory goes back to the system).
    """

    def __init__(self, store: JobStore, config: DispatcherConfig = DispatcherConfig()):
        self.store = store
        self.config = config
        self.slots: list[_Slot] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._warmed_at: dict[str, float] = {}  # --warm spec → when its worker was last started

    def start(self) -> None:
        """Start the dispatch loop in a daemon thread (its worker processes die with the server)."""
        with self._lock:  # warm workers first: they load while the server starts answering
            for spec in self.config.warm[: self.config.concurrency]:
                self._warmed_at[spec] = time.monotonic()
                self.slots.append(_Slot(self._spawn(spec), parse_warm(spec).backend, idle_since=time.monotonic(),
                                        warm=spec))
        self._thread = threading.Thread(target=self._loop, name="daotai-dispatcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop dispatching and end the workers; their jobs are re-queued at the next start."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        with self._lock:
            for slot in self.slots:
                _end_process(slot.proc, 0.0)
            self.slots.clear()

    def warm_workers(self) -> list[dict]:
        """Each live warm worker: its spec and whether its backend is loaded (``ready``), with the
        seconds the warm-up took, or the error that stopped it."""
        with self._lock:
            slots = [(slot.warm, slot.proc.pid) for slot in self.slots if slot.warm and slot.proc.poll() is None]
        found = []
        for spec, pid in slots:
            try:
                status = json.loads((self.store.data_dir / WARM_FOLDER / f"{pid}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                status = {}
            found.append({"spec": spec, "pid": pid, "ready": bool(status.get("ready")),
                          "seconds": status.get("seconds"), "error": status.get("error")})
        return found

    def worker_pids(self) -> dict[str, int]:
        """Job id → pid of the worker process running it."""
        with self._lock:
            return {slot.job_id: slot.proc.pid for slot in self.slots if slot.job_id}

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001  (keep dispatching; the store is retried next tick)
                print(f"daotai dispatcher: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._stop.wait(self.config.poll_s)

    def tick(self) -> None:
        """One round: reap dead workers, free finished slots, enforce cancels, start new jobs."""
        with self._lock:
            now = time.monotonic()
            for slot in list(self.slots):
                if slot.proc.poll() is not None:
                    self._reap(slot)
                elif slot.job_id is not None:
                    self._follow(slot, now)
                elif slot.warm is None and now - slot.idle_since > self.config.idle_exit_s:
                    self.slots.remove(slot)
                    _end_process(slot.proc, 10.0)
            queue_empty = False
            while not self._stop.is_set() and self._has_capacity():
                job = self.store.claim_next()
                if job is None:
                    queue_empty = True
                    break
                self._assign(job.id, job.attempts, job.model)
            if queue_empty and not self._stop.is_set():
                self._rewarm(now)

    def _rewarm(self, now: float) -> None:
        """With nothing queued, bring back a --warm worker that a job for another backend replaced
        (or that died): an idle worker of another backend makes room for it. At most once a
        minute per spec, so a warm-up that keeps failing does not spin."""
        for spec in self.config.warm[: self.config.concurrency]:
            if any(slot.warm == spec for slot in self.slots) or now - self._warmed_at.get(spec, -1e9) < self.config.rewarm_after_s:
                continue
            if len(self.slots) >= self.config.concurrency:
                other = next((s for s in self.slots if s.job_id is None and s.warm is None), None)
                if other is None:
                    return  # every slot is busy or warm: try again on a later tick
                self.slots.remove(other)
                _end_process(other.proc, 10.0)
            self._warmed_at[spec] = now
            self.slots.append(_Slot(self._spawn(spec), parse_warm(spec).backend, idle_since=now, warm=spec))

    def _has_capacity(self) -> bool:
        idle = sum(1 for slot in self.slots if slot.job_id is None)
        return idle > 0 or len(self.slots) < self.config.concurrency

    def _assign(self, job_id: str, attempt: int, model: str) -> None:
        slot = next((s for s in self.slots if s.job_id is None and s.model == model), None)
        if slot is None:
            if len(self.slots) >= self.config.concurrency:
                # Switching model: the idle worker of another model makes room for a fresh one.
                other = next(s for s in self.slots if s.job_id is None)
                self.slots.remove(other)
                _end_process(other.proc, 10.0)
            slot = _Slot(self._spawn(), model)
            self.slots.append(slot)
        slot.job_id, slot.attempt, slot.cancel_seen_at = job_id, attempt, None
        self.store.job_dir(job_id).mkdir(parents=True, exist_ok=True)
        self.store.set_worker(job_id, slot.proc.pid)
        try:
            assert slot.proc.stdin is not None
            slot.proc.stdin.write(f"{job_id} {attempt}\n")
            slot.proc.stdin.flush()
        except OSError:
            pass  # the worker just died: the next tick reaps it and fails the job as worker_lost

    def _spawn(self, warm: str | None = None) -> subprocess.Popen:
        log = open(self.store.data_dir / "worker.log", "ab")
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "daotai.server.worker", str(self.store.data_dir),
                 *(("--cluster", self.config.cluster) if self.config.cluster else ()),
                 *(("--speed", self.config.speed) if self.config.speed else ()),
                 *(("--warm", warm) if warm else ()),
                 *(("--cache-bytes", str(self.config.cache_bytes)) if self.config.cache_bytes is not None else ())],
                stdin=subprocess.PIPE, stdout=log, stderr=log, text=True, cwd=str(self.store.data_dir),
                start_new_session=True,  # a Ctrl-C in the server's terminal is the server's to handle
            )
        finally:
            log.close()

    def _follow(self, slot: _Slot, now: float) -> None:
        job = self.store.get(slot.job_id, include_deleted=True)
        if job.status != "in_progress" or job.attempts != slot.attempt:
            self._release(slot, job.deleted)
            slot.job_id, slot.idle_since = None, now
        elif job.cancel_requested:
            if slot.cancel_seen_at is None:
                slot.cancel_seen_at = now
            elif now - slot.cancel_seen_at > self.config.cancel_grace_s:
                slot.proc.kill()

    def _reap(self, slot: _Slot) -> None:
        self.slots.remove(slot)
        if slot.job_id is None:
            return
        job = self.store.get(slot.job_id, include_deleted=True)
        if job.cancel_requested:
            self.store.finish(slot.job_id, "cancelled", "cancelled", "stopped on request", attempt=slot.attempt)
        else:
            # The worker finishes its own jobs; one still active means the worker died.
            self.store.finish(
                slot.job_id, "failed", "worker_lost",
                f"the worker process (pid {slot.proc.pid}) exited with code {slot.proc.returncode} before finishing",
                attempt=slot.attempt,
            )
        self._release(slot, job.deleted)

    def _release(self, slot: _Slot, deleted: bool) -> None:
        shutil.rmtree(self.store.job_dir(slot.job_id) / f"work-{slot.attempt}", ignore_errors=True)
        if deleted:
            shutil.rmtree(self.store.job_dir(slot.job_id) / "out", ignore_errors=True)


def _end_process(proc: subprocess.Popen, grace_s: float) -> None:
    """Close a worker's input (it exits when idle), then kill it if it lingers."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10.0)


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
        except Exception:  # noqa: BLE001  (a busy database is retried on the next tick)
            continue


def output_name(layout: RenderLayout, relpath: str) -> str | None:
    """The public name of a deliverable (``video``, ``shot.s01`` …) from its path in out/; None for other files."""
    try:
        return layout.name_of(relpath)
    except ValueError:
        return None


def collect_outputs(folder: Path, layout: RenderLayout | None = None) -> list[OutputFile]:
    """Every deliverable in a finished work folder, with its checksum.

    ``layout``: the run's file names (its container); by default read from the folder."""
    from daotai.files import sha256_file

    layout = layout or RenderLayout.find(folder)
    found = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(folder).as_posix()
        name = output_name(layout, rel)
        if name is not None:
            found.append(OutputFile(name, rel, sha256_file(path), path.stat().st_size))
    return found


def write_previews(video: Path, frames: int, folder: Path) -> None:
    """thumbnail.jpg (the middle frame) and spritesheet.jpg (a grid of frames) of a video."""
    import numpy as np
    from PIL import Image

    from daotai.encode.read import decode_frames
    from daotai.files import atomic_write_bytes

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
    layout = RenderLayout(folder)
    atomic_write_bytes(layout.thumbnail, _jpeg(Image.fromarray(middle)))
    height, width = tiles[0].shape[:2]
    scale = SPRITE_TILE_SIDE / max(height, width)
    tw, th = max(1, round(width * scale)), max(1, round(height * scale))
    columns = min(SPRITE_COLUMNS, len(tiles))
    rows = (len(tiles) + columns - 1) // columns
    sheet = Image.new("RGB", (columns * tw, rows * th))
    for i, tile in enumerate(tiles):
        sheet.paste(Image.fromarray(tile).resize((tw, th)), ((i % columns) * tw, (i // columns) * th))
    atomic_write_bytes(layout.spritesheet, _jpeg(sheet))


def _jpeg(image) -> bytes:
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


# Overall percent at each stage after the shots are rendered (in the order a run reaches them).
AFTER_RENDER_PERCENT = {"assemble": 88, "enhance": 90, "qc": 92, "deliver": 97}


def _progress_percent(stage: str, frames_done: int, total_frames: int) -> int:
    """Overall percent: rendering is most of the work, then assembly, qc and delivery. A shot's
    own stages (encode, load, denoise, decode …) count as its rendering, so the percentage never
    jumps ahead and back while the shots render."""
    if stage in AFTER_RENDER_PERCENT:
        return AFTER_RENDER_PERCENT[stage]
    return int(85 * frames_done / max(total_frames, 1))


@dataclass(frozen=True)
class WarmSpec:
    """What ``daotai serve --warm BACKEND[:MODEL][@WxH]`` asks a worker to load before the first job."""

    backend: str
    options: dict
    size: str | None = None  # the warm-up render's size (default: a script's default size)


def parse_warm(spec: str) -> WarmSpec:
    """``BACKEND[:MODEL][@WxH]`` as a WarmSpec; OptionError naming the spec when the backend is
    unknown, takes no model, or the size is not WIDTHxHEIGHT."""
    import re

    from daotai.errors import OptionError
    from daotai.render.registry import backend_names, spec_for

    head, at, size = spec.rpartition("@")
    if not at:
        head, size = spec, ""
    elif re.fullmatch(r"[1-9][0-9]{0,4}x[1-9][0-9]{0,4}", size) is None:
        raise OptionError.at("--warm", spec, f"{size!r} after @ is not a size such as 832x480")
    backend, _, model = head.partition(":")
    if backend not in backend_names():
        raise OptionError.at("--warm", spec, f"{backend!r} is not a backend; choose one of: {', '.join(backend_names())}")
    options = {"model": model} if model else {}
    if model and "model" not in spec_for(backend).options.model_fields:
        raise OptionError.at("--warm", spec, f"backend {backend!r} takes no model; write --warm {backend}")
    spec_for(backend).validate_options(options)
    return WarmSpec(backend, options, size or None)


class HeldBackendExecutor:
    """Renders a job's shots in this process through a backend kept loaded between jobs.

    A worker serves one backend (the dispatcher sends it that backend's jobs), so the next job
    with the same backend and options reuses the loaded pipeline or GL context instead of
    paying the load again; other options replace it. A render that fails or is cancelled
    drops the backend (its state is not trusted), the next job loads afresh."""

    def __init__(self) -> None:
        self._held: tuple[str, object] | None = None  # (identity, backend)
        self.finished: list = []  # the job's shots done so far: the run hands each to QC as it lands

    @staticmethod
    def identity(settings) -> str:
        """What makes two jobs' backends interchangeable: the backend and its validated options,
        the model named when the default is meant."""
        from daotai.render.registry import spec_for

        spec = spec_for(settings.backend)
        options = dict(settings.options)
        if "model" in options and not options["model"]:
            options["model"] = spec.default_model
        return json.dumps([settings.backend, options], sort_keys=True, default=str)

    def backend_for(self, settings):
        """The held backend when it suits ``settings``, else a new one (the old one closed)."""
        from daotai.render.registry import create_backend
        from daotai.run.settings import backend_env

        identity = self.identity(settings)
        if self._held is None or self._held[0] != identity:
            self.close()
            self._held = (identity, create_backend(settings.backend, settings.options, backend_env(None, None)))
        return self._held[1]

    def renders_on_cpu(self) -> bool:
        """Whether the held backend draws with this machine's processor cores (daotai.render.base.renders_on_cpu)."""
        from daotai.render.base import renders_on_cpu

        return self._held is not None and renders_on_cpu(self._held[1])

    def close(self) -> None:
        """Release the held backend."""
        held, self._held = self._held, None
        if held is not None:
            held[1].close()

    def render_shots(self, plan, out_dir, settings, ctx, source, health):
        """Yield events; return one ShotRecord per shot, in plan order (as LocalExecutor does)."""
        from contextlib import nullcontext

        from daotai.encode.procsink import EncoderPool
        from daotai.run.encoders import use_encoder_processes
        from daotai.run.records import ShotRecord
        from daotai.run.shots import render_shot

        records: list = []
        self.finished = records
        with EncoderPool() if use_encoder_processes(plan) else nullcontext() as encoders:
            if encoders is not None:
                encoders.start(*(("shot", "depth", "depth_preview", "mask") if settings.controls else ("shot",)))
            try:
                backend = self.backend_for(settings)
                if encoders is not None:
                    encoders.wait_ready()
                for shot in plan.shots:
                    ctx.check()
                    record = ShotRecord(shot.shot_id)
                    yield from render_shot(backend, plan, shot, out_dir, settings, ctx, record, encoders)
                    records.append(record)
            except BaseException:
                self.close()
                raise
        return records


def warm_up(data_dir: str | Path, spec: str, executor: HeldBackendExecutor, speed: str | None = None) -> float:
    """Load a backend before the first job: a one-shot script rendered through the whole pipeline
    into a scratch folder (no cache), the backend then held by ``executor``. Writes the worker's
    state to ``<data>/warm/<pid>.json``; returns the seconds it took."""
    import tempfile

    from daotai.files import atomic_write_text
    from daotai.plan.planner import plan_script
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.script.load import validate_script

    state = Path(data_dir) / WARM_FOLDER / f"{os.getpid()}.json"
    started = time.perf_counter()
    atomic_write_text(state, json.dumps({"spec": spec, "ready": False}) + "\n")
    try:
        warm = parse_warm(spec)
        # one character framed as the subject: the paths a typical job takes (figures, subject checks)
        script = {"characters": [{"id": "warm_up"}],
                  "shots": [{"shot_id": "warm_up", "duration": WARM_SHOT_S, "subject": "warm_up"}],
                  **({"size": warm.size} if warm.size else {})}
        plan = plan_script(validate_script(script))
        settings = replace(job_settings(data_dir, warm.backend, "script", warm.options, None, speed), cache=None)
        with tempfile.TemporaryDirectory(prefix=".warm-", dir=data_dir) as folder:
            finished = [e for e in run(plan, Path(folder), settings, executor=executor) if isinstance(e, Finished)]
        if not finished:
            raise RuntimeError("the warm-up render stopped before finishing")
    except Exception as exc:  # noqa: BLE001  (a failed warm-up is reported; the worker still serves jobs)
        atomic_write_text(state, json.dumps({"spec": spec, "ready": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        print(f"daotai worker: --warm {spec}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return time.perf_counter() - started
    seconds = time.perf_counter() - started
    atomic_write_text(state, json.dumps({"spec": spec, "ready": True, "seconds": round(seconds, 3)}) + "\n")
    print(f"daotai worker: {spec} warm in {seconds:.1f} s", file=sys.stderr, flush=True)
    return seconds


def job_settings(data_dir: str | Path, backend: str, kind: str, options: dict | None, cluster: str | None = None,
                 speed: str | None = None, cache_bytes: int | None = None):
    """The pipeline settings a job renders with (and the console's render plan predicts with)."""
    from daotai.run.cache import DEFAULT_CAP_BYTES
    from daotai.run.settings import PipelineSettings

    return PipelineSettings(backend=backend, controls=kind == "script", cluster=cluster, options=options or {},
                            option_defaults={"speed": speed},
                            # one shot cache per data folder: a resubmitted script renders only what changed
                            cache=None if os.environ.get("DAOTAI_NO_CACHE", "") not in ("", "0")
                            else str(Path(data_dir) / "cache"),
                            cache_bytes=DEFAULT_CAP_BYTES if cache_bytes is None else cache_bytes)


def job_plan(script_text: str, kind: str, preset: str | None, store: JobStore, folder: Path):
    """A stored job's script as the plan it renders: ``upload:`` references placed as files in
    ``folder`` (the script's base folder), the preset applied. Returns (plan, references)."""
    from daotai.plan.planner import plan_script
    from daotai.script.load import validate_script
    from daotai.script.presets import apply_preset
    from daotai.server.references import materialise_references

    script_data = json.loads(script_text)
    references: list = []
    if kind == "script":  # upload:<id> names become files in the job folder
        script_data, references = materialise_references(script_data, store, folder)
    script = validate_script(script_data, source="job")
    if preset:
        script = apply_preset(script, preset)
    return plan_script(script), references


def run_job(data_dir: str | Path, job_id: str, attempt: int, cluster: str | None = None,
            speed: str | None = None, executor: HeldBackendExecutor | None = None, cache_bytes: int | None = None) -> int:
    """Run one claimed job to completion in this process; returns an exit code.

    ``executor``: renders here through a backend held between jobs (a warm worker's); a
    cluster, when set, renders instead. ``cache_bytes``: the shot cache's cap (None: the default)."""
    from daotai.cluster import executor_for
    from daotai.errors import Cancelled, DaotaiError, DiskFull, disk_full_cause
    from daotai.events import Glimpse, Notice, Output, Progress
    from daotai.render.base import RunContext
    from daotai.run.pipeline import run
    from daotai.run.progress_labels import ShotOrder
    from daotai.run.records import Finished
    from daotai.run.settings import layout_for
    from daotai.server.live import GLIMPSE_EVERY_S, LIVE_FOLDER, LiveView
    from daotai.server.references import record_references

    store = JobStore(data_dir)
    job = store.get(job_id, include_deleted=True)
    work = store.job_dir(job_id) / f"work-{attempt}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.chdir(work.parent)  # the job folder is the script's base folder (reference images live there)
    live = LiveView(work.parent / LIVE_FOLDER)  # the frame being rendered and the shots done, until the job ends
    ctx = RunContext(glimpse_every_s=GLIMPSE_EVERY_S)
    done = threading.Event()
    watcher = threading.Thread(
        target=_watch_cancel, args=(store, job_id, os.getppid(), ctx.cancel, done), daemon=True
    )
    watcher.start()
    try:
        # upload:<id> names become files in the job folder (the current folder)
        plan, references = job_plan(job.script, job.kind, job.preset, store, work.parent)
        frames = {shot.shot_id: shot.frames for shot in plan.shots}
        order = ShotOrder.of(plan)  # labels number the shots: "rendering shot 3/7 (s03)"
        shot_state = {sid: (0, n, "queued") for sid, n in frames.items()}
        store.update_progress(job_id, attempt, 0, shot_state, ("planned", {"frames": plan.total_frames, "worker_pid": os.getpid()}))
        settings = job_settings(store.data_dir, job.model, job.kind, json.loads(job.options) if job.options else {},
                                cluster, speed, cache_bytes)
        layout = layout_for(work, settings)
        last_write = 0.0
        rendered: dict[str, int] = {}
        finished = False
        for event in run(plan, work, settings, ctx, executor=executor_for(settings) or executor):
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
                    payload = {"stage": event.stage, "shot_id": event.shot_id,
                               "shot": order.numbers.get(event.shot_id) if event.shot_id else None,
                               "shots": order.count, "done": event.done, "total": event.total,
                               "progress": percent, "label": order.label(event)}
                    if not store.update_progress(job_id, attempt, percent, dict(shot_state), ("progress", payload)):
                        ctx.cancel.set()  # this attempt is no longer the current one
            elif isinstance(event, Notice):
                store.add_event(job_id, "notice", {"level": event.level, "text": event.text, "shot_id": event.shot_id})
            elif isinstance(event, Output):
                rel = Path(event.path).resolve().relative_to(work.resolve()).as_posix()
                data = {"kind": event.kind, "name": output_name(layout, rel), "shot_id": event.shot_id}
                shown = live.clip(event)  # the shot's clip, playable now (GET /v1/jobs/<id>/live/shot.<id>)
                store.add_event(job_id, "output", {**data, "live": shown} if shown else data)
            elif isinstance(event, Glimpse):
                shown = live.glimpse(event)  # GET /v1/jobs/<id>/live/preview
                if shown is not None:
                    store.add_event(job_id, "preview", shown)
            ctx.check()
        if not finished:
            raise Cancelled("the pipeline stopped before finishing")
        ctx.check()
        if references:
            record_references(layout.manifest, references)
        store.update_progress(job_id, attempt, 97, None, ("progress", {
            "stage": "deliver", "shot_id": None, "shot": None, "shots": order.count, "progress": 97,
            "label": "delivering: the sequence's thumbnail and sprite sheet"}))
        if layout.sequence.is_file():
            write_previews(layout.sequence, plan.total_frames, work)
        live.close()  # gone before the job reads as completed: from then on its deliverables show
        if not store.complete(job_id, attempt, work, collect_outputs(work, layout)):
            shutil.rmtree(work, ignore_errors=True)
        return 0
    except Cancelled as exc:
        shutil.rmtree(work, ignore_errors=True)
        store.finish(job_id, "cancelled", "cancelled", str(exc) or "cancelled", attempt=attempt)
        return 0
    except DaotaiError as exc:
        shutil.rmtree(work, ignore_errors=True)  # first: a full disk gets back what the job wrote
        code = exc.code if isinstance(exc, DiskFull) else type(exc).__name__.replace("Error", "").lower() + "_error"
        store.finish(job_id, "failed", code, str(exc).splitlines()[0][:2000], attempt=attempt)
        return 0
    except Exception as exc:  # noqa: BLE001  (a bug must fail this job, not the warm worker serving the next ones)
        shutil.rmtree(work, ignore_errors=True)
        full = disk_full_cause(exc)
        if full is not None:  # outside the render (the job's references, previews): the same clear error
            message = str(store.disk_full(writing=_written(full, work))).splitlines()[0]
            store.finish(job_id, "failed", DiskFull.code, message[:2000], attempt=attempt)
            return 0
        import traceback

        traceback.print_exc()
        store.finish(job_id, "failed", "internal_error", f"{type(exc).__name__}: {exc}"[:2000], attempt=attempt)
        return 1
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        done.set()
        live.close()


def _written(error: OSError, work: Path) -> str:
    """The file a full disk refused, relative to the job's folder where it is inside it."""
    name = error.filename2 or error.filename
    if not name:
        return "a file"
    path = Path(os.fsdecode(name))
    try:
        return path.relative_to(work.parent).as_posix()
    except ValueError:
        return str(path)


def serve_jobs(data_dir: str, lines: Iterator[str], cluster: str | None = None, speed: str | None = None,
               warm: str | None = None, cache_bytes: int | None = None) -> int:
    """Warm worker loop: run each ``JOB_ID ATTEMPT`` line as a job until the input ends, through
    a backend held between jobs; with ``warm`` (BACKEND[:MODEL]) the backend is loaded first."""
    import daotai.run.pipeline  # noqa: F401  (loaded once, kept warm for every job)

    executor = HeldBackendExecutor()
    try:
        if warm:
            warm_up(data_dir, warm, executor, speed)
        for line in lines:
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                try:
                    run_job(data_dir, parts[0], int(parts[1]), cluster, speed, executor, cache_bytes)
                except Exception as exc:  # noqa: BLE001  (e.g. the job row vanished: report it, serve the next job)
                    print(f"daotai worker: job {parts[0]}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    finally:
        executor.close()
        (Path(data_dir) / WARM_FOLDER / f"{os.getpid()}.json").unlink(missing_ok=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m daotai.server.worker DATA_DIR`` (jobs on stdin) or ``DATA_DIR JOB_ID ATTEMPT``;
    ``--cluster ADDRESS`` renders every job's shots on a Ray cluster, ``--speed MODE`` sets the
    neural backends' speed mode, ``--cache-bytes N`` caps the shot cache."""
    args = list(sys.argv[1:] if argv is None else argv)
    _die_with_parent()
    values: dict[str, str | None] = {"--cluster": None, "--speed": None, "--warm": None, "--cache-bytes": None}
    for flag in values:
        if flag in args:
            at = args.index(flag)
            if at + 1 >= len(args):
                print(f"{flag} needs a value", file=sys.stderr)
                return 2
            values[flag] = args[at + 1]
            del args[at : at + 2]
    cluster, speed = values["--cluster"], values["--speed"]
    given = values["--cache-bytes"]
    if given is not None and not given.isdigit():
        print(f"--cache-bytes: {given!r} must be a whole number of bytes", file=sys.stderr)
        return 2
    cache_bytes = int(given) if given is not None else None
    if len(args) == 1:
        return serve_jobs(args[0], iter(sys.stdin.readline, ""), cluster, speed, values["--warm"], cache_bytes)
    if len(args) == 3:
        return run_job(args[0], args[1], int(args[2]), cluster, speed, cache_bytes=cache_bytes)
    print("usage: python -m daotai.server.worker DATA_DIR [JOB_ID ATTEMPT] [--cluster ADDRESS] [--speed MODE] "
          "[--warm BACKEND[:MODEL]] [--cache-bytes N]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
