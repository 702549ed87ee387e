"""qc.json: does each delivered file match the plan, survive encoding, and move as planned?

Per shot: size / fps / frame count / colour tags against the plan; black, green and frozen
frames; encode fidelity (PSNR of decoded frames against the rendered ones: mean ≥ 38.5 dB,
std ≤ 1.2 dB); camera adherence (motion measured from the pixels vs the planned camera).
For the sequence: frame count and duration against the plan (transitions included).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from daotai.deliver.files import atomic_write_text
from daotai.errors import DaotaiError, EncodeError
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import Progress

PSNR_MEAN_MIN_DB = 38.5
PSNR_STD_MAX_DB = 1.2
FIGURE_RADIUS_M = 0.32  # proxy body plus swinging arms, for a 1.75 m figure


@dataclass
class QcReport:
    ok: bool
    shots: list[dict[str, Any]]
    sequence: dict[str, Any] | None
    failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "failures": self.failures, "shots": self.shots, "sequence": self.sequence}

    def summary_text(self) -> str:
        """A few plain lines for the terminal."""
        lines = [f"qc {'passed' if self.ok else 'FAILED'}: {len(self.shots)} shots"]
        for shot in self.shots:
            cam = shot.get("camera") or {}
            fidelity = shot.get("fidelity") or {}
            psnr = fidelity.get("psnr_mean_db")
            lines.append(
                f"  {shot['shot_id']}: {'ok' if shot['ok'] else 'FAIL'}"
                + (f"; PSNR {psnr:.1f} dB" if isinstance(psnr, (int, float)) else "")
                + (f"; camera: {cam.get('summary')}" if cam else "")
            )
        lines.extend(f"  failure: {f}" for f in self.failures)
        return "\n".join(lines)


def shot_expects_motion(shot: ShotPlan) -> bool:
    """True when the camera moves or someone walks: a frozen picture would then be a fault."""
    move = shot.move
    camera_moves = any(move.motion) or any(move.rotate) or move.orbit or move.fov_end != move.fov or move.shake
    walking = any(c.walking for frame in shot.character_frames for c in frame)
    return bool(camera_moves or walking)


def _depth_models(plan: Plan, shot: ShotPlan):
    from daotai.qc.camera import Cylinder, DepthModel, Solid

    heights = {c.id: c.height for c in plan.characters}
    pieces = tuple(Solid.placed(p.kind, p.position, p.size, p.yaw) for p in plan.scene.set_pieces)
    models = []
    for frame in shot.character_frames:
        cylinders = tuple(
            Cylinder(
                center_x=c.position[0],
                center_z=c.position[1],
                radius=FIGURE_RADIUS_M * heights[c.id] / 1.75,
                height=heights[c.id],
            )
            for c in frame
        )
        models.append(DepthModel(occluders=pieces + cylinders))
    return models


def _check_format(shot: ShotPlan, plan: Plan, info) -> list[str]:
    problems = []
    if (info.width, info.height) != (plan.width, plan.height):
        problems.append(f"size {info.width}x{info.height} differs from the plan's {plan.width}x{plan.height}")
    if info.fps != Fraction(*plan.fps_fraction):
        problems.append(f"fps {info.fps} differs from the plan's {Fraction(*plan.fps_fraction)}")
    if info.frames != shot.frames:
        problems.append(f"{info.frames} frames, the plan has {shot.frames}")
    return problems


def check_shot(plan: Plan, shot: ShotPlan, path: Path, samples: dict[int, np.ndarray] | None,
               camera: bool = True) -> dict[str, Any]:
    """Every check of one shot file; returns its qc.json entry (``ok`` and ``failures`` included)."""
    from daotai.encode.video import decode_frames, probe
    from daotai.qc.camera import check_camera
    from daotai.qc.metrics import psnr, scan_video

    entry: dict[str, Any] = {"shot_id": shot.shot_id, "file": path.name}
    failures: list[str] = []
    try:
        info = probe(path)
    except EncodeError as exc:
        return {**entry, "ok": False, "failures": [f"cannot read the file: {exc}"]}
    entry["format"] = {
        "width": info.width, "height": info.height, "fps": str(info.fps), "frames": info.frames,
        "duration_s": info.duration_s, "codec": info.codec, "pix_fmt": info.pix_fmt,
        "colorspace": info.colorspace, "faststart": info.faststart,
    }
    failures += _check_format(shot, plan, info)

    scan = scan_video(path)
    expects_motion = shot_expects_motion(shot)
    entry["frames"] = {
        "black": list(scan.black_frames),
        "green": list(scan.green_frames),
        "frozen_runs": [list(r) for r in scan.frozen_runs],
        "frozen_expected": not expects_motion,
        "flicker": round(float(scan.flicker), 4),
    }
    if scan.black_frames:
        failures.append(f"{len(scan.black_frames)} black frame(s), first at {scan.black_frames[0]}")
    if scan.green_frames:
        failures.append(f"{len(scan.green_frames)} green frame(s), first at {scan.green_frames[0]}")
    if expects_motion and scan.frozen_runs:
        start, length = scan.frozen_runs[0]
        failures.append(f"picture frozen for {length} frames from frame {start} while the plan moves")

    decoded_samples: dict[int, np.ndarray] = {}
    wanted = set(samples or {})

    def frames_with_capture() -> Iterator[np.ndarray]:
        for index, frame in enumerate(decode_frames(path)):
            if index in wanted:
                decoded_samples[index] = frame
            yield frame

    cams = np.array([c.cam_to_world for c in shot.cameras], dtype=np.float64).reshape(-1, 4, 4)
    fovs = np.array([c.fov for c in shot.cameras], dtype=np.float64)
    if camera and shot.frames >= 2:
        adherence = check_camera(frames_with_capture(), cams, fovs, _depth_models(plan, shot))
        entry["camera"] = adherence.to_dict()
        if not adherence.ok:
            failures.append(f"camera: {adherence.summary}")
    elif wanted:
        for _ in frames_with_capture():
            pass

    if samples:
        values = [psnr(samples[i], decoded_samples[i]) for i in sorted(samples) if i in decoded_samples]
        finite = [v for v in values if math.isfinite(v)]
        mean = float(np.mean(finite)) if finite else math.inf
        std = float(np.std(finite)) if len(finite) > 1 else 0.0
        entry["fidelity"] = {
            "frames_compared": len(values),
            "psnr_mean_db": round(mean, 3) if math.isfinite(mean) else None,
            "psnr_std_db": round(std, 3),
            "psnr_min_db": round(min(finite), 3) if finite else None,
            "rule": f"mean >= {PSNR_MEAN_MIN_DB} dB and std <= {PSNR_STD_MAX_DB} dB",
        }
        if len(values) != len(samples):
            failures.append(f"only {len(values)} of {len(samples)} sampled frames could be decoded")
        elif math.isfinite(mean) and (mean < PSNR_MEAN_MIN_DB or std > PSNR_STD_MAX_DB):
            failures.append(f"encode fidelity: PSNR mean {mean:.2f} dB, std {std:.2f} dB (needs ≥ {PSNR_MEAN_MIN_DB}, ≤ {PSNR_STD_MAX_DB})")
    entry["ok"] = not failures
    entry["failures"] = failures
    return entry


def check_sequence(plan: Plan, path: Path) -> dict[str, Any]:
    """The assembled sequence against the plan's total frames and duration."""
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
    if (info.width, info.height) != (plan.width, plan.height):
        failures.append(f"size {info.width}x{info.height} differs from the plan's {plan.width}x{plan.height}")
    scan = scan_video(path)
    fades = sum(2 * s.transition.frames for s in plan.shots if s.transition.type == "fade")
    # Fades legitimately pass through black; anything beyond them is a fault.
    if len(scan.black_frames) > fades:
        failures.append(f"{len(scan.black_frames)} black frames, fades account for at most {fades}")
    if scan.green_frames:
        failures.append(f"{len(scan.green_frames)} green frame(s)")
    return {
        "file": path.name,
        "frames": info.frames,
        "duration_s": info.duration_s,
        "planned_frames": plan.total_frames,
        "black_frames": len(scan.black_frames),
        "ok": not failures,
        "failures": failures,
    }


def check_render(plan: Plan, out_dir: Path, records, camera: bool = True) -> Iterator[Progress]:
    """Check a finished render (samples kept while rendering); writes qc.json; returns the report."""
    shots = []
    for i, (shot, record) in enumerate(zip(plan.shots, records)):
        yield Progress("qc", shot.shot_id, i, len(plan.shots))
        shots.append(check_shot(plan, shot, out_dir / record.files["shot"], record.samples, camera))
    yield Progress("qc", None, len(plan.shots), len(plan.shots))
    sequences = sorted(out_dir.glob("sequence.*"))
    sequence = check_sequence(plan, sequences[0]) if sequences else None
    return _finish(out_dir, shots, sequence)


def _finish(out_dir: Path, shots: list[dict[str, Any]], sequence: dict[str, Any] | None) -> QcReport:
    failures = [f"{s['shot_id']}: {f}" for s in shots for f in s["failures"]]
    if sequence is None:
        failures.append("sequence: missing")
    else:
        failures += [f"sequence: {f}" for f in sequence["failures"]]
    report = QcReport(ok=not failures, shots=shots, sequence=sequence, failures=failures)
    atomic_write_text(out_dir / "qc.json", json.dumps(report.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    return report


def check_folder(folder: Path, console=None) -> QcReport:
    """Re-run qc on a render folder. Previz renders are deterministic, so the sampled frames
    for the fidelity check are rendered again from plan.json rather than trusted from disk."""
    from daotai.pipeline import _sample_indexes
    from daotai.plan.planner import plan_from_json

    folder = Path(folder)
    plan_path = folder / "plan.json"
    if not plan_path.is_file():
        raise DaotaiError(f"{folder}: has no plan.json; is it a daotai render folder?")
    plan = plan_from_json(plan_path.read_text(encoding="utf-8"))
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    settings = manifest.get("settings", {})
    backend = settings.get("backend", "previz")
    shots = []
    renderer = None
    try:
        for shot in plan.shots:
            files = next((s["files"] for s in manifest.get("shots", []) if s["shot_id"] == shot.shot_id), None)
            rel = files["shot"] if files else next((p.relative_to(folder).as_posix() for p in (folder / "shots").glob(f"{shot.shot_id}.*")), None)
            if rel is None:
                shots.append({"shot_id": shot.shot_id, "ok": False, "failures": ["shot file missing"]})
                continue
            samples = None
            if backend == "previz":
                from daotai.render.previz.backend import PrevizBackend, frame_states

                renderer = renderer or PrevizBackend()
                wanted = _sample_indexes(shot.frames)
                gl = renderer._renderer_for(plan)
                samples = {i: gl.render(state).rgb for i, state in enumerate(frame_states(plan, shot)) if i in wanted}
            if console is not None:
                console.print(f"[dim]checking {shot.shot_id}…[/dim]")
            shots.append(check_shot(plan, shot, folder / rel, samples))
    finally:
        if renderer is not None:
            renderer.close()
    sequences = sorted(folder.glob("sequence.*"))
    sequence = check_sequence(plan, sequences[0]) if sequences else None
    return _finish(folder, shots, sequence)
