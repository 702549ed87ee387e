"""The plan's cameras as files other tools read: pose files, camera-to-world JSON, USD.

Per shot (``<shot_id>`` below), written into one folder (``daotai cameras script.json -o DIR``):

- ``<shot_id>.pose.txt`` — CameraCtrl / RealEstate10K pose file: a first line that readers
  skip (here ``# daotai ...``), then one line per frame ``timestamp fx fy cx cy 0 0`` and the
  3x4 world-to-camera matrix row-major, OpenCV camera axes (x right, y down, +z forward),
  intrinsics normalised by the width and height, timestamps in microseconds from the shot's
  start. The CameraCtrl, CamI2V and Wan-Fun Control-Camera tools read these.
- ``<shot_id>.c2w.json`` — ReCamMaster-style camera-to-world JSON: ``{"frame<i>": {"cam01":
  "[a] [b] [c] [d]"}}`` where the four bracketed groups are the columns of the 4x4 camera-to-world
  matrix (the last one is the camera centre and 1), as those files store it. Units and axes are
  daotai's (metres, y up, OpenGL camera axes; see docs/conventions.md), stated again under the
  file's ``"daotai"`` key, with the per-frame vertical fov and pixel intrinsics.
- ``<shot_id>.usda`` — a USD stage with a ``UsdGeom.Camera`` whose transform, focal length and
  apertures are time-sampled per frame (time code = frame number, ``timeCodesPerSecond`` = the
  plan's rate, metres, y up). USD cameras look down -z with y up, as daotai's do, so the matrices
  are the plan's own. Written only when asked (``daotai cameras --usd``, ``daotai render
  --usd-cameras``); needs ``usd-core`` (``pip install 'daotai[usd]'``).

Per sequence: ``sequence.usda`` with every shot's camera at its sequence frames and one
``/daotai/camera`` that follows the cut (at each frame, the shot that started last).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from daotai.errors import DependencyMissing
from daotai.files import atomic_write_text
from daotai.plan import geometry
from daotai.plan.geometry import FAR_M, NEAR_M
from daotai.plan.layout import SEQUENCE_CAMERA, camera_file_name
from daotai.plan.model import Plan, ShotPlan

VERTICAL_APERTURE_MM = 24.0  # a full-frame sensor's height; the focal length follows from the fov
POSE_DIGITS = 12  # significant digits in pose files: round-trips the matrices to ~1e-12


@dataclass(frozen=True)
class PoseFile:
    """A pose file read back: per frame its timestamp (µs), normalised intrinsics and world-to-camera (OpenCV)."""

    timestamps: np.ndarray  # (F,) int64 microseconds
    intrinsics: np.ndarray  # (F, 4) fx/W, fy/H, cx/W, cy/H
    world_to_camera: np.ndarray  # (F, 4, 4) OpenCV camera axes


def shot_matrices(shot: ShotPlan) -> np.ndarray:
    """The shot's cam_to_world matrices (F, 4, 4) (OpenGL camera axes, metres)."""
    return np.stack([np.reshape(c.cam_to_world, (4, 4)) for c in shot.cameras]).astype(np.float64)


def shot_intrinsics(shot: ShotPlan) -> list[geometry.Intrinsics]:
    """Pixel (fx, fy, cx, cy) of every frame."""
    return [geometry.intrinsics_from_matrix(np.reshape(c.K, (3, 3))) for c in shot.cameras]


def _number(value: float) -> str:
    return format(float(value), f".{POSE_DIGITS}g")


def pose_text(plan: Plan, shot: ShotPlan) -> str:
    """The shot's CameraCtrl / RealEstate10K pose file."""
    lines = [f"# daotai {plan.title!r} shot {shot.shot_id}: {shot.frames} frames at {plan.fps:g} fps, "
             f"{plan.width}x{plan.height}; fx fy cx cy normalised, world-to-camera OpenCV axes, metres"]
    views = geometry.gl_to_cv_view(geometry.world_to_camera(shot_matrices(shot)))  # (F, 4, 4)
    for i, (view, intrinsics) in enumerate(zip(views, shot_intrinsics(shot), strict=True)):
        timestamp = int(round(i * 1_000_000 / plan.fps))
        normal = geometry.normalized_intrinsics(intrinsics, plan.width, plan.height)
        values = [*normal, 0.0, 0.0, *view[:3].reshape(-1)]
        lines.append(" ".join([str(timestamp), *(_number(v) for v in values)]))
    return "\n".join(lines) + "\n"


def read_pose_file(path: str | Path) -> PoseFile:
    """Read a CameraCtrl / RealEstate10K pose file (its first line is skipped, as those tools do)."""
    rows = [line.split() for line in Path(path).read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    for number, row in enumerate(rows, start=2):
        if len(row) != 19:
            raise ValueError(f"{path}:{number}: {len(row)} fields; a pose line has 19 (timestamp, 4 intrinsics, "
                             "2 zeros, 12 matrix entries)")
    values = np.array([[float(v) for v in row] for row in rows], dtype=np.float64).reshape(-1, 19)
    views = np.tile(np.eye(4), (len(values), 1, 1))
    views[:, :3, :] = values[:, 7:].reshape(-1, 3, 4)
    return PoseFile(values[:, 0].astype(np.int64), values[:, 1:5], views)


def _matrix_string(matrix: np.ndarray) -> str:
    """A 4x4 matrix as ReCamMaster writes it: its columns, each in brackets."""
    return " ".join("[" + " ".join(_number(v) for v in column) + "]" for column in np.asarray(matrix).T)


def parse_matrix_string(text: str) -> np.ndarray:
    """A ``"[a] [b] [c] [d]"`` column string back to the 4x4 matrix."""
    columns = [[float(v) for v in group.split()] for group in text.replace("[", " ").split("]") if group.strip()]
    return np.array(columns, dtype=np.float64).T


def c2w_json(plan: Plan, shot: ShotPlan) -> dict[str, Any]:
    """The shot's ReCamMaster-style camera-to-world JSON object."""
    data: dict[str, Any] = {f"frame{i}": {"cam01": _matrix_string(m)} for i, m in enumerate(shot_matrices(shot))}
    data["daotai"] = {
        "shot_id": shot.shot_id, "fps": plan.fps, "width": plan.width, "height": plan.height,
        "units": "metres", "world": "right-handed, y up",
        "camera_axes": "OpenGL: x right, y up, -z forward (flip y and z for OpenCV)",
        "matrix": "cam01: the columns of cam_to_world, each in brackets; the last is the camera centre",
        "fov_deg": [c.fov for c in shot.cameras],
        "intrinsics_px": [list(k) for k in shot_intrinsics(shot)],
    }
    return data


# ---------------------------------------------------------------- USD


def require_usd() -> Any:
    """The ``pxr`` package or DependencyMissing naming the install command."""
    try:
        from pxr import Gf, Sdf, Usd, UsdGeom  # noqa: F401
    except ImportError:
        raise DependencyMissing("usd-core", "usd", "USD camera files") from None
    import pxr

    return pxr


def usd_available() -> bool:
    """Whether USD cameras can be written here."""
    try:
        require_usd()
    except DependencyMissing:
        return False
    return True


USD_OUTPUTS = "USD cameras (cameras/<shot_id>.usda, cameras/sequence.usda)"
USD_INSTALL = "pip install 'daotai[usd]'"


def usd_skipped() -> dict[str, str] | None:
    """None when USD cameras can be written here; else what is skipped, why and the install command
    (the manifest's ``skipped_outputs`` entry)."""
    if usd_available():
        return None
    return {"output": USD_OUTPUTS, "reason": "usd-core is not installed", "install": USD_INSTALL}


def _usd_name(shot_id: str) -> str:
    """A valid USD prim name for a shot id."""
    cleaned = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in shot_id)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"shot_{cleaned}"


def _new_stage(plan: Plan, start: int, end: int) -> Any:
    pxr = require_usd()
    Usd, UsdGeom = pxr.Usd, pxr.UsdGeom
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    stage.SetTimeCodesPerSecond(plan.fps)
    stage.SetFramesPerSecond(plan.fps)
    stage.SetStartTimeCode(start)
    stage.SetEndTimeCode(end)
    root = UsdGeom.Xform.Define(stage, "/daotai")
    stage.SetDefaultPrim(root.GetPrim())
    return stage


def _camera(stage: Any, path: str, plan: Plan) -> tuple[Any, Any]:
    """A camera prim with its one transform op."""
    pxr = require_usd()
    camera = pxr.UsdGeom.Camera.Define(stage, path)
    camera.CreateClippingRangeAttr(pxr.Gf.Vec2f(NEAR_M, FAR_M))
    camera.CreateProjectionAttr(pxr.UsdGeom.Tokens.perspective)
    op = camera.AddTransformOp()
    return camera, op


def _sample(camera: Any, op: Any, time: float, matrix: np.ndarray, intrinsics: geometry.Intrinsics,
            width: int, height: int) -> None:
    """One frame's transform and lens on a camera (USD matrices are row-vector: the transpose)."""
    pxr = require_usd()
    fx, fy, cx, cy = intrinsics
    focal = fy * VERTICAL_APERTURE_MM / height  # mm, so that the aperture spans the vertical fov
    op.Set(pxr.Gf.Matrix4d(*np.asarray(matrix, dtype=np.float64).T.reshape(-1).tolist()), time)
    camera.GetFocalLengthAttr().Set(float(focal), time)
    camera.GetVerticalApertureAttr().Set(float(VERTICAL_APERTURE_MM), time)
    camera.GetHorizontalApertureAttr().Set(float(focal * width / fx), time)
    # Principal point offsets (mm) from the image centre: zero for the plan's centred intrinsics.
    camera.GetHorizontalApertureOffsetAttr().Set(float((cx - width / 2.0) * focal / fx), time)
    camera.GetVerticalApertureOffsetAttr().Set(float((height / 2.0 - cy) * focal / fy), time)


def shot_usda(plan: Plan, shot: ShotPlan) -> str:
    """The shot's USD stage as text: /daotai/<shot> camera, time code = frame within the shot."""
    stage = _new_stage(plan, 0, max(0, shot.frames - 1))
    camera, op = _camera(stage, f"/daotai/{_usd_name(shot.shot_id)}", plan)
    for i, (matrix, intrinsics) in enumerate(zip(shot_matrices(shot), shot_intrinsics(shot), strict=True)):
        _sample(camera, op, float(i), matrix, intrinsics, plan.width, plan.height)
    return stage.GetRootLayer().ExportToString()


def sequence_usda(plan: Plan) -> str:
    """Every shot's camera on the sequence's frames, and /daotai/camera following the cut."""
    stage = _new_stage(plan, 0, max(0, plan.total_frames - 1))
    main, main_op = _camera(stage, "/daotai/camera", plan)
    active: dict[int, tuple[np.ndarray, geometry.Intrinsics]] = {}
    for shot in sorted(plan.shots, key=lambda s: s.start_frame):
        camera, op = _camera(stage, f"/daotai/shots/{_usd_name(shot.shot_id)}", plan)
        for i, (matrix, intrinsics) in enumerate(zip(shot_matrices(shot), shot_intrinsics(shot), strict=True)):
            frame = shot.start_frame + i
            _sample(camera, op, float(frame), matrix, intrinsics, plan.width, plan.height)
            active[frame] = (matrix, intrinsics)  # a later shot wins where shots overlap (transitions)
    for frame in sorted(active):
        matrix, intrinsics = active[frame]
        _sample(main, main_op, float(frame), matrix, intrinsics, plan.width, plan.height)
    return stage.GetRootLayer().ExportToString()


# ---------------------------------------------------------------- writing


def write_cameras(plan: Plan, folder: str | Path, usd: bool = False) -> list[Path]:
    """Write every shot's camera files (and sequence.usda) into ``folder``; returns the paths written.

    ``usd``: True writes USD cameras too (DependencyMissing, naming the install command, without
    usd-core); False, the default, writes the pose files and JSON only, whatever is installed.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    if usd:
        require_usd()  # refused before any file is written
    written = []
    for shot in plan.shots:
        sid = shot.shot_id
        written.append(atomic_write_text(out / camera_file_name("camera_pose", sid), pose_text(plan, shot)))
        written.append(atomic_write_text(out / camera_file_name("camera_json", sid),
                                         json.dumps(c2w_json(plan, shot), indent=1) + "\n"))
        if usd:
            written.append(atomic_write_text(out / camera_file_name("camera_usd", sid), shot_usda(plan, shot)))
    if usd:
        written.append(atomic_write_text(out / SEQUENCE_CAMERA, sequence_usda(plan)))
    return [Path(p) for p in written]


def usd_camera_fov(focal_mm: float, vertical_aperture_mm: float) -> float:
    """Vertical fov in degrees of a USD camera's focal length and vertical aperture."""
    return math.degrees(2.0 * math.atan(vertical_aperture_mm / (2.0 * focal_mm)))
