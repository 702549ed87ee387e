"""How much of a subject one frame shows, from a character mask and depth or from geometry.

The subject check asks it of every frame it samples; it casts the camera check's scene rays
(daotai.qc.camera_scene) but has nothing to do with camera motion, so it stands on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from daotai.plan import geometry
from daotai.qc.camera_scene import (
    Cylinder,
    Solid,
    check_cam,
    cylinder_hits,
    ground_hits,
    solids_hits,
    solids_within_reach,
)

__all__ = ["Visibility", "subject_visibility"]


@dataclass(frozen=True)
class Visibility:
    """How much of a subject one frame shows, sampled on a pixel grid.

    ``region``: grid pixels whose ray meets the subject's cylinder (its proxy, a little wider
    than the body); of those, ``visible`` show the subject and ``covered`` show something in
    front of it. The rest show what is behind (the gap between an arm and the body) and count
    for neither. ``share`` = visible / (visible + covered), None when the subject is out of
    the frame. ``blocker``: who covers most of it (a character id, "scenery"), or None.
    """

    region: int
    visible: int
    covered: int
    blocker: str | None

    @property
    def share(self) -> float | None:
        seen = self.visible + self.covered
        return self.visible / seen if seen else None


def _subject_grid(width: int, height: int, step: int) -> np.ndarray:
    """(N, 2) pixel centres every ``step`` px, conventions' pixel coordinates."""
    us = np.arange(step / 2.0, width, step)
    vs = np.arange(step / 2.0, height, step)
    grid = np.stack(np.meshgrid(us, vs), -1).reshape(-1, 2)
    return grid


def subject_visibility(cam: np.ndarray, fov: float, width: int, height: int, subject: Cylinder,
                       others: Sequence[tuple[str, Cylinder | Solid]] = (),
                       mask: tuple[np.ndarray, int, Sequence[str]] | None = None,
                       depth_m: np.ndarray | None = None, step: int = 4,
                       ground_y: float = 0.0) -> Visibility:
    """How much of ``subject`` the camera sees, from a character mask or from geometry.

    With ``mask`` = (index map (h, w) uint8, the subject's value, names of values 1, 2, …) and
    ``depth_m`` (h, w) the rendered view-axis depth, a grid pixel in the subject's region shows
    the subject when the mask says so, and something in front when its depth is nearer than the
    subject's cylinder there. Without them, the ``others`` (id, occluder) are ray-cast: a pixel
    is covered when one of them is hit before the subject's cylinder.
    """
    cam = check_cam(cam, "cam")
    uv = _subject_grid(width, height, step)  # (N, 2) px
    local = geometry.camera_rays(uv, geometry.intrinsics_from_fov(fov, width, height))  # (N, 3)
    dirs = local @ cam[:3, :3].T  # (N, 3) unit, world
    origin = cam[:3, 3]
    t_subject = cylinder_hits(origin, dirs, subject, ground_y)  # (N,) m, inf where missed
    region = np.isfinite(t_subject)
    if not region.any():
        return Visibility(0, 0, 0, None)
    uv, dirs, local, t_subject = uv[region], dirs[region], local[region], t_subject[region]
    if mask is not None and depth_m is not None:
        index_map, value, names = mask
        h, w = index_map.shape
        cols = np.clip((uv[:, 0] * w / width).astype(np.int64), 0, w - 1)
        rows = np.clip((uv[:, 1] * h / height).astype(np.int64), 0, h - 1)
        labels = index_map[rows, cols]  # (K,) mask values
        dh, dw = depth_m.shape
        depth = depth_m[np.clip((uv[:, 1] * dh / height).astype(np.int64), 0, dh - 1),
                        np.clip((uv[:, 0] * dw / width).astype(np.int64), 0, dw - 1)]
        front = t_subject * -local[:, 2]  # (K,) view-axis depth of the cylinder's near side
        visible = labels == value
        covered = ~visible & (depth < front)
        blockers = [names[v - 1] if 0 < v <= len(names) else "scenery" for v in labels[covered]]
    else:
        # The ground hides the subject only from below it (a camera that sank under the floor).
        ground = ground_hits(origin, dirs, ground_y) if origin[1] < ground_y else np.full(len(dirs), np.inf)
        hits = np.full((len(others) + 1, len(dirs)), np.inf)  # row 0 the ground, row i + 1 others[i]; (M + 1, N) m
        hits[0] = ground
        solid_rows = [i for i, (_, occluder) in enumerate(others) if isinstance(occluder, Solid)]
        if solid_rows:  # only what can come before the subject can cover it: the rest stay missed
            near = solids_within_reach(origin, dirs, [others[i][1] for i in solid_rows], float(t_subject.max()))
            solid_rows = [i for i, keep in zip(solid_rows, near, strict=True) if keep]
        if solid_rows:
            hits[[i + 1 for i in solid_rows]] = solids_hits(origin, dirs, [others[i][1] for i in solid_rows])
        for i, (_, occluder) in enumerate(others):
            if not isinstance(occluder, Solid):
                hits[i + 1] = cylinder_hits(origin, dirs, occluder, ground_y)
        covered = hits.min(axis=0) < t_subject
        visible = ~covered
        # the nearest hit names the blocker; on a tie the ground, then the occluder given first
        who = np.argmin(hits[:, covered], axis=0)
        names_by_row = ["ground", *(name for name, _ in others)]
        blockers = [names_by_row[i] for i in who]
    blocker = min(set(blockers), key=lambda name: (-blockers.count(name), name)) if blockers else None
    return Visibility(int(region.sum()), int(visible.sum()), int(covered.sum()), blocker)
