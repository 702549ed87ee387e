"""Incremental renders: what re-rendering one changed shot of eight costs, against a full render.

An eight-shot previz script (2 s per shot, 640x360 by default) is rendered three times: into
an empty shot cache, again with one shot's camera changed (seven shots and their quality
verdicts come from the cache), and once more from scratch without a cache. It prints each
run's QC and total seconds and whether the incremental run's qc.json and sequence are
byte-identical to the fresh render's.

    python bench/incremental.py [--size 640x360] [--seconds 2]
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
from pathlib import Path

from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

MOVES = ("static", "pan_left", "pan_right", "push_in", "pull_back", "tilt_up", "orbit_left", "crane_up")


def script(size: str, seconds: float, changed: bool) -> dict:
    """Eight shots, one per move; ``changed`` turns the sixth shot's tilt the other way."""
    shots = [{"shot_id": f"s{i}", "duration": seconds, "subject": "ana" if i % 2 else "bo", "camera": move}
             for i, move in enumerate(MOVES)]
    if changed:
        shots[5]["camera"] = "tilt_down"
    return {"fps": 24, "size": size, "seed": 3, "characters": [{"id": "ana"}, {"id": "bo", "position": [0.8, -1.0]}],
            "shots": shots}


def render(data: dict, out: Path, cache: str | None) -> dict[str, float]:
    """Render through the real pipeline; the run's timings."""
    events = list(run(plan_script(validate_script(data)), out, PipelineSettings(cache=cache)))
    assert isinstance(events[-1], Finished)
    return events[-1].result.timings


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="640x360")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each shot")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        cache = str(root / "cache")
        runs = {
            "full, empty cache": render(script(args.size, args.seconds, False), root / "full", cache),
            "one shot changed": render(script(args.size, args.seconds, True), root / "again", cache),
            "fresh, no cache": render(script(args.size, args.seconds, True), root / "fresh", None),
        }
        for name, timings in runs.items():
            print(f"{name:18s}  qc {timings['qc_s']:6.1f} s   total {timings['total_s']:6.1f} s")
        for rel in ("qc.json", "sequence.mp4"):
            same = digest(root / "again" / rel) == digest(root / "fresh" / rel)
            print(f"{rel}: incremental {'==' if same else '!='} fresh render")


if __name__ == "__main__":
    main()
