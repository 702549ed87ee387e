"""Packaging speed: the encoder's frame threads and stream-copy assembly against the old path, in one run.

The seven-shot previz script of ``bench/e2e.py`` (14 s of video, a crossfade and a fade) is
rendered cold (empty shot cache) and fully cached, twice: with the baseline, the path as it
was (one x264 thread, 250-frame GOPs, every frame of the sequence decoded and re-encoded), and
with the current path (FRAME_THREADS frame threads, 1 s GOPs, untouched GOPs copied). Then the
cached run's shots are assembled again on their own, both ways, best of three. It prints the
stage seconds of each render, the cached total's share of its cold total (target at most 20%),
QC's share of the cold total (target at most 15%), and each new figure as a ratio of the
baseline's.

    python bench/encode_threads.py [--size 640x360] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import daotai.encode.policy as policy
import daotai.post.assemble as assembly
from daotai.encode.read import probe
from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import CACHED_SHARE_TARGET, QC_SHARE_TARGET, STAGES, script  # noqa: E402

BASELINE_KEYINT_S = 250 / 24  # x264's default GOP (250 frames) at the script's 24 fps


@contextlib.contextmanager
def baseline() -> Iterator[None]:
    """The path as it was: one x264 thread, x264's default GOP, every sequence frame re-encoded."""
    settings, assemble = policy.encode_settings, assembly.assemble

    def one_thread(*args, **kwargs):
        return replace(settings(*args, **kwargs), threads=1, keyint_s=BASELINE_KEYINT_S)

    def reencode(*args, **kwargs):
        return assemble(*args, **kwargs, stream_copy=False)

    policy.encode_settings, assembly.assemble = one_thread, reencode
    try:
        yield
    finally:
        policy.encode_settings, assembly.assemble = settings, assemble


def render(data: dict, out: Path, cache: str) -> dict[str, float]:
    """One render through the pipeline; manifest.json's timings."""
    events = list(run(plan_script(validate_script(data)), out, PipelineSettings(cache=cache, force=True)))
    assert isinstance(events[-1], Finished)
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))["timings_s"]


def renders(size: str, root: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Cold then fully cached timings of the bench script, with a cache of their own."""
    cache = str(root / "cache")
    return render(script(size), root / "cold", cache), render(script(size), root / "cached", cache)


def assembly_seconds(run_dir: Path, size: str, new: bool, repeat: int) -> tuple[float, int]:
    """Best-of-``repeat`` seconds to assemble a render's shots again (as the pipeline joins them),
    and the frames copied."""
    from daotai.plan.layout import RenderLayout
    from daotai.run.settings import encode_settings_for

    plan = plan_script(validate_script(script(size)))
    fps = Fraction(*plan.fps_fraction)
    layout = RenderLayout(run_dir)
    clips = [assembly.ClipSpec(layout.path("shot", shot.shot_id), assembly.Transition(
                 shot.transition.type, shot.transition.frames / float(fps) * (2 if shot.transition.type == "fade" else 1)))
             for shot in plan.shots]
    enc = encode_settings_for(PipelineSettings(), plan.width, plan.height)
    if not new:
        enc = replace(enc, threads=1, keyint_s=BASELINE_KEYINT_S)
    best, copied = float("inf"), 0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as folder:
            tick = time.perf_counter()
            result = assembly.assemble(clips, Path(folder) / "sequence.mp4", fps, enc, stream_copy=new)
            best = min(best, time.perf_counter() - tick)
            copied = result.copied_frames
    return best, copied


def table(name: str, timings: dict[str, float]) -> None:
    """A render's stage seconds and shares."""
    total = timings["total_s"]
    print(f"  {name}: total {total:6.1f} s")
    for stage in STAGES:
        seconds = timings.get(stage, 0.0)
        print(f"    {stage[:-2]:<18} {seconds:6.1f} s  {seconds / total:6.1%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="640x360")
    parser.add_argument("--repeat", type=int, default=3, help="assembly timings: best of this many")
    args = parser.parse_args(argv)
    print(f"cores: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}, "
          f"previz {args.size}, 7 shots, 14 s of video")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        with baseline():
            old_cold, old_cached = renders(args.size, root / "baseline")
        new_cold, new_cached = renders(args.size, root / "current")
        old_asm, _ = assembly_seconds(root / "current" / "cached", args.size, new=False, repeat=args.repeat)
        new_asm, copied = assembly_seconds(root / "current" / "cached", args.size, new=True, repeat=args.repeat)
        frames = probe(root / "current" / "cached" / "sequence.mp4").frames
    for name, cold, cached in (("baseline (1 thread, re-encode)", old_cold, old_cached),
                               ("current (frame threads, stream copy)", new_cold, new_cached)):
        print(f"\n{name}")
        table("cold", cold)
        table("fully cached", cached)
        print(f"  cached total / cold total {cached['total_s'] / cold['total_s']:6.1%}  "
              f"(target <= {CACHED_SHARE_TARGET:.0%})")
        print(f"  QC share of the cold total {cold['qc_s'] / cold['total_s']:6.1%}  (target <= {QC_SHARE_TARGET:.0%})")
    print("\ncurrent / baseline")
    for label, new, old in (("cached total", new_cached["total_s"], old_cached["total_s"]),
                            ("cached assemble stage", new_cached["assemble_s"], old_cached["assemble_s"]),
                            ("cold total", new_cold["total_s"], old_cold["total_s"]),
                            ("cold render+encode", new_cold["render_and_encode_s"], old_cold["render_and_encode_s"]),
                            (f"assembly alone, best of {args.repeat}", new_asm, old_asm)):
        print(f"  {label:<28} {new:6.2f} s vs {old:6.2f} s  = {new / old:5.2f}x")
    print(f"  frames copied, not re-encoded: {copied} of {frames}")
    return 0 if new_cached["total_s"] / new_cold["total_s"] <= CACHED_SHARE_TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
