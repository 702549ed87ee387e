"""The Previz Render node's library half: one shot through the previz backend, kept in memory.

The frames are the backend's own (:func:`daotai.render.registry.create_backend` with the same
options ``daotai render`` validates), so they equal what ``daotai render`` encodes into
``shots/<id>.mp4``; depth and the character index map are the frames' control channels.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Generator, Mapping

import numpy as np

from daotai.errors import BackendError, OptionError
from daotai.events import Event, Frame, Glimpse
from daotai.plan.geometry import FAR_M, NEAR_M
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import GlimpsePace, RenderJob, RunContext


@dataclass(frozen=True)
class PrevizShot:
    """A shot's previz frames and control channels, frame-aligned."""

    shot_id: str
    fps: Fraction
    characters: tuple[str, ...]  # mask value i + 1 is characters[i]
    rgb: np.ndarray  # (F, H, W, 3) uint8
    depth: np.ndarray  # (F, H, W) float32 metres along the view axis, inf = sky
    mask: np.ndarray  # (F, H, W) uint8 character index map, 0 = nobody

    def depth_preview(self) -> np.ndarray:
        """(F, H, W) uint8 log depth, nearest surface 255, sky 0 (what ``control/<id>_depth_preview.mp4`` holds)."""
        from daotai.render.previz.control import depth_to_preview

        return np.stack([depth_to_preview(d, NEAR_M, FAR_M) for d in self.depth])

    def character_mask(self, character: str = "") -> np.ndarray:
        """(F, H, W) bool: where ``character`` is ("" or blank: any character of the shot)."""
        wanted = (character or "").strip()
        if not wanted:
            return self.mask > 0
        if wanted not in self.characters:
            raise OptionError.at("character", wanted, "is not in this shot", valid=self.characters)
        return self.mask == self.characters.index(wanted) + 1


def render_previz(plan: Plan, shot: ShotPlan, options: Mapping[str, Any] | None = None,
                  ctx: RunContext | None = None) -> Generator[Event, None, PrevizShot]:
    """Render ``shot`` with the previz backend (``options``: its options, as ``-O`` takes them); yields progress,
    and glimpses of the frames drawn when ``ctx`` asks for them (the first, then one per ``glimpse_every_s``)."""
    from daotai.render.registry import create_backend
    from daotai.run.shots import glimpse_of

    ctx = ctx or RunContext()
    backend = create_backend("previz", dict(options or {}))
    frames = shot.frames
    rgb = depth = mask = None
    seen = 0
    pace = GlimpsePace(ctx)
    try:
        for event in backend.render(RenderJob(plan=plan, shot=shot, controls=True), ctx):
            if not isinstance(event, Frame):
                yield event
                continue
            if event.index != seen or event.depth is None or event.mask is None:
                raise BackendError(f"{shot.shot_id}: previz sent frame {event.index} without controls or out of order")
            if rgb is None:
                height, width = event.rgb.shape[:2]
                rgb = np.empty((frames, height, width, 3), np.uint8)  # (F, H, W, 3) uint8
                depth = np.empty((frames, height, width), np.float32)  # (F, H, W) metres
                mask = np.empty((frames, height, width), np.uint8)  # (F, H, W) index map
            rgb[seen], depth[seen], mask[seen] = event.rgb, event.depth, event.mask
            if pace.due(first=seen == 0):
                pace.shown()
                yield Glimpse(shot.shot_id, seen, glimpse_of(event.rgb))
            seen += 1
    finally:
        backend.close()
    if seen != frames or rgb is None:
        raise BackendError(f"{shot.shot_id}: previz produced {seen} frames, the plan has {frames}")
    return PrevizShot(shot_id=shot.shot_id, fps=Fraction(*plan.fps_fraction), characters=tuple(shot.characters),
                      rgb=rgb, depth=depth, mask=mask)
