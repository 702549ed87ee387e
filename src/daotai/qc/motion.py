"""Planned motion: how far the plan moves the picture, and when a still picture contradicts it.

The frozen-frame check (a still run is a fault only where the plan moves the picture), the camera
verdict's "stands still where the plan moves", the cost estimate and the QC bench all ask the
plan the same question; the answer is one piece of geometry (the planned camera's flow over the
plan's scene, walkers in view) kept here, apart from the verdicts that use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from daotai.plan import geometry
from daotai.plan.model import Plan, ShotPlan
from daotai.qc.scene_model import depth_models

# A frozen run is a fault only if the plan moves the picture at least this much per frame
# inside it: consecutive-frame differences cannot tell an eased start (sub-pixel steps)
# from a freeze, the plan can.
FROZEN_MOTION_PX_PER_FRAME = 1.0
MOTION_GRID = 24  # points across the frame where the planned motion is measured (x 24 * H / W down)


def planned_motion(plan: Plan, shot: ShotPlan, first: int, last: int) -> tuple[float, float]:
    """How far (px) the plan moves the picture between two frames: (camera, walkers).

    camera: the 75th percentile of the planned displacement over a grid of the frame, with the
    plan's scene (ground, set pieces, people; the sky at infinity), so a truck over an empty sky
    moves nothing and a pan moves everything. walkers: the largest on-screen displacement of a
    walking character in view at either frame (someone walking out of shot moves no pixel)."""
    if last <= first:
        return 0.0, 0.0
    a, b = shot.cameras[first], shot.cameras[last]
    cam_a = np.array(a.cam_to_world, dtype=np.float64).reshape(4, 4)
    cam_b = np.array(b.cam_to_world, dtype=np.float64).reshape(4, 4)
    _, flow = _camera_flow(plan, shot, first, last)
    moved = np.linalg.norm(flow, axis=1)
    moved = np.where(np.isfinite(moved), moved, plan.width)  # behind the camera: it left the frame
    camera = float(np.percentile(moved, 75))
    heights = {c.id: c.height for c in plan.characters}
    walkers = 0.0
    ends = {p.id: p for p in shot.character_frames[last]}
    for person in shot.character_frames[first]:
        other = ends.get(person.id)
        if other is None or not (person.walking or other.walking):
            continue
        y = 0.5 * heights[person.id]  # the body's middle
        ua = _on_screen(plan, cam_a, a.fov, (person.position[0], y, person.position[1]))
        ub = _on_screen(plan, cam_b, b.fov, (other.position[0], y, other.position[1]))
        if ua is not None and ub is not None:
            walkers = max(walkers, float(np.hypot(*(ub - ua))))
        elif ua is not None or ub is not None:
            walkers = max(walkers, FROZEN_MOTION_PX_PER_FRAME * (last - first))  # walks into or out of view
    return camera, walkers


def _on_screen(plan: Plan, cam: np.ndarray, fov: float, point: tuple[float, float, float],
               margin: float = 0.25) -> np.ndarray | None:
    """Pixel (2,) of a world point when it is in front of the camera and within the frame grown by
    ``margin`` of its size on each side (a body's middle just outside still shows its half)."""
    uv, depth = geometry.project(np.array([point]), cam, geometry.intrinsics_from_fov(fov, plan.width, plan.height))
    u, v = uv[0]
    if not (depth[0] > 0 and np.isfinite(u) and np.isfinite(v)):
        return None
    inside = (-margin * plan.width <= u <= (1 + margin) * plan.width
              and -margin * plan.height <= v <= (1 + margin) * plan.height)
    return uv[0] if inside else None


def _camera_flow(plan: Plan, shot: ShotPlan, first: int, last: int,
                 columns: int = MOTION_GRID, depth: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The plan's camera motion between two frames over a grid of the frame ``columns`` across:
    (grid (N, 2) px, flow (N, 2) px, non-finite where a point goes behind the camera); on the
    frame's rendered ``depth`` (a camera.DepthMap) when given, else on the plan's scene model."""
    from daotai.qc.camera_planned import expected_flow

    a, b = shot.cameras[first], shot.cameras[last]
    cam_a = np.array(a.cam_to_world, dtype=np.float64).reshape(4, 4)
    cam_b = np.array(b.cam_to_world, dtype=np.float64).reshape(4, 4)
    rows = max(2, round(columns * plan.height / plan.width))
    us = (np.arange(columns) + 0.5) * plan.width / columns
    vs = (np.arange(rows) + 0.5) * plan.height / rows
    grid = np.stack(np.meshgrid(us, vs), -1).reshape(-1, 2)  # (N, 2) px
    model = depth if depth is not None else depth_models(plan, shot, frames=(first,))[0]
    flow = expected_flow(cam_a, a.fov, cam_b, b.fov, grid, plan.width, plan.height, model)
    return grid, flow


# A camera move over flat parts of the picture (sky, a plain wall: the background of a long-lens
# dolly zoom, whose subject keeps its size) changes no pixel, so a picture standing still there
# matches the plan. A freeze is a fault of the camera only when the plan's move, applied to the
# run's first frame, changes it by this much (mean |a - b| per sample, twice the drift a still
# run may have, metrics.FROZEN_MAX_DRIFT).
FROZEN_VISIBLE_CHANGE = 2.0


def freeze_is_fault(plan: Plan, shot: ShotPlan, start: int, length: int,
                    anchor: np.ndarray | None = None, depth_path: Path | None = None) -> bool:
    """Whether a still run of the picture contradicts the plan: a walker in view moves, or the
    camera moves the picture at least FROZEN_MOTION_PX_PER_FRAME and (given the run's first
    frame's thumbnail ``anchor``) visibly (FROZEN_VISIBLE_CHANGE), judged on the shot's depth
    control (``depth_path``) where there is one: the scene model's bodies are only cylinders."""
    from daotai.qc.metrics import warped_change

    last = start + length - 1
    steps = max(length - 1, 1)
    camera, walkers = planned_motion(plan, shot, start, last)
    if walkers / steps >= FROZEN_MOTION_PX_PER_FRAME:
        return True
    if camera / steps < FROZEN_MOTION_PX_PER_FRAME:
        return False
    if anchor is None:
        return True
    # every other thumbnail pixel: a coarser grid smears the sky's flow over a figure's outline
    depth = _depth_frame(depth_path, start) if depth_path is not None else None
    grid, flow = _camera_flow(plan, shot, start, last, columns=max(MOTION_GRID, anchor.shape[1] // 2),
                              depth=depth)
    return warped_change(anchor, grid, flow, (plan.width, plan.height)) >= FROZEN_VISIBLE_CHANGE


def _depth_frame(path: Path, index: int):
    """Frame ``index`` of a depth control file as a camera.DepthMap (None past its end)."""
    from daotai.encode.video import decode_gray
    from daotai.qc.camera_scene import DepthMap

    for i, depth_mm in enumerate(decode_gray(path)):
        if i == index:
            return DepthMap.from_millimetres(depth_mm)
    return None


def planned_motion_px(plan: Plan, shot: ShotPlan, first: int, last: int) -> float:
    """How far (px) the plan moves the picture between two frames (see planned_motion)."""
    return max(planned_motion(plan, shot, first, last))


def shot_expects_motion(shot: ShotPlan) -> bool:
    """True when the camera moves or someone walks: a frozen picture would then be a fault."""
    move = shot.move
    camera_moves = any(move.motion) or any(move.rotate) or move.orbit or move.fov_end != move.fov or move.shake
    walking = any(c.walking for frame in shot.character_frames for c in frame)
    return bool(camera_moves or walking)
