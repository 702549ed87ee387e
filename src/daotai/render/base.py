"""The render contract: one signature for every backend.

``Backend.render(job, ctx) -> Iterator[Event]`` yields progress and frames for one shot;
the pipeline consumes the frames (encoding overlapped with rendering) and front ends draw
the progress. Backends are chosen by name from :mod:`daotai.render.registry`.

The events themselves live in :mod:`daotai.events` (every layer yields or reads them); they are
named here too, for backends written against this module (plugins among them).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol

from daotai.errors import Cancelled
from daotai.events import Audio, Event, Frame, Notice, Output, Progress
from daotai.plan.model import Plan, ShotPlan

__all__ = ["Audio", "Backend", "Event", "Frame", "Notice", "Output", "Progress", "RenderJob", "RunContext"]


@dataclass(frozen=True)
class RenderJob:
    """One shot of a plan to render."""

    plan: Plan
    shot: ShotPlan
    controls: bool = True  # also produce depth and character masks when the backend can


@dataclass
class RunContext:
    """Passed down explicitly (no global state): cancellation and run-wide settings."""

    cancel: threading.Event = field(default_factory=threading.Event)
    # a Glimpse of the frame being rendered at each shot's first frame and then at most this often
    # (seconds); None: no glimpses (the command line draws progress bars, not pictures)
    glimpse_every_s: float | None = None

    def check(self) -> None:
        """Raise Cancelled when the caller asked to stop."""
        if self.cancel.is_set():
            raise Cancelled("stopped before the work finished")


class GlimpsePace:
    """When a live view's next Glimpse is due: never without ``glimpse_every_s``, else at a shot's first
    frame (or the first one asked for) and then at most once per ``glimpse_every_s`` seconds."""

    def __init__(self, ctx: RunContext) -> None:
        self.every_s = ctx.glimpse_every_s
        self.last = -float("inf")  # time.monotonic() of the last Glimpse shown

    def due(self, first: bool = False) -> bool:
        return self.every_s is not None and (first or time.monotonic() - self.last >= self.every_s)

    def shown(self) -> None:
        """A Glimpse went out now."""
        self.last = time.monotonic()




def renders_on_cpu(backend: Any) -> bool:
    """Whether ``backend`` draws its frames with this machine's processor cores (a software GL
    rasteriser, a model on the CPU), per its optional ``renders_on_cpu()``; False when it says nothing."""
    probe = getattr(backend, "renders_on_cpu", None)
    return bool(probe()) if callable(probe) else False


class Backend(Protocol):
    """A renderer of shots. Implementations hold warm resources between shots."""

    name: str

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield Progress and exactly ``job.shot.frames`` Frame events, in frame order (and at most one Audio)."""
        ...

    def close(self) -> None:
        """Release resources (GL contexts, models)."""
        ...
