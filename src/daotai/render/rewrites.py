"""Exact rewrites of diffusers modules: the same arithmetic in fewer passes over GPU memory.

Found by profiling Wan2.1-1.3B's compiled block at 480x832x81 on an H200 (`bench/neural.py --profile`);
per-step gains measured there (two forwards, 30 blocks each):

- **Rotary embedding.** diffusers writes the rotated pairs back with two strided slice assignments;
  inductor fused q/k RMS-norm with that form into one reduction kernel at ~0.9 TB/s (0.45 ms per
  block). Here the same products are interleaved with one ``stack`` (bit-identical output); inductor
  still fuses it with the norm, 0.43 ms per block: -1.5 ms per step, kept because it costs nothing.
- **Cross-attention kernel.** 32,760 video tokens attend to 512 text tokens. FlashAttention-4 (the
  self-attention kernel) took 0.42 ms per call there inside the pipeline; ``cross_kernel="cudnn"``
  sends the call to cuDNN's fused attention instead (same softmax(QK^T/sqrt(d))V, fp32
  accumulation): 0.21 ms, -12.7 ms per step.
- **GELU in the GEMM epilogue.** The FFN up-projection's tanh-GELU is applied by cuBLASLt while the
  product is still in registers (``torch._addmm_activation``), so the 8960-wide activation is written
  once instead of written, read and written again: 1.57 → 1.37 ms per block, -12 ms per step. The
  GELU then sees the fp32 accumulator rather than its bf16 rounding: a last-bit difference, not an
  approximation.

Nothing here imports torch or diffusers at import time.
"""

from __future__ import annotations

import functools
from typing import Any

CROSS_KERNELS = (None, "cudnn")


def rotate_pairs(x: Any, cos: Any, sin: Any) -> Any:
    """Rotary embedding on interleaved pairs, as Wan defines it.

    x: (B, L, H, D) with pairs (x[2i], x[2i+1]); cos, sin: (1, L, 1, D) float32, each frequency
    repeated for both members of its pair. Returns x's dtype. Element for element the products of
    diffusers' ``apply_rotary_emb`` (computed in float32, rounded once to x's dtype).
    """
    import torch

    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)  # (B, L, H, D/2) each
    c, s = cos[..., 0::2], sin[..., 1::2]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2).type_as(x)


def cudnn_attention(query: Any, key: Any, value: Any) -> Any:
    """softmax(QK^T / sqrt(D)) V through cuDNN's fused kernel; (B, L, H, D) in and out, no mask.

    Called as the aten op so a compiled graph keeps it (a ``sdpa_kernel`` context cannot be traced).
    """
    import torch

    out = torch.ops.aten._scaled_dot_product_cudnn_attention(
        query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), None, False)[0]  # (B, H, L, D)
    return out.transpose(1, 2)


def cudnn_takes_head_dim(head_dim: int) -> bool:
    """Whether cuDNN's fused attention takes heads of ``head_dim`` channels: multiples of 8 only
    ("hidden_dim should be multiple of 8" otherwise, as a tiny test model's 4-wide heads showed on
    an H200); the others stay on the dispatcher's kernels."""
    return head_dim % 8 == 0


@functools.lru_cache(maxsize=8)
def cudnn_attention_supported(device: str) -> bool:
    """True when ``cudnn_attention`` runs on ``device`` and agrees with PyTorch's math kernel.

    One tiny call per process and device: a GPU, cuDNN or PyTorch build without the fused kernel
    (or one that gets it wrong) leaves the cross-attention on the dispatcher's kernel instead of
    failing the first shot. Always False off CUDA.
    """
    import torch

    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return False
    try:
        generator = torch.Generator(device).manual_seed(0)
        q = torch.randn(1, 256, 2, 64, device=device, dtype=torch.bfloat16, generator=generator)  # (B, L, H, D)
        k, v = (torch.randn(1, 64, 2, 64, device=device, dtype=torch.bfloat16, generator=generator) for _ in range(2))
        out = cudnn_attention(q, k, v).float()
        reference = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float()).transpose(1, 2)
        return bool(torch.linalg.vector_norm(out - reference) <= 0.02 * torch.linalg.vector_norm(reference))
    except Exception:  # noqa: BLE001 - any failure means: do not use it here
        return False


def _projections(attn: Any, hidden_states: Any, encoder_hidden_states: Any | None) -> tuple[Any, Any, Any]:
    """q, k, v of a Wan attention module, fused projections or not (diffusers' layout)."""
    source = hidden_states if encoder_hidden_states is None else encoder_hidden_states
    if getattr(attn, "fused_projections", False):
        if not attn.is_cross_attention:
            return attn.to_qkv(hidden_states).chunk(3, dim=-1)
        key, value = attn.to_kv(source).chunk(2, dim=-1)
        return attn.to_q(hidden_states), key, value
    return attn.to_q(hidden_states), attn.to_k(source), attn.to_v(source)


@functools.lru_cache(maxsize=1)
def lean_wan_processor_class() -> type:
    """The processor class (built on first use so that importing this module needs no diffusers)."""
    from diffusers.models.attention_dispatch import dispatch_attention_fn
    from diffusers.models.transformers.transformer_wan import WanAttnProcessor

    class LeanWanAttnProcessor(WanAttnProcessor):
        """Wan text-to-video attention with the interleaved rotary form and an optional cross kernel.

        Image-conditioned modules (``add_k_proj``, Wan I2V) keep diffusers' own path. Self-attention
        goes through diffusers' dispatcher as before, so ``set_attention_backend`` still applies.
        """

        def __init__(self, cross_kernel: str | None = None):
            super().__init__()
            self.cross_kernel = cross_kernel

        def __call__(self, attn: Any, hidden_states: Any, encoder_hidden_states: Any = None,
                     attention_mask: Any = None, rotary_emb: Any = None) -> Any:
            if attn.add_k_proj is not None:
                return super().__call__(attn, hidden_states, encoder_hidden_states, attention_mask, rotary_emb)
            cross = encoder_hidden_states is not None
            query, key, value = _projections(attn, hidden_states, encoder_hidden_states)
            query = attn.norm_q(query).unflatten(2, (attn.heads, -1))  # (B, L, H, D)
            key = attn.norm_k(key).unflatten(2, (attn.heads, -1))
            value = value.unflatten(2, (attn.heads, -1))
            if rotary_emb is not None:
                query, key = rotate_pairs(query, *rotary_emb), rotate_pairs(key, *rotary_emb)
            if (cross and self.cross_kernel == "cudnn" and attention_mask is None and query.is_cuda
                    and cudnn_takes_head_dim(query.shape[-1])):
                out = cudnn_attention(query, key, value)
            else:
                out = dispatch_attention_fn(query, key, value, attn_mask=attention_mask, dropout_p=0.0,
                                            is_causal=False, backend=self._attention_backend,
                                            parallel_config=None if cross else self._parallel_config)
            out = out.flatten(2, 3).type_as(query)
            return attn.to_out[1](attn.to_out[0](out))

    return LeanWanAttnProcessor


def lean_wan_attention(transformer: Any, cross_kernel: str | None = None) -> int:
    """Give every Wan attention module of ``transformer`` the lean processor; returns how many.

    Keeps an attention backend already chosen on a module's processor. Only diffusers'
    ``WanAttention`` modules are touched (Wan, Wan 2.2, VACE); other models' (e.g. LTX's) are left alone.
    """
    if cross_kernel not in CROSS_KERNELS:
        raise ValueError(f"cross_kernel: {cross_kernel!r} must be one of {CROSS_KERNELS}")
    try:
        from diffusers.models.transformers.transformer_wan import WanAttention
    except ImportError:
        return 0
    processor_class = lean_wan_processor_class()
    changed = 0
    for module in transformer.modules():
        if isinstance(module, WanAttention):
            processor = processor_class(cross_kernel)
            processor._attention_backend = getattr(module.processor, "_attention_backend", None)
            processor._parallel_config = getattr(module.processor, "_parallel_config", None)
            module.set_processor(processor)
            changed += 1
    return changed


@functools.lru_cache(maxsize=1)
def gelu_linear_class() -> type:
    """The module class applying a linear layer and tanh-GELU in one cuBLASLt call."""
    import torch

    class GeluLinear(torch.nn.Module):
        """tanh-GELU(x W^T + b) with the GELU in the GEMM's epilogue; keeps the linear as ``proj``
        so state-dict keys are those of diffusers' GELU module."""

        def __init__(self, proj: torch.nn.Linear):
            super().__init__()
            self.proj = proj

        def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
            if not hidden_states.is_cuda:
                # the op's GELU is tanh only on CUDA (cuBLASLt's epilogue); elsewhere it is the erf form
                return torch.nn.functional.gelu(self.proj(hidden_states), approximate="tanh")
            flat = hidden_states.reshape(-1, hidden_states.shape[-1])  # (tokens, in)
            out = torch._addmm_activation(self.proj.bias, flat, self.proj.weight.t(), use_gelu=True)
            return out.reshape(*hidden_states.shape[:-1], out.shape[-1])

    return GeluLinear


def fuse_gelu_epilogues(model: Any) -> int:
    """Replace diffusers' tanh-GELU modules whose projection is a plain biased ``nn.Linear`` (after FP8
    quantisation an FP8 projection stays as it is) by ``GeluLinear``; returns how many."""
    import torch

    try:
        from diffusers.models.activations import GELU
    except ImportError:
        return 0
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if (isinstance(child, GELU) and getattr(child, "approximate", None) == "tanh"
                    and type(child.proj) is torch.nn.Linear and child.proj.bias is not None):
                setattr(parent, name, gelu_linear_class()(child.proj))
                replaced += 1
    return replaced
