"""Previz rasteriser: animatic frames with depth and character masks, on the CPU via OpenGL."""

from daotai.render.previz.control import depth_to_preview, depth_to_uint16_mm
from daotai.render.previz.gl import PrevizRenderer, RenderedFrame
from daotai.render.previz.projection import intrinsics, project, projection_matrix
from daotai.render.previz.scene import (
    TIMES_OF_DAY,
    Environment,
    Figure,
    FrameState,
    RenderSettings,
    SetPiece,
    environment_for,
)

__all__ = [
    "TIMES_OF_DAY",
    "Environment",
    "Figure",
    "FrameState",
    "PrevizRenderer",
    "RenderSettings",
    "RenderedFrame",
    "SetPiece",
    "depth_to_preview",
    "depth_to_uint16_mm",
    "environment_for",
    "intrinsics",
    "project",
    "projection_matrix",
]
