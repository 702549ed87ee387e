"""How long a whole previz render will take here, told before it starts (`render --dry-run`, the
long-render warning).

A previz render's time is mostly not drawing: on the 2-core software-GL box at 640x360 a frame
draws in ~10 ms, while encoding its four files, checking it and cutting it into the sequence
take several times that (the office example: ~12 ms a frame to render and encode, ~37 ms to
check, ~7 ms to assemble, CPU). Timing bare frames and multiplying by a fixed factor was off
by 0.5x to 3x on the examples. So the estimate models each stage the run goes through and
times each one here, on a sample of the plan itself at its real size (:func:`calibrate`):

* **render + encode**: a middle stretch of the plan's busiest shot rendered through the real
  backend into its real encoded files (controls included), at two lengths, so that the
  per-shot part (opening the encoders) and the per-frame part come apart;
* **QC**: the shot checks run on those sample clips (the function a render's checks run), and
  once in a QC worker process as a render hands them in;
* **assembly**: each sample clip cut twice into a sequence (copied, per shot), once re-encoded
  (per frame: what a transition or a fade makes the assembly decode, blend and encode; the
  frames a plan re-encodes are counted from its transitions and GOPs), and the sequence check;
* **reuse**: a sample shot stored in a shot cache and placed in another folder, as a render
  reusing an unchanged shot does: such shots cost that, not a render, an encode or checks;
* **start-up**: opening the backend (the GL context), and a fresh interpreter importing what the
  render imports and what a QC worker imports.

The costs are measured once per machine and kept in the user's cache folder
(:func:`stored_calibration`), measured again when daotai's version or the machine (cores,
platform, GPUs) changes. They are CPU seconds (all threads of this process), which a busy
machine changes far less than wall seconds, and the stages are added up as they run
(:func:`whole_render_s`): the shot checks run in worker processes beside the render and the
assembly, so on a machine with spare cores they take the cores the render leaves idle, and what
does not fit beside it is added at the end. What the machine gives us now is measured at each
estimate (:func:`cpu_rates`): the part of a core one thread gets and what all our threads get
together, which on a machine shared with other work is often about one core however many
threads we run.

Neural backends keep their own rule (daotai.render.cost); this module is about previz.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from daotai.plan.model import Plan, ShotPlan
from daotai.render.cost import CostEstimate, format_seconds
from daotai.runtime.cores import usable_cores

# The longer sample; the shorter is half of it. A shot's checks cost 29 ms a frame from 12 to 24 frames,
# 37 from 24 to 48 and 47 from 48 to 72 (office s01, CPU): samples shorter than a shot miss that growth.
SAMPLE_FRAMES = 48
# The samples before a render that may be long (the warning): a 4K plan's 24 and 48 frames took 50 s
# to time on the 2-core box, 4 and 8 frames 12 s.
WARNING_SAMPLE_FRAMES = 8
# A render's own start-up that a dry run (already running, modules imported) does not see: the
# interpreter and the pipeline's imports. Timed by :func:`calibrate` (a fresh interpreter importing
# them); this is the value tests and a failed timing use (0.8-1.4 s on the 2-core box).
PROCESS_START_S = 1.2
# CPU seconds one QC worker process takes to start (an interpreter and the checks' imports); timed
# by :func:`calibrate` like the process start, this where that timing fails.
QC_WORKER_START_CPU_S = 0.6
# What `render` imports before its first shot, and what a QC worker imports (daotai.qc.parallel).
RENDER_IMPORTS = ("import daotai.cli, daotai.run.pipeline, daotai.render.registry, daotai.post.assemble, "
                  "daotai.qc.report, daotai.run.cache, daotai.deliver.manifest, daotai.deliver.contact_sheet, "
                  "daotai.deliver.timeline, daotai.deliver.camera_files, daotai.cli.progress, daotai.plan.planner, "
                  "daotai.script.load")
QC_WORKER_IMPORTS = "import daotai.qc.parallel, daotai.qc.report"
# Writing the contact sheet, cameras, timeline, subtitles and manifest, per shot: 0.05-0.09 s a
# shot (manifest deliver_s over the examples at 640x360).
DELIVER_PER_SHOT_S = 0.08
# Runnable threads the render's process counts as while it renders and assembles, each taking its
# share of the cores; alone it keeps about one core busy (office s01, 72 frames: 0.97 CPU s in 0.88
# wall s). Two (its encoder threads counted) came out at 0.50-0.66 of the examples' renders with
# their QC workers beside it, one at 0.56-0.91.
RENDER_THREADS = 1


@dataclass(frozen=True)
class StageCost:
    """One stage's cost here for a shot of n frames: ``per_shot + per_frame·n + per_frame_log·n·ln n``
    seconds (the log term: checks whose work grows faster than the shot, such as recovering the
    camera path over every frame)."""

    per_frame: float
    per_shot: float
    per_frame_log: float = 0.0

    def shot_s(self, frames: int) -> float:
        """The stage's time for one shot of ``frames`` frames."""
        grows = self.per_frame_log * frames * math.log(frames) if frames > 1 else 0.0
        return self.per_shot + self.per_frame * frames + grows

    def seconds(self, lengths: Sequence[int]) -> float:
        """The stage's time for shots of these lengths (frames)."""
        return sum(self.shot_s(n) for n in lengths)


def two_point(short_frames: int, short_s: float, long_frames: int, long_s: float) -> StageCost:
    """Per-frame and per-shot cost from one stage timed at two lengths. Neither is ever below zero:
    timer noise on a busy machine can make the shorter sample the slower one, and then the
    longer sample's average is taken as all per frame."""
    per_frame = (long_s - short_s) / max(long_frames - short_frames, 1)
    if per_frame <= 0.0 or per_frame * long_frames > long_s:
        return StageCost(long_s / max(long_frames, 1), 0.0)
    return StageCost(per_frame, long_s - per_frame * long_frames)


def two_point_growing(short_frames: int, short_s: float, long_frames: int, long_s: float) -> StageCost:
    """Per-frame and per-frame-log cost (no per-shot part) from one stage timed at two lengths, for
    work that grows faster than the frames; :func:`two_point` when the samples show no growth.

    The growth is fitted as the average cost a frame rising with log n, not with n: a shot's
    checks took 29, 37 and 47 ms a frame at 12-24, 24-48 and 48-72 frames (office s01), about the
    same step for each doubling; a squared term fitted at 24 and 48 frames put a 96-frame shot's
    checks 40% over the measured time."""
    a, b = short_frames, long_frames
    if a == b or a <= 0:
        return two_point(a, short_s, b, long_s)
    growth = (long_s / b - short_s / a) / math.log(b / a)  # t/n = per_frame + per_frame_log·ln n
    per_frame = short_s / a - growth * math.log(a)
    if growth <= 0.0 or per_frame <= 0.0:
        return two_point(a, short_s, b, long_s)
    return StageCost(per_frame, 0.0, per_frame_log=growth)


@dataclass(frozen=True)
class Calibration:
    """What this machine takes for each stage of a previz render, at one frame size (CPU seconds)."""

    width: int
    height: int
    backend_open: float  # opening the backend (GL context) and drawing its first frame
    render: StageCost  # render + encode of a shot's files
    qc: StageCost  # a shot's checks (they run in worker processes)
    assemble: StageCost  # cutting shots into the sequence (per shot: each clip's decoder)
    sequence_check: StageCost  # the sequence's check (per shot: none; per frame)
    others: float  # runnable threads of other programs while the samples ran (machine_load)
    cores: int  # cores this process may use
    # CPU seconds a frame the assembly re-encodes (decoded, blended, encoded: transitions, fades)
    assemble_encode: float = 0.0
    reuse_shot: float = 0.0  # placing one cached shot's files in the output (linked, sha256 checked)
    process_start: float = PROCESS_START_S  # the render's interpreter and imports
    # a shot's checks in a QC worker over the same checks timed in this process (the worker's
    # decoding and hand-over, timed on the longer sample); at least 1
    worker_factor: float = 1.0
    worker_start: float = QC_WORKER_START_CPU_S  # one QC worker's interpreter and imports
    # Measured now (:func:`cpu_rates`), not stored: the part of a core one busy thread gets, and the
    # CPU seconds a wall second ``cores`` busy threads get together. None: from ``others``.
    single: float | None = None
    capacity: float | None = None

    def describe(self) -> str:
        return (f"timed here at {self.width}x{self.height}, per frame: render+encode "
                f"{format_seconds(self.render.per_frame)}, QC {format_seconds(self.qc.shot_s(SAMPLE_FRAMES) / SAMPLE_FRAMES)}, "
                f"assembly {format_seconds(self.assemble_encode)} a re-encoded frame")


def busiest_shot(plan: Plan) -> ShotPlan:
    """The shot most expensive to draw and check: a moving camera (its checks track the motion),
    then the most characters, then the longest."""
    from daotai.qc.motion import shot_expects_motion

    return max(plan.shots, key=lambda s: (shot_expects_motion(s), len(s.characters), s.frames))


def sample_shot(shot: ShotPlan, frames: int, shot_id: str) -> ShotPlan:
    """A stretch of ``frames`` frames from the middle of ``shot`` as a shot of its own (a cut, at frame 0)."""
    from daotai.plan.model import TransitionPlan

    frames = max(1, min(frames, shot.frames))
    first = (shot.frames - frames) // 2
    frame_s = shot.duration_s / max(shot.frames, 1)
    return shot.model_copy(update={
        "shot_id": shot_id, "index": 0, "start_frame": 0, "frames": frames,
        "duration_s": frames * frame_s, "requested_duration_s": frames * frame_s,
        "transition": TransitionPlan(type="cut", duration_s=0.0, frames=0),
        "cameras": shot.cameras[first:first + frames],
        "character_frames": shot.character_frames[first:first + frames],
        "sound": None,
    })


class _Clock:
    """CPU seconds (every thread of this process) and wall seconds of the calls made through it."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.wall = 0.0

    def __call__(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
        """(result, CPU seconds) of one call."""
        wall, cpu = time.perf_counter(), time.process_time()
        result = function(*args, **kwargs)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        self.cpu += cpu
        self.wall += wall
        return result, cpu


@dataclass(frozen=True)
class MachineLoad:
    """The machine's CPU time counters at one moment (/proc/stat; None where there is none)."""

    at: float  # perf_counter seconds
    busy_s: float | None  # CPU seconds every core spent on any work since boot
    idle_s: float | None  # and idle

    @classmethod
    def now(cls) -> "MachineLoad":
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                fields = [int(x) for x in stat.readline().split()[1:]]
        except (OSError, ValueError):
            return cls(time.perf_counter(), None, None)
        tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return cls(time.perf_counter(), (sum(fields[:8]) - idle) / tick, idle / tick)


SATURATED_IDLE = 0.1  # below this share of idle CPU time the cores were all taken (fair sharing applies)


SHARE_PROBE_S = 0.25  # wall seconds of each busy loop that measures a thread's share of a core


def thread_share(seconds: float = SHARE_PROBE_S) -> float:
    """The part of a core one busy thread gets here now (1.0 on a machine with a core to spare):
    CPU seconds over wall seconds of a pure-Python busy loop."""
    wall, cpu = time.perf_counter(), time.thread_time()
    while time.perf_counter() - wall < seconds:
        pass
    return min(1.0, (time.thread_time() - cpu) / max(time.perf_counter() - wall, 1e-9))


def others_running(before: MachineLoad, after: MachineLoad, cpu_s: float, share: float, cores: int) -> float:
    """How many threads of other programs ran beside the samples (0 on an idle machine), from the
    machine's counters ``before`` and ``after`` them, the samples' own ``cpu_s`` and the ``share``
    of a core one thread got meanwhile (:func:`thread_share`).

    With idle time left, the others used what they needed: their CPU seconds over the wall
    time. With none left, the cores were shared fairly among every runnable thread, so one
    thread getting ``share`` of a core shared them with about ``cores / share − 1`` others."""
    if before.busy_s is None or after.busy_s is None or before.idle_s is None or after.idle_s is None:
        return 0.0
    busy, idle = after.busy_s - before.busy_s, after.idle_s - before.idle_s
    others = max(busy - cpu_s, 0.0) / max(after.at - before.at, 1e-6)
    if idle / max(busy + idle, 1e-9) < SATURATED_IDLE:
        others = max(others, cores / max(share, 1e-3) - 1.0)
    return others


def import_cpu_s(imports: str) -> float:
    """CPU seconds a fresh interpreter takes to start and run ``imports`` here (its wall seconds where
    the platform keeps no child CPU counters), or None when it fails."""
    try:
        import resource
    except ImportError:  # Windows
        resource = None  # type: ignore[assignment]
    before = resource.getrusage(resource.RUSAGE_CHILDREN) if resource else None
    wall = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", imports], capture_output=True, check=False)
    wall = time.perf_counter() - wall
    if done.returncode != 0:
        return None
    if resource is None or before is None:
        return wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


CAPACITY_PROBE_S = 0.5  # wall seconds the busy threads of :func:`cpu_rates` run


def cpu_rates(cores: int, seconds: float = CAPACITY_PROBE_S) -> tuple[float, float]:
    """(the part of a core one busy thread gets, the CPU seconds a wall second ``cores`` busy threads
    get together) here now. On a machine shared with other work the second is often far under
    ``cores``: where the others run in their own control groups the cores are shared between
    groups, not threads, so more threads of ours do not take more of them (the 2-core box under
    load: 0.5-0.8 with one, two or three threads), which counting the others' threads misses.
    The threads hash a buffer, which runs without Python's lock."""
    import hashlib
    import threading

    data = bytes(1 << 20)
    got: list[float] = []

    def busy() -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        while time.perf_counter() - wall < seconds:
            hashlib.sha256(data).digest()
        got.append(time.thread_time() - cpu)

    threads = [threading.Thread(target=busy, name="daotai-capacity-probe") for _ in range(max(1, cores))]
    wall = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    capacity = sum(got) / max(time.perf_counter() - wall, 1e-9)
    single = thread_share()
    return single, max(min(capacity, float(cores)), single)


def calibrate(plan: Plan, backend_name: str = "previz", options: Mapping[str, Any] | None = None,
              controls: bool = True, sample: int = SAMPLE_FRAMES) -> Calibration:
    """Time each stage of a previz render here on samples of ``plan``'s busiest shot (module doc)."""
    from daotai.post.assemble import ClipSpec, assemble
    from daotai.qc.report import check_sequence
    from daotai.qc.shot import check_shot
    from daotai.render.base import RunContext
    from daotai.render.registry import create_backend
    from daotai.run.records import ShotRecord
    from daotai.run.settings import PipelineSettings, encode_settings_for, layout_for
    from daotai.run.shots import render_shot

    source = busiest_shot(plan)
    shots = [sample_shot(source, n, f"calibration_{n}") for n in (max(2, sample // 2), max(4, sample))]
    settings = PipelineSettings(backend=backend_name, controls=controls, options=dict(options or {}))
    enc = encode_settings_for(settings, plan.width, plan.height)
    fps = Fraction(*plan.fps_fraction)
    clock = _Clock()
    share = thread_share()  # before the counters are read: its own busy loop is not another program's
    load = MachineLoad.now()
    costs: dict[str, list[float]] = {"render": [], "qc": [], "assemble": [], "sequence": []}
    encode_s, reuse_s = 0.0, 0.0

    def render_into(backend, mini: Plan, shot: ShotPlan, out: Path, record: ShotRecord) -> None:
        for _ in render_shot(backend, mini, shot, out, settings, RunContext(), record):
            pass

    with tempfile.TemporaryDirectory(prefix="daotai-calibrate-") as folder:
        out = Path(folder)
        layout = layout_for(out, settings)
        layout.make_folders(controls)
        backend, opened = clock(create_backend, backend_name, options)
        try:
            opened += clock(backend.render_frames, plan, source, {0})[1]  # opens the GL context
            for shot in shots:
                mini = plan.model_copy(update={"shots": (shot,)})
                record = ShotRecord(shot.shot_id)
                costs["render"].append(clock(render_into, backend, mini, shot, out, record)[1])
                path = out / record.files["shot"]
                checked = {k: out / record.files[k] for k in ("depth", "mask") if k in record.files}
                costs["qc"].append(clock(check_shot, mini, shot, path, record.samples, controls=checked)[1])
                target = out / f"sequence_{shot.frames}{layout.container}"
                # two clips, as a run cuts its shots: half of it is one shot's share
                costs["assemble"].append(clock(assemble, [ClipSpec(path=path)] * 2, target, fps, enc)[1] / 2)
                twice = plan.model_copy(update={"shots": (shot, shot.model_copy(update={"start_frame": shot.frames}))})
                costs["sequence"].append(clock(check_sequence, twice, target)[1] / 2)
            # a crossfade or a fade makes assembly decode, blend and encode frames: every frame here
            sample_clip, frames = out / record.files["shot"], shots[-1].frames
            encode_s = clock(assemble, [ClipSpec(path=sample_clip)] * 2, out / f"encoded{layout.container}", fps, enc,
                             stream_copy=False)[1] / (2 * frames)
            reuse_s = _time_reuse(clock, out, record)
            mini = plan.model_copy(update={"shots": (shots[-1],)})
            in_worker = worker_check_cpu_s(mini, shots[-1], record, out)
        finally:
            backend.close()
    start = import_cpu_s(RENDER_IMPORTS)
    worker = import_cpu_s(QC_WORKER_IMPORTS)
    in_process = costs["qc"][-1]
    if in_worker is not None and worker is not None and in_process > 0:
        worker_factor = max(1.0, (in_worker - worker) / in_process)
    else:
        worker_factor = 1.0
    short, long = (s.frames for s in shots)
    stage = {name: (two_point_growing if name == "qc" else two_point)(short, values[0], long, values[1])
             for name, values in costs.items()}
    return Calibration(
        width=plan.width, height=plan.height, backend_open=opened,
        render=stage["render"], qc=stage["qc"], assemble=stage["assemble"],
        sequence_check=StageCost(stage["sequence"].shot_s(long) / long, 0.0),
        others=others_running(load, MachineLoad.now(), clock.cpu, (share + thread_share()) / 2, usable_cores()),
        cores=usable_cores(), assemble_encode=encode_s, reuse_shot=reuse_s,
        process_start=PROCESS_START_S if start is None else start, worker_factor=worker_factor,
        worker_start=QC_WORKER_START_CPU_S if worker is None else worker,
    )


def worker_check_cpu_s(plan: Plan, shot: ShotPlan, record: Any, out: Path) -> float | None:
    """CPU seconds a QC worker process takes to start and check ``shot`` (its files in ``out``), as
    a render hands its shots to the workers; None where the platform keeps no child CPU counters."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    from daotai.qc.parallel import ShotChecks
    from daotai.qc.report import hand_in_shot, shot_result

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with ShotChecks(plan, 1) as checks:
        hand_in_shot(checks, plan, shot, record, out, True)
        shot_result(checks, shot.shot_id)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _time_reuse(clock: _Clock, out: Path, record: Any) -> float:
    """CPU seconds of placing one cached shot in an output folder: stored in a shot cache under
    ``out``, then taken back out into another folder as a render reusing it does."""
    from daotai.run.cache import ShotCache

    cache = ShotCache(out / "cache")
    cache.put("calibration", out, record)
    again = out / "again"
    again.mkdir()
    return clock(cache.get, "calibration", again)[1]


@dataclass(frozen=True)
class StageTimes:
    """A previz render's estimated wall seconds by stage, and in all (:func:`whole_render_s`)."""

    start: float  # the process, the backend and the QC workers starting
    render: float  # every shot not reused rendered and encoded
    reuse: float  # the reused shots placed from the shot cache
    assemble: float
    qc: float  # CPU seconds of every rendered shot's checks, wherever they run
    qc_after: float  # what the checks add after the assembly (the sequence check included)
    deliver: float
    total: float

    def describe(self) -> str:
        return (f"start {self.start:.1f} s, render+encode {self.render:.1f} s, reuse {self.reuse:.1f} s, "
                f"assembly {self.assemble:.1f} s, QC {self.qc_after:.1f} s after them "
                f"({self.qc:.1f} s of checks in all), deliver {self.deliver:.1f} s")


def assembly_encoded_frames(plan: Plan, keyint: int) -> int:
    """Frames the assembly decodes, blends and encodes rather than copies: those a transition or
    the closing fade touches, widened to the GOPs (``keyint`` frames) they fall in, since only
    whole untouched GOPs are copied (daotai.post.assemble); every frame of a letterboxed plan."""
    from daotai.post.assemble import Transition, _joins, end_fade_frames, untouched

    if plan.letterbox is not None:
        return plan.total_frames
    fps = Fraction(*plan.fps_fraction)
    counts = [s.frames for s in plan.shots]
    closing = 0
    if plan.fade_out is not None:
        from daotai.post.assemble import closing_fade_seconds

        closing = end_fade_frames(closing_fade_seconds(plan.fade_out.frames, fps), fps)
    transitions = [Transition.planned(s.transition.type, s.transition.frames, fps) for s in plan.shots]
    joins = _joins(counts, transitions, fps, closing)
    total = sum(counts) - sum(j.overlap_in for j in joins)
    copied = 0
    for count, join in zip(counts, joins, strict=True):
        plain = untouched(count, join)
        first = -(-plain.start // keyint) * keyint  # the first keyframe in the untouched frames
        end = count if plain.stop >= count else (plain.stop // keyint) * keyint
        copied += max(0, end - first)
    return max(0, total - copied)


def whole_render_s(plan: Plan, cal: Calibration, reused: frozenset[str] | set[str] = frozenset(),
                   keyint: int = 0) -> StageTimes:
    """The render's wall time from the calibrated stage costs (module doc).

    Shots in ``reused`` come from the shot cache: they cost placing their files, not a render,
    an encode or checks (their stored verdicts are kept). The render, assembly and delivery run one
    after another in the render's process; the shot checks of the rendered shots run in
    ``min(cores, shots, 4)`` worker processes beside them (none with one core or one shot to
    render: then they run after the assembly). Every runnable thread, ours (RENDER_THREADS for
    the render's process, one per worker) and the other programs' (``cal.others``), gets an
    equal share of the cores, at most one core each; checks left when the assembly is done run
    on their own after it. ``keyint``: the GOP length of the shot files in frames (0: the
    plan's rate times the encoder's default, one GOP a second)."""
    from daotai.qc.parallel import MAX_QC_WORKERS

    todo = [s.frames for s in plan.shots if s.shot_id not in reused]
    frames, cores = plan.total_frames, cal.cores
    shots = len(todo)
    workers = min(cores, shots, MAX_QC_WORKERS) if cores > 1 and shots > 1 else 0

    def share(threads: float) -> float:  # the part of a core each of ``threads`` runnable threads gets
        if cal.single is not None and cal.capacity is not None:
            return min(cal.single, cal.capacity / threads)
        return min(1.0, cores / (cal.others + threads))

    def render_rate(each: float) -> float:  # CPU seconds a wall second the render's process gets
        return min(1.0, RENDER_THREADS * each)  # its threads take turns: about one core at most

    start = cal.process_start + (cal.backend_open if todo else 0.0)
    render = cal.render.seconds(todo)
    reuse = cal.reuse_shot * (len(plan.shots) - shots)
    if not keyint:
        from daotai.encode.video import EncodeSettings

        keyint = EncodeSettings().keyint_frames(Fraction(*plan.fps_fraction))
    encoded = assembly_encoded_frames(plan, keyint)
    # every clip is probed and its untouched GOPs copied (timed on cut samples), and the frames a
    # transition touches are decoded, blended and encoded again
    assemble = cal.assemble.seconds([s.frames for s in plan.shots]) + cal.assemble_encode * encoded
    qc = cal.qc.seconds(todo)
    chain = start + render + reuse + assemble  # CPU seconds of the render's process until the sequence is cut
    if workers and cal.single is not None and cal.capacity is not None:
        # The machine's rates measured now: the render's process runs at one thread's rate, and all
        # of our work together at what all our threads get (on a shared box often about one core,
        # so the checks mostly add after the render rather than hide beside it)
        wall = chain / min(cal.single, cal.capacity)
        everything = chain + qc * cal.worker_factor + workers * cal.worker_start
        qc_after = max(0.0, everything / cal.capacity - wall)
    elif workers:
        together = share(RENDER_THREADS + workers)  # each thread's part while the checks run beside
        per_worker = qc * cal.worker_factor / workers + cal.worker_start
        chain_wall = chain / render_rate(together)
        if per_worker <= together * chain_wall:  # the checks end before the sequence is cut
            done_at = per_worker / together
            wall = done_at + (chain - done_at * render_rate(together)) / render_rate(share(RENDER_THREADS))
            qc_after = 0.0
        else:
            wall = chain_wall
            qc_after = (per_worker - together * chain_wall) / share(workers)
    else:
        wall = chain / render_rate(share(RENDER_THREADS))
        qc_after = qc / share(1)
    qc_after += cal.sequence_check.per_frame * frames / share(1)
    scale = wall / max(chain, 1e-9)  # how much slower than its CPU time the chain ran
    deliver = DELIVER_PER_SHOT_S * len(plan.shots) / share(1)
    return StageTimes(start * scale, render * scale, reuse * scale, assemble * scale, qc, qc_after, deliver,
                      wall + qc_after + deliver)


# The stored calibrations: one file in the user's cache folder, valid for one machine and one
# version of daotai (:func:`machine_identity`); another of either and it is measured again.
CALIBRATION_FILE = "calibration.json"


def calibration_path() -> Path:
    """Where the calibrations are kept: the user's daotai cache folder ($DAOTAI_CACHE_DIR included)."""
    from daotai.files import default_cache_dir

    return default_cache_dir() / CALIBRATION_FILE


def gpu_names() -> list[str]:
    """The GPUs the machine shows without opening them (NVIDIA's driver files, the DRI devices)."""
    names: list[str] = []
    nvidia = Path("/proc/driver/nvidia/gpus")
    if nvidia.is_dir():
        for info in sorted(nvidia.glob("*/information")):
            try:
                names += [line.split(":", 1)[1].strip() for line in info.read_text(encoding="utf-8").splitlines()
                          if line.startswith("Model:")]
            except OSError:
                continue
    dri = Path("/dev/dri")
    if dri.is_dir():
        names += sorted(p.name for p in dri.iterdir())
    return names


def machine_identity() -> dict[str, Any]:
    """What a calibration holds for: daotai's version and the machine (cores, platform, GPUs)."""
    from daotai import __version__

    return {"daotai": __version__, "cpu_count": os.cpu_count(), "cores": usable_cores(),
            "platform": platform.platform(), "machine": platform.machine(),
            "python": platform.python_version(), "gpus": gpu_names()}


# Set sizes a calibration stands for: its set-piece count within this factor (a prop or two added
# keeps the calibration; the street set's 155 pieces are not the studio's 69, whose calibration put
# the street's checks at 11.7 s where they took 16)
SET_SIZE_STEP = 1.25


def calibration_key(plan: Plan, backend_name: str, options: Mapping[str, Any] | None, controls: bool) -> str:
    """What a calibration measured: the backend and its options, the frame size, the control
    channels, whether the sampled shot's camera moves (its checks then track the motion) and the
    set: its size in steps of SET_SIZE_STEP set pieces and its cast (drawing, ray casting and the
    per-character checks grow with both)."""
    from daotai.qc.motion import shot_expects_motion

    moving = shot_expects_motion(busiest_shot(plan))
    set_size = round(math.log1p(len(plan.scene.set_pieces)) / math.log(SET_SIZE_STEP))
    return json.dumps([backend_name, dict(options or {}), plan.width, plan.height, controls, moving,
                       set_size, len(plan.characters)], sort_keys=True, default=str)


def _to_json(cal: Calibration) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(cal)


def _from_json(data: Mapping[str, Any]) -> Calibration:
    stages = {k: StageCost(**data[k]) for k in ("render", "qc", "assemble", "sequence_check")}
    return Calibration(**{**data, **stages})


def load_calibrations(path: Path) -> dict[str, Any]:
    """The stored calibrations when they were measured on this machine by this daotai, else none
    (a file another machine or version wrote is measured over)."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(stored, dict) or stored.get("machine") != machine_identity():
        return {}
    return stored.get("calibrations") or {}


def stored_calibration(plan: Plan, backend_name: str = "previz", options: Mapping[str, Any] | None = None,
                       controls: bool = True, sample: int = SAMPLE_FRAMES,
                       path: Path | None = None) -> tuple[Calibration, bool]:
    """This machine's calibration for ``plan`` (:func:`calibrate`), measured once and kept in
    :func:`calibration_path`; the other programs running are counted now, not when it was measured.
    Returns it and whether it was measured now."""
    from daotai.files import atomic_write_text

    path = path or calibration_path()
    key = f"{calibration_key(plan, backend_name, options, controls)} {sample}"
    found = load_calibrations(path)
    if key in found:
        try:
            return with_rates(replace(_from_json(found[key]), others=others_now(), cores=usable_cores())), False
        except (TypeError, KeyError):
            pass  # written by another layout of Calibration: measured again
    cal = calibrate(plan, backend_name, options, controls, sample)
    found[key] = {**_to_json(cal), "single": None, "capacity": None}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"machine": machine_identity(), "calibrations": found}, indent=1) + "\n")
    except OSError:
        pass  # a read-only cache folder: measured again next time
    return with_rates(cal), True


def with_rates(cal: Calibration) -> Calibration:
    """``cal`` with the machine's CPU rates for us measured now (:func:`cpu_rates`)."""
    single, capacity = cpu_rates(cal.cores)
    return replace(cal, single=single, capacity=capacity)


def others_now() -> float:
    """Threads of other programs running now (:func:`others_running` over a short probe)."""
    before = MachineLoad.now()
    cpu = time.process_time()
    share = thread_share()
    return others_running(before, MachineLoad.now(), time.process_time() - cpu, share, usable_cores())


def previz_estimate(plan: Plan, backend_name: str = "previz", options: Mapping[str, Any] | None = None,
                    controls: bool = True, sample: int = SAMPLE_FRAMES,
                    reused: frozenset[str] | set[str] = frozenset()) -> CostEstimate:
    """The whole render's estimate for a previz plan, stage by stage (module doc)."""
    cal, _ = stored_calibration(plan, backend_name, options, controls, sample)
    times = whole_render_s(plan, cal, reused)
    kept = f", {len(reused)} of {len(plan.shots)} shots reused from the cache" if reused else ""
    basis = f"{cal.describe()}; {times.describe()}{kept}"
    return CostEstimate(backend_name, plan.total_frames, times.total / max(plan.total_frames, 1), basis)


def estimate_render(plan: Plan, backend_name: str, options: Mapping[str, Any] | None = None, controls: bool = True,
                    quick: bool = False, reused: frozenset[str] | set[str] = frozenset()) -> CostEstimate | None:
    """The render's cost here: previz by its stages (this module), neural backends by their rule
    (daotai.render.cost.estimate_cost); None when it cannot be told, or with ``quick`` for a
    previz plan too small to be worth timing before a render. ``reused``: the shots the shot
    cache will give back (daotai.run.reuse.reusable_shots)."""
    from daotai.render.cost import PREVIZ_QUICK_PIXEL_FRAMES, estimate_cost
    from daotai.render.registry import spec_for

    spec = spec_for(backend_name)
    if spec.family is not None or not spec.reproducible:
        return estimate_cost(plan, backend_name, options, quick=quick)
    if quick and plan.total_frames * plan.width * plan.height < PREVIZ_QUICK_PIXEL_FRAMES:
        return None
    # before a real render only the order of magnitude matters (is it over LONG_RENDER_S?): short samples
    return previz_estimate(plan, backend_name, options, controls=controls and spec.controls,
                           sample=WARNING_SAMPLE_FRAMES if quick else SAMPLE_FRAMES, reused=reused)
