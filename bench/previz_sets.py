"""Frames per second of the previz rasteriser drawing the dressed set kits, at preview size.

For each kit a two-person dialogue scene (master, two over-the-shoulders, a reverse single
and a slow orbit) is planned, and every frame of every shot is rendered with RGB, depth and
the character-id mask read back, as the previz backend does with control channels. Run:

    python bench/previz_sets.py [--kits office,street,...] [--size 640x360] [--rounds R]

Each kit runs several rounds; the best and the median round are printed, with the number of
set pieces the kit laid out (more pieces, more instanced draws).

Measured on a shared 2-core machine, before and after the sets were closed all round (walls and
a ceiling indoors, facades, trees and a horizon ring outdoors), CPU ms per frame over all threads
(wall-clock fps swung 2x between rounds with other work running): 640x360 office 3.5-4.4 -> 4.0-4.2,
living room 3.2-3.5 -> 3.0-3.2, street 3.2-3.5 -> 3.2-3.6, park 3.5 -> 4.1-4.8, forest 3.5 -> 4.7-5.3,
beach 3.2-3.3 -> 3.8-4.1; 1280x720 best fps office 29.0 -> 26.3, street 43.9 -> 45.7, forest 46.5
-> 31.4 (three rows of trees all round are the dearest surround).
"""

from __future__ import annotations

import argparse
import statistics
import time

from daotai.plan.planner import plan_script
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, frame_states, set_pieces_for_plan
from daotai.script.load import validate_script

DEFAULT_KITS = ("office", "diner", "living room", "street", "park", "night market")


def dialogue_script(scene: str, width: int, height: int) -> dict:
    """Two people face to face in ``scene``: the shots a crew covers a dialogue with (5.5 s at 24 fps)."""
    return {
        "size": {"width": width, "height": height}, "fps": 24, "seed": 11, "scene": {"name": scene},
        "characters": [{"id": "mia", "appearance": "red coat", "position": [-0.8, 0.0], "facing": 90},
                       {"id": "tom", "appearance": "blue shirt", "position": [0.8, 0.0], "facing": -90}],
        "shots": [
            {"shot_id": "master", "duration": 1.5, "framing": "wide", "subject": "mia"},
            {"shot_id": "ots_mia", "duration": 1.0, "framing": "OTS", "subject": "mia"},
            {"shot_id": "ots_tom", "duration": 1.0, "framing": "OTS", "subject": "tom"},
            {"shot_id": "cu_tom", "duration": 1.0, "framing": "close_up", "subject": "tom"},
            {"shot_id": "orbit", "duration": 1.0, "framing": "medium", "subject": "mia",
             "camera": {"type": "orbit", "orbit": 90}},
        ],
    }


def main() -> None:
    """Print previz fps per kit: best and median of several timed rounds over every frame of the plan."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kits", default=",".join(DEFAULT_KITS), help="scene names, comma separated")
    ap.add_argument("--size", default="640x360")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    for scene in args.kits.split(","):
        plan = plan_script(validate_script(dialogue_script(scene, width, height)))
        states = [state for shot in plan.shots for state in frame_states(plan, shot)]
        pieces = set_pieces_for_plan(plan)
        with PrevizRenderer(RenderSettings(width, height), environment_for_plan(plan), pieces) as renderer:
            for state in states[:8]:  # warm-up: shader JIT, label patches
                renderer.render(state)
            fps, cpu_ms = [], []
            for _ in range(args.rounds):
                start, cpu = time.perf_counter(), time.process_time()
                for state in states:
                    renderer.render(state, with_depth=True)
                fps.append(len(states) / (time.perf_counter() - start))
                # CPU time of every thread (llvmpipe rasterises on all cores): steadier than wall time
                # on a machine other work shares
                cpu_ms.append(1000.0 * (time.process_time() - cpu) / len(states))
        print(f"{scene:>14} {width}x{height}: {len(pieces):4d} pieces, {len(states)} frames: "
              f"best {max(fps):6.1f} fps, median {statistics.median(fps):6.1f} fps, CPU {min(cpu_ms):5.2f} ms/frame")


if __name__ == "__main__":
    main()
