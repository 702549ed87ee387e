"""Int8 weight-only linear layers: half a bf16 transformer's weight memory, on any device.

For cards (and Macs) too small to hold a model's transformer in bf16: each linear layer of the
transformer's repeated blocks keeps its weight as int8 with one scale per output row
(symmetric, absmax / 127), and rebuilds the bf16 weight just before its product. The product
itself runs in the activations' dtype, so this saves memory, not time, and works wherever the
model runs (CUDA, MPS, CPU). It is approximate: one rounding of every weight to 8 bits.
"""

from __future__ import annotations

import functools
from typing import Any

from daotai.errors import BackendError

INT8_MAX = 127


def quantize_rows_int8(weight: Any) -> tuple[Any, Any]:
    """(out, in) float weight → ((out, in) int8, (out,) float32 scale) with weight ≈ q * scale[:, None]."""
    import torch

    rows = weight.detach().float()
    scale = rows.abs().amax(dim=1).clamp(min=1e-12) / INT8_MAX  # (out,)
    quantized = torch.round(rows / scale[:, None]).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return quantized, scale


@functools.lru_cache(maxsize=None)
def _linear_class() -> type:
    """The Int8Linear module class (built on first use: torch is an optional dependency)."""
    import torch

    class Int8Linear(torch.nn.Module):
        """y = x @ (q * scale)^T + b, with q int8 (out, in) and scale float32 (out,)."""

        def __init__(self, quantized: Any, scale: Any, bias: Any | None, dtype: Any):
            super().__init__()
            # diffusers reads a module's dtype from its first floating tensor: the compute dtype, not int8's scale.
            self.register_buffer("compute_dtype_marker", torch.empty(0, dtype=dtype), persistent=False)
            self.in_features = quantized.shape[1]
            self.out_features = quantized.shape[0]
            self.register_buffer("weight_int8", quantized)
            self.register_buffer("weight_scale", scale)
            self.bias = torch.nn.Parameter(bias.detach(), requires_grad=False) if bias is not None else None
            self.weight_dtype = dtype  # the dtype the layer computed in before quantising

        @property
        def weight(self) -> Any:
            """The dequantised weight (diffusers reads ``.weight.dtype`` of linears for casting)."""
            return (self.weight_int8.to(self.weight_dtype) * self.weight_scale.to(self.weight_dtype)[:, None])

        def forward(self, x: Any) -> Any:
            weight = self.weight_int8.to(x.dtype) * self.weight_scale.to(x.dtype)[:, None]
            return torch.nn.functional.linear(x, weight, self.bias.to(x.dtype) if self.bias is not None else None)

        def extra_repr(self) -> str:
            return f"in_features={self.in_features}, out_features={self.out_features}, int8 rows"

    return Int8Linear


def int8_linear(linear: Any) -> Any:
    """An Int8Linear holding ``linear``'s weight rounded to int8 rows (on the linear's device)."""
    quantized, scale = quantize_rows_int8(linear.weight)
    return _linear_class()(quantized, scale, linear.bias, linear.weight.dtype)


def quantize_linears_int8(module: Any) -> int:
    """Replace every torch.nn.Linear inside ``module`` (but AdaLN modulation) by an Int8Linear; returns how many."""
    import torch

    from daotai.render.fp8 import is_modulation

    replaced = 0
    for parent_name, parent in list(module.named_modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear) and not is_modulation(f"{parent_name}.{name}"):
                setattr(parent, name, int8_linear(child))
                replaced += 1
    return replaced


def quantize_repeated_blocks_int8(transformer: Any) -> int:
    """Int8 weights for the linears of the transformer's repeated blocks (``_repeated_blocks``).

    Embeddings, conditioning projections and output heads keep their dtype: they are a small share
    of the weights and set the scale of everything downstream.
    """
    names = set(getattr(transformer, "_repeated_blocks", None) or ())
    if not names:
        raise BackendError(f"weights=int8 needs a transformer with repeated blocks; {type(transformer).__name__} "
                           "names none")
    blocks = [module for module in transformer.modules() if type(module).__name__ in names]
    return sum(quantize_linears_int8(block) for block in blocks)

