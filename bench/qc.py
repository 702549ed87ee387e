"""How far the QC can be trusted: false alarms on correct previz shots, misses on broken ones.

The correct corpus is rendered by the previz backend, whose cameras are exact: every camera move
x framings (extreme close-up … extreme wide) x angles (low, eye level, high, bird's eye, dutch) x
lenses (18–135 mm full-frame equivalents, as vertical fields of view) x with and without walking
figures, sampled so every move, framing, angle and lens appears. Every shot is checked the way a
render checks it (``daotai.qc.shot.check_shot`` with its depth and mask controls and the
rendered frames kept for encode fidelity); a failing verdict there is a false alarm of its check.

The faulted corpus is made from the same files, never from the plan: the frames reversed, a run of
frames held, frames dropped, a different move made from the first frame (a pan where a dolly was
planned, a zoom where a truck was), the subject covered by a board (picture, mask and depth), black
and green frames, the shot stretched to the wrong length, and a starved encode. Each fault has the
check that must catch it; a fault it lets through is a miss of that check.

    python bench/qc.py --quick            # every move, framing, angle and lens once (13 shots)
    python bench/qc.py                    # the full corpus (every move x every framing: 104 shots)
    python bench/qc.py --json qc-bench.json --keep out/qc-bench
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from daotai.encode.read import decode_frames, decode_gray
from daotai.encode.video import EncodeSettings, VideoWriter, write_gray8, write_gray16
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.planner import plan_script
from daotai.qc.metrics import thumbnail
from daotai.qc.motion import planned_motion
from daotai.qc.shot import check_shot
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.run.shots import fidelity_sample_indexes
from daotai.script.load import validate_script
from daotai.script.vocab import DIRECTION_SIGNS

MOVES = ("static", "pan", "tilt", "roll", "dolly", "truck", "pedestal", "crane", "orbit", "zoom",
         "dolly_zoom", "handheld", "follow")
FRAMINGS = ("extreme_close_up", "close_up", "medium_close_up", "medium", "medium_full", "full", "wide",
            "extreme_wide")
ANGLES = ("low", "eye_level", "high", "birds_eye", "dutch")
LENSES_MM = (18, 24, 35, 50, 85, 135)  # full-frame focal lengths: a 24 mm tall gate
CHECKS = ("format", "frames", "camera", "subject", "fidelity", "audio")  # first in the table; others follow
ALWAYS_JUDGED = ("format", "frames")  # checks that run on every shot but say nothing when they pass
DURATION_S = 1.5
SUBJECT = "a"
PASSER_BY = "b"


def fov_for_lens(focal_mm: float) -> float:
    """Vertical field of view (degrees) of a full-frame (36 x 24 mm) lens."""
    return math.degrees(2.0 * math.atan(12.0 / focal_mm))


@dataclass(frozen=True)
class Case:
    """One correct shot of the corpus."""

    shot_id: str
    move: str
    direction: str | None
    framing: str
    angle: str
    lens_mm: int
    walking: bool


def corpus(quick: bool) -> list[Case]:
    """The corpus, sampled as a Latin square: quick covers every move, framing, angle and lens at
    least once; full takes every move x every framing, angles, lenses and walkers rotating."""
    pairs = [(m, i) for m in range(len(MOVES)) for i in (range(1) if quick else range(len(FRAMINGS)))]
    cases = []
    for n, (m, i) in enumerate(pairs):
        move = MOVES[m]
        f = (m + i) % len(FRAMINGS) if not quick else m % len(FRAMINGS)
        a = (m + 2 * i) % len(ANGLES)
        lens = LENSES_MM[(m + 3 * i) % len(LENSES_MM)]
        signs = sorted(DIRECTION_SIGNS.get(move, {}))
        direction = signs[(m + i) % len(signs)] if signs else None
        walking = move == "follow" or (m + i) % 2 == 1
        cases.append(Case(f"c{n:03d}_{move}", move, direction, FRAMINGS[f], ANGLES[a], lens, walking))
    return cases


# Where the walkers go, turn about: the subject takes a few steps across, someone crosses behind
# her, farther back. Characters stay where the previous shot left them, so each walking shot
# walks to the other end.
WALKS = {SUBJECT: ((0.0, 0.0), (0.6, 0.2)), PASSER_BY: ((-2.5, -3.0), (2.5, -3.0))}


def _shot(case: Case, walks_before: int) -> dict[str, Any]:
    camera: dict[str, Any] = {"type": case.move, "fov": round(fov_for_lens(case.lens_mm), 2)}
    if case.direction is not None:
        camera["direction"] = case.direction
    shot: dict[str, Any] = {"shot_id": case.shot_id, "duration": DURATION_S, "subject": SUBJECT,
                            "framing": case.framing, "angle": case.angle, "camera": camera}
    if case.walking:
        shot["characters"] = [SUBJECT, PASSER_BY]
        shot["blocking"] = [{"character": who, "to": list(ends[(walks_before + 1) % 2])}
                            for who, ends in WALKS.items()]
    else:
        shot["characters"] = [SUBJECT]
    return shot


def script_for(cases: list[Case], size: str) -> dict[str, Any]:
    """One script holding every case as a shot, in an office set with its default set pieces."""
    shots = []
    walks = 0
    for case in cases:
        shots.append(_shot(case, walks))
        walks += case.walking
    return {"size": size, "fps": 24, "seed": 7, "scene": {"name": "office"},
            "characters": [{"id": SUBJECT, "height": 1.75, "position": list(WALKS[SUBJECT][0]), "colour": "#3366cc"},
                           {"id": PASSER_BY, "height": 1.7, "position": list(WALKS[PASSER_BY][0]), "facing": 90,
                            "colour": "#cc5533"}],
            "shots": shots}


# --------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class Clip:
    """A correct shot's files and what the bench needs to break it."""

    plan: Plan
    shot: ShotPlan
    video: Path
    depth: Path
    mask: Path


@dataclass(frozen=True)
class Faulted:
    """A broken copy of a clip: the video (and, when edited, controls) to check."""

    video: Path
    controls: dict[str, Path]
    samples: dict[int, np.ndarray] | None = None


def _write(frames: list[np.ndarray], path: Path, fps, settings: EncodeSettings | None = None) -> Path:
    height, width = frames[0].shape[:2]
    with VideoWriter(path, width, height, fps, settings) as writer:
        for frame in frames:
            writer.write(frame)
    return path


def _controls(clip: Clip) -> dict[str, Path]:
    return {"depth": clip.depth, "mask": clip.mask}


def _camera_px(clip: Clip, first: int, last: int) -> float:
    return planned_motion(clip.plan, clip.shot, first, last)[0]


def reversed_move(clip: Clip, frames: list[np.ndarray], work: Path) -> Faulted | None:
    """The frames played backwards: the camera moves the wrong way (only where it moves)."""
    if _camera_px(clip, 0, len(frames) - 1) < 10.0:
        return None
    return Faulted(_write(frames[::-1], work / "reversed.mp4", clip.plan.fps), _controls(clip))


FREEZE_FRAMES = 16
VISIBLE_CHANGE = 3.0  # mean |a - b| per sample across the held run in the correct clip


def frozen_run(clip: Clip, frames: list[np.ndarray], work: Path) -> Faulted | None:
    """One frame held for FREEZE_FRAMES frames where the correct picture changes most, if it
    changes visibly there (a hold over flat sky is no fault) and the plan moves it."""
    n = len(frames)
    if n < FREEZE_FRAMES + 2:
        return None
    small = [thumbnail(f) for f in frames]
    changes = [(_mad(small[i], small[i + FREEZE_FRAMES - 1]), i) for i in range(1, n - FREEZE_FRAMES)]
    change, start = max(changes)
    moved = max(planned_motion(clip.plan, clip.shot, start, start + FREEZE_FRAMES - 1))
    if change < VISIBLE_CHANGE or moved / (FREEZE_FRAMES - 1) < 1.5:
        return None
    held = frames[:start] + [frames[start]] * FREEZE_FRAMES + frames[start + FREEZE_FRAMES:]
    return Faulted(_write(held, work / "frozen.mp4", clip.plan.fps), _controls(clip))


def _mad(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def dropped_frames(clip: Clip, frames: list[np.ndarray], work: Path) -> Faulted | None:
    """Four frames missing from the middle: the shot is short and the picture jumps."""
    middle = len(frames) // 2
    kept = frames[:middle - 2] + frames[middle + 2:]
    return Faulted(_write(kept, work / "dropped.mp4", clip.plan.fps), _controls(clip))


def wrong_length(clip: Clip, frames: list[np.ndarray], work: Path) -> Faulted | None:
    """The shot stretched to 1.25x its planned frames (a backend that made the wrong length)."""
    count = round(len(frames) * 1.25)
    stretched = [frames[min(int(i / 1.25), len(frames) - 1)] for i in range(count)]
    return Faulted(_write(stretched, work / "length.mp4", clip.plan.fps), _controls(clip))


def _filled(frames: list[np.ndarray], colour: tuple[int, int, int], count: int = 3) -> list[np.ndarray]:
    middle = len(frames) // 2
    bad = np.empty_like(frames[0])
    bad[:] = colour
    return frames[:middle] + [bad] * count + frames[middle + count:]


def black_frames(clip: Clip, frames: list[np.ndarray], work: Path) -> Faulted | None:
    """Three black frames in the middle."""
    return Faulted(_write(_filled(frames, (0, 0, 0)), work / "black.mp4", clip.plan.fps), _controls(clip))


def green_frames(clip: Clip, frames: list[np.ndarray], work: Path) -> Faulted | None:
    """Three frames of the broken-decode green (all-zero YUV) in the middle."""
    return Faulted(_write(_filled(frames, (0, 135, 0)), work / "green.mp4", clip.plan.fps), _controls(clip))


def wrong_move(clip: Clip, frames: list[np.ndarray], work: Path) -> Faulted | None:
    """A different move made from the first frame: a pan (image shift) where the plan's main effect
    is growth or a roll, an image-wide zoom where it is a sideways or vertical move; as large as the
    plan's own move, and at least a tenth of the frame's width at its edge (a default pan turns
    30 degrees, a default zoom grows the picture 1.67 times)."""
    import cv2

    height, width = frames[0].shape[:2]
    amount = max(0.1 * width, _camera_px(clip, 0, len(frames) - 1))
    scale_kinds = ("static", "handheld", "dolly", "zoom", "dolly_zoom", "roll")
    pan = clip.shot.move.type in scale_kinds
    half_diagonal = 0.5 * math.hypot(width, height)
    out = []
    for i in range(len(frames)):
        t = i / max(len(frames) - 1, 1)
        if pan:
            matrix = np.float32([[1, 0, -amount * t], [0, 1, 0]])
        else:
            s = 1.0 + t * amount / half_diagonal
            matrix = np.float32([[s, 0, (1 - s) * width / 2], [0, s, (1 - s) * height / 2]])
        out.append(cv2.warpAffine(frames[0], matrix, (width, height), flags=cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_REFLECT))
    return Faulted(_write(out, work / "wrong_move.mp4", clip.plan.fps), _controls(clip))


def subject_hidden(clip: Clip, frames: list[np.ndarray], work: Path) -> Faulted | None:
    """A grey board stands in front of the subject all shot: drawn into the picture, the mask
    (background) and the depth (10 cm from the lens). Only where the subject is in view."""
    value = clip.shot.characters.index(clip.shot.subject) + 1
    masks = list(decode_gray(clip.mask))
    depths = list(decode_gray(clip.depth))
    if sum(bool((m == value).any()) for m in masks) < 0.5 * len(masks):
        return None
    pictures, new_masks, new_depths = [], [], []
    for frame, mask, depth in zip(frames, masks, depths, strict=True):
        frame, mask, depth = frame.copy(), mask.copy(), depth.copy()
        rows, cols = np.nonzero(mask == value)
        if rows.size:
            pad_r = max(2, int(0.1 * (rows.max() - rows.min())))
            pad_c = max(2, int(0.1 * (cols.max() - cols.min())))
            r0, r1 = max(rows.min() - pad_r, 0), rows.max() + pad_r + 1
            c0, c1 = max(cols.min() - pad_c, 0), cols.max() + pad_c + 1
            frame[r0:r1, c0:c1] = 128
            mask[r0:r1, c0:c1] = 0
            depth[r0:r1, c0:c1] = 100  # mm
        pictures.append(frame)
        new_masks.append(mask)
        new_depths.append(depth)
    write_gray8(new_masks, work / "hidden_mask.mkv", clip.plan.fps)
    write_gray16(new_depths, work / "hidden_depth.mkv", clip.plan.fps)
    return Faulted(_write(pictures, work / "hidden.mp4", clip.plan.fps),
                   {"depth": work / "hidden_depth.mkv", "mask": work / "hidden_mask.mkv"})


def starved_encode(clip: Clip, frames: list[np.ndarray], work: Path) -> Faulted | None:
    """The shot re-encoded at CRF 42, checked against its correct frames."""
    video = _write(frames, work / "starved.mp4", clip.plan.fps, EncodeSettings(crf=42))
    samples = {i: frames[i] for i in fidelity_sample_indexes(len(frames))}
    return Faulted(video, _controls(clip), samples)


# name -> (maker, the check that must catch it)
FAULTS: dict[str, tuple[Callable[[Clip, list[np.ndarray], Path], Faulted | None], str]] = {
    "reversed_move": (reversed_move, "camera"),
    "frozen_run": (frozen_run, "frames"),
    "dropped_frames": (dropped_frames, "format"),
    "wrong_move": (wrong_move, "camera"),
    "subject_hidden": (subject_hidden, "subject"),
    "black_frames": (black_frames, "frames"),
    "green_frames": (green_frames, "frames"),
    "wrong_length": (wrong_length, "format"),
    "starved_encode": (starved_encode, "fidelity"),
}


# --------------------------------------------------------------------------- running


def _failing(entry: dict[str, Any]) -> dict[str, str]:
    """check -> failing text of a qc.json shot entry."""
    return {v["check"]: v["text"] for v in entry["verdicts"] if not v["ok"]}


def _checked(entry: dict[str, Any]) -> set[str]:
    return {v["check"] for v in entry["verdicts"]}


def render_corpus(cases: list[Case], size: str, out: Path) -> tuple[Plan, dict[str, Any], float]:
    """Render the corpus through the pipeline (QC included); (plan, qc.json, seconds)."""
    plan = plan_script(validate_script(script_for(cases, size)))
    began = time.perf_counter()
    for event in run(plan, out, PipelineSettings()):
        if isinstance(event, Finished):
            break
    return plan, json.loads((out / "qc.json").read_text(encoding="utf-8")), time.perf_counter() - began


def measure(cases: list[Case], size: str, out: Path, faults: tuple[str, ...],
            every: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Render, check, break, check again; the JSON summary."""
    plan, qc, render_s = render_corpus(cases, size, out)
    log(f"rendered and checked {len(cases)} shots in {render_s:.0f} s")
    layout = RenderLayout.find(out)
    correct = []
    for case, entry in zip(cases, qc["shots"], strict=True):
        # a shot the planner warns about (the camera goes below the ground) is no correct clip:
        # the QC failing it is right, so it is left out of the false-alarm rates and not broken further
        warned = list(plan.shot(case.shot_id).warnings)
        correct.append({"case": asdict(case), "ok": entry["ok"], "plan_warnings": warned, "failing": _failing(entry),
                        "checked": sorted(_checked(entry)),
                        "camera_checked": (entry.get("camera") or {}).get("checked"),
                        "warnings": entry["warnings"]})
    faulted = []
    began = time.perf_counter()
    for n, case in enumerate(cases):
        shot = plan.shot(case.shot_id)
        if shot.warnings:
            continue
        clip = Clip(plan, shot, layout.shot(shot.shot_id), layout.depth(shot.shot_id), layout.mask(shot.shot_id))
        frames = list(decode_frames(clip.video))
        for k, name in enumerate(faults):
            if (n + k) % every:  # each fault on every ``every``-th clip, staggered
                continue
            maker, check = FAULTS[name]
            work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=out))
            try:
                broken = maker(clip, frames, work)
                if broken is None:
                    continue
                entry = check_shot(plan, shot, broken.video, broken.samples, controls=broken.controls)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            failing = _failing(entry)
            log(f"  {name} on {case.shot_id}: {'caught' if check in failing else 'MISSED'} "
                f"(failed: {', '.join(sorted(failing)) or 'nothing'})")
            faulted.append({"case": asdict(case), "fault": name, "check": check, "caught": check in failing,
                            "caught_by": sorted(failing), "text": failing.get(check) or entry["summary"]})
    log(f"checked {len(faulted)} faulted clips in {time.perf_counter() - began:.0f} s")
    return {"size": size, "shots": len(cases), "correct": correct, "faulted": faulted,
            "rates": rates(correct, faulted)}


def rates(correct: list[dict[str, Any]], faulted: list[dict[str, Any]]) -> dict[str, Any]:
    """Per check: false alarms over the correct shots it judged, misses over the faults it owns."""
    table = {}
    correct = [c for c in correct if not c["plan_warnings"]]
    seen = {check for c in correct for check in c["checked"]}
    for check in [*CHECKS, *sorted(seen - set(CHECKS))]:
        judged = correct if check in ALWAYS_JUDGED else [c for c in correct if check in c["checked"]]
        alarms = [c for c in judged if check in c["failing"]]
        owned = [f for f in faulted if f["check"] == check]
        missed = [f for f in owned if not f["caught"]]
        table[check] = {"judged": len(judged), "false_alarms": len(alarms),
                        "false_alarm_rate": len(alarms) / len(judged) if judged else None,
                        "faults": len(owned), "misses": len(missed),
                        "miss_rate": len(missed) / len(owned) if owned else None}
    by_fault = {}
    for name in FAULTS:
        owned = [f for f in faulted if f["fault"] == name]
        if owned:
            by_fault[name] = {"check": FAULTS[name][1], "clips": len(owned),
                              "missed": sum(not f["caught"] for f in owned),
                              "failed_at_all": sum(bool(f["caught_by"]) for f in owned)}
    return {"checks": table, "faults": by_fault}


def _rate(count: int, total: int) -> str:
    return f"{count:>3}/{total:<3} ({count / total:6.1%})" if total else f"{'-':>16}"


def print_report(summary: dict[str, Any]) -> None:
    table = summary["rates"]
    print(f"\nQC bench: {summary['shots']} shots at {summary['size']}, "
          f"{len(summary['faulted'])} faulted clips")
    print(f"{'check':<10} {'false alarms (correct)':>24} {'misses (faulted)':>24}")
    for check, row in table["checks"].items():
        print(f"{check:<10} {_rate(row['false_alarms'], row['judged']):>24} {_rate(row['misses'], row['faults']):>24}")
    print(f"\n{'fault':<16} {'check':<9} {'missed':>16} {'failed at all':>16}")
    for name, row in table["faults"].items():
        print(f"{name:<16} {row['check']:<9} {_rate(row['missed'], row['clips']):>16} "
              f"{_rate(row['failed_at_all'], row['clips']):>16}")
    unchecked = [c["case"]["shot_id"] for c in summary["correct"] if c["camera_checked"] is False]
    if unchecked:
        print(f"\ncamera not checked (too little texture): {', '.join(unchecked)}")
    warned = [c for c in summary["correct"] if c["plan_warnings"]]
    if warned:
        print("\nleft out, the plan warns (what the QC says):")
        for c in warned:
            case = c["case"]
            print(f"  {case['shot_id']} ({case['framing']}, {case['angle']}, {case['lens_mm']} mm): "
                  f"{'; '.join(c['plan_warnings'])} ({'; '.join(c['failing'].values()) or 'passes'})")
    alarms = [c for c in summary["correct"] if c["failing"] and not c["plan_warnings"]]
    if alarms:
        print("\nfalse alarms:")
        for c in alarms:
            case = c["case"]
            for check, text in c["failing"].items():
                print(f"  {case['shot_id']} ({case['framing']}, {case['angle']}, {case['lens_mm']} mm"
                      f"{', walking' if case['walking'] else ''}) {check}: {text}")
    misses = [f for f in summary["faulted"] if not f["caught"]]
    if misses:
        print("\nmisses:")
        for f in misses:
            case = f["case"]
            print(f"  {f['fault']} on {case['shot_id']} ({case['framing']}, {case['angle']}, {case['lens_mm']} mm"
                  f"{', walking' if case['walking'] else ''}): {f['check']} says: {f['text']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every move, framing, angle and lens at least once")
    parser.add_argument("--size", default=None, help="frame size (default: preview)")
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated faults to inject")
    parser.add_argument("--every", type=int, default=None,
                        help="inject each fault into every N-th clip (default: 1 with --quick, 3 in full)")
    parser.add_argument("--only", default="", help="comma-separated moves to keep (for a closer look)")
    parser.add_argument("--json", type=Path, default=None, help="write the summary here")
    parser.add_argument("--keep", type=Path, default=None, help="render into this folder and keep it")
    args = parser.parse_args(argv)
    faults = tuple(f for f in args.faults.split(",") if f)
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        parser.error(f"--faults: {', '.join(unknown)} unknown; choose from {', '.join(FAULTS)}")
    size = args.size or "preview"
    every = args.every or (1 if args.quick else 3)
    cases = corpus(args.quick)
    if args.only:
        keep = set(args.only.split(","))
        cases = [c for c in cases if c.move in keep]
    out = args.keep or Path(tempfile.mkdtemp(prefix="daotai-qc-bench-"))
    try:
        summary = measure(cases, size, out, faults, every, lambda line: print(line, file=sys.stderr))
    finally:
        if args.keep is None:
            shutil.rmtree(out, ignore_errors=True)
    print_report(summary)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    table = summary["rates"]["checks"].values()
    return 0 if all(r["false_alarms"] == 0 and r["misses"] == 0 for r in table) else 1


if __name__ == "__main__":
    raise SystemExit(main())
