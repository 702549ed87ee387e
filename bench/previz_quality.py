"""Quality targets of the previz path, measured by rendering every example through the pipeline.

Prints, per shot: encode fidelity (PSNR mean / std of decoded vs rendered frames; target
mean >= 38.5 dB, std <= 1.2 dB) and camera adherence (direction agreement and mean
endpoint error in px/frame; target <= 0.5 on the all-moves example), and a summary line
per example.

    python bench/previz_quality.py [examples/*.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import load_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", type=Path, default=sorted(EXAMPLES.glob("*.json")))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="daotai-quality-"))
    try:
        print(f"{'example':<16} {'shot':<11} {'PSNR dB':>8} {'std':>5} {'cam err px':>10} {'direction':>9}  "
              "camera summary")
        for script_path in args.scripts:
            plan = plan_script(load_script(script_path))
            out = work / script_path.stem
            for event in run(plan, out, PipelineSettings()):
                if isinstance(event, Finished):
                    pass
            qc = json.loads((out / "qc.json").read_text())
            worst = 0.0
            directions_ok = True
            for shot in qc["shots"]:
                fidelity = shot.get("fidelity", {})
                cam = shot.get("camera", {})
                components = cam.get("components", [])
                direction = all(c.get("direction_ok") is not False for c in components)
                directions_ok &= direction
                err = cam.get("error_mean_px") or 0.0
                worst = max(worst, err)
                print(
                    f"{script_path.stem:<16} {shot['shot_id']:<11} {fidelity.get('psnr_mean_db', float('nan')):8.2f} "
                    f"{fidelity.get('psnr_std_db', float('nan')):5.2f} {err:10.3f} {str(direction):>9}  "
                    f"{cam.get('summary', '')[:70]}"
                )
            print(
                f"{script_path.stem:<16} {'SUMMARY':<11} qc {'ok' if qc['ok'] else 'FAILED'}; worst camera error "
                f"{worst:.3f} px/frame (target 0.5); all directions {'ok' if directions_ok else 'WRONG'}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
