"""MiniMax-H3's rectified-flow Euler sampler for MLX (diffusers' MiniMaxH3Scheduler as pure functions).

What sets it apart from Wan's flow-match Euler (:mod:`daotai.mlx.scheduler`):

- the transformer predicts a *data-ward* velocity: the clean estimate is x0 = x_t + sigma * v;
- the transformer is conditioned on t = 1 - sigma in [0, 1] (t = 1 clean), not on sigma x 1000;
- the grid is linspace(1, 0, steps) through the exponential shift, the terminal 0 included
  (so ``steps`` grid points drive steps - 1 transformer passes), with consecutive float32
  duplicates the shift creates near 1 collapsed.

Video and sound step on their own schedules (shift 12 and 3 in the released pipeline) over
the same number of passes. The update is the blend x_next = r * x_t + (1 - r) * x0 with
r = sigma_next / sigma, in float32; x0's sigma comes from the timestep the transformer saw,
the ratio's from the grid, as the reference keeps them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VIDEO_SHIFT = 12.0  # the released pipeline's video schedule
AUDIO_SHIFT = 3.0  # and its audio schedule


@dataclass(frozen=True, eq=False)
class H3Schedule:
    """sigmas (n,) float32 from 1 down to 0; timesteps (n - 1,) = 1 - sigmas[:-1], one per transformer pass."""

    sigmas: np.ndarray
    timesteps: np.ndarray

    @property
    def passes(self) -> int:
        """Transformer evaluations the schedule drives."""
        return len(self.timesteps)


def h3_schedule(steps: int, shift: float) -> H3Schedule:
    """The shifted grid of ``steps`` points (terminal 0 included), float32 duplicates collapsed.

    The grid is numpy's linspace rounded to float32; diffusers' torch.linspace rounds a few
    points differently in the last bit (up to 6e-8, depending on the CPU's vector width).
    """
    if steps < 2:
        raise ValueError(f"h3 schedule: steps={steps} must be >= 2 (the grid includes its terminal 0)")
    if shift <= 0:
        raise ValueError(f"h3 schedule: shift={shift} must be > 0")
    base = np.linspace(1.0, 0.0, steps).astype(np.float32)
    shift32 = np.float32(shift)
    sigmas = (shift32 * base / (np.float32(1.0) + (shift32 - np.float32(1.0)) * base)).astype(np.float32)
    keep = np.concatenate([[True], sigmas[1:] != sigmas[:-1]])
    sigmas = sigmas[keep]
    return H3Schedule(sigmas, (np.float32(1.0) - sigmas[:-1]).astype(np.float32))


def h3_step(velocity, timestep: float, sample, sigma: float, sigma_next: float):
    """One Euler step (eta 0) from ``sample`` at grid ``sigma`` to ``sigma_next``; mx or numpy arrays.

    ``timestep`` is the t the transformer was conditioned on (1 - sigma, rounded in float32).
    """
    import mlx.core as mx

    sample = mx.array(sample) if not isinstance(sample, mx.array) else sample
    velocity = mx.array(velocity) if not isinstance(velocity, mx.array) else velocity
    dtype = sample.dtype
    denoised = sample + (1.0 - mx.array(timestep, dtype=dtype)) * velocity.astype(dtype)
    ratio = mx.array(sigma_next, dtype=mx.float32) / mx.array(sigma, dtype=mx.float32)
    out = ratio * sample.astype(mx.float32) + (1.0 - ratio) * denoised.astype(mx.float32)
    return out.astype(dtype)


def h3_noised(sample, timestep: float, noise):
    """The forward process in H3's convention, x_t = t * x0 + (1 - t) * noise (conditioning rows' noise level)."""
    return timestep * sample + (1.0 - timestep) * noise
