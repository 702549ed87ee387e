"""Flow-matching Euler sampler, same timesteps/sigmas as diffusers' FlowMatchEulerDiscreteScheduler.

diffusers shifts the training sigmas once when the scheduler is built (which fixes
sigma_min/sigma_max) and again in set_timesteps; both shifts are reproduced so the
timestep values fed to the transformer agree to float32 precision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FlowSchedule:
    """timesteps (n,) float32 for the model; sigmas (n + 1,) float32 ending at 0."""

    timesteps: np.ndarray
    sigmas: np.ndarray


def _shift(s: np.ndarray, shift: float) -> np.ndarray:
    """Wan's static time shift: s' = shift * s / (1 + (shift - 1) * s)."""
    return (shift * s / (1.0 + (shift - 1.0) * s)).astype(np.float32)


def flow_schedule(steps: int, shift: float = 3.0, train_steps: int = 1000) -> FlowSchedule:
    """Timesteps and sigmas for `steps` denoising steps (Wan2.1 uses shift 3 at 480p, 5 at 720p)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if shift <= 0:
        raise ValueError(f"shift must be > 0, got {shift}")
    base = np.linspace(1, train_steps, train_steps, dtype=np.float32)[::-1] / np.float32(train_steps)
    base = _shift(base, shift)
    sigma_max, sigma_min = float(base[0]), float(base[-1])
    t = np.linspace(sigma_max * train_steps, sigma_min * train_steps, steps)
    sig = _shift((t / train_steps).astype(np.float32), shift)
    return FlowSchedule(
        timesteps=(sig * np.float32(train_steps)).astype(np.float32),
        sigmas=np.concatenate([sig, np.zeros(1, np.float32)]),
    )


def euler_step(sample, velocity, sigma: float, sigma_next: float):
    """One flow-matching Euler step: x + (sigma_next - sigma) * v (works on mx or np arrays)."""
    return sample + (sigma_next - sigma) * velocity
