"""The label-free previz a neural backend takes its guidance from (character masks, conditioning frames)."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from daotai.events import Event, Frame
from daotai.render.base import RenderJob, RunContext


class PrevizGuide:
    """A previz renderer without name labels, made at the first shot that needs it (its GL context
    costs nothing to a run that never asks) and kept for the next shots; :meth:`close` releases it."""

    def __init__(self) -> None:
        self._backend: Any = None

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """The previz backend's events for ``job`` (frames, masks with ``job.controls``)."""
        if self._backend is None:
            from daotai.render.previz.backend import PrevizBackend

            self._backend = PrevizBackend(labels=False)
        return self._backend.render(job, ctx)

    def rgb_frames(self, job: RenderJob, ctx: RunContext, indexes: list[int]) -> list[np.ndarray]:
        """The shot's frames at ``indexes`` (plan frames, repeats allowed), (H, W, 3) uint8 each, in that order."""
        needed = set(indexes)
        frames: dict[int, np.ndarray] = {}
        for event in self.render(RenderJob(job.plan, job.shot, controls=False), ctx):
            if isinstance(event, Frame) and event.index in needed:
                frames[event.index] = event.rgb
        return [frames[i] for i in indexes]

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None
