"""How close `daotai render --dry-run`'s estimate lands to the real render, per script, cold and cached.

For each script (default: every examples/*.json) at the preview size with the previz backend, twice:
cold (an empty shot cache) and cached (the same render again, every shot reused from the cache).
Each time the estimate is made as `render --dry-run` makes it (in this process: the stored
calibration, the shots the cache would give back) and right after it the real render runs as a
user runs it (`python -m daotai.cli render SCRIPT --preset preview --cache FOLDER`, a fresh
process, into a temporary folder) and its wall time is measured, so the machine's load is about
the same for both. The calibration is kept in a temporary cache folder ($DAOTAI_CACHE_DIR), so
the first script of each size measures it, as a new user's first dry run does.

It prints, per script and case, the estimate, the actual seconds and their ratio, the estimate's
stages and the render's own stage timings, then the largest |ratio - 1| (the target: at most
0.30); the exit status is 1 over it.

    python bench/dry_run.py [--preset preview] [SCRIPT ...]
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

from daotai.plan.planner import plan_script
from daotai.run.estimate import stored_calibration, whole_render_s
from daotai.run.reuse import reusable_shots
from daotai.run.settings import PipelineSettings
from daotai.script.load import load_script
from daotai.script.presets import apply_preset

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.30  # the estimate within ±30% of the actual wall time


def actual_s(script: Path, preset: str, out: Path, cache: Path) -> tuple[float, dict[str, float]]:
    """Wall seconds of a real `daotai render` of ``script`` (a fresh process, shot cache ``cache``),
    and the stage timings its manifest records."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(script), "-o", str(out), "--preset", preset,
                    "--cache", str(cache), "--force"], check=True, capture_output=True, cwd=ROOT, env=dict(os.environ))
    wall = time.perf_counter() - start
    return wall, json.loads((out / "manifest.json").read_text(encoding="utf-8"))["timings_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scripts", nargs="*", type=Path)
    parser.add_argument("--preset", default="preview")
    args = parser.parse_args()
    scripts = args.scripts or sorted((ROOT / "examples").glob("*.json"))
    print(f"{'script':12s} {'case':6s} {'frames':>6s} {'reused':>6s} {'estimate s':>10s} {'actual s':>9s} "
          f"{'ratio':>6s}  estimate's stages | render's own")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="daotai-bench-dry-run-") as folder:
        os.environ["DAOTAI_CACHE_DIR"] = str(Path(folder) / "user-cache")  # the calibration, as a new user's
        for script in scripts:
            plan = plan_script(apply_preset(load_script(script), args.preset))
            shots = Path(folder) / f"{script.stem}-shots"
            settings = PipelineSettings(backend="previz", size_preset=args.preset, cache=str(shots))
            for case in ("cold", "cached"):
                reused = reusable_shots(plan, settings, script)
                cal, measured = stored_calibration(plan)
                times = whole_render_s(plan, cal, reused)
                actual, stages = actual_s(script, args.preset, Path(folder) / f"{script.stem}-out", shots)
                ratio = times.total / actual
                worst = max(worst, abs(ratio - 1))
                print(f"{script.stem:12s} {case:6s} {plan.total_frames:6d} {len(reused):6d} {times.total:10.1f} "
                      f"{actual:9.1f} {ratio:6.2f}  {times.describe()}, {cal.others:.1f} others"
                      f"{' (calibrated now)' if measured else ''} | render+encode {stages['render_and_encode_s']:.1f}, "
                      f"assemble {stages['assemble_s']:.1f}, qc {stages['qc_s']:.1f}, "
                      f"deliver {stages['deliver_s']:.1f}, total {stages.get('total_s', 0.0):.1f}", flush=True)
    print(f"max |ratio - 1| = {worst:.2f} (target <= {TARGET:.2f}): {'PASS' if worst <= TARGET else 'FAIL'}")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
