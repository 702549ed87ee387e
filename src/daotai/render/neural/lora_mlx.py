"""A LoRA folded into an MLX transformer's linear layers, full precision or quantised (a turbo on a Mac).

Each layer the file names gets ``W += scale * (alpha / rank) * B @ A`` with ``A`` (rank, in) and
``B`` (out, rank); a file without per-layer alphas is fused at ``alpha = rank``, as peft (and so the
`h3` backend) fuses it. A quantised layer is dequantised, changed and quantised again with its own
group size and bits: what converting the fused weights would have given, and the layer then runs at
its usual speed with no adapter beside it. The factors are checked against the layers first, with
the torch path's rules and messages (daotai.render.neural.lora).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from daotai.errors import BackendError
from daotai.render.neural.lora import check_factor_shapes, lora_factors


def linear_shape(module: Any) -> tuple[int, int] | None:
    """(out, in) of an MLX Linear or QuantizedLinear, else None."""
    import mlx.nn as nn

    if isinstance(module, nn.QuantizedLinear):
        out_features, packed = module.weight.shape
        return int(out_features), int(packed) * 32 // int(module.bits)
    if isinstance(module, nn.Linear):
        return tuple(int(n) for n in module.weight.shape)
    return None


def fuse_lora_mlx(model: Any, state: dict, prefix: str, scale: float, source: str = "the LoRA") -> int:
    """Fold ``state`` (keys under ``prefix.``, as diffusers' reader gives them) into ``model`` at ``scale``.

    Returns how many linear layers changed. Refuses (BackendError) factors for layers the model lacks
    or does not fit, before any weight changes.
    """
    modules = dict(model.named_modules())
    factors = lora_factors(state, prefix, source)

    def shape_of(layer: str) -> tuple[int, int] | None | bool:
        return linear_shape(modules[layer]) if layer in modules else False

    check_factor_shapes(factors, shape_of, prefix, source)
    for layer, found in sorted(factors.items()):
        down = _array(state[found[".lora_A.weight"][0]])  # (rank, in)
        up = _array(state[found[".lora_B.weight"][0]])  # (out, rank)
        alpha = state.get(f"{prefix}.{layer}.alpha")
        strength = scale * (float(_array(alpha)) / down.shape[0] if alpha is not None else 1.0)
        _fold(modules[layer], strength, up, down, source, layer)
    return len(factors)


def _array(tensor: Any) -> np.ndarray:
    """A torch tensor (or array) as float32 numpy on the host."""
    if hasattr(tensor, "detach"):
        tensor = tensor.detach().float().cpu().numpy()
    return np.asarray(tensor, dtype=np.float32)


def _fold(module: Any, strength: float, up: np.ndarray, down: np.ndarray, source: str, layer: str) -> None:
    """W += strength * up @ down, (out, in), in ``module``'s own precision and layout; the product is made by
    MLX, on a Mac's GPU like the rest."""
    import mlx.core as mx
    import mlx.nn as nn

    delta = strength * (mx.array(up) @ mx.array(down))

    if isinstance(module, nn.QuantizedLinear):
        mode = getattr(module, "mode", "affine")
        if mode != "affine":
            raise BackendError(f"lora: {source}: {layer!r} is quantised in mode {mode!r}; only affine layers are "
                               "changed (convert the model again with --bits 4 or 8)")
        weight = mx.dequantize(module.weight, module.scales, module.biases, module.group_size, module.bits)
        fused = weight.astype(mx.float32) + delta
        module.weight, module.scales, module.biases = mx.quantize(fused.astype(weight.dtype), module.group_size,
                                                                  module.bits)
        mx.eval(module.weight, module.scales, module.biases)
    else:
        weight = module.weight
        module.weight = (weight.astype(mx.float32) + delta).astype(weight.dtype)
        mx.eval(module.weight)
