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
* **QC**: the shot checks run on those sample clips (the function a render's checks run);
* **assembly**: each sample clip cut twice into a sequence, as the run assembles its shots,
  and the sequence check on it;
* **start-up**: opening the backend (the GL context), timed; the render process's own start and
  its QC workers' start are constants measured below.

Costs are measured as CPU seconds (all threads of this process), which a busy machine changes
far less than wall seconds, and the stages are added up as they run (:func:`whole_render_s`):
the shot checks run in worker processes beside the render and the assembly, so on a machine
with spare cores they take the cores the render leaves idle, and what does not fit beside it
is added at the end. Other programs running while the samples ran (counted from the machine's
CPU counters) are taken to keep running through the render and to share the cores with it.

Neural backends keep their own rule (daotai.render.cost); this module is about previz.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from daotai.plan.model import Plan, ShotPlan
from daotai.render.cost import CostEstimate, format_duration, format_seconds

# The longer sample; the shorter is half of it. A shot's checks cost 29 ms a frame from 12 to 24 frames,
# 37 from 24 to 48 and 47 from 48 to 72 (office s01, CPU): samples shorter than a shot miss that growth.
SAMPLE_FRAMES = 48
# The samples before a render that may be long (the warning): a 4K plan's 24 and 48 frames took 50 s
# to time on the 2-core box, 4 and 8 frames 12 s.
WARNING_SAMPLE_FRAMES = 8
# A render's own start-up that a dry run (already running, modules imported) does not see: the
# interpreter and the pipeline's imports, measured as `daotai render`'s wall time minus the run's
# own total_s in its manifest (0.8-1.4 s over the four examples on the 2-core box).
PROCESS_START_S = 1.2
# CPU seconds one QC worker process takes to start (an interpreter and the checks' imports).
QC_WORKER_START_CPU_S = 0.6
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
    """One stage's cost here for a shot of n frames: ``per_shot + per_frame·n + per_frame_squared·n²``
    seconds (the squared term: checks whose work grows faster than the shot, such as recovering
    the camera path over every frame)."""

    per_frame: float
    per_shot: float
    per_frame_squared: float = 0.0

    def shot_s(self, frames: int) -> float:
        """The stage's time for one shot of ``frames`` frames."""
        return self.per_shot + self.per_frame * frames + self.per_frame_squared * frames * frames

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
    """Per-frame and per-frame-squared cost (no per-shot part) from one stage timed at two lengths,
    for work that grows faster than the frames; :func:`two_point` when the samples show no growth."""
    a, b = short_frames, long_frames
    if a == b or a <= 0:
        return two_point(a, short_s, b, long_s)
    squared = (long_s / b - short_s / a) / (b - a)  # t/n = per_frame + per_frame_squared·n
    per_frame = short_s / a - squared * a
    if squared <= 0.0 or per_frame <= 0.0:
        return two_point(a, short_s, b, long_s)
    return StageCost(per_frame, 0.0, squared)


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

    def describe(self) -> str:
        return (f"timed here at {self.width}x{self.height}, per frame: render+encode "
                f"{format_seconds(self.render.per_frame)}, QC {format_seconds(self.qc.shot_s(SAMPLE_FRAMES) / SAMPLE_FRAMES)}, "
                f"assembly {format_seconds(self.assemble.per_frame)}")


def usable_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def busiest_shot(plan: Plan) -> ShotPlan:
    """The shot most expensive to draw and check: a moving camera (its checks track the motion),
    then the most characters, then the longest."""
    from daotai.qc.report import shot_expects_motion

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


def calibrate(plan: Plan, backend_name: str = "previz", options: Mapping[str, Any] | None = None,
              controls: bool = True, sample: int = SAMPLE_FRAMES) -> Calibration:
    """Time each stage of a previz render here on samples of ``plan``'s busiest shot (module doc)."""
    from daotai.pipeline import PipelineSettings, ShotRecord, encode_settings_for, layout_for, render_shot
    from daotai.post.assemble import ClipSpec, assemble
    from daotai.qc.report import check_sequence, check_shot
    from daotai.render.base import RunContext
    from daotai.render.registry import create_backend

    source = busiest_shot(plan)
    shots = [sample_shot(source, n, f"calibration_{n}") for n in (max(2, sample // 2), max(4, sample))]
    settings = PipelineSettings(backend=backend_name, controls=controls, options=dict(options or {}))
    enc = encode_settings_for(settings, plan.width, plan.height)
    fps = Fraction(*plan.fps_fraction)
    clock = _Clock()
    share = thread_share()  # before the counters are read: its own busy loop is not another program's
    load = MachineLoad.now()
    costs: dict[str, list[float]] = {"render": [], "qc": [], "assemble": [], "sequence": []}

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
        finally:
            backend.close()
    short, long = (s.frames for s in shots)
    stage = {name: (two_point_growing if name == "qc" else two_point)(short, values[0], long, values[1])
             for name, values in costs.items()}
    return Calibration(
        width=plan.width, height=plan.height, backend_open=opened,
        render=stage["render"], qc=stage["qc"], assemble=stage["assemble"],
        sequence_check=StageCost(stage["sequence"].shot_s(long) / long, 0.0),
        others=others_running(load, MachineLoad.now(), clock.cpu, (share + thread_share()) / 2, usable_cores()),
        cores=usable_cores(),
    )


@dataclass(frozen=True)
class StageTimes:
    """A previz render's estimated wall seconds by stage, and in all (:func:`whole_render_s`)."""

    start: float  # the process, the backend and the QC workers starting
    render: float  # every shot rendered and encoded
    assemble: float
    qc: float  # CPU seconds of every shot's checks, wherever they run
    qc_after: float  # what the checks add after the assembly (the sequence check included)
    deliver: float
    total: float


def whole_render_s(plan: Plan, cal: Calibration) -> StageTimes:
    """The render's wall time from the calibrated stage costs (module doc).

    The render, assembly and delivery run one after another in the render's process; the shot
    checks run in ``min(cores, shots, 4)`` worker processes beside them (none with one core or
    one shot: then they run after the assembly). Every runnable thread, ours (RENDER_THREADS for
    the render's process, one per worker) and the other programs' (``cal.others``), gets an
    equal share of the cores, at most one core each; checks left when the assembly is done run
    on their own after it."""
    from daotai.qc.parallel import MAX_QC_WORKERS

    lengths, frames, cores = [s.frames for s in plan.shots], plan.total_frames, cal.cores
    shots = len(lengths)
    workers = min(cores, shots, MAX_QC_WORKERS) if cores > 1 and shots > 1 else 0

    def share(threads: int) -> float:  # the part of a core each of ``threads`` runnable threads gets
        return min(1.0, cores / (cal.others + threads))

    def render_rate(each: float) -> float:  # CPU seconds a wall second the render's process gets
        return min(1.0, RENDER_THREADS * each)  # its threads take turns: about one core at most

    start = PROCESS_START_S + cal.backend_open
    render = cal.render.seconds(lengths)
    assemble = cal.assemble.seconds(lengths)
    qc = cal.qc.seconds(lengths)
    chain = start + render + assemble  # CPU seconds of the render's process until the sequence is cut
    if workers:
        together = share(RENDER_THREADS + workers)  # each thread's part while the checks run beside
        per_worker = qc / workers + QC_WORKER_START_CPU_S
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
    deliver = DELIVER_PER_SHOT_S * shots / share(1)
    return StageTimes(start * scale, render * scale, assemble * scale, qc, qc_after, deliver,
                      wall + qc_after + deliver)


def previz_estimate(plan: Plan, backend_name: str = "previz", options: Mapping[str, Any] | None = None,
                    controls: bool = True, sample: int = SAMPLE_FRAMES) -> CostEstimate:
    """The whole render's estimate for a previz plan, stage by stage (module doc)."""
    cal = calibrate(plan, backend_name, options, controls, sample)
    times = whole_render_s(plan, cal)
    basis = (f"{cal.describe()}; render {format_duration(times.render)}, assembly "
             f"{format_duration(times.assemble)}, QC {format_duration(times.qc_after)} after them")
    return CostEstimate(backend_name, plan.total_frames, times.total / max(plan.total_frames, 1), basis)


def estimate_render(plan: Plan, backend_name: str, options: Mapping[str, Any] | None = None, controls: bool = True,
                    quick: bool = False) -> CostEstimate | None:
    """The render's cost here: previz by its stages (this module), neural backends by their rule
    (daotai.render.cost.estimate_cost); None when it cannot be told, or with ``quick`` for a
    previz plan too small to be worth timing before a render."""
    from daotai.render.cost import PREVIZ_QUICK_PIXEL_FRAMES, estimate_cost
    from daotai.render.registry import spec_for

    spec = spec_for(backend_name)
    if spec.family is not None or not spec.reproducible:
        return estimate_cost(plan, backend_name, options, quick=quick)
    if quick and plan.total_frames * plan.width * plan.height < PREVIZ_QUICK_PIXEL_FRAMES:
        return None
    # before a real render only the order of magnitude matters (is it over LONG_RENDER_S?): short samples
    return previz_estimate(plan, backend_name, options, controls=controls and spec.controls,
                           sample=WARNING_SAMPLE_FRAMES if quick else SAMPLE_FRAMES)
