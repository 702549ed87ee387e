"""qc.json: does each delivered file match the plan, survive encoding, and move as planned?

Per shot (daotai.qc.shot.check_shot): size / fps / frame count / colour tags against the plan;
black, green and frozen frames (a freeze is a fault where the plan moves the picture); camera
adherence (motion measured from the pixels vs the planned camera); the subject in view (from the
mask control, else the plan's geometry); encode fidelity (PSNR of decoded frames against the
rendered ones: mean ≥ 38.5 dB and no frame starved; a spread over 1.2 dB is a warning); sound.
For the sequence: frame count and duration against the plan (transitions included).

This module hands a render's shots and its sequence to the checks (in worker processes,
daotai.qc.parallel), gathers their entries into the report and writes qc.json.

Each shot entry carries ``verdicts`` (one per check: check, ok, text), ``failures`` (the
failing verdicts' texts), ``warnings`` and ``summary``: one line, failing checks first, that
the CLI and the console show; the numbers for engineers stay under each check's own key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from daotai.errors import EncodeError
from daotai.files import atomic_write_text
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan, ShotPlan
from daotai.qc.audio import add_audio_entry
from daotai.qc.fades import unexplained_black
from daotai.qc.shot import check_shot, finish_shot
from daotai.render.base import Progress


@dataclass
class QcReport:
    ok: bool
    shots: list[dict[str, Any]]
    sequence: dict[str, Any] | None
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files: dict[str, Any] | None = None  # the folder's files against manifest.json (daotai qc)
    identity: dict[str, Any] | None = None  # each character's look across shots (daotai.qc.identity)

    def to_dict(self) -> dict[str, Any]:
        data = {"ok": self.ok, "failures": self.failures, "warnings": self.warnings,
                "shots": self.shots, "sequence": self.sequence}
        if self.files is not None:
            data["files"] = self.files
        if self.identity is not None:
            data["identity"] = self.identity
        return data

    def summary_text(self) -> str:
        """A few plain lines for the terminal: per shot its verdict, what failed first."""
        lines = [f"qc {'passed' if self.ok else 'FAILED'}: {len(self.shots)} shots"]
        for shot in self.shots:
            text = shot.get("summary") or "; ".join(shot.get("failures") or []) or "checked"
            lines.append(f"  {shot['shot_id']}: {'ok' if shot['ok'] else 'FAIL'}: {text}")
            lines.extend(f"    note: {w}" for w in shot.get("warnings") or [])
        if self.sequence is not None and not self.sequence.get("ok", True):
            lines.append(f"  sequence: FAIL: {'; '.join(self.sequence['failures'])}")
        if self.files is not None and not self.files.get("ok", True):
            lines.extend(f"  files: {problem}" for problem in self.files["problems"])
        if self.sequence is None:
            lines.append("  sequence: missing")
        return "\n".join(lines)


def _picture_box(plan: Plan) -> tuple[float, float, float, float] | None:
    """(left, top, right, bottom) of the picture inside a letterboxed sequence, as shares of the frame's
    width and height; None when it fills the frame."""
    from daotai.script.aspect import bars

    if plan.letterbox is None:
        return None
    (width, height), (left, top) = plan.letterbox, bars(plan.letterbox, (plan.width, plan.height))
    return left / width, top / height, (left + plan.width) / width, (top + plan.height) / height


def check_sequence(plan: Plan, path: Path, audio: bool | None = None) -> dict[str, Any]:
    """The assembled sequence against the plan's total frames and duration (and its sound: ``audio``
    says whether it should have any, by default when the plan has a soundtrack)."""
    from daotai.encode.video import probe
    from daotai.qc.metrics import scan_video

    try:
        info = probe(path)
    except EncodeError as exc:
        return {"file": path.name, "ok": False, "failures": [f"cannot read the file: {exc}"]}
    failures = []
    if info.frames != plan.total_frames:
        failures.append(f"{info.frames} frames, the plan has {plan.total_frames}")
    expected = plan.total_frames / float(Fraction(*plan.fps_fraction))
    if abs(info.duration_s - expected) > 0.5 / plan.fps:
        failures.append(f"duration {info.duration_s:.3f} s, the plan has {expected:.3f} s")
    width, height = plan.delivery_size  # a letterboxed sequence: the frame round the picture
    if (info.width, info.height) != (width, height):
        failures.append(f"size {info.width}x{info.height} differs from the plan's {width}x{height}")
    # Black and green frames are judged on the picture, not on the bars round it: bars are black by design
    scan = scan_video(path, picture=_picture_box(plan) if (info.width, info.height) == (width, height) else None)
    # Fades the plan asks for (transitions and the film's fade_out) pass through black on purpose;
    # a black frame outside them is a fault.
    stray = unexplained_black(scan.black_frames, plan)
    if stray:
        failures.append(f"{len(stray)} black frame(s) outside the planned fades, first at frame {stray[0]}")
    if scan.green_frames:
        failures.append(f"{len(scan.green_frames)} green frame(s)")
    entry: dict[str, Any] = {
        "file": path.name,
        "frames": info.frames,
        "duration_s": info.duration_s,
        "planned_frames": plan.total_frames,
        "black_frames": len(scan.black_frames),
    }
    failures += add_audio_entry(entry, path, expected, plan.soundtrack is not None if audio is None else audio)
    return {**entry, "ok": not failures, "failures": failures}


def check_render(plan: Plan, out_dir: Path, records, camera: bool = True,
                 layout: RenderLayout | None = None,
                 known: Mapping[str, dict[str, Any]] | None = None,
                 checks: Any = None) -> Iterator[Progress]:
    """Check a finished render (samples kept while rendering); writes qc.json; returns the report.

    ``layout``: the run's file names (its container); by default read from the folder.
    ``known``: shot id → the qc.json entry of a shot whose files are unchanged since it was
    checked (an incremental render's reused shots); taken as it is, not checked again.
    ``checks``: a :class:`daotai.qc.parallel.ShotChecks` the run handed shots to as they
    finished (the rest are handed in here); None: one is made here for this call.
    """
    from daotai.qc.parallel import ShotChecks

    layout = layout or RenderLayout.find(out_dir)
    known = known or {}
    todo = [(shot, record) for shot, record in zip(plan.shots, records, strict=False) if shot.shot_id not in known]
    own = checks is None
    if own:
        checks = ShotChecks(plan, workers=None if len(todo) > 1 else 0)
    try:
        for shot, record in todo:
            if not checks.has(f"shot:{shot.shot_id}"):
                hand_in_shot(checks, plan, shot, record, out_dir, camera)
        # the sequence has sound when there is a soundtrack or a shot's own sound is not muted
        mixed = plan.soundtrack is not None or any(
            (getattr(r, "audio", None) or {}).get("source") == "backend" and not (s.sound is not None and s.sound.mute)
            for s, r in zip(plan.shots, records, strict=True))
        if layout.sequence.is_file():
            hand_in_sequence(checks, layout.sequence, audio=mixed)
        shots = []
        for i, shot in enumerate(plan.shots[:len(records)]):
            if shot.shot_id in known:
                shots.append(known[shot.shot_id])
                continue
            yield Progress("qc", shot.shot_id, i, len(plan.shots), f"checking shot {i + 1} of {len(plan.shots)}")
            shots.append(shot_result(checks, shot.shot_id))
        yield Progress("qc", None, len(plan.shots), len(plan.shots), "checking the sequence")
        sequence = checks.result("sequence") if layout.sequence.is_file() else None
    except BaseException:
        if own:
            checks.close(cancel=True)
        raise
    if own:
        checks.close()
    return _finish(layout, shots, sequence)


def hand_in_shot(checks: Any, plan: Plan, shot: ShotPlan, record: Any, out_dir: Path, camera: bool) -> None:
    """Hand one rendered shot (its record: files relative to ``out_dir``, fidelity samples, sound)
    to a :class:`daotai.qc.parallel.ShotChecks` (key ``shot:<id>``), checked as :func:`check_render` checks it."""
    controls = {k: out_dir / record.files[k] for k in ("depth", "mask") if k in record.files}
    sound = getattr(record, "audio", None) or {}
    hand_in_file(checks, shot.shot_id, out_dir / record.files["shot"], record.samples, camera, controls=controls,
                 audio=plan.soundtrack is not None or bool(sound))


def hand_in_file(checks: Any, shot_id: str, path: Path, samples: dict[int, np.ndarray] | None, camera: bool = True,
                 controls: dict[str, Path] | None = None, labels: bool = True, audio: bool | None = None) -> None:
    """Hand a shot file to a ShotChecks for :func:`daotai.qc.shot.check_shot` (key ``shot:<id>``; and
    where the ShotChecks has workers to spare, its camera path apart, key ``path:<id>``)."""
    apart = camera and bool(getattr(checks, "split_paths", False))
    files = {k: str(v) for k, v in controls.items()} if controls is not None else None
    checks.submit(f"shot:{shot_id}", _shot_entry, (shot_id, str(path), samples, camera, files, labels, audio, apart))
    if apart:
        checks.submit(f"path:{shot_id}", _path_measure, (shot_id, str(path), files, labels))


def shot_result(checks: Any, shot_id: str) -> dict[str, Any]:
    """The qc.json entry of a shot handed in with :func:`hand_in_file` (waits for its jobs)."""
    from daotai.qc.shot import complete_shot

    entry = checks.result(f"shot:{shot_id}")
    measured = checks.result(f"path:{shot_id}") if checks.has(f"path:{shot_id}") else None
    return complete_shot(entry, measured)


def hand_in_sequence(checks: Any, path: Path, audio: bool | None = None) -> None:
    """Hand the assembled sequence to a ShotChecks for :func:`check_sequence` (key ``sequence``): to a
    worker where the shots' checks started them, else checked here (a render whose every shot was
    reused checks only the sequence, and starting the workers for it took longer than the check)."""
    checks.submit("sequence", _sequence_entry, (str(path), audio), start=False)


def _shot_entry(plan: Plan, shot_id: str, path: str, samples: dict[int, np.ndarray] | None, camera: bool,
                controls: dict[str, str] | None, labels: bool, audio: bool | None, apart: bool = False) -> Any:
    return check_shot(plan, plan.shot(shot_id), Path(path), samples, camera,
                      controls={k: Path(v) for k, v in controls.items()} if controls is not None else None,
                      labels=labels, audio=audio, path_apart=apart)


def _path_measure(plan: Plan, shot_id: str, path: str, controls: dict[str, str] | None, labels: bool) -> Any:
    from daotai.qc.shot import measure_camera_path

    return measure_camera_path(plan, plan.shot(shot_id), Path(path),
                               {k: Path(v) for k, v in controls.items()} if controls is not None else None, labels)


def _sequence_entry(plan: Plan, path: str, audio: bool | None) -> dict[str, Any]:
    return check_sequence(plan, Path(path), audio=audio)


def _finish(layout: RenderLayout, shots: list[dict[str, Any]], sequence: dict[str, Any] | None,
            files: dict[str, Any] | None = None) -> QcReport:
    from daotai.qc.identity import apply_identity

    identity = apply_identity(shots, finish_shot)  # a look that changed fails the shot it changed in
    failures = [f"{s['shot_id']}: {f}" for s in shots for f in s["failures"]]
    if sequence is None:
        failures.append("sequence: missing")
    else:
        failures += [f"sequence: {f}" for f in sequence["failures"]]
    if files is not None:
        failures += [f"files: {problem}" for problem in files["problems"]]
    warnings = [f"{s['shot_id']}: {w}" for s in shots for w in s.get("warnings") or []]
    report = QcReport(ok=not failures, shots=shots, sequence=sequence, failures=failures,
                      warnings=warnings, files=files, identity=identity)
    atomic_write_text(layout.qc, json.dumps(report.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    return report


def finish_report(layout: RenderLayout, shots: list[dict[str, Any]], sequence: dict[str, Any] | None,
                  files: dict[str, Any] | None = None) -> QcReport:
    """Gather shot and sequence results (and, for ``daotai qc``, the folder's files against its
    manifest) into a report and write qc.json (atomically)."""
    return _finish(layout, shots, sequence, files)
