"""Motion regularity (judder) of a clip, measured on its frames.

Judder: a steady camera move shows the same image motion from one frame to the next. Frames
repeated to reach a higher rate (16 fps shown at 30) move the picture on some frame steps and
not on others. :func:`judder` measures that irregularity: for every pair of neighbouring
frames the median optical flow (DIS) is the step's global motion; projected on the clip's mean
motion direction these steps should all be equal, and the judder score is their coefficient of
variation (standard deviation / mean). A clip with less than ``min_step_px`` mean motion per
frame has no move to judge and scores 0.

That score assumes a steady move: an eased start or stop varies the steps too. QC judges any
planned move, so it reads ``jerk`` instead: the mean size of the second differences of the step
lengths (s[i+1] - 2 s[i] + s[i-1], s = the median length of the step's flow, so a roll, a dolly and a
zoom count too) over the mean step length. Easing changes the step a little from one frame to
the next (a 48-frame ease-in-out: under 0.01 of the mean step); a repeated frame makes a step
of 0 between two full ones, a second difference of about twice the mean step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

# Measured (tests/test_retime_judder.py): a 16 fps steady pan retimed to 30 fps scores 0.002
# motion-interpolated and 0.94 with repeated frames (the source: 0.000); 0.2 separates them widely.
JUDDER_BOUND = 0.2
# Measured (tests/test_camera_metrics_qc.py, print with -s; QC of examples/*.json previz renders): moves
# at 1 px a frame or more jerk 0.12-0.33, a previz close-up truck 0.44 (tracks on the subject); frames
# repeated to show 16 fps at 24: 2.2. One repeat in five (24 at 30) works out at 1.0.
JERK_BOUND = 0.7
# The jerk's noise grows as the step shrinks (flow noise of ~0.05 px over a 0.3 px step reads 0.4);
# QC judges pictures moving at least this much a frame, where repeated frames are also visible.
JUDGED_SPEED_PX = 1.0
MIN_STEP_PX = 0.25  # mean motion per frame below which a clip counts as still
FLOW_SIDE = 512  # flow is measured on frames shrunk to at most this wide (global motion needs no detail)
@dataclass(frozen=True)
class Judder:
    """Frame-to-frame motion regularity of a clip."""

    score: float  # coefficient of variation of the per-step motion along the mean direction (0 = even)
    mean_step_px: float  # mean motion per frame step, pixels of the full frame
    steps_px: tuple[float, ...]  # each step's motion along the mean direction
    jerk: float = 0.0  # mean |second difference of the step lengths| / mean step length (0 = even or eased)
    mean_speed_px: float = 0.0  # mean median flow length per step, full-frame pixels (what the jerk is judged on)

    @property
    def even(self) -> bool:
        """Whether the motion is even within :data:`JUDDER_BOUND`."""
        return self.score <= JUDDER_BOUND

    @property
    def smooth(self) -> bool:
        """Whether no frame step jumps out of the move (repeated or dropped frames) within :data:`JERK_BOUND`."""
        return self.jerk <= JERK_BOUND


def _step_flows(frames: Iterable[np.ndarray], preset: int | None, side: int) -> np.ndarray:
    """Per neighbouring pair: median flow (dx, dy) and median flow length, full-frame pixels: (N - 1, 3)."""
    import cv2

    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM if preset is None else preset)
    previous, scale, rows = None, 1.0, []
    for frame in frames:
        grey = cv2.cvtColor(np.asarray(frame), cv2.COLOR_RGB2GRAY)
        if grey.shape[1] > side:
            scale = grey.shape[1] / side
            grey = cv2.resize(grey, (side, max(8, round(grey.shape[0] / scale))), interpolation=cv2.INTER_AREA)
        if previous is not None:
            # every other pixel each way: the medians barely change, their cost (more than the flow's) quarters
            flow = dis.calc(previous, grey, None)[::2, ::2].reshape(-1, 2)  # (h * w / 4, 2) float32
            rows.append([*np.median(flow, axis=0), np.median(np.linalg.norm(flow, axis=1))])
        previous = grey
    return np.array(rows, dtype=np.float64).reshape(-1, 3) * scale


def step_motions(frames: Iterable[np.ndarray], preset: int | None = None, side: int = FLOW_SIDE) -> np.ndarray:
    """Median optical flow (dx, dy) in full-frame pixels of every neighbouring pair: (N - 1, 2) float64.

    ``preset``: OpenCV's DIS preset (default: medium); ``side``: frames are shrunk to at most this wide."""
    return _step_flows(frames, preset, side)[:, :2]


def judder(frames: Iterable[np.ndarray], min_step_px: float = MIN_STEP_PX, pixel_scale: float = 1.0,
           preset: int | None = None, side: int = FLOW_SIDE) -> Judder:
    """The judder of a clip of (H, W, 3) uint8 frames (see the module docstring).

    ``pixel_scale``: full-frame pixels per pixel of ``frames`` (frames shrunk before the call)."""
    flows = _step_flows(frames, preset, side) * pixel_scale
    return judder_of_motions(flows[:, :2], min_step_px, flows[:, 2])


def judder_of_motions(motions: np.ndarray, min_step_px: float = MIN_STEP_PX,
                      speeds: np.ndarray | None = None) -> Judder:
    """The judder of a clip from its per-step global motions (N - 1, 2) in pixels.

    ``speeds`` (N - 1,): each step's median flow length, which the jerk is measured on (a roll,
    a dolly or a zoom moves the picture with a median flow near zero); default: the motions' lengths."""
    speeds = np.linalg.norm(motions, axis=1) if speeds is None else np.asarray(speeds, dtype=np.float64)
    mean_speed = float(speeds.mean()) if len(speeds) else 0.0
    jerk = float(np.abs(np.diff(speeds, 2)).mean() / mean_speed) \
        if len(speeds) >= 3 and mean_speed >= min_step_px else 0.0
    if len(motions) < 2:
        return Judder(0.0, 0.0, (), 0.0, mean_speed)
    mean = motions.mean(axis=0)
    speed = float(np.linalg.norm(mean))
    if speed < min_step_px:
        return Judder(0.0, speed, tuple(float(v) for v in np.linalg.norm(motions, axis=1)), jerk, mean_speed)
    steps = motions @ (mean / speed)  # (N - 1,) signed motion along the mean direction
    return Judder(float(steps.std() / speed), speed, tuple(float(v) for v in steps), jerk, mean_speed)
