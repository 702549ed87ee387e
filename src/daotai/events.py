"""What long work yields: progress, frames, sound, notices and finished files.

Rendering, encoding, assembly, checking and delivery are generators of these events; the CLI draws
them as progress bars and messages, the server streams them, ComfyUI reports node progress. They are
plain frozen records at the bottom of the package, so every layer can yield and read them (numpy is
named in annotations only: importing them loads nothing heavy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


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
    # where the file is right now when that is not ``path`` yet: a render's staging folder, which
    # is swapped in at the end (a consumer may show the file from here while the run goes on)
    written: str | None = None


@dataclass(frozen=True)
class Glimpse:
    """A small copy of a frame just rendered, for a live view while a shot renders (only when the
    run's context asks for glimpses: daotai.render.base.RunContext.glimpse_every_s)."""

    shot_id: str
    index: int  # the frame's index in the shot
    rgb: np.ndarray  # (h, w, 3) uint8, at most GLIMPSE_WIDTH wide
    # while a neural shot denoises: the step just done and the steps in all; the picture is then
    # its current latents seen through a learned map, not a decoded frame
    step: int | None = None
    steps: int | None = None


GLIMPSE_WIDTH = 320  # px: a live view, not a picture to judge

Event = Progress | Frame | Audio | Notice | Output | Glimpse
