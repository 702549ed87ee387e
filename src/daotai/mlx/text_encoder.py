"""UMT5 encoder (Wan's text encoder) in MLX, matching transformers' UMT5EncoderModel.

UMT5 differs from T5 in giving every layer its own relative-position bias table.
Names mirror transformers' so the safetensors load through :mod:`daotai.mlx.weights`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
import numpy as np


@dataclass(frozen=True)
class UMT5Config:
    """The encoder fields of a transformers UMT5Config."""

    vocab_size: int = 256384
    d_model: int = 4096
    d_kv: int = 64
    d_ff: int = 10240
    num_layers: int = 24
    num_heads: int = 64
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    layer_norm_epsilon: float = 1e-6
    dense_act_fn: str = "gelu_new"
    is_gated_act: bool = True

    @classmethod
    def from_dict(cls, cfg: dict) -> "UMT5Config":
        """Build from a transformers config.json dict (only gated-gelu UMT5 is supported)."""
        act = cfg.get("feed_forward_proj", "gated-gelu")
        if act not in ("gated-gelu",):
            raise ValueError(f"UMT5 feed_forward_proj {act!r} is not supported (expected 'gated-gelu')")
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in cfg.items() if k in names})


def relative_buckets(q_len: int, k_len: int, num_buckets: int, max_distance: int) -> np.ndarray:
    """Bidirectional T5 relative-position buckets: (q_len, k_len) int32."""
    rel = np.arange(k_len)[None, :] - np.arange(q_len)[:, None]  # memory - query
    half = num_buckets // 2
    out = (rel > 0).astype(np.int64) * half
    n = np.abs(rel)
    max_exact = half // 2
    with np.errstate(divide="ignore"):
        # float32 log like torch, then truncation toward zero (torch .to(long))
        ratio = np.log(n.astype(np.float32) / np.float32(max_exact)) / np.float32(math.log(max_distance / max_exact))
    large = max_exact + np.trunc(np.nan_to_num(ratio * (half - max_exact), neginf=0.0)).astype(np.int64)
    large = np.minimum(large, half - 1)
    return (out + np.where(n < max_exact, n, large)).astype(np.int32)


def _gelu_new(x: mx.array) -> mx.array:
    """transformers' gelu_new (tanh approximation)."""
    return 0.5 * x * (1.0 + mx.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * mx.power(x, 3.0))))


class T5Norm(nn.Module):
    """T5 RMS layer norm (no mean subtraction, no bias), statistics in float32."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = mx.ones((dim,))
        self.eps = eps

    def __call__(self, x: mx.array) -> mx.array:
        xf = x.astype(mx.float32)
        var = mx.mean(xf * xf, axis=-1, keepdims=True)
        return self.weight * (xf * mx.rsqrt(var + self.eps)).astype(self.weight.dtype)


class SelfAttention(nn.Module):
    """Unscaled dot-product attention with a per-layer relative-position bias."""

    def __init__(self, cfg: UMT5Config):
        super().__init__()
        inner = cfg.num_heads * cfg.d_kv
        self.cfg = cfg
        self.q = nn.Linear(cfg.d_model, inner, bias=False)
        self.k = nn.Linear(cfg.d_model, inner, bias=False)
        self.v = nn.Linear(cfg.d_model, inner, bias=False)
        self.o = nn.Linear(inner, cfg.d_model, bias=False)
        self.relative_attention_bias = nn.Embedding(cfg.relative_attention_num_buckets, cfg.num_heads)

    def __call__(self, x: mx.array, mask_bias: mx.array) -> mx.array:
        """x (B, L, d_model), mask_bias (B, 1, 1, L) additive -> (B, L, d_model)."""
        cfg = self.cfg
        b, n, _ = x.shape
        heads = lambda t: t.reshape(b, n, cfg.num_heads, cfg.d_kv).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        buckets = mx.array(
            relative_buckets(n, n, cfg.relative_attention_num_buckets, cfg.relative_attention_max_distance)
        )
        bias = self.relative_attention_bias(buckets).transpose(2, 0, 1)[None]  # (1, H, L, L)
        scores = (q @ k.transpose(0, 1, 3, 2)).astype(mx.float32) + bias + mask_bias
        attn = mx.softmax(scores, axis=-1).astype(v.dtype)
        return self.o((attn @ v).transpose(0, 2, 1, 3).reshape(b, n, -1))


class _AttnLayer(nn.Module):
    def __init__(self, cfg: UMT5Config):
        super().__init__()
        self.SelfAttention = SelfAttention(cfg)
        self.layer_norm = T5Norm(cfg.d_model, cfg.layer_norm_epsilon)

    def __call__(self, x, mask_bias):
        return x + self.SelfAttention(self.layer_norm(x), mask_bias)


class _GatedFF(nn.Module):
    def __init__(self, cfg: UMT5Config):
        super().__init__()
        self.wi_0 = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.wi_1 = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.wo = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def __call__(self, x):
        return self.wo(_gelu_new(self.wi_0(x)) * self.wi_1(x))


class _FFLayer(nn.Module):
    def __init__(self, cfg: UMT5Config):
        super().__init__()
        self.DenseReluDense = _GatedFF(cfg)
        self.layer_norm = T5Norm(cfg.d_model, cfg.layer_norm_epsilon)

    def __call__(self, x):
        return x + self.DenseReluDense(self.layer_norm(x))


class _Block(nn.Module):
    def __init__(self, cfg: UMT5Config):
        super().__init__()
        self.layer = [_AttnLayer(cfg), _FFLayer(cfg)]

    def __call__(self, x, mask_bias):
        return self.layer[1](self.layer[0](x, mask_bias))


class _Stack(nn.Module):
    def __init__(self, cfg: UMT5Config):
        super().__init__()
        self.block = [_Block(cfg) for _ in range(cfg.num_layers)]
        self.final_layer_norm = T5Norm(cfg.d_model, cfg.layer_norm_epsilon)


class UMT5Encoder(nn.Module):
    """UMT5 encoder: token ids (B, L) int + attention mask (B, L) -> last hidden state (B, L, d_model)."""

    def __init__(self, cfg: UMT5Config):
        super().__init__()
        self.cfg = cfg
        self.shared = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.encoder = _Stack(cfg)

    def __call__(self, input_ids: mx.array, attention_mask: mx.array | None = None) -> mx.array:
        x = self.shared(input_ids)
        if attention_mask is None:
            attention_mask = mx.ones(input_ids.shape, dtype=mx.int32)
        # padded keys get the most negative float32, as transformers' bidirectional mask does
        mask_bias = mx.where(attention_mask[:, None, None, :] > 0, 0.0, float(np.finfo(np.float32).min))
        for blk in self.encoder.block:
            x = blk(x, mask_bias)
        return self.encoder.final_layer_norm(x)


def wan_prompt_embeds(encoder: UMT5Encoder, ids: np.ndarray, mask: np.ndarray) -> mx.array:
    """Encode padded ids like diffusers' Wan pipeline: keep real tokens, zero the padding rows."""
    h = encoder(mx.array(ids), mx.array(mask))  # (B, L, d_model)
    return h * mx.array(mask[..., None] > 0).astype(h.dtype)
