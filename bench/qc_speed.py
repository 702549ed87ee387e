"""How long the shot checks of one render folder take here, against another revision of daotai in the same run.

Every shot of the folder is checked in one process, as a QC worker checks it (daotai.qc.shot.check_shot,
the camera path included), and the seconds are summed. With ``--against REV`` the same folder is also
checked by that revision (a temporary git worktree, its ``src`` first on the path, this script run
there in a subprocess); the two alternate, ``--repeat`` times each, so the machine's load falls on
both. It prints each side's median seconds, the ratio, and whether both wrote the same qc.json
entries, byte for byte (a speed change must not change a verdict or a number).

    daotai render examples/office.json -o /tmp/office --preset preview --no-controls   # checks on the scene model
    python bench/qc_speed.py /tmp/office --against HEAD~3 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def check_folder(folder: Path) -> tuple[float, str]:
    """(seconds, the entries as JSON text) of checking every shot of ``folder`` in this process."""
    from daotai.plan.planner import plan_from_json
    from daotai.qc.shot import check_shot

    plan = plan_from_json((folder / "plan.json").read_text(encoding="utf-8"))
    started = time.perf_counter()
    entries = [check_shot(plan, shot, folder / "shots" / f"{shot.shot_id}.mp4", None) for shot in plan.shots]
    return time.perf_counter() - started, json.dumps(entries, indent=1, default=str)


def run_side(src: Path, folder: Path, out: Path) -> float:
    """One check of ``folder`` by the daotai in ``src``, in a fresh process; its entries go to ``out``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, __file__, str(folder), "--entries", str(out)], env=env, check=True,
                          capture_output=True, text=True)
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a render folder (plan.json, shots/)")
    parser.add_argument("--against", help="a git revision to compare with (checked out in a temporary worktree)")
    parser.add_argument("--repeat", type=int, default=2, help="checks of the folder per side")
    parser.add_argument("--entries", type=Path, help=argparse.SUPPRESS)  # one side's run (used by --against)
    args = parser.parse_args(argv)
    if args.entries is not None:
        seconds, text = check_folder(args.folder)
        args.entries.write_text(text, encoding="utf-8")
        print(f"{seconds:.3f}")
        return 0
    if not (args.folder / "plan.json").is_file():
        parser.error(f"folder: {str(args.folder)!r} has no plan.json (not a render folder)")
    sides = {"this tree": ROOT / "src"}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        if args.against:
            tree = work / "against"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), args.against],
                           check=True)
            sides = {f"{args.against}": tree / "src", **sides}
        try:
            seconds: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(args.repeat):
                for side, (name, src) in enumerate(sides.items()):
                    seconds[name].append(run_side(src, args.folder, work / f"side{side}-{len(seconds[name])}.json"))
            texts = {name: (work / f"side{side}-0.json").read_text(encoding="utf-8") for side, name in enumerate(sides)}
        finally:
            if args.against:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / "against")],
                               check=False)
    print(f"{args.folder}: every shot checked in one process, {args.repeat} time(s) per side")
    for name, values in seconds.items():
        print(f"  {name:<12} median {statistics.median(values):7.2f} s   ({', '.join(f'{v:.2f}' for v in values)})")
    if args.against:
        base, here = (statistics.median(v) for v in seconds.values())
        same = len(set(texts.values())) == 1
        print(f"  ratio {base / here:.2f}x ({args.against} / this tree); qc.json entries "
              f"{'identical' if same else 'DIFFER'}")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
