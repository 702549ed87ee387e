"""Peak-memory estimates for neural video generation (bytes), from model size × frames × size.

Coarse on purpose: they decide *whether* a plan fits and which setting would, not exact
allocator behaviour. Coefficients are documented where they are set.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

GIB = 1024**3


@dataclass(frozen=True)
class ModelFootprint:
    """Parameter counts (billions) and geometry of a latent video model."""

    name: str
    transformer_b: float
    text_encoder_b: float
    vae_b: float
    spatial_down: int  # VAE spatial downsampling × patch size
    temporal_down: int  # VAE temporal downsampling
    hidden: int  # transformer width
    # Decoder activation bytes per output pixel per frame at bf16, measured order of
    # magnitude for causal 3D VAEs without tiling (their conv caches dominate).
    vae_bytes_per_pixel: float


MODELS = MappingProxyType(
    {
        "wan2.1-t2v-1.3b": ModelFootprint("wan2.1-t2v-1.3b", 1.42, 5.68, 0.13, 16, 4, 1536, 120.0),
        "wan2.1-t2v-14b": ModelFootprint("wan2.1-t2v-14b", 14.0, 5.68, 0.13, 16, 4, 5120, 120.0),
        "wan2.2-ti2v-5b": ModelFootprint("wan2.2-ti2v-5b", 5.0, 5.68, 0.7, 32, 4, 3072, 120.0),
        "ltx-video-2b": ModelFootprint("ltx-video-2b", 1.92, 4.76, 0.4, 32, 8, 2048, 40.0),
    }
)


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: float
    activations_bytes: float
    vae_decode_bytes: float
    peak_bytes: float
    offload: str  # "none" | "model" (text encoder moved off after encoding) | "sequential"


def estimate(model: str, width: int, height: int, frames: int, bytes_per_param: float = 2.0,
             offload: str = "none", vae_tiling: bool = False) -> MemoryEstimate:
    """Peak accelerator memory for one generation at the given size and frame count."""
    m = MODELS[model]
    latent_frames = (frames - 1) // m.temporal_down + 1
    tokens = latent_frames * (height // m.spatial_down) * (width // m.spatial_down)
    resident = {
        "none": m.transformer_b + m.text_encoder_b + m.vae_b,
        "model": max(m.transformer_b + m.vae_b, m.text_encoder_b),
        "sequential": 0.5,  # one block at a time
    }[offload]
    weights = resident * 1e9 * bytes_per_param
    # ~12 live (tokens × hidden) bf16 tensors in a block's forward (attention + FFN), ×2 CFG.
    activations = tokens * m.hidden * 2 * 12 * 2
    pixels = width * height * frames
    vae = pixels * m.vae_bytes_per_pixel / (8.0 if vae_tiling else 1.0) / max(frames / 8, 1) * 2
    peak = weights + max(activations, vae)
    return MemoryEstimate(weights, activations, vae, peak, offload)


def choose_settings(model: str, width: int, height: int, frames: int, budget_bytes: float) -> MemoryEstimate | None:
    """The lightest-touch setting that fits the budget, or None when nothing does."""
    for offload, tiling in (("none", False), ("none", True), ("model", True), ("sequential", True)):
        est = estimate(model, width, height, frames, offload=offload, vae_tiling=tiling)
        if est.peak_bytes <= budget_bytes:
            return est
    return None
