"""Wan2.1 diffusion transformer (DiT) in MLX, numerically matching diffusers' WanTransformer3DModel.

Parameter names mirror the diffusers module tree so a diffusers safetensors file loads with
the single mapping in :mod:`daotai.mlx.weights`. Layout: hidden states are (B, L, D) with
L = F' * H' * W' patches in (frame, row, column) order, as diffusers flattens them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
import numpy as np


@dataclass(frozen=True)
class WanTransformerConfig:
    """Subset of the diffusers config that the text-to-video transformer uses."""

    patch_size: tuple[int, int, int] = (1, 2, 2)
    num_attention_heads: int = 40
    attention_head_dim: int = 128
    in_channels: int = 16
    out_channels: int = 16
    text_dim: int = 4096
    freq_dim: int = 256
    ffn_dim: int = 13824
    num_layers: int = 40
    cross_attn_norm: bool = True
    eps: float = 1e-6
    rope_max_seq_len: int = 1024

    @property
    def inner_dim(self) -> int:
        """Model width D = heads * head_dim."""
        return self.num_attention_heads * self.attention_head_dim

    @classmethod
    def from_dict(cls, cfg: dict) -> "WanTransformerConfig":
        """Build from a diffusers config.json dict, refusing the image-conditioned variants."""
        if cfg.get("image_dim") or cfg.get("added_kv_proj_dim"):
            raise ValueError("image-to-video Wan (image_dim/added_kv_proj_dim) is not supported by wan-mlx yet")
        names = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in cfg.items() if k in names}
        if "patch_size" in kw:
            kw["patch_size"] = tuple(kw["patch_size"])
        return cls(**kw)


def timestep_sinusoid(t: mx.array, dim: int) -> mx.array:
    """diffusers Timesteps(flip_sin_to_cos=True, shift 0): (B,) -> (B, dim) as [cos, sin]."""
    half = dim // 2
    freqs = mx.exp(-math.log(10000.0) * mx.arange(half, dtype=mx.float32) / half)  # (half,)
    args = t.astype(mx.float32)[:, None] * freqs[None, :]
    return mx.concatenate([mx.cos(args), mx.sin(args)], axis=-1)


def rope_tables(head_dim: int, max_len: int, grid: tuple[int, int, int], theta: float = 10000.0):
    """3D RoPE cos/sin per patch: two (L, head_dim // 2) float32 arrays (one per rotated pair)."""
    h_dim = w_dim = 2 * (head_dim // 6)
    t_dim = head_dim - h_dim - w_dim
    f, h, w = grid
    parts = []
    # float64 on the host like diffusers, then cast: keeps parity for long sequences
    for dim, n, axis in ((t_dim, f, 0), (h_dim, h, 1), (w_dim, w, 2)):
        inv = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64)[: dim // 2] / dim)
        ang = np.outer(np.arange(max_len, dtype=np.float64), inv)[:n]  # (n, dim/2)
        shape = [1, 1, 1, dim // 2]
        shape[axis] = n
        parts.append(np.broadcast_to(ang.reshape(shape), (f, h, w, dim // 2)))
    ang = np.concatenate(parts, axis=-1).reshape(f * h * w, head_dim // 2)
    return mx.array(np.cos(ang).astype(np.float32)), mx.array(np.sin(ang).astype(np.float32))


def apply_rope(x: mx.array, cos: mx.array, sin: mx.array) -> mx.array:
    """Rotate interleaved pairs (x0, x1) of x (B, H, L, Dh) by per-position angles (L, Dh/2)."""
    b, h, n, d = x.shape
    xp = x.reshape(b, h, n, d // 2, 2)
    x1, x2 = xp[..., 0], xp[..., 1]
    out = mx.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    return out.reshape(b, h, n, d)


class Attention(nn.Module):
    """Wan attention: q/k RMS-normed across all heads, optional RoPE, no mask."""

    def __init__(self, dim: int, heads: int, eps: float):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = [nn.Linear(dim, dim)]
        self.norm_q = nn.RMSNorm(dim, eps=eps)
        self.norm_k = nn.RMSNorm(dim, eps=eps)

    def __call__(self, x: mx.array, context: mx.array | None = None, rope=None) -> mx.array:
        """x (B, L, D), context (B, S, D) or None for self-attention -> (B, L, D)."""
        ctx = x if context is None else context
        b, n, d = x.shape
        dh = d // self.heads
        q = self.norm_q(self.to_q(x)).reshape(b, n, self.heads, dh).transpose(0, 2, 1, 3)
        k = self.norm_k(self.to_k(ctx)).reshape(b, ctx.shape[1], self.heads, dh).transpose(0, 2, 1, 3)
        v = self.to_v(ctx).reshape(b, ctx.shape[1], self.heads, dh).transpose(0, 2, 1, 3)
        if rope is not None:
            q = apply_rope(q, *rope)
            k = apply_rope(k, *rope)
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(dh))
        return self.to_out[0](o.transpose(0, 2, 1, 3).reshape(b, n, d))


class _GeluProj(nn.Module):
    """Linear followed by tanh-approximate GELU (diffusers' GELU(approximate='tanh'))."""

    def __init__(self, dim: int, inner: int):
        super().__init__()
        self.proj = nn.Linear(dim, inner)

    def __call__(self, x: mx.array) -> mx.array:
        return _gelu_tanh(self.proj(x))


def _gelu_tanh(x: mx.array) -> mx.array:
    """GELU with the tanh approximation, written out so it matches torch's formula exactly."""
    return 0.5 * x * (1.0 + mx.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


class _Placeholder(nn.Module):
    """Stands in for a parameter-free torch module so list indices match diffusers' names."""

    def __call__(self, x: mx.array) -> mx.array:
        return x


class FeedForward(nn.Module):
    """diffusers FeedForward(activation 'gelu-approximate'): net.0.proj -> gelu -> net.2."""

    def __init__(self, dim: int, inner: int):
        super().__init__()
        self.net = [_GeluProj(dim, inner), _Placeholder(), nn.Linear(inner, dim)]

    def __call__(self, x: mx.array) -> mx.array:
        return self.net[2](self.net[0](x))


class _MLP2(nn.Module):
    """Two linears with an activation between (TimestepEmbedding / PixArt text projection)."""

    def __init__(self, din: int, dout: int, act):
        super().__init__()
        self.linear_1 = nn.Linear(din, dout)
        self.linear_2 = nn.Linear(dout, dout)
        self._act = act

    def __call__(self, x: mx.array) -> mx.array:
        return self.linear_2(self._act(self.linear_1(x)))


class ConditionEmbedder(nn.Module):
    """Time (sinusoid -> MLP -> 6D modulation) and text (text_dim -> D) embeddings."""

    def __init__(self, cfg: WanTransformerConfig):
        super().__init__()
        d = cfg.inner_dim
        self.freq_dim = cfg.freq_dim
        self.time_embedder = _MLP2(cfg.freq_dim, d, nn.silu)
        self.time_proj = nn.Linear(d, 6 * d)
        self.text_embedder = _MLP2(cfg.text_dim, d, _gelu_tanh)

    def __call__(self, t: mx.array, text: mx.array):
        """t (B,), text (B, S, text_dim) -> temb (B, D), proj (B, 6D), text (B, S, D)."""
        temb = self.time_embedder(timestep_sinusoid(t, self.freq_dim))
        return temb, self.time_proj(nn.silu(temb)), self.text_embedder(text)


class Block(nn.Module):
    """One Wan transformer block: modulated self-attn, cross-attn, modulated FFN."""

    def __init__(self, cfg: WanTransformerConfig):
        super().__init__()
        d = cfg.inner_dim
        self.norm1 = nn.LayerNorm(d, eps=cfg.eps, affine=False)
        self.attn1 = Attention(d, cfg.num_attention_heads, cfg.eps)
        self.attn2 = Attention(d, cfg.num_attention_heads, cfg.eps)
        self.norm2 = nn.LayerNorm(d, eps=cfg.eps, affine=True) if cfg.cross_attn_norm else _Placeholder()
        self.ffn = FeedForward(d, cfg.ffn_dim)
        self.norm3 = nn.LayerNorm(d, eps=cfg.eps, affine=False)
        self.scale_shift_table = mx.zeros((1, 6, d))

    def __call__(self, x: mx.array, context: mx.array, tproj: mx.array, rope) -> mx.array:
        """x (B, L, D); tproj (B, 6, D) float32 modulation."""
        mod = self.scale_shift_table.astype(mx.float32) + tproj.astype(mx.float32)  # (B, 6, D)
        shift, scale, gate, c_shift, c_scale, c_gate = (mod[:, i : i + 1] for i in range(6))
        dt = x.dtype
        h = (self.norm1(x.astype(mx.float32)) * (1 + scale) + shift).astype(dt)
        x = (x.astype(mx.float32) + self.attn1(h, None, rope) * gate).astype(dt)
        h = self.norm2(x.astype(mx.float32)).astype(dt)
        x = x + self.attn2(h, context)
        h = (self.norm3(x.astype(mx.float32)) * (1 + c_scale) + c_shift).astype(dt)
        return (x.astype(mx.float32) + self.ffn(h).astype(mx.float32) * c_gate).astype(dt)


class WanTransformer(nn.Module):
    """The Wan2.1 text-to-video DiT; call with latents (B, C, F, H, W) like diffusers."""

    def __init__(self, cfg: WanTransformerConfig):
        super().__init__()
        self.cfg = cfg
        pt, ph, pw = cfg.patch_size
        # the Conv3d patch embedding with kernel == stride is a Linear over flattened patches
        self.patch_embedding = nn.Linear(cfg.in_channels * pt * ph * pw, cfg.inner_dim)
        self.condition_embedder = ConditionEmbedder(cfg)
        self.blocks = [Block(cfg) for _ in range(cfg.num_layers)]
        self.norm_out = nn.LayerNorm(cfg.inner_dim, eps=cfg.eps, affine=False)
        self.proj_out = nn.Linear(cfg.inner_dim, cfg.out_channels * pt * ph * pw)
        self.scale_shift_table = mx.zeros((1, 2, cfg.inner_dim))

    def __call__(self, latents: mx.array, timestep: mx.array, text: mx.array) -> mx.array:
        """latents (B, C, F, H, W), timestep (B,), text (B, S, text_dim) -> velocity (B, C_out, F, H, W)."""
        x, grid = self.patchify(latents, self.patch_embedding)
        rope = rope_tables(self.cfg.attention_head_dim, self.cfg.rope_max_seq_len, grid)
        temb, tproj, context = self.embed_conditions(timestep, text)
        for blk in self.blocks:
            x = blk(x, context, tproj, rope)
        return self.unpatchify(x, temb, latents.shape)

    def patchify(self, video: mx.array, embedding: nn.Linear) -> tuple[mx.array, tuple[int, int, int]]:
        """(B, C, F, H, W) -> patch tokens (B, L, D) through ``embedding``, and the patch grid (F', H', W')."""
        b, c, f, h, w = video.shape
        pt, ph, pw = self.cfg.patch_size
        gf, gh, gw = f // pt, h // ph, w // pw
        # (B, C, gf, pt, gh, ph, gw, pw) -> (B, gf, gh, gw, C, pt, ph, pw): patch vectors in Conv3d weight order
        p = video.reshape(b, c, gf, pt, gh, ph, gw, pw).transpose(0, 2, 4, 6, 1, 3, 5, 7)
        return embedding(p.reshape(b, gf * gh * gw, c * pt * ph * pw)), (gf, gh, gw)

    def embed_conditions(self, timestep: mx.array, text: mx.array) -> tuple[mx.array, mx.array, mx.array]:
        """timestep (B,), text (B, S, text_dim) -> temb (B, D), block modulation (B, 6, D), context (B, S, D)."""
        temb, tproj, context = self.condition_embedder(timestep, text)
        return temb, tproj.reshape(tproj.shape[0], 6, self.cfg.inner_dim), context

    def unpatchify(self, x: mx.array, temb: mx.array, shape: tuple[int, ...]) -> mx.array:
        """Output head: tokens (B, L, D) -> velocity (B, C_out, F, H, W) for latents of ``shape``."""
        cfg = self.cfg
        b, _, f, h, w = shape
        pt, ph, pw = cfg.patch_size
        gf, gh, gw = f // pt, h // ph, w // pw
        mod = self.scale_shift_table + temb[:, None, :]  # (B, 2, D)
        shift, scale = mod[:, 0:1], mod[:, 1:2]
        x = (self.norm_out(x.astype(mx.float32)) * (1 + scale) + shift).astype(x.dtype)
        x = self.proj_out(x)  # (B, L, pt*ph*pw*C_out), diffusers orders (pt, ph, pw, C)
        co = cfg.out_channels
        x = x.reshape(b, gf, gh, gw, pt, ph, pw, co).transpose(0, 7, 1, 4, 2, 5, 3, 6)
        return x.reshape(b, co, f, h, w)
