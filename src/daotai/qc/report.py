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

from daotai.errors import DaotaiError, EncodeError, QualityError
from daotai.files import atomic_write_text
from daotai.plan import geometry
from daotai.plan.layout import RenderLayout
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


# A frozen run is a fault only if the plan moves the picture at least this much per frame
# inside it: consecutive-frame differences cannot tell an eased start (sub-pixel steps)
# from a freeze, the plan can.
FROZEN_MOTION_PX_PER_FRAME = 1.0


def planned_motion_px(plan: Plan, shot: ShotPlan, first: int, last: int) -> float:
    """How far (px) the plan moves the picture between two frames: camera turn, travel
    relative to the subject distance, zoom, and walking characters (an upper-bound sketch,
    enough to tell an eased start, which barely moves, from a real freeze)."""
    if last <= first:
        return 0.0
    a = np.array(shot.cameras[first].cam_to_world).reshape(4, 4)
    b = np.array(shot.cameras[last].cam_to_world).reshape(4, 4)
    focal = geometry.focal_from_fov(shot.cameras[first].fov, plan.height)  # px
    relative = a[:3, :3].T @ b[:3, :3]
    turn = math.acos(max(-1.0, min(1.0, (np.trace(relative) - 1.0) / 2.0)))
    travel = float(np.linalg.norm(b[:3, 3] - a[:3, 3])) / max(shot.subject_distance, 0.5)
    zoom = abs(geometry.focal_from_fov(shot.cameras[last].fov, plan.height) - focal)  # px: change of focal length
    walked = max(
        (math.dist(p.position, q.position) for p, q in zip(shot.character_frames[first], shot.character_frames[last])),
        default=0.0,
    ) / max(shot.subject_distance, 0.5)
    return focal * (turn + travel + walked) + zoom


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


# previz draws each visible character's name in a box just above the head: a screen-space
# overlay, snapped to whole pixels, that follows no surface of the depth map. Its box is at
# most about LABEL_HEIGHT_EM font sizes tall and LABEL_EM_PER_CHAR per character wide (plus
# LABEL_EXTRA_EM for the dot and padding); the font size is at most max(11, H / 22) px.
LABEL_HEIGHT_EM = 2.6
LABEL_EM_PER_CHAR = 1.0
LABEL_EXTRA_EM = 2.0


def _label_boxes(mask: np.ndarray, names: list[str]) -> np.ndarray:
    """(H, W) bool: where previz may have drawn name labels above the characters of ``mask``."""
    height, width = mask.shape
    size = max(11.0, height / 22.0)  # px, the largest label font
    box_h = math.ceil(LABEL_HEIGHT_EM * size)
    out = np.zeros(mask.shape, dtype=bool)
    for value, name in enumerate(names, start=1):
        rows = np.flatnonzero((mask == value).any(axis=1))
        if rows.size == 0:
            continue
        top = int(rows[0])
        centre = float(np.flatnonzero(mask[top] == value).mean())
        half = math.ceil(0.5 * size * (LABEL_EXTRA_EM + LABEL_EM_PER_CHAR * len(name)))
        # The renderer keeps the whole box inside the frame, so a box cut by an image edge
        # is shifted inward: clamp the same way.
        y0 = min(max(top - box_h, 0), max(height - box_h, 0))
        x0 = min(max(round(centre) - half, 0), max(width - 2 * half, 0))
        out[y0 : max(top, y0 + box_h), x0 : x0 + 2 * half] = True
    return out


class _ControlDepthMaps:
    """Frame index -> DepthMap, decoded lazily from a shot's depth (and mask) control files.

    Frames are read in order as check_camera asks for them (never backwards); pixels of
    walking characters (mask value j + 1 for the shot's j-th character) and, for previz, the
    name labels above every character are marked as moving on their own.
    """

    def __init__(self, shot: ShotPlan, depth_path: Path, mask_path: Path | None,
                 label_names: list[str] | None):
        from daotai.encode.video import decode_gray

        self._shot = shot
        self._depth = iter(decode_gray(depth_path))
        self._mask = iter(decode_gray(mask_path)) if mask_path is not None else None
        self._labels = label_names
        self._index = -1
        self._current = None

    def __call__(self, index: int):
        from daotai.qc.camera import DepthMap

        if index < self._index:
            raise QualityError(f"{self._shot.shot_id}: depth frame {index} asked for after "
                               f"frame {self._index}; control frames are read in order")
        while self._index < index:
            try:
                depth_mm = next(self._depth)  # (H, W) uint16 mm
                mask = next(self._mask) if self._mask is not None else None  # (H, W) uint8
            except StopIteration:
                raise QualityError(f"{self._shot.shot_id}: the depth control has fewer frames "
                                   f"than the {index + 1} the video needs") from None
            self._index += 1
            self._current = (depth_mm, mask)
        depth_mm, mask = self._current
        exclude = None
        if mask is not None:
            people = self._shot.character_frames[index]
            walkers = [j + 1 for j, person in enumerate(people) if person.walking]
            exclude = np.isin(mask, walkers) if walkers else np.zeros(mask.shape, dtype=bool)
            if self._labels:
                exclude |= _label_boxes(mask, self._labels)
        return DepthMap.from_millimetres(depth_mm, exclude)


def _label_names(plan: Plan, shot: ShotPlan) -> list[str]:
    """Per mask value - 1, the longest text previz may draw as the character's label."""
    characters = {c.id: c for c in plan.characters}
    people = shot.character_frames[0] if shot.character_frames else ()
    return [max(characters[p.id].name, p.id, key=len) for p in people]


def _control_paths(path: Path, shot: ShotPlan,
                   controls: dict[str, Path] | None) -> tuple[Path | None, Path | None]:
    """The shot's depth and mask control files where they exist (mask only with depth)."""
    if controls is None:
        layout = RenderLayout(path.parent.parent)  # the render folder that holds shots/
        controls = {"depth": layout.depth(shot.shot_id), "mask": layout.mask(shot.shot_id)}
    depth, mask = controls.get("depth"), controls.get("mask")
    if depth is None or not Path(depth).is_file():
        return None, None
    return Path(depth), (Path(mask) if mask is not None and Path(mask).is_file() else None)


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
               camera: bool = True, controls: dict[str, Path] | None = None,
               labels: bool = True, audio: bool | None = None) -> dict[str, Any]:
    """Every check of one shot file; returns its qc.json entry (``ok`` and ``failures`` included).

    Camera adherence predicts image motion from the shot's rendered depth when its depth
    control file exists (``controls`` maps "depth" / "mask" to files; by default
    ``control/<shot_id>_depth.mkv`` and ``_mask.mkv`` next to the ``shots`` folder), else from
    the geometric scene model of the plan; ``camera.depth_source`` records which
    ("control_depth" or "scene_model"). ``labels``: whether name labels were drawn over the
    characters (previz): their boxes are kept out of the camera check. Leaving it on for
    another backend only costs the few tracks above the characters. ``audio``: whether the
    file should carry sound (default: when the plan has a soundtrack); sound that is there is
    checked either way (:func:`daotai.qc.audio.check_audio`).
    """
    from daotai.encode.video import decode_frames, probe
    from daotai.qc.camera import DEPTH_MAP_CONFIG, CameraCheckConfig, check_camera
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
    faulty_runs = [(start, length) for start, length in scan.frozen_runs
                   if planned_motion_px(plan, shot, start, start + length - 1) / max(length - 1, 1)
                   >= FROZEN_MOTION_PX_PER_FRAME]
    entry["frames"]["frozen_faulty"] = [list(r) for r in faulty_runs]
    if faulty_runs:
        start, length = faulty_runs[0]
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
        depth_path, mask_path = _control_paths(path, shot, controls)
        if depth_path is not None:
            names = _label_names(plan, shot) if labels else None
            models = _ControlDepthMaps(shot, depth_path, mask_path, names)
            source, config = "control_depth", DEPTH_MAP_CONFIG
        else:
            models, source, config = _depth_models(plan, shot), "scene_model", CameraCheckConfig()
        adherence = check_camera(frames_with_capture(), cams, fovs, models, config=config)
        entry["camera"] = {**adherence.to_dict(), "depth_source": source,
                           "depth_file": depth_path.name if depth_path is not None else None,
                           "mask_file": mask_path.name if mask_path is not None else None}
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
    failures += _audio_checks(entry, path, shot.frames / float(Fraction(*plan.fps_fraction)),
                              plan.soundtrack is not None if audio is None else audio)
    entry["ok"] = not failures
    entry["failures"] = failures
    return entry


def _audio_checks(entry: dict[str, Any], path: Path, picture_s: float, planned: bool) -> list[str]:
    """Add the file's "audio" entry (only when it has sound or should have) and return its failures."""
    from daotai.qc.audio import check_audio

    sound, failures = check_audio(path, picture_s, planned)
    if sound is not None:
        entry["audio"] = sound
    return failures


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
    if (info.width, info.height) != (plan.width, plan.height):
        failures.append(f"size {info.width}x{info.height} differs from the plan's {plan.width}x{plan.height}")
    scan = scan_video(path)
    fades = sum(2 * s.transition.frames for s in plan.shots if s.transition.type == "fade")
    # Fades legitimately pass through black; anything beyond them is a fault.
    if len(scan.black_frames) > fades:
        failures.append(f"{len(scan.black_frames)} black frames, fades account for at most {fades}")
    if scan.green_frames:
        failures.append(f"{len(scan.green_frames)} green frame(s)")
    entry: dict[str, Any] = {
        "file": path.name,
        "frames": info.frames,
        "duration_s": info.duration_s,
        "planned_frames": plan.total_frames,
        "black_frames": len(scan.black_frames),
    }
    failures += _audio_checks(entry, path, expected, plan.soundtrack is not None if audio is None else audio)
    return {**entry, "ok": not failures, "failures": failures}


def check_render(plan: Plan, out_dir: Path, records, camera: bool = True,
                 layout: RenderLayout | None = None) -> Iterator[Progress]:
    """Check a finished render (samples kept while rendering); writes qc.json; returns the report.

    ``layout``: the run's file names (its container); by default read from the folder."""
    layout = layout or RenderLayout.find(out_dir)
    shots = []
    for i, (shot, record) in enumerate(zip(plan.shots, records)):
        yield Progress("qc", shot.shot_id, i, len(plan.shots))
        controls = {k: out_dir / record.files[k] for k in ("depth", "mask") if k in record.files}
        sound = getattr(record, "audio", None) or {}
        shots.append(check_shot(plan, shot, out_dir / record.files["shot"], record.samples, camera,
                                controls=controls, audio=plan.soundtrack is not None or bool(sound)))
    yield Progress("qc", None, len(plan.shots), len(plan.shots))
    # the sequence has sound when there is a soundtrack or a shot's own sound is not muted
    mixed = plan.soundtrack is not None or any(
        (getattr(r, "audio", None) or {}).get("source") == "backend" and not (s.sound is not None and s.sound.mute)
        for s, r in zip(plan.shots, records, strict=True))
    sequence = check_sequence(plan, layout.sequence, audio=mixed) if layout.sequence.is_file() else None
    return _finish(layout, shots, sequence)


def _finish(layout: RenderLayout, shots: list[dict[str, Any]], sequence: dict[str, Any] | None) -> QcReport:
    failures = [f"{s['shot_id']}: {f}" for s in shots for f in s["failures"]]
    if sequence is None:
        failures.append("sequence: missing")
    else:
        failures += [f"sequence: {f}" for f in sequence["failures"]]
    report = QcReport(ok=not failures, shots=shots, sequence=sequence, failures=failures)
    atomic_write_text(layout.qc, json.dumps(report.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    return report


def finish_report(layout: RenderLayout, shots: list[dict[str, Any]], sequence: dict[str, Any] | None) -> QcReport:
    """Gather shot and sequence results into a report and write qc.json (atomically)."""
    return _finish(layout, shots, sequence)
