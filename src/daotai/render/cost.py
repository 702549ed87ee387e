"""What a render will cost in time, told before it starts (`render --dry-run`, the long-render
warning, `daotai doctor`).

* **previz**: (the whole render's estimate, every stage timed, is daotai.run.estimate's; this is the
  bare drawing time, for callers below the pipeline) a few frames of the plan's longest shot are drawn and timed on this machine (after
  one frame that opens the GL context; one frame and several are timed and differenced, so the
  per-call set-up cancels). A whole render also writes depth and masks, encodes, assembles and
  runs QC (most of it): on the 2-core software-GL box, 640x360, a bare frame took 9 ms while the
  whole render took 304 ms a frame for the office example (264 frames, two figures; 33x) and
  175 ms for two empty shots (42 frames; 13x). PREVIZ_WHOLE_RENDER_FACTOR keeps the larger end.
* **neural** (a model with a catalog footprint): a stated rule. One denoising step of a video
  transformer with P parameters over T latent tokens costs about 2·P·T FLOPs for its linear
  layers plus 4·T²·hidden·layers for attention, twice with classifier-free guidance (for Wan
  1.3B at 480x832, 81 frames: 566 TFLOP a step, as docs/performance.md works out). This
  machine's matmul throughput is measured (about 0.2 s of torch matmuls on the device the
  backend would use) and a step reaches about NEURAL_EFFICIENCY of it: stock diffusers took
  1.2 s a step on an H200 whose matmuls reach 790 TFLOP/s (566 / (1.2 · 790) = 0.6). The VAE
  decode and text encoding are left out: they are small beside the steps on long shots.

Estimates are orders of magnitude for deciding whether to start, not promises.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daotai import catalog
from daotai.catalog import ModelFootprint
from daotai.plan.model import Plan
from daotai.runtime.memory import latent_tokens

LONG_RENDER_S = 30 * 60  # above this a render is announced with a warning before it starts
PREVIZ_SAMPLE_FRAMES = 3  # frames timed after the first (which opens the GL context)
PREVIZ_WHOLE_RENDER_FACTOR = 30.0  # whole render ÷ bare frames, measured as in the module doc
# Below this many pixel-frames previz is not timed: at the all-in rate measured on the slow
# 2-core box (~0.76 µs a pixel-frame) it takes ~6 min, far under LONG_RENDER_S.
PREVIZ_QUICK_PIXEL_FRAMES = 5e8
NEURAL_EFFICIENCY = 0.6  # a diffusion step's share of the measured matmul rate (module doc)
MATMUL_PROBE_S = 0.2  # how long the throughput probe runs


@dataclass(frozen=True)
class CostEstimate:
    """How long a render should take here, and how that was worked out."""

    backend: str
    frames: int
    seconds_per_frame: float
    basis: str  # what was measured or assumed, in words

    @property
    def total_s(self) -> float:
        return self.frames * self.seconds_per_frame

    @property
    def long(self) -> bool:
        """Long enough to warn about before it starts (LONG_RENDER_S)."""
        return self.total_s > LONG_RENDER_S

    def describe(self) -> str:
        """'about 2 h 05 min for 1,440 frames (5.2 s a frame; …)'."""
        return (f"about {format_duration(self.total_s)} for {self.frames:,} frames "
                f"({format_seconds(self.seconds_per_frame)} a frame; {self.basis})")


def format_seconds(seconds: float) -> str:
    """A per-frame time: '13 ms', '1.4 s', '95 s'."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def format_duration(seconds: float) -> str:
    """A whole render's time: '40 s', '12 min', '2 h 05 min', '3.5 days'."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    minutes = seconds / 60
    if minutes < 90:
        return f"{minutes:.0f} min"
    hours = minutes / 60
    if hours < 48:
        return f"{int(hours)} h {int(minutes % 60):02d} min"
    return f"{hours / 24:.1f} days"


# ------------------------------------------------------------------ previz


def previz_cost(plan: Plan, options: Mapping[str, Any] | None = None, sample: int = PREVIZ_SAMPLE_FRAMES,
                backend_name: str = "previz") -> CostEstimate:
    """Time ``sample`` frames of the plan's longest shot with the previz backend and scale to the plan."""
    from daotai.render.registry import create_backend

    shot = max(plan.shots, key=lambda s: s.frames)
    backend = create_backend(backend_name, options)
    try:
        backend.render_frames(plan, shot, {0})  # opens the GL context: not a frame's cost
        count = max(1, min(sample, shot.frames - 1))

        def timed(indexes: set[int]) -> float:
            start = time.perf_counter()
            backend.render_frames(plan, shot, indexes)
            return time.perf_counter() - start

        first = 1 if shot.frames > 1 else 0  # frame 0 was drawn already
        count = max(1, min(count, shot.frames - 1 - first))
        one = timed({first})
        several = timed(set(range(first, first + count + 1)))  # `count` frames more than `one`
        bare = max(several - one, one / 4) / count  # never below a share of a whole call (timer noise)
    finally:
        backend.close()
    return CostEstimate(backend_name, plan.total_frames, bare * PREVIZ_WHOLE_RENDER_FACTOR,
                        f"{count + 1} frames timed here at {plan.width}x{plan.height}, "
                        f"x{PREVIZ_WHOLE_RENDER_FACTOR:g} for controls, encoding, assembly and QC")


# ------------------------------------------------------------------ neural


def step_flops(footprint: ModelFootprint, width: int, height: int, frames: int, guidance: float) -> float:
    """FLOPs of one denoising step of one generation (module doc's rule)."""
    tokens = latent_tokens(footprint, width, height, frames)
    linear = 2.0 * footprint.transformer_b * 1e9 * tokens
    attention = 4.0 * tokens**2 * footprint.hidden * footprint.layers
    return (linear + attention) * (2 if guidance > 1 else 1)


def matmul_flops(device: str | None = None) -> tuple[float, str]:
    """(FLOP/s, device) that torch's matmul reaches here: bf16 on CUDA and MPS, float32 on CPU."""
    import torch

    if device is None:
        device = ("cuda" if torch.cuda.is_available()
                  else "mps" if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available() else "cpu")
    kind = device.split(":")[0]
    n, dtype = (4096, torch.bfloat16) if kind in ("cuda", "mps") else (1024, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)

    def sync() -> None:
        if kind == "cuda":
            torch.cuda.synchronize()
        elif kind == "mps":
            torch.mps.synchronize()

    a @ b  # first call: kernel choice and warm-up
    sync()
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < MATMUL_PROBE_S:
        a @ b
        sync()
        runs += 1
    return 2.0 * n**3 * runs / (time.perf_counter() - start), device


def neural_seconds_per_shot(model: str, width: int, height: int, seconds: float, flops: float,
                            steps: int | None = None) -> tuple[float, int]:
    """(seconds, frames) one generation of ``seconds`` of video takes at ``flops`` (module doc's rule)."""
    row = catalog.model_row(model)
    footprint = catalog.footprint(model)
    if footprint is None:
        raise KeyError(model)
    family = catalog.family(row.family) if row is not None else None
    overrides = dict(row.overrides) if row is not None else {}
    native = overrides.get("native_fps") or (family.snap.native_fps if family else None) or 16
    frames = max(1, round(seconds * native)) + 1
    steps = steps or int(overrides.get("steps") or (family.steps if family else 50))
    guidance = float(overrides.get("guidance") or (family.guidance if family else 5.0))
    per_step = step_flops(footprint, width, height, frames, guidance) / (flops * NEURAL_EFFICIENCY)
    return per_step * steps, frames


def neural_cost(plan: Plan, backend_name: str, model: str, steps: int | None = None,
                flops: tuple[float, str] | None = None) -> CostEstimate:
    """Every shot's generation time by the rule, spread over the plan's frames."""
    rate, device = flops or matmul_flops()
    total = sum(neural_seconds_per_shot(model, plan.width, plan.height, s.frames / plan.fps, rate, steps)[0]
                for s in plan.shots)
    return CostEstimate(backend_name, plan.total_frames, total / max(plan.total_frames, 1),
                        f"{model} by the FLOP rule at {rate / 1e12:.2g} TFLOP/s measured on {device}")


# ------------------------------------------------------------------ either


def estimate_cost(plan: Plan, backend_name: str, options: Mapping[str, Any] | None = None,
                  quick: bool = False) -> CostEstimate | None:
    """The render's cost here, or None when it cannot be told (a backend without a model footprint,
    or, with ``quick``, a previz plan too small to be worth timing)."""
    from daotai.render.registry import spec_for

    spec = spec_for(backend_name)
    options = dict(options or {})
    if spec.family is None:
        if not spec.reproducible:
            return None
        if quick and plan.total_frames * plan.width * plan.height < PREVIZ_QUICK_PIXEL_FRAMES:
            return None
        return previz_cost(plan, options, backend_name=backend_name)
    model = str(options.get("model") or spec.default_model or "")
    if catalog.footprint(model) is None:
        return None
    device = options.get("device")
    steps = options.get("steps")
    try:
        flops = matmul_flops(None if device in (None, "auto") else str(device))
    except Exception:  # noqa: BLE001  (a device torch cannot open here: the backend itself will say why)
        return None
    return neural_cost(plan, backend_name, model, int(steps) if steps else None, flops)


def hours_for(seconds: float) -> str:
    """'~3 h', '~40 min', '~2 days' for doctor's one-liners."""
    return "~" + format_duration(seconds) if seconds >= 90 else f"~{math.ceil(seconds)} s"
