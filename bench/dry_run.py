"""How close `daotai render --dry-run`'s estimate lands to the real render, per example.

For each script (default: every examples/*.json) at the preview size with the previz backend,
the estimate is made as `render --dry-run` makes it (in this process, from the plan), and right
after it the real render runs as a user runs it (`python -m daotai.cli render SCRIPT --preset
preview --no-cache`, a fresh process, into a temporary folder) and its wall time is measured.
Estimate and render follow each other so the machine's load is about the same for both. It
prints, per script, the estimate, the actual seconds and their ratio, then a summary line with
the largest |ratio - 1| (the target: at most 0.30).

    python bench/dry_run.py [--preset preview] [--runs 1] [SCRIPT ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from daotai.estimate import calibrate, whole_render_s
from daotai.plan.planner import plan_script
from daotai.script.load import load_script
from daotai.script.presets import apply_preset

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.30  # the estimate within ±30% of the actual wall time


def actual_s(script: Path, preset: str, out: Path) -> tuple[float, dict[str, float]]:
    """Wall seconds of a real `daotai render` of ``script`` (a fresh process, no shot cache), and
    the stage timings its manifest records."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(script), "-o", str(out), "--preset", preset,
                    "--no-cache"], check=True, capture_output=True, cwd=ROOT, env=dict(os.environ))
    wall = time.perf_counter() - start
    return wall, json.loads((out / "manifest.json").read_text(encoding="utf-8"))["timings_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scripts", nargs="*", type=Path)
    parser.add_argument("--preset", default="preview")
    parser.add_argument("--runs", type=int, default=1, help="estimate + render pairs per script")
    args = parser.parse_args()
    scripts = args.scripts or sorted((ROOT / "examples").glob("*.json"))
    print(f"{'script':16s} {'frames':>6s} {'estimate s':>10s} {'actual s':>9s} {'ratio':>6s}  "
          f"(render / assemble / qc after / others running)")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="daotai-bench-dry-run-") as folder:
        for script in scripts:
            plan = plan_script(apply_preset(load_script(script), args.preset))
            for run in range(args.runs):
                cal = calibrate(plan)
                times = whole_render_s(plan, cal)
                actual, stages = actual_s(script, args.preset, Path(folder) / f"{script.stem}-{run}")
                ratio = times.total / actual
                worst = max(worst, abs(ratio - 1))
                print(f"{script.stem:16s} {plan.total_frames:6d} {times.total:10.1f} {actual:9.1f} {ratio:6.2f}  "
                      f"({times.render:.1f} / {times.assemble:.1f} / {times.qc_after:.1f} / {cal.others:.1f}); "
                      f"actual: render+encode {stages['render_and_encode_s']:.1f}, assemble {stages['assemble_s']:.1f}, "
                      f"qc {stages['qc_s']:.1f}, deliver {stages['deliver_s']:.1f}", flush=True)
    print(f"max |ratio - 1| = {worst:.2f} (target <= {TARGET:.2f}): {'PASS' if worst <= TARGET else 'FAIL'}")


if __name__ == "__main__":
    main()
