"""QC's share of a cold render: the old dense sampling against the new, in one run.

A script (by default bench/e2e.py's seven previz shots at preview size) is rendered cold (no shot
cache) through the real pipeline, alternately with QC's sampling set to ``dense`` (the camera
tracked on every frame pair: the baseline) and ``fast`` (every third frame, dense again only
where the verdict is close: daotai.qc.sampling), ``--repeat`` times each. For each run it prints
QC seconds (the wait after assembly: shots are checked by worker processes while later shots
render), QC's share of the total, the total, and the CPU seconds of the child processes (QC
workers and encoders; a busy machine inflates them far less than wall seconds); then the medians, the ratios of fast to dense,
and whether every verdict in qc.json is the same both ways (it must be).

    python bench/qc_share.py                         # the e2e script, preview size, 1 run each
    python bench/qc_share.py --repeat 3 --size 1080p
    python bench/qc_share.py --script examples/office.json

Target (issue: previz, preview size, 7 shots, no cache, 2 cores): QC at most 15% of the total.
The machine's other load shows in every number: the runs alternate so both settings share it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from daotai.plan.planner import plan_script
from daotai.qc.sampling import ENV_VAR, SAMPLINGS
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import QC_SHARE_TARGET, SIZES, script  # noqa: E402


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def render_cold(data: dict[str, Any], out: Path, sampling: str) -> tuple[dict[str, float], dict[str, Any]]:
    """One cold render with QC's sampling set (worker processes inherit it); (timings_s, qc.json).

    timings_s gains "child_cpu_s": the CPU seconds of the run's child processes (the QC workers and
    the encoder processes, counted once they exit at the end of the run; the encoding is the same
    work in both settings, so the difference between settings is QC's), which the machine's other
    load inflates far less than wall seconds; "main_cpu_s": this process's."""
    before = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = sampling
    children, own = _cpu_s(resource.RUSAGE_CHILDREN), _cpu_s(resource.RUSAGE_SELF)
    try:
        events = list(run(plan_script(validate_script(data)), out, PipelineSettings(cache=None, force=True)))
    finally:
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before
    assert isinstance(events[-1], Finished)
    timings = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["timings_s"]
    timings["child_cpu_s"] = _cpu_s(resource.RUSAGE_CHILDREN) - children
    timings["main_cpu_s"] = _cpu_s(resource.RUSAGE_SELF) - own
    return timings, json.loads((out / "qc.json").read_text(encoding="utf-8"))


def verdicts(report: dict[str, Any]) -> dict[str, list[tuple[str, bool | None]]]:
    """shot id -> its (check, ok) verdicts, the sequence's ok under "sequence"."""
    found = {s["shot_id"]: [(v["check"], v["ok"]) for v in s["verdicts"]] for s in report["shots"]}
    found["sequence"] = [("sequence", (report.get("sequence") or {}).get("ok"))]
    return found


def densified(report: dict[str, Any]) -> list[str]:
    """Shots whose camera check went dense, with the reason."""
    return [f"{s['shot_id']}: {s['camera']['densified']}" for s in report["shots"]
            if (s.get("camera") or {}).get("densified")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, default=None, help="a script file (default: bench/e2e.py's seven shots)")
    parser.add_argument("--size", default="preview", help=f"{', '.join(SIZES)} or WxH (overrides the script's)")
    parser.add_argument("--repeat", type=int, default=1, help="cold renders per setting (alternating)")
    parser.add_argument("--json", type=Path, default=None, help="write every run's numbers here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat: {args.repeat} must be at least 1")
    size = SIZES.get(args.size, args.size)
    if args.script is None:
        data, name = script(size), "bench/e2e.py's seven shots"
    else:
        data, name = json.loads(args.script.read_text(encoding="utf-8")), str(args.script)
        data["size"] = size
    print(f"cores: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}; "
          f"{name} at {size}, cold, {args.repeat} run(s) per setting")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in SAMPLINGS}
    reports: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for k in range(args.repeat):
            for sampling in ("dense", "fast"):
                began = time.perf_counter()
                timings, reports[sampling] = render_cold(data, Path(folder) / f"{sampling}{k}", sampling)
                runs[sampling].append(timings)
                print(f"  {sampling:<6} run {k + 1}: qc {timings['qc_s']:6.1f} s  "
                      f"{timings['qc_s'] / timings['total_s']:6.1%} of {timings['total_s']:6.1f} s "
                      f"(render+encode {timings['render_and_encode_s']:.1f}, assemble {timings['assemble_s']:.1f}; "
                      f"child processes' CPU {timings['child_cpu_s']:.1f} s, this process's {timings['main_cpu_s']:.1f} s; "
                      f"{time.perf_counter() - began:.0f} s wall)")
    keys = ("qc_s", "total_s", "child_cpu_s", "main_cpu_s")
    median = {s: {key: statistics.median(t[key] for t in runs[s]) for key in keys} for s in runs}
    print(f"\n{'sampling':<8} {'qc s':>7} {'total s':>8} {'qc share':>9} {'child cpu s':>12} {'main cpu s':>11}")
    for s, m in median.items():
        print(f"{s:<8} {m['qc_s']:7.1f} {m['total_s']:8.1f} {m['qc_s'] / m['total_s']:9.1%} {m['child_cpu_s']:12.1f} "
              f"{m['main_cpu_s']:11.1f}")
    fast, dense = median["fast"], median["dense"]
    print(f"fast / dense: QC wait {fast['qc_s'] / dense['qc_s']:.2f}x, total {fast['total_s'] / dense['total_s']:.2f}x; "
          f"QC CPU saved {dense['child_cpu_s'] - fast['child_cpu_s']:.1f} s; target QC share <= {QC_SHARE_TARGET:.0%}")
    same = verdicts(reports["dense"]) == verdicts(reports["fast"])
    print(f"verdicts: {'the same' if same else 'DIFFERENT'} in dense and fast")
    gone_dense = densified(reports["fast"])
    print(f"made dense in the fast run: {'; '.join(gone_dense) if gone_dense else 'none'}")
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": runs, "median": median, "same_verdicts": same,
                                         "densified": gone_dense}, indent=1) + "\n", encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
