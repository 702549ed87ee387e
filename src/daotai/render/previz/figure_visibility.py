"""Which figures show in a rendered frame, read from its mask: any pixel of a figure, and whether
its head is covered; and the screen box of a figure's head.

The labels use them (a name is drawn only for someone seen, and kept off every face). Pure numpy
on the read-back mask and the figures' geometry, so apart from the GL renderer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from daotai.plan import geometry
from daotai.render.previz.meshes import HEAD_C, face_points, head_drop
from daotai.render.previz.scene import FrameState


def figures_visible(state: FrameState, masks: np.ndarray) -> list[bool]:
    """Per figure, whether any of its pixels made it into ``masks`` (searched in its screen box)."""
    h, w = masks.shape
    # a generous box around each figure, walking limbs included: (N * 8, 3) world corners
    corners = np.array([
        [f.position[0] + dx * f.height_m, y * f.height_m, f.position[1] + dz * f.height_m]
        for f in state.figures for dx in (-0.5, 0.5) for dz in (-0.5, 0.5) for y in (0.0, 1.1)
    ])
    uv, depth = geometry.project(corners, state.cam_to_world, geometry.intrinsics_from_fov(state.fov_deg, w, h))
    out = []
    for i in range(len(state.figures)):
        box_uv, box_depth = uv[8 * i : 8 * i + 8], depth[8 * i : 8 * i + 8]
        if np.all(box_depth > 0.0):
            x0, y0 = np.floor(box_uv.min(axis=0)).astype(int)
            x1, y1 = np.ceil(box_uv.max(axis=0)).astype(int) + 1
            x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
            region = masks[y0:y1, x0:x1] if x0 < x1 and y0 < y1 else masks[:0, :0]
        else:  # the box straddles the camera plane: its projection is unbounded, search everything
            region = masks
        out.append(bool((region == i + 1).any()))
    return out


def face_box(fig: Any, state: FrameState, intr: Any, near: float) -> tuple[float, float, float, float] | None:
    """Screen box (x0, y0, x1, y1) px of a figure's head (it may reach past the frame); None when
    part of it is behind the near plane."""
    uv, depth = geometry.project(face_points(fig), state.cam_to_world, intr)  # (N, 2) px, (N,) m
    if not np.all(depth > near):
        return None
    x0, y0 = np.floor(uv.min(axis=0))
    x1, y1 = np.ceil(uv.max(axis=0)) + 1.0
    return float(x0), float(y0), float(x1), float(y1)


def heads_hidden(state: FrameState, masks: np.ndarray) -> list[bool]:
    """Per figure, whether its head is inside the frame yet none of its pixels show (something covers it)."""
    h, w = masks.shape
    intr = geometry.intrinsics_from_fov(state.fov_deg, w, h)
    out = []
    for i, f in enumerate(state.figures):
        # the head from the chin to the top of the hair, as wide as the hair, in a plane through its centre
        if f.kind != "person":  # an animal's head is ahead of its feet: its body test decides
            out.append(False)
            continue
        centre = np.array([f.position[0], (HEAD_C[1] - head_drop(f)) * f.height_m, f.position[1]])
        lo, hi, side = -0.055 * f.height_m, 0.075 * f.height_m, 0.052 * f.height_m
        right = state.cam_to_world[:3, 0]  # the box faces the camera
        corners = centre + np.array([s * side * right + [0.0, dy, 0.0] for s in (-1, 1) for dy in (lo, hi)])
        uv, depth = geometry.project(corners, state.cam_to_world, intr)
        if not np.all(depth > 0.0):
            out.append(False)  # the head straddles the camera plane: leave it to the body test
            continue
        x0, y0 = np.maximum(np.floor(uv.min(axis=0)).astype(int), 0)
        x1, y1 = np.ceil(uv.max(axis=0)).astype(int) + 1
        x1, y1 = min(x1, w), min(y1, h)
        if x0 >= x1 or y0 >= y1:
            out.append(False)  # off-frame, not covered: the label still says who this is
            continue
        out.append(not bool((masks[y0:y1, x0:x1] == i + 1).any()))
    return out
