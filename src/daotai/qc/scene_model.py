"""The plan's scene as solids, for the checks that reason from geometry instead of pixels.

A figure is a proxy of the previz rig: a cylinder its arms may sweep, its torso as an elliptic
cylinder (what the camera check's scene model sees), and, as an occluder of the people behind
it, its shoulders, hanging arms and head. The planned-motion judgement, the camera check without a
depth control and the subject check without a mask all build on these, and the shares below are
one fact each, so they live here rather than with any one of those checks.
"""

from __future__ import annotations

from daotai.plan.model import Plan, ShotPlan

FIGURE_RADIUS_M = 0.32  # proxy body plus swinging arms, for a 1.75 m figure
# The figure's torso as an elliptic cylinder, in figure heights: previz's chest section is
# 0.097 wide and 0.066 deep each side of the axis (render/previz/meshes.py CHEST_RINGS).
BODY_HALF_WIDTH = 0.10
BODY_HALF_DEPTH = 0.07
# A figure as an occluder of the people behind it (figure_solids), shares of its height: half its span
# across the shoulders and hanging arms, the top of the shoulders, the head's half width with hair.
# Measured: an over-the-shoulder of two seated people leaves the subject 0.92 visible by this model,
# 0.90 by the rendered mask; a person who steps in front of the subject hides it in 29 of 36 frames.
FIGURE_HALF_SPAN = 0.135
FIGURE_SHOULDER_TOP = 0.83
FIGURE_HEAD_HALF_WIDTH = 0.06


def _body(position: tuple[float, float], facing: float, height: float):
    """The torso as a Solid: an elliptic cylinder turned the way the character faces."""
    from daotai.qc.camera_scene import Solid

    size = (2 * BODY_HALF_WIDTH * height, height, 2 * BODY_HALF_DEPTH * height)
    return Solid.placed("cylinder", (position[0], 0.0, position[1]), size, facing)


def figure_solids(position: tuple[float, float], facing: float, height: float, drop: float = 0.0):
    """A figure as what hides the people behind it: its shoulders and hanging arms (an elliptic cylinder
    turned the way it faces, up to the shoulders) and its head above them, ``drop`` metres lower when
    seated. Shares of the height from the previz rig (daotai.render.previz.meshes: shoulder joints at
    0.104 out and 0.805 up, the arm's own half-thickness beyond; the head with its hair 0.06 round)."""
    from daotai.qc.camera_scene import Solid

    x, z = position
    shoulders = FIGURE_SHOULDER_TOP * height - drop
    torso = (2 * FIGURE_HALF_SPAN * height, shoulders, 2 * BODY_HALF_DEPTH * height)
    head = (2 * FIGURE_HEAD_HALF_WIDTH * height, (1.0 - FIGURE_SHOULDER_TOP) * height,
            2 * FIGURE_HEAD_HALF_WIDTH * height)
    return (Solid.placed("cylinder", (x, 0.0, z), torso, facing),
            Solid.placed("cylinder", (x, shoulders, z), head, facing))


def depth_models(plan: Plan, shot: ShotPlan, frames: tuple[int, ...] | None = None):
    """The geometric scene model of every frame (or of ``frames``): ground, set pieces, people."""
    from daotai.qc.camera_scene import Cylinder, DepthModel, Solid

    heights = {c.id: c.height for c in plan.characters}
    pieces = tuple(Solid.placed(p.kind, p.position, p.size, p.yaw) for p in plan.scene.set_pieces)
    models = []
    chosen = shot.character_frames if frames is None else [shot.character_frames[i] for i in frames]
    for frame in chosen:
        cylinders = tuple(
            Cylinder(
                center_x=c.position[0],
                center_z=c.position[1],
                radius=FIGURE_RADIUS_M * heights[c.id] / 1.75,
                height=heights[c.id],
                body=_body(c.position, c.facing, heights[c.id]),
            )
            for c in frame
        )
        models.append(DepthModel(occluders=pieces + cylinders))
    return models
