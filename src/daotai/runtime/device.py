"""Where a neural model runs: device (cuda | mps | cpu), dtypes and seeded generators.

Nothing here touches torch at import time: probing a GPU can take seconds and fail on
machines without drivers, so it happens only when a backend asks for a runtime.

Rules (documented in docs and relied on by the memory planner):
- cuda: bfloat16 everywhere except the video VAE, which stays float32 (its decoder's
  group norms lose detail in half precision and it is small).
- mps: float16 for the transformer (bf16 matmuls are slow or missing on older macOS);
  the text encoder (T5/UMT5 overflow to inf in fp16) and the VAE stay float32.
- cpu: float32 everywhere (half-precision CPU kernels are slow and incomplete).
- Generators: a ``torch.Generator`` on the CPU seeded with the shot seed. Drawing the
  initial noise on the CPU makes a seed mean the same latents on every device, and the
  same video on a given device and dtype.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from daotai.errors import BackendError, DependencyMissing

DEVICES = ("auto", "cuda", "mps", "cpu")

# Per device: dtype name for (transformer, text_encoder, vae).
DTYPE_RULES = {
    "cuda": ("bfloat16", "bfloat16", "float32"),
    "mps": ("float16", "float32", "float32"),
    "cpu": ("float32", "float32", "float32"),
}


@dataclass(frozen=True)
class Runtime:
    """A resolved device with the dtype of each pipeline component (names, not torch objects)."""

    device: str  # "cuda" | "cuda:1" | "mps" | "cpu"
    kind: str  # "cuda" | "mps" | "cpu"
    transformer_dtype: str
    text_encoder_dtype: str
    vae_dtype: str
    memory_bytes: int  # what the accelerator can hold (CPU: RAM); 0 when unknown

    def dtype(self, component: str) -> Any:
        """The torch dtype for a component name (transformer, text_encoder, vae, other)."""
        import torch

        name = {
            "text_encoder": self.text_encoder_dtype,
            "vae": self.vae_dtype,
        }.get(component, self.transformer_dtype)
        return getattr(torch, name)


# Families whose VAE runs in another dtype than the device rule says, per device kind. LTX-Video's
# causal VAE is published and used in bfloat16 (its reference pipeline and diffusers' examples load
# it so); in float32 it decodes no better in practice and a 768x512x121 decode peaks 5 GiB higher.
def vae_dtype_for(runtime: Runtime, family: str) -> Any:
    """The torch dtype of ``family``'s VAE on ``runtime`` (the device rule unless overridden)."""
    import torch

    from daotai import catalog

    name = catalog.family(family).vae_dtypes.get(runtime.kind, runtime.vae_dtype)
    return getattr(torch, name)


def require_torch() -> Any:
    """Import torch or raise DependencyMissing naming the extra."""
    if importlib.util.find_spec("torch") is None:
        raise DependencyMissing("torch", "neural", "neural rendering")
    import torch

    return torch


def dtype_rule(kind: str) -> tuple[str, str, str]:
    """(transformer, text_encoder, vae) dtype names for a device kind."""
    if kind not in DTYPE_RULES:
        raise BackendError(f"--device: {kind!r} is not a device kind; choose one of: cuda, mps, cpu")
    return DTYPE_RULES[kind]


def _kind_of(device: str) -> str:
    """'cuda:1' -> 'cuda'; validates the spelling."""
    kind = device.split(":", 1)[0]
    if kind not in ("cuda", "mps", "cpu") or (":" in device and kind != "cuda"):
        raise BackendError(f"--device: {device!r} is not a device; choose one of: auto, cuda, cuda:N, mps, cpu")
    if ":" in device and not device.split(":", 1)[1].isdigit():
        raise BackendError(f"--device: {device!r} must name a GPU index, e.g. cuda:0")
    return kind


def _total_ram_bytes() -> int:
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


# On Apple Silicon Metal may use about this share of unified memory by default.
MPS_MEMORY_SHARE = 0.70


def resolve_runtime(device: str | None = None) -> Runtime:
    """Pick the device (explicit, else cuda > mps > cpu) and its dtypes; probes torch now."""
    torch = require_torch()
    requested = (device or "auto").strip().lower()
    if requested == "auto":
        if torch.cuda.is_available():
            requested = "cuda"
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            requested = "mps"
        else:
            requested = "cpu"
    kind = _kind_of(requested)
    memory = _total_ram_bytes()
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise BackendError(f"--device: {requested!r} asked for, but torch sees no CUDA GPU; use --device cpu or auto")
        index = int(requested.split(":", 1)[1]) if ":" in requested else 0
        if index >= torch.cuda.device_count():
            raise BackendError(f"--device: {requested!r} but only {torch.cuda.device_count()} CUDA GPU(s) are visible")
        memory = int(torch.cuda.get_device_properties(index).total_memory)
    elif kind == "mps":
        if getattr(torch.backends, "mps", None) is None or not torch.backends.mps.is_available():
            raise BackendError("--device: 'mps' asked for, but this machine has no usable Metal device; use --device cpu")
        memory = int(memory * MPS_MEMORY_SHARE)
    t, te, v = dtype_rule(kind)
    return Runtime(requested, kind, t, te, v, memory)


def generator_for(seed: int) -> Any:
    """A CPU torch.Generator seeded with ``seed`` (noise drawn on the CPU, same on every device)."""
    torch = require_torch()
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise BackendError(f"seed: {seed!r} must be an integer in [0, 2**64)")
    return torch.Generator(device="cpu").manual_seed(seed)


def health_sample(runtime: Runtime) -> dict[str, Any]:
    """Accelerator health now, as a flat dict (fields in :mod:`daotai.runtime.health`); {} when nothing is readable.

    cuda: the allocator's peak and reserved memory, the card's total, and NVML's temperature
    and throttle reasons; mps: the Metal allocator's figures; on a Mac (any device) also the
    system's memory pressure and thermal state. Never raises: telemetry must not fail a render.
    """
    from daotai.runtime.health import macos_sample, nvml_sample

    sample: dict[str, Any] = {}
    try:
        if runtime.kind == "cuda":
            import torch

            index = int(runtime.device.split(":", 1)[1]) if ":" in runtime.device else 0
            sample["peak_allocated_gib"] = round(torch.cuda.max_memory_allocated(index) / 1024**3, 2)
            sample["reserved_gib"] = round(torch.cuda.memory_reserved(index) / 1024**3, 2)
            sample["total_gib"] = round(runtime.memory_bytes / 1024**3, 2)
            sample.update(nvml_sample(index))
        elif runtime.kind == "mps":
            sample.update(_mps_memory(runtime))
        sample.update(macos_sample())
    except Exception:  # noqa: BLE001  (a driver hiccup leaves the fields read so far)
        pass
    return sample


def _mps_memory(runtime: Runtime) -> dict[str, Any]:
    """Metal allocator figures (GiB): tensors allocated, the driver's total, and the working-set limit."""
    import torch

    mps = getattr(torch, "mps", None)
    found: dict[str, Any] = {}
    for field, name in (("allocated_gib", "current_allocated_memory"), ("driver_gib", "driver_allocated_memory"),
                        ("total_gib", "recommended_max_memory")):
        read = getattr(mps, name, None)
        if read is not None:
            found[field] = round(read() / 1024**3, 2)
    if "total_gib" not in found and runtime.memory_bytes:
        found["total_gib"] = round(runtime.memory_bytes / 1024**3, 2)
    return found
