"""Frames per second of the previz rasteriser at 1920x1080 and 640x360.

Scene: ground + 3 set pieces + 3 walking figures with labels, a slowly orbiting camera;
every frame reads back RGB, depth and the character-id mask. Run:

    python bench/previz_render.py [--frames N] [--rounds R] [--supersample K] [--no-labels]

Wall-clock numbers on a shared machine swing with other load, so each size runs several
rounds and prints the best and the median round, plus CPU time per frame.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

from daotai.render.previz import (
    Figure,
    FrameState,
    PrevizRenderer,
    RenderSettings,
    SetPiece,
    environment_for,
)


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """cam_to_world (4, 4) float64 for a level-up camera at ``eye`` looking at ``target``."""
    fwd = target - eye
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, (0.0, 1.0, 0.0))
    right /= np.linalg.norm(right)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = right, np.cross(right, fwd), -fwd, eye
    return m


def states(n: int):
    """A shot of ``n`` frames: the camera orbits while three figures walk."""
    for i in range(n):
        a = 0.3 * math.sin(i / 40.0)
        eye = np.array([6.0 * math.sin(a), 1.6, 6.0 * math.cos(a) - 2.0])
        figs = (
            Figure("lin", "林", (0.85, 0.25, 0.2), 1.7, (-1.5 + 0.02 * i, -2.0), 90.0, 0.2 * i, True),
            Figure("wang", "王", (0.2, 0.45, 0.85), 1.8, (1.5 - 0.015 * i, -3.0), -90.0, 0.15 * i + 1.0, True),
            Figure("kid", "Kid", (0.3, 0.75, 0.3), 1.2, (0.2, -1.0), 0.0, 0.0, False),
        )
        yield FrameState(look_at(eye, np.array([0.0, 1.0, -2.0])), 50.0, figs)


def main() -> None:
    """Print fps at the two benchmark sizes: best and median of several timed rounds."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=120, help="frames per timed round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--supersample", type=int, default=1)
    ap.add_argument("--no-labels", action="store_true")
    args = ap.parse_args()
    pieces = (
        SetPiece("box", (-3.0, 0.0, -4.0), (2.0, 1.2, 1.0), (0.7, 0.6, 0.5), 20.0),
        SetPiece("cylinder", (3.0, 0.0, -6.0), (1.0, 3.0, 1.0), (0.5, 0.6, 0.7)),
        SetPiece("sphere", (0.0, 0.0, -9.0), (1.5, 1.5, 1.5), (0.8, 0.8, 0.4)),
    )
    shot = list(states(args.frames))
    for w, h in ((1920, 1080), (640, 360)):
        settings = RenderSettings(w, h, labels=not args.no_labels, supersample=args.supersample)
        t0 = time.perf_counter()
        with PrevizRenderer(settings, environment_for("day"), pieces) as renderer:
            t1 = time.perf_counter()
            for _ in renderer.frames(shot[:10]):  # warm-up: shader JIT, label patches
                pass
            fps, cpu_ms = [], []
            for _ in range(args.rounds):
                t2, c2 = time.perf_counter(), time.process_time()
                for _ in renderer.frames(shot):
                    pass
                t3, c3 = time.perf_counter(), time.process_time()
                fps.append(len(shot) / (t3 - t2))
                # CPU time counts every thread (llvmpipe rasterises on all cores); it is
                # steadier than wall time when other work shares the machine
                cpu_ms.append(1000.0 * (c3 - c2) / len(shot))
        print(f"{w}x{h} supersample={args.supersample} labels={not args.no_labels}: "
              f"best {max(fps):6.1f} fps, median {statistics.median(fps):6.1f} fps "
              f"({1000.0 / max(fps):5.2f} ms/frame), CPU {min(cpu_ms):5.2f} ms/frame over all threads, "
              f"context {1000.0 * (t1 - t0):.0f} ms; rgb+depth+mask read back every frame")


if __name__ == "__main__":
    main()
