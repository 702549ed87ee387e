"""Rough peak-memory planning for wan-mlx on Apple Silicon (unified memory).

macOS lets the GPU wire only part of unified memory (its "recommended max working set");
past that, Metal allocations page and a render slows by orders of magnitude, so a plan that
would exceed it is refused up front. The share used here (about 2/3 up to 36 GB, 3/4 above)
is what current macOS reports on M-series machines; on a real Mac the measured value from
``mx.metal.device_info()["max_recommended_working_set_size"]`` replaces it.
These are estimates to be calibrated on a Mac (see docs/mlx.md), not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from daotai.errors import BackendError

GB = 1024**3
MAC_SIZES_GB = (64, 96, 128, 192, 256, 512)


@dataclass(frozen=True)
class WanSize:
    """Parameter counts of one Wan2.1 model and its width (for activation estimates)."""

    name: str
    transformer_params: float
    dim: int
    ffn_dim: int
    text_params: float = 5.68e9  # UMT5-XXL encoder
    vae_params: float = 0.127e9


WAN_SIZES = {
    "wan2.1-t2v-1.3b": WanSize("wan2.1-t2v-1.3b", 1.42e9, 1536, 8960),
    "wan2.1-t2v-14b": WanSize("wan2.1-t2v-14b", 14.3e9, 5120, 13824),
}


def working_set_bytes(unified_gb: float) -> int:
    """GPU working-set limit macOS grants on a Mac with ``unified_gb`` of unified memory."""
    share = 0.75 if unified_gb > 36 else 2.0 / 3.0
    return int(unified_gb * GB * share)


def weight_bytes(params: float, bits: int | None, group_size: int = 64) -> float:
    """Bytes of weights at float32 (bits None) or b-bit with a 16-bit scale and bias per group."""
    if bits is None:
        return params * 4.0
    return params * (bits + 32.0 / group_size) / 8.0


def tokens(width: int, height: int, frames: int) -> int:
    """Transformer sequence length: latent frames x (H/16) x (W/16)."""
    return ((frames - 1) // 4 + 1) * (height // 16) * (width // 16)


def peak_bytes(size: WanSize, width: int, height: int, frames: int, bits: int | None, group_size: int = 64) -> float:
    """Estimated peak: all weights resident + one block's activations (fused attention) + VAE decode."""
    n = tokens(width, height, frames)
    weights = weight_bytes(size.transformer_params, bits, group_size) + 4.0 * (size.text_params + size.vae_params)
    block_acts = 4.0 * n * (6 * size.dim + size.ffn_dim) * 2  # float32, cond + uncond passes kept alive
    # chunked VAE decode: ~4 output frames of the widest full-size stage (96 ch), 3 live buffers,
    # plus the decoded float32 video itself
    vae_acts = 4.0 * 4 * width * height * 96 * 3 + 4.0 * frames * width * height * 3
    return weights + block_acts + vae_acts


def check_fits(size: WanSize, width: int, height: int, frames: int, bits: int | None, unified_gb: float,
               group_size: int = 64) -> float:
    """The estimated peak in bytes, or BackendError naming the numbers when it would swap."""
    need = peak_bytes(size, width, height, frames, bits, group_size)
    have = working_set_bytes(unified_gb)
    if need > have:
        raise BackendError(
            f"wan-mlx: {size.name} at {width}x{height}, {frames} frames, "
            f"{'float32' if bits is None else f'{bits}-bit'} needs ~{need / GB:.0f} GB but a {unified_gb:g} GB Mac "
            f"lets the GPU use ~{have / GB:.0f} GB; rule: peak <= working set (use --bits 4, a smaller preset or fewer frames)"
        )
    return need


def mac_table(size: WanSize, width: int, height: int, frames: int, bits: int | None) -> list[tuple[int, float, bool]]:
    """(unified GB, estimated peak GB, fits) for each common Mac size."""
    need = peak_bytes(size, width, height, frames, bits) / GB
    return [(gb, need, need * GB <= working_set_bytes(gb)) for gb in MAC_SIZES_GB]
