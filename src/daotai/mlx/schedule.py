"""The timestep schedule both samplers (flow Euler and UniPC) hand to the denoise loop."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FlowSchedule:
    """timesteps (n,) float32 for the model; sigmas (n + 1,) float32 ending at 0."""

    timesteps: np.ndarray
    sigmas: np.ndarray
