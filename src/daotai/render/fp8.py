"""FP8 linear layers for the fast speed mode: float8 (e4m3) matmuls with row-wise scales.

Each eligible ``nn.Linear`` inside a transformer's repeated blocks is replaced by ``Fp8Linear``:
the weight is quantised once, per output channel, and the activations per token at every call,
so one outlier only coarsens its own row. On CUDA the product runs in ``torch._scaled_mm`` (FP8
tensor cores on Ada/Hopper and newer); elsewhere it is computed in fp32 from the same float8
operands, as a reference. It comes back in the input's dtype.
This is a numerics change (3 mantissa bits per operand), so it belongs to ``fast`` only; the
bench reports the deviation it causes.

Nothing here imports torch at import time.
"""

from __future__ import annotations

import functools
from typing import Any

from daotai.errors import BackendError

FP8_ALIGN = 16  # FP8 GEMMs need the reduced and the output dimension to be multiples of 16
# Narrower outputs stay bf16. Quantising the activations costs in proportion to the input width,
# the FP8 GEMM saves in proportion to the output width as well. Measured on an H200 (bench/neural.py
# --attention-only, compiled, quantisation included): 1536-wide outputs lost (Wan q/k/v/out 0.83x,
# FFN down 0.98x) while every layer with 2048 or more outputs gained (1.03x-1.42x).
FP8_MIN_OUT_FEATURES = 2048
MIN_CUDA_CAPABILITY = (8, 9)  # Ada (sm_89) and Hopper (sm_90) have FP8 tensor cores
_SCALE_FLOOR = 1e-12  # an all-zero row gets this scale instead of a division by zero


def quantize_rows(matrix: Any) -> tuple[Any, Any]:
    """(float8 values, float32 scales of shape (rows, 1)) with ``values * scales ≈ matrix``.

    matrix: (rows, cols), any float dtype. Each row is scaled so its largest magnitude maps to the
    format's largest finite value (448 for e4m3), then rounded to float8.
    """
    import torch

    fp8 = torch.float8_e4m3fn
    largest = torch.finfo(fp8).max
    wide = matrix.float()
    scales = wide.abs().amax(dim=1, keepdim=True).clamp(min=_SCALE_FLOOR) / largest
    values = (wide / scales).clamp(-largest, largest).to(fp8)
    return values, scales


def _linear_class() -> type:
    import torch

    class Fp8Linear(torch.nn.Module):
        """``y = x @ W.T + b`` with W (out, in) and x (..., in) both in float8 with row-wise scales."""

        def __init__(self, linear: torch.nn.Linear):
            super().__init__()
            self.in_features, self.out_features = linear.in_features, linear.out_features
            # First buffer, empty: diffusers reads a module's dtype from its first floating tensor
            # (get_parameter_dtype) to cast inputs, and must find the compute dtype, not float8.
            self.register_buffer("compute_dtype_marker", torch.empty(0, dtype=linear.weight.dtype), persistent=False)
            values, scales = quantize_rows(linear.weight.detach())  # (out, in) fp8, (out, 1) fp32
            # Buffers, not parameters: nothing trains these, and .to(device) still moves them.
            self.register_buffer("weight_fp8", values)
            self.register_buffer("weight_scale", scales.t().contiguous())  # (1, out), as _scaled_mm wants
            bias = None if linear.bias is None else linear.bias.detach()
            self.register_buffer("bias", bias)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            rows = x.reshape(-1, self.in_features)  # (tokens, in)
            values, scales = quantize_rows(rows)
            bias = None if self.bias is None else self.bias.to(x.dtype)
            if values.device.type != "cuda":
                # The same product from the same float8 operands, in fp32: the CPU's row-wise
                # _scaled_mm exists on some torch releases only (2.11 refuses it), and nothing
                # fast runs there anyway; this keeps the numerics testable everywhere.
                wide = (values.float() * scales) @ (self.weight_fp8.float() * self.weight_scale.t()).t()  # (tokens, out)
                out = (wide if bias is None else wide + bias.float()).to(x.dtype)
                return out.reshape(*x.shape[:-1], self.out_features)
            # weight_fp8.t() is the column-major (in, out) operand the FP8 GEMM needs, without a copy.
            out = torch._scaled_mm(values, self.weight_fp8.t(), scale_a=scales, scale_b=self.weight_scale,
                                   bias=bias, out_dtype=x.dtype)
            return out.reshape(*x.shape[:-1], self.out_features)

        def extra_repr(self) -> str:
            return f"in_features={self.in_features}, out_features={self.out_features}, fp8=e4m3 row-wise"

    return Fp8Linear


@functools.lru_cache(maxsize=None)
def fp8_linear_class() -> type:
    """The ``Fp8Linear`` module class (made on first use so this module imports without torch)."""
    return _linear_class()


def eligible(linear: Any, min_out_features: int | None = None) -> bool:
    """Whether an ``nn.Linear`` runs as an FP8 GEMM: both widths multiples of 16, output wide enough.

    ``min_out_features`` defaults to ``FP8_MIN_OUT_FEATURES`` (read at call time).
    """
    floor = FP8_MIN_OUT_FEATURES if min_out_features is None else min_out_features
    return (linear.in_features % FP8_ALIGN == 0 and linear.out_features % FP8_ALIGN == 0
            and linear.out_features >= floor)


def quantize_linears(module: Any) -> int:
    """Replace every eligible ``nn.Linear`` below ``module`` by an ``Fp8Linear``, in place.

    Returns how many were replaced. The bf16 weights are dropped with the replaced modules.
    """
    import torch

    fp8_linear = fp8_linear_class()
    replaced = 0
    for parent_name, parent in list(module.named_modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear) and eligible(child) and not is_modulation(f"{parent_name}.{name}"):
                setattr(parent, name, fp8_linear(child))
                replaced += 1
    return replaced


def is_modulation(qualified_name: str) -> bool:
    """Whether a linear layer projects the timestep embedding into norm modulation (AdaLN) parameters.

    Those stay in their own dtype under every weight rounding: a handful of rows per step, so no
    time to gain, and a rounding there biases every token of every block at every step the same way.
    """
    return any(part.startswith("adaln") or "norm" in part for part in qualified_name.lower().split("."))


def quantize_repeated_blocks(transformer: Any) -> int:
    """FP8 linears in the transformer's repeated blocks (its ``_repeated_blocks`` classes) only.

    Embeddings, the timestep/text conditioning and the output projection stay in their own
    dtype: they are a small share of the FLOPs and set the scale of everything downstream.
    """
    names = set(getattr(transformer, "_repeated_blocks", None) or ())
    if not names:
        raise BackendError(f"speed: fp8 needs a transformer with repeated blocks; "
                           f"{type(transformer).__name__} names none")
    blocks = [module for module in transformer.modules() if type(module).__name__ in names]
    return sum(quantize_linears(block) for block in blocks)


@functools.lru_cache(maxsize=None)
def fp8_supported(device: str) -> bool:
    """Whether FP8 row-wise GEMMs run on this CUDA device and agree with a float32 product.

    CPU and MPS answer False: the CPU kernel is a reference implementation (slower than bf16)
    and MPS has no FP8 matmul. On CUDA the device must be Ada/Hopper or newer, and one small
    GEMM with bias is run and checked once per process, so an unsupported build degrades to
    bf16 instead of failing the first shot.
    """
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return False
    index = torch.device(device).index or 0
    if torch.cuda.get_device_capability(index) < MIN_CUDA_CAPABILITY:
        return False
    try:
        generator = torch.Generator(device="cpu").manual_seed(0)
        x = torch.randn(64, 128, generator=generator).to(device, torch.bfloat16)
        linear = torch.nn.Linear(128, 64).to(device, torch.bfloat16)
        got = fp8_linear_class()(linear)(x).float()
        want = linear(x).float()
        error = ((got - want).norm() / want.norm()).item()
    except (AttributeError, RuntimeError, TypeError, ValueError):  # an older PyTorch or an unsupported build
        return False
    return error < 0.1
