"""Flow-matching samplers: Euler (same timesteps/sigmas as diffusers' FlowMatchEulerDiscreteScheduler),
the choice between it and UniPC (:mod:`daotai.mlx.unipc`) from a model folder's scheduler config.

diffusers shifts the training sigmas once when the scheduler is built (which fixes
sigma_min/sigma_max) and again in set_timesteps; both shifts are reproduced so the
timestep values fed to the transformer agree to float32 precision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from daotai.mlx.schedule import FlowSchedule

if TYPE_CHECKING:
    from daotai.mlx.unipc import UniPCConfig


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


@dataclass(frozen=True)
class EulerSampler:
    """Flow-matching Euler as a sampler object (no state between steps)."""

    schedule: FlowSchedule

    def step(self, i: int, sample, velocity, state=None):
        """Latents and velocity at step i -> (latents at step i + 1, None)."""
        return euler_step(sample, velocity, float(self.schedule.sigmas[i]), float(self.schedule.sigmas[i + 1])), None


EULER_CLASS, UNIPC_CLASS = "FlowMatchEulerDiscreteScheduler", "UniPCMultistepScheduler"
# FlowMatchEulerDiscreteScheduler options the static-shift Euler above does not implement
_EULER_UNSUPPORTED = ("use_dynamic_shifting", "invert_sigmas", "shift_terminal", "use_karras_sigmas",
                      "use_exponential_sigmas", "use_beta_sigmas", "stochastic_sampling")


@dataclass(frozen=True)
class SamplerSpec:
    """Which sampler a model folder asks for, and where that was read.

    ``kind`` is "euler" or "unipc"; ``unipc`` holds the UniPC options (None for Euler);
    ``folder_shift`` is the shift the folder's config carries (the backend's own default or
    the user's ``--shift`` is what runs, as the torch ``wan`` backend does).
    """

    kind: str = "euler"
    unipc: UniPCConfig | None = None
    train_steps: int = 1000
    folder_shift: float | None = None
    source: str = "default"

    def build(self, steps: int, shift: float):
        """A sampler object with ``schedule`` and ``step(i, sample, velocity, state)``."""
        if self.kind == "unipc":
            from daotai.mlx.unipc import UniPCConfig, UniPCSampler

            return UniPCSampler.build(steps, self.unipc or UniPCConfig(), shift)
        return EulerSampler(flow_schedule(steps, shift, self.train_steps))

    def describe(self) -> str:
        """Short text for notices and manifests."""
        what = self.unipc.describe() if self.unipc is not None else "Euler (flow matching)"
        return f"{what}, from {self.source}"


def sampler_from_config(cfg: dict | None, where: str = "scheduler_config.json") -> SamplerSpec:
    """The sampler a diffusers scheduler config names; other scheduler classes are refused."""
    from daotai.errors import BackendError

    if cfg is None:
        return SamplerSpec("euler", source="the default (no scheduler_config.json)")
    name = cfg.get("_class_name")
    if name == UNIPC_CLASS:
        from daotai.mlx.unipc import UniPCConfig

        unipc = UniPCConfig.from_dict(cfg, where)
        return SamplerSpec("unipc", unipc, unipc.num_train_timesteps, unipc.flow_shift, f"{where} ({name})")
    if name == EULER_CLASS:
        for key in _EULER_UNSUPPORTED:
            if cfg.get(key):
                raise BackendError(f"{where}: {key}={cfg[key]!r} is not supported by wan-mlx's Euler sampler "
                                   "(rule: off/null, as Wan ships it)")
        return SamplerSpec("euler", None, int(cfg.get("num_train_timesteps", 1000)), cfg.get("shift"),
                           f"{where} ({name})")
    raise BackendError(f"{where}: _class_name={name!r} is not a sampler wan-mlx has; "
                       f"it runs {UNIPC_CLASS} and {EULER_CLASS}")


def sampler_from_folder(folder) -> SamplerSpec:
    """Read ``<folder>/scheduler_config.json`` (a diffusers scheduler/ folder); Euler when absent."""
    import json
    from pathlib import Path

    path = Path(folder) / "scheduler_config.json"
    if not path.is_file():
        return sampler_from_config(None)
    return sampler_from_config(json.loads(path.read_text(encoding="utf-8")), f"{path.parent.name}/{path.name}")
