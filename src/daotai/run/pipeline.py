"""run(plan, out_dir, settings, ctx) -> Iterator[Event]: render → encode → assemble → qc → deliver.

Rendering and encoding overlap: each output stream (shot video, depth, depth preview,
mask) is encoded by its own long-lived process (``daotai.encode.procsink``), fed through a
shared-memory ring while the backend renders the next frame (the renderer holds the GIL
during GL calls, which slows encoder threads); short runs, which would not pay back the
processes' start-up, and ``render_shot`` called without a pool use one encoder thread per
stream. Every file is written to a temp name in its folder and renamed when complete, so an
interrupted run leaves nothing half-written at an output path.

A render never writes into its output folder: it fills a hidden staging sibling
(``.<name>.daotai-staging-<hex>``, daotai.files.staging_folder) and swaps it in whole once the
manifest is written, so the folder holds the earlier render or the new one, never a mix; a
stopped render removes its staging folder, leaves the output folder untouched and says what
was finished (a note on the exception). Shots reused from the shot cache are linked (or, from
another file system, copied) into the staging folder from their checked cache entry. The
folder must be empty, absent or a render of the same script (:func:`check_output_folder`);
anything else needs ``force``.

Before anything is written the render's files are estimated and checked against the free disk
space (:func:`ensure_space`, daotai.diskspace); a disk too full for them, or one that fills up
during the render, stops it with :class:`daotai.errors.DiskFull` (the staging folder removed).
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterator, Literal, Mapping, Protocol

import numpy as np

from daotai.errors import BackendError, Cancelled, EncodeError, Issue, PlanError, ScriptError, interrupted_inside
from daotai.plan.geometry import FAR_M, NEAR_M
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import Audio, Event, Frame, Notice, Output, Progress, RenderJob, RunContext
from daotai.run.retakes import TakePolicy

if TYPE_CHECKING:
    from daotai.encode.hardware import HardwareEncoder
    from daotai.encode.video import EncodeSettings

FIDELITY_SAMPLES_PER_SHOT = 12  # rendered frames kept to measure encode PSNR after encoding
QUEUE_DEPTH = 6  # frames in flight per encoder thread: overlap without much memory


@dataclass(frozen=True)
class PipelineSettings:
    """What to render and how to encode it."""

    backend: str = "previz"
    codec: str = "h264"
    crf: int | None = None
    preset: str | None = None  # the encoder's (x264) preset; None: chosen per backend and frame size
    # The user's --preset (preview | draft | final …), which chose the frame size; recorded in the
    # manifest beside the x264 preset so a render says how it was asked for. None: the script's size.
    size_preset: str | None = None
    controls: bool = True
    shots: tuple[str, ...] = ()
    strict: bool = False
    camera_qc: bool = True
    # --encoder auto | software | hardware (daotai.encode.hardware). run() decides hardware_encoder
    # (None: the software encoder) after the fidelity gate, and notes why hardware, when wanted, is
    # not used (daotai.run.encoder_choice); the manifest records all three.
    encoder: str = "software"
    hardware_encoder: HardwareEncoder | None = None
    encoder_notes: tuple[str, ...] = ()
    # The backend's options (its Options type says which; checked before any work): model,
    # device, steps, speed, adaptive, offload, … for neural backends.
    options: Mapping[str, Any] = field(default_factory=dict)
    # Run-wide defaults from a front end (e.g. the server's --speed): applied only to backends
    # that have the field, and overridden by ``options``.
    option_defaults: Mapping[str, Any] = field(default_factory=dict)
    enhance: str = ""  # e.g. "upscale=2,interpolate=60": restored copies beside the planned shots
    cluster: str | None = None  # None: render here; else a Ray address (local | auto | ray://host:port)
    # A folder of finished shots by key (daotai.run.cache): an unchanged shot is reused, not
    # rendered again. None: no cache (the library's default; the CLI and the server set one).
    cache: str | None = None
    cache_bytes: int = 20 * 1024**3  # the cache's cap; least recently used shots go first
    # Takes per shot, the checks that call for another one and the time they may take (daotai.run.retakes)
    retakes: TakePolicy = field(default_factory=TakePolicy)
    # Render into a folder that is not a render of this script (check_output_folder): the folder
    # is replaced whole; one that held files daotai did not write is kept aside, never deleted.
    force: bool = False
    # USD cameras (cameras/<shot>.usda, sequence.usda) beside the pose files and JSON: only when
    # asked, so what a render writes never depends on which extras happen to be installed.
    usd_cameras: bool = False
    # Processes that check shots while the next ones render (daotai.qc.parallel); None: one per
    # core, up to the shots; 0: every shot is checked in this process after assembly.
    qc_workers: int | None = None
    # Storyboard pages written with the render (daotai.deliver.boards): "pdf" (boards.pdf) or "png"
    # (boards/page_01.png …); None: none (the contact sheet is always written).
    boards: str | None = None
    # Outputs asked for but not written because an optional package is missing: run() fills it
    # (with a notice before any work) and the manifest lists it as "skipped_outputs".
    skipped_outputs: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class RunResult:
    out_dir: Path
    sequence: Path
    qc_path: Path
    qc_ok: bool
    summary: str
    timings: dict[str, float]


@dataclass(frozen=True)
class Finished:
    """Last event of a run."""

    result: RunResult


@dataclass
class ShotRecord:
    """What the pipeline learned while rendering one shot (kept for qc and the manifest)."""

    shot_id: str
    samples: dict[int, np.ndarray] = field(default_factory=dict)  # frame index → (H, W, 3) uint8
    middle: np.ndarray | None = None  # (H, W, 3) uint8 for the contact sheet
    render_s: float = 0.0
    wall_s: float = 0.0
    files: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)  # what the backend decided (retiming, memory tier, retries)
    key: str | None = None  # what determines the shot's files (daotai.run.cache), when a cache is used
    reused: bool = False  # True: the files came from the cache, unchanged since an earlier render
    audio: dict[str, Any] = field(default_factory=dict)  # the shot file's sound: source, rate, channels…; {} = none
    takes: list[dict[str, Any]] = field(default_factory=list)  # every take when there were retakes (daotai.run.retakes)


def load_plan_or_script(path: Path, preset: str | None, loader: Callable[..., Any]) -> Plan:
    """A plan file written by `daotai plan`, or a script planned now."""
    from daotai.plan.planner import plan_from_json, plan_script

    if path.suffix.lower() == ".json" and path.is_file() and path.stat().st_size < 256 * 1024 * 1024:
        head = path.read_text(encoding="utf-8", errors="replace")[:4096]
        if '"plan_version"' in head:
            if preset:
                raise PlanError(f"--preset: {preset!r} cannot resize an existing plan; plan the script again with --preset")
            try:
                return plan_from_json(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise PlanError(f"{path}: is not a valid daotai plan ({str(exc).splitlines()[0]})") from None
    return plan_script(loader(path, preset))


# ------------------------------------------------------------------ threaded encoders

_DONE = object()
_ABORT = object()


class _Sink:
    """Runs ``consume(iterator)`` in a thread; items arrive through a bounded queue."""

    def __init__(self, name: str, consume: Callable[[Iterator[Any]], Any]):
        self.name = name
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
        self._error: BaseException | None = None
        self.busy_s = 0.0
        self._thread = threading.Thread(target=self._run, args=(consume,), name=f"daotai-{name}", daemon=True)
        self._thread.start()

    def _items(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if item is _ABORT:
                raise Cancelled("encoding stopped")
            started = time.perf_counter()
            yield item
            self.busy_s += time.perf_counter() - started

    def _run(self, consume: Callable[[Iterator[Any]], Any]) -> None:
        try:
            consume(self._items())
        except BaseException as exc:  # noqa: BLE001  (reported to the producer in put()/finish())
            self._error = exc
            # Drain so a producer blocked on a full queue wakes up and sees the error.
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break

    def put(self, item: Any) -> None:
        while True:
            if self._error is not None:
                raise self._error
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                if not self._thread.is_alive():
                    raise EncodeError(f"{self.name} encoder stopped unexpectedly") from self._error

    def finish(self) -> None:
        self.put(_DONE)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def abort(self) -> None:
        try:
            self._queue.put(_ABORT, timeout=2.0)
        except queue.Full:
            pass
        self._thread.join(timeout=30.0)


def encode_settings_for(settings: PipelineSettings, width: int = 0, height: int = 0):
    """The run's encode settings: the user's codec choices over the backend's defaults."""
    from daotai.encode.policy import encode_settings
    from daotai.render.registry import spec_for

    enc = encode_settings(settings.codec, settings.crf, settings.preset, spec_for(settings.backend).encode,
                          width, height)
    return replace(enc, hardware=settings.hardware_encoder) if settings.hardware_encoder is not None else enc


def layout_for(out_dir: Path, settings: PipelineSettings) -> RenderLayout:
    """The run's output layout: file names under ``out_dir``, videos in the codec's container
    (with ``enhance``, shots/<id>_enhanced<c> are the shots' enhanced copies)."""
    return RenderLayout(Path(out_dir), encode_settings_for(settings).container, enhanced=bool(settings.enhance))


def resolved_options(settings: PipelineSettings):
    """The backend's validated options: run-wide defaults where the backend has the field, then the user's."""
    from daotai.render.registry import spec_for

    spec = spec_for(settings.backend)
    fields = spec.options.model_fields
    merged = {k: v for k, v in settings.option_defaults.items() if k in fields and v is not None}
    merged.update(settings.options)
    return spec.validate_options(merged)


def require_models(settings: PipelineSettings, options=None) -> None:
    """Refuse, before any estimate or work, a render whose backend would load a catalog model (or a
    Control-Camera checkpoint) that is not downloaded here; the error names the command that pulls it.
    A cluster's workers load their own copies, so a cluster run is not checked here."""
    from daotai.render.registry import spec_for
    from daotai.runtime.models import require_pulled

    spec = spec_for(settings.backend)
    if spec.family is None or settings.cluster:
        return
    options = options if options is not None else resolved_options(settings)
    given = getattr(options, "model", None)
    needed = [(str(given or spec.default_model or ""), f"backend {spec.name}" + ("" if given else " (its default model)")),
              (str(getattr(options, "checkpoint", None) or ""), f"backend {spec.name}, -O checkpoint")]
    missing = []
    for name, needed_by in needed:
        try:
            if name:
                require_pulled(name, needed_by)
        except BackendError as exc:
            missing.append(str(exc))
    if missing:  # both at once when the model and the checkpoint are missing
        raise BackendError("\n  ".join(missing))


def backend_env(source: Path | None = None, health: Callable[[Any], dict] | None = None):
    """What the backend gets from the run: the script's folder (relative references) and a health sampler."""
    from daotai.render.spec import BackendEnv

    return BackendEnv(reference_root=Path(source).resolve().parent if source is not None else None,
                      health_sampler=health)


# Encoder processes beat encoder threads by ~3.5 ms of wall time per megapixel-frame on two
# busy cores (median of bench/previz.py runs: 1080p 0.56x vs 0.50x real time, 360p with controls
# 1.68x vs 1.47x) but cost ~1 s to start; below this many pixels in a run, threads finish first.
ENCODER_PROCESS_MIN_PIXELS = 300_000_000  # ~145 frames at 1920x1080, ~1300 at 640x360


def use_encoder_processes(plan: Plan) -> bool:
    """Whether a local run encodes in processes (long runs) or threads (short ones)."""
    return sum(s.frames for s in plan.shots) * plan.width * plan.height >= ENCODER_PROCESS_MIN_PIXELS


def _shot_sinks(plan: Plan, shot: ShotPlan, out_dir: Path, settings: PipelineSettings,
                encoders: Any = None) -> dict[str, Any]:
    """One sink per output stream: encoder processes from ``encoders`` (an EncoderPool), else threads."""
    fps = Fraction(*plan.fps_fraction)
    enc = encode_settings_for(settings, plan.width, plan.height)
    layout = layout_for(out_dir, settings)
    sid = shot.shot_id
    shot_path = layout.shot(sid)
    near, far = NEAR_M, FAR_M  # the renderer's clip planes (daotai.plan.geometry)
    if encoders is not None:
        from daotai.encode.procsink import StreamJob

        w, h = plan.width, plan.height
        jobs = {"shot": StreamJob("rgb", shot_path, w, h, fps, enc)}
        if settings.controls:
            jobs["depth"] = StreamJob("depth16", layout.depth(sid), w, h, fps)
            jobs["depth_preview"] = StreamJob("depth_preview", layout.depth_preview(sid), w, h, fps,
                                              near=near, far=far)
            jobs["mask"] = StreamJob("gray8", layout.mask(sid), w, h, fps)
        labels = {"shot": "video", "depth": "depth", "depth_preview": "depth preview", "mask": "mask"}
        sinks: dict[str, Any] = {}
        try:
            for stream, job in jobs.items():
                sinks[stream] = encoders.open(stream, f"{shot.shot_id} {labels[stream]}", job)
        except BaseException:
            for sink in sinks.values():
                sink.abort()
            raise
        return sinks

    from daotai.encode.video import VideoWriter, write_gray8, write_gray16, write_preview_h264
    from daotai.render.previz.control import depth_to_preview, depth_to_uint16_mm

    def write_rgb(frames: Iterator[np.ndarray]) -> None:
        with VideoWriter(shot_path, plan.width, plan.height, fps, enc) as writer:
            for frame in frames:
                writer.write(frame)

    sinks = {"shot": _Sink(f"{shot.shot_id} video", write_rgb)}
    if settings.controls:
        sinks["depth"] = _Sink(
            f"{shot.shot_id} depth",
            lambda frames: write_gray16((depth_to_uint16_mm(d) for d in frames), layout.depth(sid), fps),
        )
        sinks["depth_preview"] = _Sink(
            f"{shot.shot_id} depth preview",
            lambda frames: write_preview_h264(
                (depth_to_preview(d, near, far) for d in frames), layout.depth_preview(sid), fps
            ),
        )
        sinks["mask"] = _Sink(
            f"{shot.shot_id} mask",
            lambda frames: write_gray8(frames, layout.mask(sid), fps),
        )
    return sinks


def shot_files(shot_id: str, settings: PipelineSettings) -> dict[str, str]:
    """Output paths of one shot, relative to the output folder (kind → posix path)."""
    return layout_for(Path("."), settings).shot_files(shot_id, settings.controls)


def control_index(plan: Plan) -> str:
    """control/index.json: how to read the control files of every shot."""
    index = {
        "depth": "FFV1 gray16le .mkv: distance along the camera's view axis in millimetres; 65535 = sky or beyond 65.534 m",
        "depth_preview": "H.264 full-range gray .mp4: log-scaled depth, near = white, sky = black (for video-model conditioning)",
        "mask": "FFV1 gray .mkv: character index map; 0 = no character, value i = the shot's i-th character (see shots)",
        "axes": "camera-local x right, y up, -z forward (OpenGL); cameras per frame are in plan.json",
        "shots": {
            shot.shot_id: {
                "frames": shot.frames,
                "mask_values": {str(i + 1): char_id for i, char_id in enumerate(shot.characters)},
            }
            for shot in plan.shots
        },
    }
    return json.dumps(index, indent=1, ensure_ascii=False) + "\n"


def mark_in_progress(layout: RenderLayout, plan_text: str) -> None:
    """Mark a staging folder as being rendered into until its manifest is written: by which
    process on which host (:func:`open_staging` removes the staging folders of dead processes)."""
    import hashlib
    import socket
    from datetime import datetime, timezone

    from daotai.files import atomic_write_text

    atomic_write_text(layout.in_progress, json.dumps({
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "plan_sha256": hashlib.sha256(plan_text.encode("utf-8")).hexdigest(),
        "pid": os.getpid(),
        "host": socket.gethostname(),
    }, indent=1) + "\n")


# ------------------------------------------------------------------ the output folder

FolderState = Literal["absent", "empty", "same_script", "other_script", "not_a_render"]
DEFAULT_TITLE = "Untitled"  # the script schema's default title: names no script


@dataclass(frozen=True)
class OutputFolder:
    """What a render's output folder holds now, and what the render does with it."""

    path: Path
    state: FolderState
    foreign: tuple[str, ...] = ()  # files in it that no render wrote (relative paths)
    previous: str = ""  # the earlier render's script, in words
    keep_old: Path | None = None  # where the old folder goes instead of being deleted (it held foreign files)

    def describe(self) -> str:
        if self.state == "other_script":
            return f"a render of another script, {self.previous}"
        if self.state == "not_a_render":
            return "not a daotai render: it has files but no manifest.json"
        return self.state.replace("_", " ")


def _script_identity(plan: Plan, source: Path | None) -> dict[str, Any]:
    """What names a script: its content hash, its file and its title."""
    resolved = str(Path(source).resolve()) if source is not None else None
    return {"script_hash": plan.script_hash, "resolved": resolved, "title": plan.title}


def _previous_identity(layout: RenderLayout, manifest: dict[str, Any]) -> dict[str, Any]:
    """The script identity an earlier render recorded (its manifest, its plan.json's title)."""
    src = manifest.get("source") or {}
    resolved = src.get("resolved") or (src.get("path") if src.get("path") and Path(src["path"]).is_absolute() else None)
    try:
        title = json.loads(layout.plan.read_text(encoding="utf-8")).get("title")
    except (OSError, ValueError, AttributeError):
        title = None
    return {"script_hash": manifest.get("script_hash"), "resolved": resolved, "title": title}


def same_script(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether an earlier render and this one are of one script: the same content, the same
    script file, or the same title (not the default one). An edited script re-renders into
    its folder; a different script file with a different title is another script."""
    if before.get("script_hash") and before["script_hash"] == now["script_hash"]:
        return True
    if before.get("resolved") and now.get("resolved"):
        if before["resolved"] == now["resolved"]:
            return True
    elif not before.get("resolved") and not now.get("resolved"):
        return before.get("title") == now["title"]  # library calls and services name no file
    return bool(before.get("title")) and before["title"] == now["title"] and now["title"] != DEFAULT_TITLE


def check_output_folder(out_dir: Path, plan: Plan, source: Path | None, force: bool) -> OutputFolder:
    """Whether a render of ``plan`` may replace ``out_dir``; OptionError (naming --output and
    --force) when it is not empty, absent or a render of the same script and ``force`` is off.

    A folder holding files daotai did not write (a user's notes, another tool's output) needs
    ``force`` too, even a render of this script; with it the old folder is kept whole beside the
    new one (``<name>.replaced-<UTC time>``), never deleted. The new render never shares its
    folder with foreign files.
    """
    from daotai.errors import Issue, OptionError
    from daotai.plan.layout import DESKTOP_FILES

    out_dir = Path(out_dir)
    if not out_dir.exists():
        return OutputFolder(out_dir, "absent")
    if all(p.is_dir() or p.name in DESKTOP_FILES for p in out_dir.rglob("*")):  # folders, a desktop's cache
        return OutputFolder(out_dir, "empty")
    layout = RenderLayout.find(out_dir)
    manifest: dict[str, Any] | None = None
    if layout.manifest.is_file():
        try:
            manifest = json.loads(layout.manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = None
    listed = frozenset((manifest or {}).get("files") or {}) if isinstance(manifest, dict) else frozenset()
    foreign = tuple(layout.foreign_files(set(listed)))
    if not isinstance(manifest, dict):
        state: FolderState = "not_a_render"
        previous = ""
    else:
        before = _previous_identity(layout, manifest)
        same = same_script(before, _script_identity(plan, source))
        state = "same_script" if same else "other_script"
        previous = f"{before.get('title')!r}" + (f" ({before['resolved']})" if before.get("resolved") else "")
    folder = OutputFolder(out_dir, state, foreign, previous)
    if state == "same_script" and not foreign:
        return folder
    if not force:
        what = folder.describe() if state != "same_script" else "a render of this script"
        extra = (f"; it holds {len(foreign)} file(s) daotai did not write ({', '.join(foreign[:4])}"
                 f"{' …' if len(foreign) > 4 else ''})") if foreign else ""
        raise OptionError(Issue("--output", str(out_dir), f"is {what}{extra}; choose an empty or new folder, or "
                                "pass --force to replace it (daotai deletes only files it wrote: a folder "
                                "holding others is kept whole beside the new render)"))
    if foreign:
        from datetime import datetime, timezone

        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        absolute = Path(os.path.abspath(out_dir))
        folder = replace(folder, keep_old=absolute.with_name(f"{absolute.name}.replaced-{stamp}"))
    return folder


STALE_STAGING_S = 24 * 3600.0  # a staging folder without a readable marker this old is a dead run's


def _staging_is_dead(folder: Path) -> bool:
    """Whether a staging folder belongs to a render that is no longer running (on this host)."""
    import socket

    from daotai.plan.layout import IN_PROGRESS

    try:
        marker = json.loads((folder / IN_PROGRESS).read_text(encoding="utf-8"))
        pid, host = int(marker["pid"]), str(marker["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return time.time() - folder.stat().st_mtime > STALE_STAGING_S
    if host != socket.gethostname() or os.name == "nt":  # another host's, or no signal-0 probe
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def open_staging(out_dir: Path) -> Path:
    """A fresh staging folder beside ``out_dir``, after removing those of renders that died there
    (and a replaced folder whose removal a crash cut short)."""
    from daotai.files import ASIDE_MARK, STAGING_MARK, remove_quietly, siblings_of, staging_folder

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    for leftover in siblings_of(out_dir, STAGING_MARK):
        if _staging_is_dead(leftover):
            remove_quietly(leftover)
    if out_dir.exists():
        for leftover in siblings_of(out_dir, ASIDE_MARK):
            remove_quietly(leftover)
    staging = staging_folder(out_dir)
    staging.mkdir()
    return staging


@dataclass
class RunTrace:
    """How far a run got: what a stopped run's note says."""

    total: int = 0
    before: str = "absent"  # what the output folder held before the run (OutputFolder.state)
    stage: str = "plan"
    shot: str | None = None  # the shot being rendered
    finished: list[str] = field(default_factory=list)  # shots whose files were complete
    cached: list[str] = field(default_factory=list)  # shots kept in the shot cache


def _final_paths(events: Generator[Event, None, RunResult], staging: Path, out_dir: Path,
                 trace: RunTrace) -> Generator[Event, None, RunResult]:
    """The run's events with output paths where the files will be once the staging folder is
    swapped in; follows the shot being rendered and the shots finished into ``trace``."""
    prefix = str(staging)
    while True:
        try:
            event = next(events)
        except StopIteration as stop:
            result = stop.value
            break
        if isinstance(event, Progress) and event.stage == "render" and event.shot_id:
            trace.shot = event.shot_id
        elif isinstance(event, Output):
            if event.kind == "shot" and event.shot_id and event.shot_id not in trace.finished:
                trace.finished.append(event.shot_id)
            if event.path.startswith(prefix):
                event = replace(event, path=str(out_dir) + event.path[len(prefix):])
        yield event
    return result


def stopped_note(out_dir: Path, trace: RunTrace, settings: PipelineSettings) -> str:
    """What a stopped render finished, where it is, and how to go on (one paragraph)."""
    where = {"plan": "before the first shot", "render": f"while rendering shot {trace.shot}" if trace.shot
             else "before the first shot", "assemble": "while assembling the sequence", "enhance": "while enhancing",
             "qc": "during the quality checks", "deliver": "while writing the deliverables",
             "manifest": "while writing the manifest", "swap": "while putting the new render in place"}
    done = f"{len(trace.finished)} of {trace.total} shot(s) finished" + \
        (f" ({', '.join(trace.finished[:8])}{' …' if len(trace.finished) > 8 else ''})" if trace.finished else "")
    folder = {"absent": f"{out_dir} was not created", "empty": f"{out_dir} is untouched (it was empty)",
              "not_a_render": f"{out_dir} is untouched"}.get(
        trace.before, f"{out_dir} is untouched: it still holds the earlier render")
    if trace.cached:
        resume = (f"The finished shots are kept in the shot cache ({settings.cache}): render again with the same "
                  f"command to resume; only the {trace.total - len(trace.cached)} other shot(s) are drawn")
    elif settings.cache and trace.finished:
        resume = "None of them was kept in the shot cache: rendering again draws every shot"
    elif settings.cache:
        resume = "No shot had finished: rendering again starts from the first shot"
    else:
        resume = "Without a shot cache nothing was kept: rendering again draws every shot (a render with " \
                 "the cache, without --no-cache or DAOTAI_NO_CACHE, keeps finished shots)"
    return f"Render stopped {where.get(trace.stage, trace.stage)}; {done}. {folder}. {resume}."


def keep_finished_shots(plan: Plan, layout: RenderLayout, finished: list[ShotRecord], soundtrack: np.ndarray | None,
                        backend: str, cache: Any, keys: dict[str, str]) -> list[str]:
    """Store the shots a stopped run finished in the shot cache (as a whole run would deliver
    them, soundtrack slice included); returns their ids. Never raises over the run's error."""
    kept: list[str] = []
    try:
        records = [r for r in finished if r.shot_id in keys and r.files]
        if not records:
            return kept
        ids = {r.shot_id for r in records}
        done = plan.model_copy(update={"shots": tuple(s for s in plan.shots if s.shot_id in ids)})
        records.sort(key=lambda r: [s.shot_id for s in done.shots].index(r.shot_id))
        for _ in add_soundtrack_to_shots(done, layout, records, soundtrack, backend):
            pass
        for record in records:
            record.key = keys[record.shot_id]
            cache.put(record.key, layout.root, record)
            kept.append(record.shot_id)
    except Exception:  # noqa: BLE001  (keeping is a favour; the run's own error is what the user must see)
        pass
    return kept


def fidelity_sample_indexes(frames: int) -> set[int]:
    """Evenly spaced frames (first and last included) kept for the encode-fidelity check."""
    count = min(frames, FIDELITY_SAMPLES_PER_SHOT)
    return {int(round(i)) for i in np.linspace(0, frames - 1, count)}


MAX_SOUNDTRACK_READ_S = 6 * 3600.0  # a soundtrack is decoded only as far as the sequence needs; never beyond this


def soundtrack_file(plan: Plan, source: Path | None) -> Path | None:
    """The soundtrack's file: relative paths resolve against the script's (or plan's) folder."""
    from daotai.script.schema import UPLOAD_PREFIX

    track = plan.soundtrack
    if track is None:
        return None
    if track.path.startswith(UPLOAD_PREFIX):
        raise ScriptError([Issue("soundtrack.path", track.path, "names an upload of the service; render through "
                                 "`daotai serve` or name a local file")])
    path = Path(track.path)
    if not path.is_absolute():
        path = (Path(source).resolve().parent if source is not None else Path.cwd()) / path
    if not path.is_file():
        raise ScriptError([Issue("soundtrack.path", track.path, f"does not exist (looked for {path})")])
    return path


def load_soundtrack(plan: Plan, source: Path | None) -> np.ndarray | None:
    """The soundtrack placed on the sequence's timeline: (N, 2) float32 at 48 kHz lasting the picture, or None."""
    path = soundtrack_file(plan, source)
    if path is None:
        return None
    from daotai.encode.audio import read_audio
    from daotai.post.assemble import place_soundtrack, sample_at

    assert plan.soundtrack is not None
    fps = Fraction(*plan.fps_fraction)
    needed = float(Fraction(plan.total_frames) / fps) + max(0.0, -plan.soundtrack.offset_s) + 1.0
    samples = read_audio(path, until_s=min(needed, MAX_SOUNDTRACK_READ_S))
    return place_soundtrack(samples, plan.soundtrack.offset_s, sample_at(plan.total_frames, fps),
                            plan.soundtrack.gain_db)


def shot_keys(plan: Plan, settings: PipelineSettings, encode: Any, source: Path | None) -> dict[str, str]:
    """Each shot's cache key (daotai.run.cache): what determines its files."""
    from daotai.render.registry import spec_for
    from daotai.run.cache import key_fields, shot_key

    spec = spec_for(settings.backend)
    model = (settings.options.get("model") or spec.default_model) if spec.family is not None else None
    memo: dict[Path, str] = {}
    # With retakes the kept take depends on how many takes a shot may have and which checks judge
    # them, so a shot rendered once is not reused for a run asking for takes (daotai.run.retakes)
    takes = {"retakes": {"takes": settings.retakes.takes, "retake_on": sorted(settings.retakes.retake_on)}} \
        if settings.retakes.takes > 1 else {}
    options = dict(settings.options)
    chained = spec.continues_across_shots(options)
    keys: dict[str, str] = {}
    previous: str | None = None
    for shot in plan.shots:
        fields = {**key_fields(plan, shot, settings.backend, options, settings.controls, encode, source, model, memo),
                  **takes}
        if chained:
            # The shot starts on the previous shot's last frame: a change there changes this shot
            fields["continues_from"] = previous
        previous = keys[shot.shot_id] = shot_key(fields)
    return keys


def chain_cache_misses(plan: Plan, settings: PipelineSettings, cache: Any, keys: dict[str, str]) -> list[str]:
    """The shots a chained backend (one shot starting on the last frame of the shot before) must render
    again: none when every shot is cached, else all of them, since the first changed shot must start on
    a frame its predecessor makes only when rendered in the same run. Empty for other backends."""
    from daotai.render.registry import spec_for

    if cache is None or not spec_for(settings.backend).continues_across_shots(dict(settings.options)):
        return []
    if all(cache.has(keys[shot.shot_id]) for shot in plan.shots):
        return []
    return [shot.shot_id for shot in plan.shots]


def reusable_shots(plan: Plan, settings: PipelineSettings, source: Path | None = None) -> frozenset[str]:
    """The shots a render of ``plan`` with ``settings`` would take from the shot cache unchanged
    (their keys are stored and no chained backend forces them again): what an estimate counts
    as a copy, not a render. Empty without a cache."""
    if not settings.cache:
        return frozenset()
    from daotai.run.cache import ShotCache

    options = resolved_options(settings)  # the keys hold the options as run() resolves them
    if options.shots_depend_on_earlier():
        return frozenset()
    settings = replace(settings, options=options.model_dump())
    cache = ShotCache(settings.cache, settings.cache_bytes)
    keys = shot_keys(plan, settings, encode_settings_for(settings, plan.width, plan.height), source)
    rerun = set(chain_cache_misses(plan, settings, cache, keys))
    return frozenset(sid for sid, key in keys.items() if sid not in rerun and cache.has(key))


def reuse_cached_shots(plan: Plan, cache: Any, keys: dict[str, str], out_dir: Path) -> Iterator[Event]:
    """Place every cached shot whose key is unchanged into ``out_dir``; returns their records by shot id."""
    reused: dict[str, ShotRecord] = {}
    for shot in plan.shots:
        key = keys[shot.shot_id]
        found = cache.get(key, out_dir)
        if found is None:
            continue
        if "damaged" in found:
            yield Notice("warning", f"cached shot {key[:12]} was damaged ({found['damaged']}): rendering it again",
                         shot.shot_id)
            continue
        note = f"unchanged since an earlier render: reused from the cache (key {key[:12]})"
        reused[shot.shot_id] = ShotRecord(shot.shot_id, samples=found["samples"], middle=found["middle"],
                                          files=dict(found["files"]), notices=[*found["notices"], note],
                                          audio=dict(found.get("audio") or {}), key=key, reused=True)
        yield Notice("info", note, shot.shot_id)
        yield Progress("render", shot.shot_id, shot.frames, shot.frames, "reused")
        for kind, rel in found["files"].items():
            yield Output(kind, str(out_dir / rel), shot.shot_id)
    return reused


def add_soundtrack_to_shots(plan: Plan, layout: RenderLayout, records: list[ShotRecord],
                            soundtrack: np.ndarray | None, backend: str) -> Iterator[Event]:
    """Give each shot file the backend left silent its slice of the soundtrack; say once when dialogue
    or sound the script asked for went unvoiced."""
    unvoiced = [shot.shot_id for shot, record in zip(plan.shots, records, strict=True)
                if shot.sound is not None and (shot.sound.dialogue or shot.sound.sound)
                and record.audio.get("source", "soundtrack") == "soundtrack"]
    if unvoiced:
        yield Notice("info", f"backend {backend!r} makes no sound: the dialogue and sound effects of "
                             f"{', '.join(unvoiced)} are not voiced" + (" (the soundtrack plays)" if soundtrack is not None else ""))
    if soundtrack is None:
        return
    for shot, record in zip(plan.shots, records, strict=True):
        yield from add_soundtrack_slice(plan, shot, layout, record, soundtrack)


def add_soundtrack_slice(plan: Plan, shot: ShotPlan, layout: RenderLayout, record: ShotRecord,
                         soundtrack: np.ndarray) -> Iterator[Event]:
    """Mux ``shot``'s slice of the soundtrack ((N, 2) float32, 48 kHz, sequence time) into its file, declicked
    at both ends and limited, unless the backend gave the shot sound of its own (or the slice is there)."""
    if record.audio:
        return
    from daotai.encode.audio import ROLE_SOUNDTRACK, mux_audio
    from daotai.post.assemble import DECLICK_S, limit, sample_at

    fps = Fraction(*plan.fps_fraction)
    declick = round(DECLICK_S * 48000)
    begin, end = sample_at(shot.start_frame, fps), sample_at(shot.start_frame + shot.frames, fps)
    piece = np.array(soundtrack[begin:end], np.float32)
    ramp = np.sin(np.linspace(0.0, np.pi / 2, declick, endpoint=False, dtype=np.float32)) ** 2
    piece[:declick] *= ramp[:, None]
    piece[len(piece) - declick:] *= ramp[::-1, None]
    limit(piece)
    mux_audio(layout.root / record.files["shot"], piece, 48000, ROLE_SOUNDTRACK)
    record.audio = {"source": "soundtrack", "rate": 48000, "channels": 2, "samples": int(len(piece)),
                    "sequence_samples": [begin, end]}
    yield Progress("encode", shot.shot_id, 1, 1, "soundtrack slice added")


def sound_summary(plan: Plan, records: list[ShotRecord], source: Path | None, report: Any) -> dict[str, Any]:
    """The manifest's "sound": the soundtrack file (hash, rate, length), what each shot file carries, the mix."""
    from daotai.encode.audio import probe_audio
    from daotai.files import sha256_file

    summary: dict[str, Any] = {"rate": 48000, "shots": {r.shot_id: r.audio.get("source") for r in records if r.audio}}
    path = soundtrack_file(plan, source)
    if path is not None and plan.soundtrack is not None:
        info = probe_audio(path)
        summary["soundtrack"] = {
            "path": plan.soundtrack.path, "resolved": str(path), "sha256": sha256_file(path),
            "bytes": path.stat().st_size, "offset_s": plan.soundtrack.offset_s, "gain_db": plan.soundtrack.gain_db,
            "codec": info.codec if info else None, "rate": info.rate if info else None,
            "channels": info.channels if info else None, "duration_s": info.duration_s if info else None,
        }
    sequence = (getattr(report, "sequence", None) or {}).get("audio") or {}
    summary["sequence"] = {"loudness": sequence.get("loudness"), "duration_s": sequence.get("duration_s")}
    return summary


def timeline_sound(plan: Plan, records: list[ShotRecord], sound: dict[str, Any] | None):
    """What the timeline's audio tracks hold (None for a silent render: no audio tracks)."""
    if sound is None:
        return None
    from daotai.deliver.timeline import TimelineSound

    track = sound.get("soundtrack") or {}
    return TimelineSound(
        shots_with_sound=frozenset(r.shot_id for r in records if r.audio.get("source") == "backend"),
        soundtrack=track.get("resolved"), soundtrack_duration_s=track.get("duration_s") or 0.0,
        soundtrack_offset_s=track.get("offset_s", 0.0), soundtrack_gain_db=track.get("gain_db", 0.0),
        muted=frozenset(s.shot_id for s in plan.shots if s.sound is not None and s.sound.mute),
        gains_db={s.shot_id: s.sound.gain_db for s in plan.shots if s.sound is not None},
    )


def shot_sound(plan: Plan, shot: ShotPlan, audio: Audio) -> np.ndarray:
    """A backend's Audio checked like its frames (length within half a frame of the shot), as
    (N, C) float32 at 48 kHz lasting exactly the shot; EncodeError otherwise."""
    from daotai.encode.audio import MIX_RATE, check_samples, fit_length, resample, samples_for

    where = f"{shot.shot_id}: backend audio"
    if audio.shot_id != shot.shot_id:
        raise EncodeError(f"{where}: is for shot {audio.shot_id!r}")
    samples = check_samples(audio.samples, audio.rate, audio.layout, where)
    fps = Fraction(*plan.fps_fraction)
    planned = Fraction(shot.frames) / fps
    got = Fraction(samples.shape[0], audio.rate)
    if abs(got - planned) > 1 / (2 * fps):
        raise EncodeError(f"{where}: lasts {float(got):.4f} s ({samples.shape[0]} samples at {audio.rate} Hz), "
                          f"the shot {float(planned):.4f} s ({shot.frames} frames); it must match within half a frame")
    sound = fit_length(resample(samples, audio.rate, MIX_RATE), samples_for(planned, MIX_RATE))
    from daotai.post.assemble import limit

    limit(sound, ceiling_dbfs=-0.1)  # a resampler's overshoot on full-scale transients, never more
    return sound


def render_shot(backend, plan: Plan, shot: ShotPlan, out_dir: Path, settings: PipelineSettings,
                ctx: RunContext, record: ShotRecord, encoders: Any = None) -> Iterator[Event]:
    """Render one shot through the backend into its encoded files; yields progress. With a hardware
    encoder the shot file is held to the fidelity gate and rendered again in software when it misses
    (daotai.run.encoder_choice)."""
    if settings.hardware_encoder is None:
        return (yield from _render_shot_once(backend, plan, shot, out_dir, settings, ctx, record, encoders))
    from daotai.run.encoder_choice import render_shot_gated

    shot_path = layout_for(out_dir, settings).shot(shot.shot_id)
    yield from render_shot_gated(_render_shot_once, shot_path, backend, plan, shot, out_dir, settings, ctx, record,
                                 encoders)


def _render_shot_once(backend, plan: Plan, shot: ShotPlan, out_dir: Path, settings: PipelineSettings,
                      ctx: RunContext, record: ShotRecord, encoders: Any = None) -> Iterator[Event]:
    """Render one shot through the backend into its encoded files; yields progress.

    ``encoders`` is an :class:`daotai.encode.procsink.EncoderPool` whose processes encode
    beside the renderer; None encodes on threads of this process.
    """
    samples = fidelity_sample_indexes(shot.frames)
    middle = shot.frames // 2
    sinks = _shot_sinks(plan, shot, out_dir, settings, encoders)
    started = time.perf_counter()
    render_s = 0.0
    frames_seen = 0
    audio: Audio | None = None
    try:
        events = iter(backend.render(RenderJob(plan=plan, shot=shot, controls=settings.controls), ctx))
        while True:
            tick = time.perf_counter()
            event = next(events, None)
            render_s += time.perf_counter() - tick
            if event is None:
                break
            if isinstance(event, Frame):
                if event.index != frames_seen:
                    raise EncodeError(f"{shot.shot_id}: backend sent frame {event.index}, expected {frames_seen}")
                if event.index in samples:
                    record.samples[event.index] = event.rgb.copy()
                if event.index == middle:
                    record.middle = event.rgb.copy()
                sinks["shot"].put(event.rgb)
                if settings.controls:
                    if event.depth is None or event.mask is None:
                        raise EncodeError(f"{shot.shot_id}: backend {backend.name!r} produced no control channels; use --no-controls")
                    sinks["depth"].put(event.depth)
                    sinks["depth_preview"].put(event.depth)
                    sinks["mask"].put(event.mask)
                frames_seen += 1
            elif isinstance(event, Audio):
                if audio is not None:
                    raise EncodeError(f"{shot.shot_id}: backend {backend.name!r} sent a second Audio event; one per shot")
                audio = event
            else:
                if isinstance(event, Notice):
                    record.notices.append(event.text)
                yield event
        if frames_seen != shot.frames:
            raise EncodeError(f"{shot.shot_id}: backend produced {frames_seen} frames, the plan has {shot.frames}")
        sound = shot_sound(plan, shot, audio) if audio is not None else None
        yield Progress("encode", shot.shot_id, 0, 1, "finishing encoders")
        for sink in sinks.values():
            sink.finish()
    except BaseException:
        for sink in sinks.values():
            sink.abort()
        raise
    if sound is not None:
        from daotai.encode.audio import ROLE_SHOT, mux_audio

        mux_audio(layout_for(out_dir, settings).shot(shot.shot_id), sound, 48000, ROLE_SHOT)
        record.audio = {"source": "backend", "rate": audio.rate, "channels": int(audio.samples.shape[1]),
                        "layout": audio.layout, "samples": int(audio.samples.shape[0])}
    record.render_s = render_s
    record.wall_s = time.perf_counter() - started
    record.files = shot_files(shot.shot_id, settings)
    for kind, rel in record.files.items():
        yield Output(kind, str(out_dir / rel), shot.shot_id)


# ------------------------------------------------------------------ the whole run


class ShotExecutor(Protocol):
    """Renders the shots of a plan into their encoded files; the rest of the run stays in :func:`run`."""

    def render_shots(self, plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext,
                     source: Path | None, health: Callable[[Any], dict] | None) -> Generator[Event, None, list]:
        """Yield events; return one ShotRecord per shot, in plan order."""
        ...


def _take_renderer(backend, plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext,
                   encoders: Any) -> Callable[[ShotPlan], Generator[Event, None, ShotRecord]]:
    """One take of a shot (daotai.run.retakes): rendered into the shot's files; returns its record."""

    def render_take(shot: ShotPlan) -> Generator[Event, None, ShotRecord]:
        record = ShotRecord(shot.shot_id)
        yield from render_shot(backend, plan, shot, out_dir, settings, ctx, record, encoders)
        return record

    return render_take


class LocalExecutor:
    """Every shot in this process, one after another, through one warm backend."""

    def __init__(self) -> None:
        self.finished: list[ShotRecord] = []  # the shots done so far (kept in the cache if the run stops)

    def render_shots(self, plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext,
                     source: Path | None, health: Callable[[Any], dict] | None) -> Generator[Event, None, list]:
        """Yield events; return one ShotRecord per shot, in plan order."""
        from contextlib import nullcontext

        from daotai.encode.procsink import EncoderPool
        from daotai.render.registry import create_backend
        from daotai.run.retakes import TakeBudget, judge_with_qc, render_with_takes

        records: list[ShotRecord] = []
        self.finished = records
        # Encoder processes for the whole run when it is long enough to pay for their start-up,
        # started first so their imports overlap backend setup; otherwise encoder threads.
        with EncoderPool() if use_encoder_processes(plan) else nullcontext() as encoders:
            if encoders is not None:
                encoders.start(*(("shot", "depth", "depth_preview", "mask") if settings.controls else ("shot",)))
            backend = create_backend(settings.backend, settings.options, backend_env(source, health))
            try:
                if encoders is not None:
                    encoders.wait_ready()
                budget = TakeBudget(settings.retakes.budget_s)
                judge = judge_with_qc(plan, out_dir, settings.camera_qc)
                for shot in plan.shots:
                    ctx.check()
                    render_take = _take_renderer(backend, plan, out_dir, settings, ctx, encoders)
                    record = yield from render_with_takes(render_take, judge, plan, shot, out_dir, settings.retakes,
                                                          budget)
                    records.append(record)
            finally:
                backend.close()
        return records


def _space_what(plan: Plan, settings: PipelineSettings) -> str:
    from daotai.diskspace import describe_render

    return describe_render(len(plan.shots), plan.total_frames, plan.width, plan.height, settings.controls)


def ensure_space(plan: Plan, settings: PipelineSettings, out_dir: Path, cache: Any,
                 keys: dict[str, str]) -> Generator[Event, None, dict[Path, int]]:
    """Check that the render's files fit on the disk (daotai.diskspace) before any is written;
    the shot cache gives up least recently used entries (not this render's) to make room, with a
    notice. DiskFull names the folder, the bytes free and the bytes needed. Returns the bytes
    needed per folder (for the message of a disk that fills up anyway)."""
    from daotai.diskspace import bytes_needed, free_bytes, render_bytes, same_file_system
    from daotai.errors import DiskFull, size_text
    from daotai.render.registry import spec_for

    estimate = render_bytes(plan.width, plan.height, {s.shot_id: s.frames for s in plan.shots}, settings.controls,
                            neural=spec_for(settings.backend).family is not None, enhance=bool(settings.enhance))
    rerun = set(chain_cache_misses(plan, settings, cache, keys))
    reused = {sid for sid, key in keys.items() if cache is not None and sid not in rerun and cache.has(key)}
    cache_dir = Path(cache.root) if cache is not None else None
    needs = bytes_needed(estimate, Path(os.path.abspath(out_dir)), cache_dir, reused)
    for folder, need in needs.items():
        free = free_bytes(folder)
        if free < need and cache is not None and same_file_system(folder, cache.root):
            freed = cache.free_up(need - free, keep=set(keys.values()))
            if freed:
                yield Notice("info", f"the shot cache gave up {size_text(freed)} of its least recently used "
                                     "shots to make room for this render")
            free = free_bytes(folder)
        if free < need:
            raise DiskFull(folder, free, need, _space_what(plan, settings))
    return needs


def disk_full_error(exc: BaseException, out_dir: Path, staging: Path, needed: dict[Path, int], plan: Plan,
                    settings: PipelineSettings) -> Any:
    """A DiskFull for a render the disk stopped (``exc`` says no space was left somewhere in its
    chain), naming the file being written, the bytes free now and the bytes needed; None for
    any other error (a DiskFull raised on purpose stays as it is)."""
    from daotai.diskspace import free_bytes
    from daotai.errors import DiskFull, disk_full_cause
    from daotai.files import target_of_temp

    cause = disk_full_cause(exc)
    if cause is None or isinstance(exc, DiskFull):
        return None
    name = cause.filename2 or cause.filename
    writing = "a file"
    folder = Path(os.path.abspath(out_dir))
    if name:
        path = Path(os.fsdecode(name))
        path = target_of_temp(path) or path
        try:
            writing = path.relative_to(staging).as_posix()
        except ValueError:
            writing = str(path)
            folder = path.parent
    need = next((n for f, n in needed.items() if folder.is_relative_to(f)), None)
    if need is None and needed:  # a file of the cache, on the output's file system
        need = max(needed.values())
    return DiskFull(folder, free_bytes(folder), need, _space_what(plan, settings), writing=writing)


def run(plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext | None = None,
        source: Path | None = None, health: Callable[[Any], dict] | None = None,
        executor: ShotExecutor | None = None) -> Iterator[Event | Finished]:
    """Render every (selected) shot, assemble, check and deliver; yields events, then Finished.

    ``executor`` renders the shots (default: :class:`LocalExecutor`); front ends choose it, e.g.
    a Ray cluster's from :func:`daotai.cluster.executor_for` when ``settings.cluster`` is set.

    ``health(runtime) -> sample`` replaces the neural backends' accelerator health sampler
    (:func:`daotai.runtime.device.health_sample`) for a local run, e.g. for a front end that
    already polls the GPU; cluster workers always sample their own device.
    """
    from daotai.files import remove_quietly, swap_folder
    from daotai.plan.planner import select_shots

    ctx = ctx or RunContext()
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise PlanError(f"--output: {out_dir} exists and is not a folder")
    if settings.shots:
        plan = select_shots(plan, list(settings.shots))
    from daotai.render.registry import spec_for

    spec = spec_for(settings.backend)
    options = resolved_options(settings)  # refused here, before any work, when an option is wrong
    require_models(settings, options)  # and a model that is not downloaded
    from daotai.render.footage import footage_notices

    for notice in footage_notices(plan, spec, Path(source).resolve().parent if source is not None else None):
        yield notice  # a reference video that does not decode or is too short is refused here, before any work
    settings = replace(settings, options=options.model_dump())  # the manifest records them, validated
    if settings.cache and options.shots_depend_on_earlier():
        settings = replace(settings, cache=None)
        yield Notice("info", "the shot cache is not used: with these options a shot depends on the shots rendered "
                             "before it, and a cached shot's key describes it alone")
    if settings.controls and not spec.controls:
        # Neural backends make no depth/mask; the run goes on with controls off.
        settings = replace(settings, controls=False)
        yield Notice("info", f"backend {settings.backend!r} makes no control channels: rendering without controls")
    if settings.usd_cameras:
        from daotai.deliver.cameras import usd_skipped

        skipped = usd_skipped()
        if skipped is not None:  # said now, before any work, and kept in the manifest
            settings = replace(settings, usd_cameras=False, skipped_outputs=(*settings.skipped_outputs, skipped))
            yield Notice("warning", f"{skipped['output']} will not be written: {skipped['reason']}; "
                                    f"install it with: {skipped['install']}")
    enc = encode_settings_for(settings, plan.width, plan.height)  # codec/crf/preset checked before any work
    from daotai.run.encoder_choice import resolve_encoder

    settings = yield from resolve_encoder(settings, plan.width, plan.height, Fraction(*plan.fps_fraction), enc.codec)
    enc = encode_settings_for(settings, plan.width, plan.height)
    if out_dir.is_symlink():
        out_dir = out_dir.resolve()  # the folder it names is replaced, not the link
    folder = check_output_folder(out_dir, plan, source, settings.force)  # refused here, before any work
    cache, keys = None, {}
    if settings.cache:
        from daotai.run.cache import ShotCache

        cache = ShotCache(settings.cache, settings.cache_bytes)
        keys = shot_keys(plan, settings, enc, source)
    needed = yield from ensure_space(plan, settings, out_dir, cache, keys)  # refused here, before any work
    staging = open_staging(Path(os.path.abspath(out_dir)))
    trace = RunTrace(total=len(plan.shots), before=folder.state)
    try:
        result = yield from _final_paths(
            _render_into(plan, staging, settings, ctx, source, health, executor, enc, trace, cache, keys),
            staging, out_dir, trace)
        trace.stage = "swap"
        swap_folder(staging, os.path.abspath(out_dir), keep_old=folder.keep_old)
    except BaseException as exc:
        remove_quietly(staging)
        if isinstance(exc, GeneratorExit):
            raise
        full = disk_full_error(exc, out_dir, staging, needed, plan, settings)
        # What was finished and how to go on, once a shot started (or the user stopped the run):
        # an error before any shot ran is the whole story, with nothing to resume.
        ran = bool(trace.shot or trace.finished) or trace.stage not in ("plan", "render")
        if ran or full is not None or isinstance(exc, Cancelled) or interrupted_inside(exc):
            (full or exc).add_note(stopped_note(out_dir, trace, settings))
        if full is not None:
            raise full from exc
        raise
    if folder.keep_old is not None:
        yield Notice("warning", f"{out_dir} held {len(folder.foreign)} file(s) daotai did not write "
                                f"({', '.join(folder.foreign[:4])}{' …' if len(folder.foreign) > 4 else ''}): "
                                f"the old folder was kept whole as {folder.keep_old}")
    elif folder.state in ("other_script", "not_a_render"):
        yield Notice("info", f"replaced the earlier contents of {out_dir} ({folder.describe()}), as --force asked")
    yield Finished(replace(result, out_dir=out_dir, sequence=out_dir / result.sequence.relative_to(staging),
                           qc_path=out_dir / result.qc_path.relative_to(staging)))


def _render_into(plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext, source: Path | None,
                 health: Callable[[Any], dict] | None, executor: ShotExecutor | None, enc: EncodeSettings,
                 trace: RunTrace, cache: Any, keys: dict[str, str]) -> Generator[Event, None, RunResult]:
    """The run's work in its staging folder ``out_dir``: yields events, returns the RunResult;
    ``trace`` follows the stage reached and the shots kept in the cache (for a stopped run's note);
    ``cache`` (a ShotCache or None) holds finished shots by their ``keys``."""
    from daotai.files import atomic_write_text
    from daotai.plan.planner import plan_to_json

    layout = layout_for(out_dir, settings)
    layout.make_folders(settings.controls)
    timings: dict[str, float] = {}
    run_started = time.perf_counter()
    soundtrack = load_soundtrack(plan, source)  # checked and decoded before any render
    plan_text = plan_to_json(plan)
    mark_in_progress(layout, plan_text)  # says whose staging folder this is, until the manifest is written
    atomic_write_text(layout.plan, plan_text)
    trace.stage = "render"
    for note in plan.scene.notices:  # what the planner chose for the whole scene (the set kit)
        yield Notice("info", note)
    for shot in plan.shots:
        for warning in shot.warnings:
            yield Notice("warning", warning, shot.shot_id)

    if settings.cluster and executor is None:
        raise ValueError("settings.cluster is set but no executor was given; front ends pass "
                         "daotai.cluster.executor_for(settings)")
    executor = executor or LocalExecutor()
    reused: dict[str, ShotRecord] = {}
    if cache is not None and chain_cache_misses(plan, settings, cache, keys):
        yield Notice("info", f"the {settings.backend} backend continues each shot from the last frame of the one "
                             "before (workflow fl2va) and some shots changed: every shot is rendered again, so "
                             "the sequence matches a render without the cache")
    elif cache is not None:
        reused = yield from reuse_cached_shots(plan, cache, keys, out_dir)
    todo = tuple(shot for shot in plan.shots if shot.shot_id not in reused)
    from daotai.qc.parallel import ShotChecks

    # Shots are checked by worker processes as their files become final: right after rendering,
    # once the soundtrack's slice (if any) is muxed into them.
    checks = ShotChecks(plan, settings.qc_workers if len(todo) > 1 else 0)
    try:
        try:
            # the workers start before the executor loads its backend (at its first event), so the
            # interpreters' start-up and imports run while the backend starts
            checks.start()
            events = executor.render_shots(plan.model_copy(update={"shots": todo}), out_dir, settings, ctx,
                                           source, health)
            rendered = (yield from _handing_in(events, executor, checks, plan, out_dir, settings.camera_qc,
                                               layout, soundtrack)) if todo else []
            render_ended = time.monotonic()
        except BaseException:
            if cache is not None:  # the shots finished so far make the next render cheaper
                trace.cached = keep_finished_shots(plan, layout, getattr(executor, "finished", []), soundtrack,
                                                   settings.backend, cache, keys)
            raise
        result = yield from _after_render(plan, out_dir, settings, ctx, layout, enc, trace, soundtrack, cache, keys,
                                          reused, rendered, todo, checks, timings, run_started, plan_text, source,
                                          render_ended)
    except BaseException:
        checks.close(cancel=True)
        raise
    checks.close()
    return result


def _handing_in(events: Generator[Event, None, list], executor: Any, checks: Any, plan: Plan, out_dir: Path,
                camera: bool, layout: RenderLayout, soundtrack: np.ndarray | None) -> Generator[Event, None, list]:
    """The executor's events, handing each shot it finishes (``executor.finished``) to ``checks``
    at the executor's next event (the next shot's first), so a shot is checked while later ones render.
    A shot the backend left silent gets its soundtrack slice first, so it is checked as delivered.

    ``executor.finished`` is read again at every event: an executor makes a new list when its
    render starts (LocalExecutor does), so a list read before the first event would stay empty
    and every shot would wait for the end of the render to be checked."""
    from daotai.qc.report import hand_in_shot

    shots = {shot.shot_id: shot for shot in plan.shots}
    handed = 0

    def hand_in() -> Iterator[Event]:
        nonlocal handed
        finished: list[ShotRecord] = getattr(executor, "finished", None) or []
        for record in finished[handed:]:
            if soundtrack is not None:
                yield from add_soundtrack_slice(plan, shots[record.shot_id], layout, record, soundtrack)
            hand_in_shot(checks, plan, shots[record.shot_id], record, out_dir, camera)
        handed = max(handed, len(finished))

    while True:
        try:
            event = next(events)
        except StopIteration as stop:
            yield from hand_in()
            return stop.value
        yield from hand_in()
        yield event


def _after_render(plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext, layout: RenderLayout,
                  enc: EncodeSettings, trace: RunTrace, soundtrack: np.ndarray | None, cache: Any, keys: dict[str, str],
                  reused: dict[str, ShotRecord], rendered: list, todo: tuple, checks: Any, timings: dict[str, float],
                  run_started: float, plan_text: str, source: Path | None,
                  render_ended: float) -> Generator[Event, None, RunResult]:
    """The run after its shots are rendered: assemble, (enhance), check, deliver; returns the RunResult.

    ``render_ended``: when the executor returned, on time.monotonic() (the clock of ``checks.spans``)."""
    from daotai.files import atomic_write_text
    from daotai.qc.parallel import seconds_before
    from daotai.qc.report import hand_in_shot

    by_id = {record.shot_id: record for record in rendered}
    records = [reused.get(shot.shot_id) or by_id[shot.shot_id] for shot in plan.shots]
    yield from add_soundtrack_to_shots(plan, layout, records, soundtrack, settings.backend)
    for shot, record in zip(plan.shots, records, strict=True):
        if shot.shot_id in by_id and not checks.has(f"shot:{shot.shot_id}"):
            hand_in_shot(checks, plan, shot, record, out_dir, settings.camera_qc)
    if cache is not None:
        for record in rendered:  # stored as delivered (a soundtrack slice included)
            record.key = keys[record.shot_id]
            cache.put(record.key, out_dir, record)
        trace.cached = [record.shot_id for record in records]
        if reused:
            yield Notice("info", f"{len(todo)} of {len(plan.shots)} shots rendered, {len(reused)} reused unchanged "
                                 f"({', '.join(reused)})")
    timings["render_and_encode_s"] = time.perf_counter() - run_started
    if settings.controls:
        atomic_write_text(layout.control_index, control_index(plan))
        yield Output("control_index", str(layout.control_index))
    timings["render_only_s"] = sum(r.render_s for r in records)

    ctx.check()
    trace.stage = "assemble"
    tick = time.perf_counter()
    try:
        sequence = yield from _assemble(plan, layout, enc, records, soundtrack)
    except EncodeError as exc:
        if enc.hardware is None:
            raise
        yield Notice("warning", f"hardware encoder {enc.hardware.name} failed on the sequence ({exc}); "
                                "assembling it with the software encoder")
        enc = replace(enc, hardware=None)
        sequence = yield from _assemble(plan, layout, enc, records, soundtrack)
    timings["assemble_s"] = time.perf_counter() - tick

    if settings.enhance:
        from daotai.post.enhance import enhance_render, parse_steps

        trace.stage = "enhance"
        tick = time.perf_counter()
        files = {r.shot_id: r.files["shot"] for r in records}
        yield from enhance_render(plan, out_dir, files, parse_steps(settings.enhance), enc, ctx)
        timings["enhance_s"] = time.perf_counter() - tick

    ctx.check()
    trace.stage = "qc"
    tick = time.perf_counter()
    from daotai.run.cache import check_render_reusing

    # shots reused from the cache keep their stored qc entries: only the rest (and the sequence) are checked
    report = yield from check_render_reusing(plan, out_dir, records, cache, settings.camera_qc, layout, checks)
    timings["qc_s"] = time.perf_counter() - tick
    # shot checking the render hid: done by the workers while later shots still rendered
    timings["qc_beside_render_s"] = seconds_before(checks.spans, render_ended, "shot:")

    trace.stage = "deliver"
    tick = time.perf_counter()
    yield Progress("deliver", None, 0, 3, "contact sheet, cameras and timeline")
    from daotai.deliver.cameras import write_cameras
    from daotai.deliver.contact_sheet import write_contact_sheet
    from daotai.deliver.manifest import write_manifest
    from daotai.deliver.timeline import camera_files_by_shot, write_timeline

    write_contact_sheet(plan, {r.shot_id: r.middle for r in records}, layout.contact_sheet)
    yield Output("contact_sheet", str(layout.contact_sheet))
    if settings.boards:
        from daotai.deliver.boards import write_boards

        for path in write_boards(plan, {r.shot_id: r.middle for r in records}, layout, settings.boards):
            yield Output(layout.classify(path.relative_to(layout.root).as_posix())[0], str(path))
    # every shot's camera for other tools (pose files, JSON, USD), with the other deliverables;
    # the timeline's clips name them
    cameras = write_cameras(plan, layout.cameras_dir, usd=settings.usd_cameras)
    sound = sound_summary(plan, records, source, report) if soundtrack is not None or any(r.audio for r in records) else None
    write_timeline(plan, {r.shot_id: r.files["shot"] for r in records}, layout.timeline,
                   timeline_sound(plan, records, sound), camera_files_by_shot(plan, cameras, layout.timeline.parent))
    yield Output("timeline", str(layout.timeline))
    from daotai.deliver.subtitles import write_subtitles

    for path in write_subtitles(plan, layout):  # the dialogue's subtitles (none without dialogue)
        kind, shot_id = layout.classify(path.relative_to(layout.root).as_posix())
        yield Output(kind, str(path), shot_id)
    yield Progress("deliver", None, 3, 3)
    timings["deliver_s"] = time.perf_counter() - tick
    timings["total_s"] = time.perf_counter() - run_started
    trace.stage = "manifest"
    write_manifest(plan, plan_text, out_dir, settings, records, timings, source, encode=enc, sound=sound)
    layout.in_progress.unlink(missing_ok=True)  # the staging folder holds one whole render
    yield Output("manifest", str(layout.manifest))

    frame = f"{plan.width}x{plan.height}" if plan.letterbox is None else \
        "{}x{} ({}x{} letterboxed)".format(*plan.letterbox, plan.width, plan.height)
    summary = (
        f"{len(plan.shots)} shot{'s' if len(plan.shots) != 1 else ''}, {plan.total_duration_s:g} s, "
        f"{frame}, rendered in {timings['total_s']:.1f} s; qc {'passed' if report.ok else 'FAILED'}"
    )
    return RunResult(out_dir, sequence, layout.qc, report.ok, summary, timings)


def _assemble(plan: Plan, layout: RenderLayout, enc: EncodeSettings, records: list[ShotRecord],
              soundtrack: np.ndarray | None = None) -> Iterator[Event]:
    """Cut the shot files into the sequence (``layout.sequence``) with the plan's transitions,
    mixing the shots' own sound (not muted) over the soundtrack."""
    from daotai.post.assemble import ClipSpec, Transition, assemble, closing_fade_seconds

    fps = Fraction(*plan.fps_fraction)
    clips = []
    for shot, record in zip(plan.shots, records, strict=True):
        level = shot.sound
        own = record.audio.get("source") == "backend" and not (level is not None and level.mute)
        clips.append(ClipSpec(path=layout.root / record.files["shot"],
                              transition_in=Transition.planned(shot.transition.type, shot.transition.frames, fps),
                              audio=own, audio_gain_db=level.gain_db if level is not None else 0.0))
    target = layout.sequence
    progress: list[tuple[int, int]] = []

    def on_progress(done: int, total: int) -> None:
        progress.append((done, total))

    # Assembly streams frames; progress is reported once it returns (it is a fraction of render time).
    yield Progress("assemble", None, 0, plan.total_frames, f"{len(clips)} shots into the sequence")
    closing = closing_fade_seconds(plan.fade_out.frames, fps) if plan.fade_out is not None else 0.0  # to black
    result = assemble(clips, target, fps, enc, on_progress=on_progress, soundtrack=soundtrack, fade_out_s=closing,
                      letterbox=plan.letterbox)
    if result.audio is not None and result.audio["limiter_gain_reduction_db"] > 0:
        yield Notice("info", f"the mix peaked at {result.audio['peak_before_limiter']:.3f} and was limited by up to "
                             f"{result.audio['limiter_gain_reduction_db']:.1f} dB so nothing clips")
    yield Progress("assemble", None, plan.total_frames, plan.total_frames)
    yield Output("sequence", str(target))
    return target
