"""Shots per minute of a previz script on a local Ray cluster: 1 worker against 2.

A script of ``--shots`` independent shots (``--seconds`` each, ``--size``) is rendered to
encoded shot and control files three ways: in this process without Ray (the pipeline's
local loop), then on a local Ray cluster (``ray.init(num_cpus=--cpus)``) with 1 and with
2 long-lived workers. Only the render stage is timed (what the cluster changes; actor
start-up included, Ray start-up timed apart). The variants run ``--repeats`` times,
interleaved, and each keeps its best, since other work on the machine adds noise. Printed as
a table and one JSON line; ``ratio`` = shots/min with 2 workers / shots/min with 1.

    python bench/cluster.py
    python bench/cluster.py --shots 12 --seconds 2 --size 640x360
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path


def _script(shots: int, seconds: float, size: str) -> dict:
    """A previz script of independent shots with varied camera moves."""
    moves = ["static", "pan_right", "dolly_in", "orbit_left", "tilt_up", "truck_left"]
    return {
        "fps": 24, "size": size, "scene": "office",
        "characters": [{"id": "a"}, {"id": "b", "position": [0.8, -1.5]}],
        "shots": [{"shot_id": f"s{i:02d}", "duration": seconds, "subject": "ab"[i % 2], "camera": moves[i % len(moves)]}
                  for i in range(shots)],
    }


def _local(plan, out: Path) -> float:
    """Seconds to render every shot in this process, the way a run without --cluster does."""
    from daotai.render.base import RunContext
    from daotai.render.registry import create_backend
    from daotai.run.records import ShotRecord
    from daotai.run.settings import PipelineSettings
    from daotai.run.shots import render_shot

    settings = PipelineSettings()
    for sub in ("shots", "control"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    backend = create_backend("previz")
    started = time.perf_counter()
    try:
        for shot in plan.shots:
            for _ in render_shot(backend, plan, shot, out, settings, RunContext(), ShotRecord(shot.shot_id)):
                pass
    finally:
        backend.close()
    return time.perf_counter() - started


def _cluster(plan, out: Path, workers: int) -> float:
    """Seconds to render every shot with ``workers`` Ray actors (dispatch to placed files)."""
    from daotai.cluster.runner import ClusterConfig, render_shots
    from daotai.render.base import RunContext
    from daotai.run.settings import PipelineSettings

    settings = PipelineSettings(cluster="local")
    for sub in ("shots", "control"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for _ in render_shots(plan, out, settings, RunContext(), config=ClusterConfig("local", workers=workers)):
        pass
    return time.perf_counter() - started


def main() -> None:
    """Run the three variants and print shots per minute and the 2-vs-1 worker ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--size", default="480x270")
    parser.add_argument("--cpus", type=int, default=2, help="CPU slots of the local Ray cluster")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import ray

    from daotai.plan.planner import plan_script
    from daotai.script.load import validate_script

    plan = plan_script(validate_script(_script(args.shots, args.seconds, args.size)))
    root = Path(tempfile.mkdtemp(prefix="daotai-bench-cluster-"))
    rows: dict[str, float] = {}

    def keep(name: str, seconds: float) -> None:
        rows[name] = min(rows.get(name, seconds), seconds)

    try:
        tick = time.perf_counter()
        ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        ray_start_s = time.perf_counter() - tick
        for repeat in range(args.repeats):
            keep("local (no ray)", _local(plan, root / f"local{repeat}"))
            for workers in (1, 2):
                keep(f"ray, {workers} worker{'s' if workers > 1 else ''}",
                     _cluster(plan, root / f"w{workers}-{repeat}", workers))
        ray.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    frames = sum(s.frames for s in plan.shots)
    print(f"{args.shots} shots x {args.seconds:g} s at {args.size} ({frames} frames), previz, best of {args.repeats}, "
          f"ray start {ray_start_s:.1f} s")
    print(f"{'variant':<18} {'seconds':>8} {'shots/min':>10}")
    per_min = {}
    for name, seconds in rows.items():
        per_min[name] = args.shots / seconds * 60.0
        print(f"{name:<18} {seconds:8.2f} {per_min[name]:10.1f}")
    ratio = per_min["ray, 2 workers"] / per_min["ray, 1 worker"]
    print(f"ratio 2 workers / 1 worker: {ratio:.2f}x")
    print(json.dumps({"shots": args.shots, "seconds_per_shot": args.seconds, "size": args.size,
                      "shots_per_min": {k: round(v, 2) for k, v in per_min.items()}, "ratio": round(ratio, 3),
                      "ray_start_s": round(ray_start_s, 2), "repeats": args.repeats}))


if __name__ == "__main__":
    main()
