"""Previz render + encode speed as a ratio of real time, measured in one run.

For each size (1920x1080 and 640x360 at 30 fps) the office example is re-planned at that
size and frame rate, and every shot goes through the real pipeline stage (render on the
main thread, encoders in their own processes fed through shared memory, as a run does; or on
threads with --sinks thread; files written atomically). It prints

    realtime = clip seconds / wall seconds      (targets: >= 1.0 at 1080p, >= 4 at 360p)

plus the split between rendering and encoding, with and without control channels, and the
CPU seconds spent by this process and its encoder processes together ("cpu s"): on a machine
shared with other work the wall time swings, the CPU time much less, and clip seconds over
cpu s / cores is the best real-time ratio the work allows ("cpu-bound"). The
baseline in the same run is the encoder alone fed pre-rendered frames, so machine noise
shows up on both sides of the comparison.

    python bench/previz.py [--script examples/office.json] [--seconds S] [--sinks process|thread] [--stages]

--stages also prints the CPU milliseconds per frame of each step of the control-channel path,
measured one step at a time in this process (rendering over the whole clip, conversions and
encoders over its first STAGE_FRAMES frames, kept in memory).

The encoder processes are started and warmed up before the clock starts (a run starts them
once, while the backend creates its GL context); their start-up time is printed separately.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from daotai.encode.procsink import EncoderPool
from daotai.encode.video import VideoWriter
from daotai.plan.planner import plan_script
from daotai.render.base import RunContext
from daotai.render.previz.backend import PrevizBackend, frame_states
from daotai.run.records import ShotRecord
from daotai.run.settings import PipelineSettings, encode_settings_for
from daotai.run.shots import render_shot
from daotai.script.load import load_script
from daotai.script.schema import Size

SIZES = {"1080p": (1920, 1080), "360p": (640, 360)}
TARGETS = {"1080p": 1.0, "360p": 4.0}
STAGE_FRAMES = 20  # consecutive frames kept for the conversion and encoder steps of --stages


def _plan(script_path: Path, width: int, height: int, seconds: float):
    script = load_script(script_path)
    shots = []
    remaining = seconds
    for shot in script.shots:
        take = min(shot.duration, remaining)
        if take <= 0:
            break
        shots.append(shot.model_copy(update={"duration": take}))
        remaining -= take
    script = script.model_copy(update={"size": Size(width=width, height=height), "fps": 30.0, "shots": tuple(shots)})
    return plan_script(script)


def _triangles(plan) -> str:
    """The scene's geometry budget: set pieces and figures, in triangles (the first frame of the first shot)."""
    from daotai.render.previz.backend import set_pieces_for_plan
    from daotai.render.previz.meshes import PRIMITIVES, figure_instances, primitive_meshes, set_piece_parts

    per_prim = {name: len(mesh) // 3 for name, mesh in primitive_meshes().items()}
    pieces = sum(per_prim[set_piece_parts(p).primitive] for p in set_pieces_for_plan(plan))
    figures = [sum(per_prim[PRIMITIVES[int(i)]] for i in figure_instances(f)[2])
               for f in next(frame_states(plan, plan.shots[0])).figures]
    return (f"scene: {len(plan.scene.set_pieces)} set pieces ({pieces} triangles), {len(figures)} figures "
            f"({sum(figures)} triangles)")


def _run_pipeline(plan, controls: bool, out: Path, encoders: EncoderPool | None) -> tuple[float, float]:
    """Wall seconds and render-only seconds for every shot through render_shot."""
    settings = PipelineSettings(controls=controls)
    backend = PrevizBackend()
    backend._renderer_for(plan)  # warm the GL context outside the timing, as a long run would be
    wall = render = 0.0
    try:
        for shot in plan.shots:
            record = ShotRecord(shot.shot_id)
            started = time.perf_counter()
            for _ in render_shot(backend, plan, shot, out, settings, RunContext(), record, encoders):
                pass
            wall += time.perf_counter() - started
            render += record.render_s
    finally:
        backend.close()
    return wall, render


def _cpu_seconds(pool: EncoderPool | None) -> float:
    """User + system CPU seconds of this process (all threads) and the pool's live children."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = usage.ru_utime + usage.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for pid in (pool.pids().values() if pool is not None else ()):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)
        except OSError:
            pass
    return total


def _start_pool() -> tuple[EncoderPool, float]:
    """Encoder processes for every stream, started and answering; returns the pool and seconds taken."""
    started = time.perf_counter()
    pool = EncoderPool()
    pool.start("shot", "depth", "depth_preview", "mask")
    pool.wait_ready()
    return pool, time.perf_counter() - started


def _encode_only(plan, out: Path) -> float:
    """Seconds to encode the same frames (pre-rendered, in memory) with the same settings."""
    backend = PrevizBackend()
    gl = backend._renderer_for(plan)
    frames = [gl.render(state).rgb for shot in plan.shots for state in frame_states(plan, shot)]
    backend.close()
    settings = encode_settings_for(PipelineSettings(), plan.width, plan.height)
    fps = Fraction(*plan.fps_fraction)
    started = time.perf_counter()
    with VideoWriter(out / "encode_only.mp4", plan.width, plan.height, fps, settings) as writer:
        for frame in frames:
            writer.write(frame)
    return time.perf_counter() - started


def _stage_cpu(plan, out: Path) -> dict[str, float]:
    """CPU ms per frame of each step of the control-channel path, one step at a time."""
    from daotai.encode.video import write_gray8, write_gray16, write_preview_h264
    from daotai.render.previz.control import depth_to_preview, depth_to_uint16_mm

    spent: dict[str, float] = {}

    def timed(name: str, count: int, work) -> None:
        started = time.process_time()
        work()
        spent[name] = (time.process_time() - started) * 1000.0 / count

    def each(step, items: list):
        def run() -> None:
            for item in items:
                step(item)  # the result is dropped at once, as a run drops each frame
        return run

    backend = PrevizBackend()
    gl = backend._renderer_for(plan)
    states = [state for shot in plan.shots for state in frame_states(plan, shot)]
    gl.render(states[0])  # warm up
    timed("render, controls off", len(states), each(lambda state: gl.render(state, with_depth=False), states))
    timed("render, controls on", len(states), each(gl.render, states))
    kept = [gl.render(state) for state in states[:STAGE_FRAMES]]
    backend.close()
    depth = [frame.depth for frame in kept]
    timed("depth -> uint16 mm", len(kept), each(depth_to_uint16_mm, depth))
    timed("depth -> preview", len(kept), each(lambda d: depth_to_preview(d, 0.05, 500.0), depth))
    mm = [depth_to_uint16_mm(d) for d in depth]
    grey = [depth_to_preview(d, 0.05, 500.0) for d in depth]
    fps = Fraction(*plan.fps_fraction)
    timed("FFV1 gray16 depth", len(kept), lambda: write_gray16(mm, out / "depth.mkv", fps))
    timed("FFV1 gray8 mask", len(kept), lambda: write_gray8([frame.masks for frame in kept], out / "mask.mkv", fps))
    timed("H.264 depth preview", len(kept), lambda: write_preview_h264(grey, out / "depth_preview.mp4", fps))
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path,
                        default=Path(__file__).resolve().parent.parent / "examples" / "office.json")
    parser.add_argument("--seconds", type=float, default=6.0, help="clip seconds rendered per size")
    parser.add_argument("--sinks", choices=("process", "thread"), default="process", help="where encoders run")
    parser.add_argument("--stages", action="store_true", help="also print CPU ms per frame of each control-path step")
    args = parser.parse_args()
    print(f"previz render + encode, {args.script.name}, {args.seconds:g} s per size at 30 fps, {args.sinks} encoders")
    print(f"{'size':>6} {'controls':>8} {'frames':>6} {'wall s':>7} {'render s':>8} {'realtime':>9} {'target':>7}      "
          f"{'cpu s':>6} {'cpu-bound':>9}  encode-only fps")
    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="daotai-bench-"))
    for sub in ("shots", "control"):
        (work / sub).mkdir()
    pool = None
    if args.sinks == "process":
        pool, startup_s = _start_pool()
        print(f"encoder processes started and ready in {startup_s:.2f} s")
    try:
        for label, (width, height) in SIZES.items():
            plan = _plan(args.script, width, height, args.seconds)
            if label == next(iter(SIZES)):
                print(_triangles(plan))
            clip_s = plan.total_frames / 30.0
            frames = sum(s.frames for s in plan.shots)
            encode_s = _encode_only(plan, work)
            for controls in (False, True):
                cpu_before = _cpu_seconds(pool)
                wall, render = _run_pipeline(plan, controls, work, pool)
                cpu = _cpu_seconds(pool) - cpu_before
                ratio = clip_s / wall
                verdict = "ok" if ratio >= TARGETS[label] else "MISS"
                print(
                    f"{label:>6} {str(controls):>8} {frames:>6} {wall:7.2f} {render:8.2f} {ratio:8.2f}x "
                    f"{TARGETS[label]:>5.1f}x {verdict:<4} {cpu:6.2f} {clip_s / (cpu / cores):8.2f}x  "
                    f"{frames / encode_s:6.1f}"
                )
            if args.stages:
                steps = _stage_cpu(plan, work)
                print(f"{'':>6} CPU ms per frame: " + ", ".join(f"{name} {ms:.1f}" for name, ms in steps.items()))
    finally:
        if pool is not None:
            pool.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
