"""Weight quantisation of the MLX transformers, Wan and MiniMax-H3 (affine 4/8-bit, per-group scales).

Only the transformer blocks' linear layers are quantised (with Wan-VACE, the control blocks'
too, their input and output projections included): they hold >95 % of the parameters of a Wan DiT. Kept at full precision by default, and why:
- the UMT5 text encoder runs once per prompt (its cost is load time, not steps), and
  its embeddings condition every step, so quantisation error there is paid everywhere;
- the VAE is convolutional, small (~0.5 GB), runs once, and its errors land directly
  on output pixels;
- the patch embedding, time/text embedders and output head are tiny and sit at the
  model's inputs and outputs, where errors are not averaged out by later layers.
"""

from __future__ import annotations

from dataclasses import dataclass

from daotai.errors import BackendError

ALLOWED_BITS = (4, 8)
ALLOWED_GROUP_SIZES = (32, 64, 128)


@dataclass(frozen=True)
class QuantSpec:
    """bits per weight (4|8) and group size (32|64|128) of shared scale/bias."""

    bits: int = 4
    group_size: int = 64

    def __post_init__(self):
        if self.bits not in ALLOWED_BITS:
            raise BackendError(f"quantisation bits={self.bits} not allowed; rule: bits in {ALLOWED_BITS}")
        if self.group_size not in ALLOWED_GROUP_SIZES:
            raise BackendError(
                f"quantisation group_size={self.group_size} not allowed; rule: group_size in {ALLOWED_GROUP_SIZES}"
            )


WAN_BLOCK_PREFIXES = ("blocks.", "vace_blocks.")  # Wan's blocks and Wan-VACE's control blocks
# MiniMax-H3: the block stack and the text refiner's blocks. A block's AdaLN projection
# (``adaln_proj.linear``) is ~40 % of the released model's parameters, so it is quantised too
# unless ``skip`` names it (bench/h3_mlx_quant.py measures the error both ways).
H3_BLOCK_PREFIXES = ("transformer_blocks.", "token_refiner.refiner_blocks.")


def quantizable(path: str, module, group_size: int, prefixes: tuple[str, ...] = WAN_BLOCK_PREFIXES,
                skip: tuple[str, ...] = ()) -> bool:
    """True for a Linear inside the transformer's blocks (paths starting with ``prefixes``, none ending with one
    of ``skip``) whose input width divides into groups."""
    import mlx.nn as nn

    return (
        isinstance(module, nn.Linear)
        and path.startswith(prefixes)
        and not path.endswith(skip)
        and module.weight.shape[-1] % group_size == 0
    )


def quantize_transformer(model, spec: QuantSpec, prefixes: tuple[str, ...] = WAN_BLOCK_PREFIXES,
                         skip: tuple[str, ...] = ()) -> list[str]:
    """Quantise the block linears of a transformer in place (Wan's by default); returns the quantised paths."""
    import mlx.nn as nn

    done: list[str] = []

    def pred(path, module):
        ok = quantizable(path, module, spec.group_size, prefixes, skip)
        if ok:
            done.append(path)
        return ok

    nn.quantize(model, group_size=spec.group_size, bits=spec.bits, class_predicate=pred)
    return done
