"""Camera checks measured on the frames: motion regularity (judder) and, below, recovered poses.

Judder: a steady camera move shows the same image motion from one frame to the next. Frames
repeated to reach a higher rate (16 fps shown at 30) move the picture on some frame steps and
not on others. :func:`judder` measures that irregularity: for every pair of neighbouring
frames the median optical flow (DIS) is the step's global motion; projected on the clip's mean
motion direction these steps should all be equal, and the judder score is their coefficient of
variation (standard deviation / mean). A clip with less than ``min_step_px`` mean motion per
frame has no move to judge and scores 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

# Measured (tests/test_retime_judder.py): a 16 fps steady pan retimed to 30 fps scores 0.002
# motion-interpolated and 0.94 with repeated frames (the source: 0.000); 0.2 separates them widely.
JUDDER_BOUND = 0.2
MIN_STEP_PX = 0.25  # mean motion per frame below which a clip counts as still
FLOW_SIDE = 512  # flow is measured on frames shrunk to at most this wide (global motion needs no detail)


@dataclass(frozen=True)
class Judder:
    """Frame-to-frame motion regularity of a clip."""

    score: float  # coefficient of variation of the per-step motion along the mean direction (0 = even)
    mean_step_px: float  # mean motion per frame step, pixels of the full frame
    steps_px: tuple[float, ...]  # each step's motion along the mean direction

    @property
    def even(self) -> bool:
        """Whether the motion is even within :data:`JUDDER_BOUND`."""
        return self.score <= JUDDER_BOUND


def step_motions(frames: Iterable[np.ndarray]) -> np.ndarray:
    """Median optical flow (dx, dy) in full-frame pixels of every neighbouring pair: (N - 1, 2) float64."""
    import cv2

    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    previous, scale, motions = None, 1.0, []
    for frame in frames:
        grey = cv2.cvtColor(np.asarray(frame), cv2.COLOR_RGB2GRAY)
        if grey.shape[1] > FLOW_SIDE:
            scale = grey.shape[1] / FLOW_SIDE
            grey = cv2.resize(grey, (FLOW_SIDE, max(8, round(grey.shape[0] / scale))), interpolation=cv2.INTER_AREA)
        if previous is not None:
            flow = dis.calc(previous, grey, None)  # (h, w, 2) float32
            motions.append(np.median(flow.reshape(-1, 2), axis=0) * scale)
        previous = grey
    return np.array(motions, dtype=np.float64).reshape(-1, 2)


def judder(frames: Iterable[np.ndarray], min_step_px: float = MIN_STEP_PX) -> Judder:
    """The judder of a clip of (H, W, 3) uint8 frames (see the module docstring)."""
    motions = step_motions(frames)
    if len(motions) < 2:
        return Judder(0.0, 0.0, ())
    mean = motions.mean(axis=0)
    speed = float(np.linalg.norm(mean))
    if speed < min_step_px:
        return Judder(0.0, speed, tuple(float(v) for v in np.linalg.norm(motions, axis=1)))
    steps = motions @ (mean / speed)  # (N - 1,) signed motion along the mean direction
    return Judder(float(steps.std() / speed), speed, tuple(float(v) for v in steps))
