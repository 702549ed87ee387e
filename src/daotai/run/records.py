"""What a run keeps and returns: each shot's record (ShotRecord), the run's result (RunResult)
and its last event (Finished).

Plain data in a module of its own: every part of the run passes them along (the shots, the
executors here and on a cluster, the shot cache, assembly and delivery) and front ends read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class RunResult:
    out_dir: Path
    sequence: Path
    qc_path: Path
    qc_ok: bool
    summary: str
    timings: dict[str, float]


@dataclass(frozen=True)
class Finished:
    """Last event of a run."""

    result: RunResult


@dataclass
class ShotRecord:
    """What the pipeline learned while rendering one shot (kept for qc and the manifest)."""

    shot_id: str
    samples: dict[int, np.ndarray] = field(default_factory=dict)  # frame index → (H, W, 3) uint8
    middle: np.ndarray | None = None  # (H, W, 3) uint8 for the contact sheet
    render_s: float = 0.0
    wall_s: float = 0.0
    files: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)  # what the backend decided (retiming, memory tier, retries)
    key: str | None = None  # what determines the shot's files (daotai.run.cache), when a cache is used
    reused: bool = False  # True: the files came from the cache, unchanged since an earlier render
    audio: dict[str, Any] = field(default_factory=dict)  # the shot file's sound: source, rate, channels…; {} = none
    takes: list[dict[str, Any]] = field(default_factory=list)  # every take when there were retakes (daotai.run.retakes)
