"""The Camera Check node's library half: does a video's camera move the way the shot's plan says?

Any frames will do (a neural model's output, a previz, a phone clip): they are put on the plan's
frame grid by time (a clip at another frame rate is sampled at the plan's frame times; a
shorter clip is checked over the frames it has), and :func:`daotai.qc.camera_adherence.check_camera`
compares the motion tracked in them with the motion the planned cameras imply for the shot's
scene. The scene is the previz's exact depth of every frame (:func:`previz_depth_maps`, walking
characters and name labels marked as moving on their own), as ``daotai qc`` checks a render
against its depth control; without it (no previz depth given), the plan's geometric scene model
(ground, set pieces, characters as cylinders).

Why the depth: the geometric model only approximates the scene (a person is a cylinder), and
where the camera travels its error grows with the travel between two frames: the same push-in
moves the picture 1.5 times as far per frame at 16 fps as at 24 fps, against a fixed per-frame
limit. In a close-up the subject's own tracks, planned anywhere in the cylinder's depth band,
carry most of the error. Measured on the exact previz of two office shots at 832x480 (limit
1.00 px/frame): a close-up pushing in 0.4 m over 4 s (it ends inside the subject's head), 3.30
px/frame at 16 fps and 2.25 at 24 fps on the model, 0.30 and 0.27 on the previz depth; a medium
shot of a walker pushing in 0.8 m over 5 s, 1.05 and 0.87 on the model, 0.37 and 0.31 on the depth.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Generator, Sequence

import numpy as np

from daotai.errors import Issue, OptionError
from daotai.events import Event
from daotai.plan.model import Plan, ShotPlan
from daotai.qc.camera_adherence import DEPTH_MAP_CONFIG, CameraAdherence, CameraCheckConfig, check_camera
from daotai.qc.camera_scene import Cylinder, DepthMap, DepthModel, Solid
from daotai.render.base import RunContext

SCENE_DEPTH = "previz_depth"  # CameraCheck.scene: the previz's exact depth of every frame
SCENE_MODEL = "scene_model"  # the plan's geometric scene model


@dataclass(frozen=True)
class CameraCheck:
    """The verdict on one clip against one shot."""

    shot_id: str
    frames_checked: int  # plan frames the clip covered
    adherence: CameraAdherence
    scene: str = SCENE_MODEL  # what the planned motion was computed on: SCENE_DEPTH or SCENE_MODEL

    @property
    def ok(self) -> bool:
        return self.adherence.ok

    def metrics(self) -> dict:
        """Plain JSON data: the adherence (errors, per-component totals, tracks) and the frames checked."""
        return {"shot_id": self.shot_id, "frames_checked": self.frames_checked, "depth_source": self.scene,
                **self.adherence.to_dict()}

    def report(self) -> str:
        """A few lines for people: the verdict, the error against its limit, each moving component."""
        a = self.adherence
        lines = [f"{self.shot_id}: camera {'follows the plan' if a.ok else 'does NOT follow the plan'} — {a.summary}",
                 f"mean error {a.error_mean_px:.2f} px/frame (limit {a.error_limit_px:.2f}), "
                 f"p95 {a.error_p95_px:.2f}; {a.pairs_evaluated} frame pairs, {a.pairs_skipped} skipped, "
                 f"{self.frames_checked} of {a.frames_planned} planned frames; planned motion from "
                 f"{'the previz depth' if self.scene == SCENE_DEPTH else 'the scene model (cylinders for people)'}"]
        for c in a.components:
            if c.significant or c.unplanned:
                verdict = ("unplanned" if c.unplanned else "right direction" if c.direction_ok
                           else "WRONG direction" if c.direction_ok is False else "")
                lines.append(f"  {c.name}: planned {c.expected_total:+.3g} {c.unit} ({c.words}), "
                             f"measured {c.measured_total:+.3g} {c.unit}; {verdict}")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(self.metrics(), indent=1)


def scene_models(plan: Plan, shot: ShotPlan) -> list[DepthModel]:
    """Per frame, the plan's geometric scene: set pieces as solids, characters as cylinders their height."""
    from daotai.qc.scene_model import FIGURE_RADIUS_M

    heights = {c.id: c.height for c in plan.characters}
    pieces = tuple(Solid.placed(p.kind, p.position, p.size, p.yaw) for p in plan.scene.set_pieces)
    return [DepthModel(occluders=pieces + tuple(
        Cylinder(center_x=c.position[0], center_z=c.position[1], radius=FIGURE_RADIUS_M * heights[c.id] / 1.75,
                 height=heights[c.id]) for c in frame)) for frame in shot.character_frames]


def previz_depth_maps(plan: Plan, shot: ShotPlan, depth: np.ndarray, mask: np.ndarray) -> list[DepthMap]:
    """Per frame, the previz's depth ((F, H, W) metres) as a DepthMap; walking characters (``mask``,
    (F, H, W) character index map) and the name labels previz may draw above people excluded."""
    from daotai.qc.controls import moving_on_their_own
    from daotai.qc.labels import label_names

    names = label_names(plan, shot)
    return [DepthMap(depth[i], moving_on_their_own(shot, i, mask[i], names)) for i in range(len(depth))]


def previz_depth(plan: Plan, shot: ShotPlan, ctx: RunContext | None = None
                 ) -> Generator[Event, None, list[DepthMap]]:
    """The shot's previz depth maps (:func:`previz_depth_maps`), rendered without labels; yields progress."""
    from daotai.comfy.previz import render_previz

    previz = yield from render_previz(plan, shot, {"labels": False}, ctx)
    return previz_depth_maps(plan, shot, previz.depth, previz.mask)


def on_plan_grid(frames: Sequence[np.ndarray] | np.ndarray, fps: float | Fraction | None, plan: Plan,
                 shot: ShotPlan) -> list[np.ndarray]:
    """The clip's frames at the plan's frame times (at most the shot's frames; none past the clip's end)."""
    count = len(frames)
    plan_fps = Fraction(*plan.fps_fraction)
    rate = plan_fps if not fps else Fraction(fps).limit_denominator(1_000_000)
    picked = []
    for i in range(shot.frames):
        index = int(Fraction(i) * rate / plan_fps + Fraction(1, 2))  # nearest clip frame at plan frame i's time
        if index >= count:
            break
        picked.append(frames[index])
    return picked


def check_clip(plan: Plan, shot: ShotPlan, frames: Sequence[np.ndarray] | np.ndarray,
               fps: float | Fraction | None = None, stride: int = 1,
               depth: Sequence[DepthMap] | None = None) -> CameraCheck:
    """Check the camera of ``frames`` ((H, W, 3) uint8 each, at ``fps``; default the plan's) against ``shot``.

    ``depth``: the shot's scene per plan frame (:func:`previz_depth_maps`); None: the geometric model.
    """
    picked = on_plan_grid(frames, fps, plan, shot)
    if len(picked) < 2:
        raise OptionError([Issue("video", f"{len(frames)} frames", f"covers {len(picked)} of shot "
                                 f"{shot.shot_id}'s frames; the check needs at least 2")])
    height, width = picked[0].shape[:2]
    if abs(width / height - plan.width / plan.height) > 0.01:
        raise OptionError([Issue("video", f"{width}x{height}", f"must have the plan's aspect ratio "
                                 f"({plan.width}x{plan.height}); crop or pad it first")])
    n = len(picked)
    cams = np.array([c.cam_to_world for c in shot.cameras[:n]], dtype=np.float64).reshape(-1, 4, 4)
    fovs = np.array([c.fov for c in shot.cameras[:n]], dtype=np.float64)
    if depth is not None and len(depth) < n:
        raise OptionError([Issue("depth", f"{len(depth)} frames", f"must cover the {n} frames checked")])
    models, config, scene = ((list(depth[:n]), DEPTH_MAP_CONFIG, SCENE_DEPTH) if depth is not None
                             else (scene_models(plan, shot)[:n], CameraCheckConfig(), SCENE_MODEL))
    adherence = check_camera(iter(picked), cams, fovs, models, stride=stride, config=config)
    return CameraCheck(shot_id=shot.shot_id, frames_checked=n, adherence=adherence, scene=scene)
