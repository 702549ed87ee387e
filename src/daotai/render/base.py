"""The render contract: one signature for every backend.

``Backend.render(job, ctx) -> Iterator[Event]`` yields progress and frames for one shot;
the pipeline consumes the frames (encoding overlapped with rendering) and front ends draw
the progress. Backends are chosen by name from :mod:`daotai.render.registry`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterator, Protocol

import numpy as np

from daotai.errors import Cancelled
from daotai.plan.model import Plan, ShotPlan


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

    def check(self) -> None:
        """Raise Cancelled when the caller asked to stop."""
        if self.cancel.is_set():
            raise Cancelled("stopped before the work finished")


@dataclass(frozen=True)
class Progress:
    """Work done so far in a named stage of one shot (or the whole run: shot_id None)."""

    stage: str  # "render", "encode", "assemble", "qc", "load", "denoise", "decode"
    shot_id: str | None
    done: int
    total: int
    message: str = ""


@dataclass(frozen=True)
class Frame:
    """One rendered frame of a shot; arrays are owned by the receiver."""

    shot_id: str
    index: int
    rgb: np.ndarray  # (H, W, 3) uint8
    depth: np.ndarray | None = None  # (H, W) float32 metres along -z, inf = sky
    mask: np.ndarray | None = None  # (H, W) uint8 character index map, 0 = none, i+1 = shot.characters[i]


@dataclass(frozen=True)
class Audio:
    """The sound a backend generated for its shot (at most one per shot, any time during the shot's events).

    The pipeline checks its length against the shot's duration (within half a frame), as it
    checks the frame count, and carries it into the shot's file and the sequence mix.
    """

    shot_id: str
    samples: np.ndarray  # (N, C) float32 in [-1, 1], N = duration × rate, C channels
    rate: int  # samples per second (Hz)
    layout: str = "stereo"  # "mono" | "stereo": the channel layout of C = 1 | 2


@dataclass(frozen=True)
class Notice:
    """Something the user should read (a warning, what a backend decided)."""

    level: str  # "info" | "warning"
    text: str
    shot_id: str | None = None


@dataclass(frozen=True)
class Output:
    """A deliverable file finished and moved into place."""

    kind: str  # "shot", "depth", "depth_preview", "mask", "sequence", "contact_sheet", ...
    path: str
    shot_id: str | None = None


Event = Progress | Frame | Audio | Notice | Output


class Backend(Protocol):
    """A renderer of shots. Implementations hold warm resources between shots."""

    name: str

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield Progress and exactly ``job.shot.frames`` Frame events, in frame order (and at most one Audio)."""
        ...

    def close(self) -> None:
        """Release resources (GL contexts, models)."""
        ...
