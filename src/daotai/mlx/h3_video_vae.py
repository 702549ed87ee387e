"""MiniMax-H3's video decoder in MLX, one clip at a time: diffusers' ``decoder(post_quant_conv(z))``.

The decoder is a non-causal ViT: each latent voxel is a token (a 1x1x1 conv, then a linear
to the width), four learned register tokens and one zero token are appended at position 0,
36 pre-norm blocks with layer-scaled residuals attend over all of them (per-head q/k RMS norm
without weights, rotate-half RoPE over 3/4 of each head from length-normalised (t, h, w)
coordinates), and a linear head turns every voxel token back into a 4 x 16 x 16 pixel block.
Output is ImageNet-normalised RGB (the pipeline maps it to [0, 1]).

Not here yet: the clip chunking with its cross-faded overlaps and the spatial tiling that
diffusers' ``AutoencoderKLMiniMaxH3.decode`` wraps around this (the released frames are the
tiled ones), and the encoder. Layout: the decoder's tokens are (B, L, width).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from daotai.errors import BackendError
from daotai.mlx.h3_transformer import apply_rope_half


@dataclass(frozen=True)
class H3VideoDecoderConfig:
    """The decoder half of diffusers' AutoencoderKLMiniMaxH3 config; defaults are the released model's."""

    latent_channels: int = 24
    out_channels: int = 3
    spatial_downsample_factors: tuple[int, ...] = (2, 2, 2, 2, 1, 1)
    temporal_downsample_factors: tuple[int, ...] = (1, 2, 2, 1, 1, 1)
    decoder_num_layers: int = 36
    decoder_num_attention_heads: int = 32
    decoder_attention_head_dim: int = 64
    decoder_num_register_tokens: int = 4
    decoder_ffn_mult: int = 4
    decoder_rope_theta: float = 100.0
    decoder_rope_dim_ratio: float = 0.75
    decoder_norm_eps: float = 1e-5

    @property
    def width(self) -> int:
        return self.decoder_num_attention_heads * self.decoder_attention_head_dim

    @property
    def patch(self) -> tuple[int, int]:
        """(temporal, spatial) pixels a latent voxel decodes to."""
        return math.prod(self.temporal_downsample_factors), math.prod(self.spatial_downsample_factors)

    @property
    def rotary_dim(self) -> int:
        return int(self.decoder_attention_head_dim * self.decoder_rope_dim_ratio)

    @classmethod
    def from_dict(cls, cfg: dict) -> "H3VideoDecoderConfig":
        """Build from a diffusers config.json dict (the encoder's keys ignored)."""
        kw = {k: v for k, v in cfg.items() if k in cls.__dataclass_fields__}
        for key in ("spatial_downsample_factors", "temporal_downsample_factors"):
            if key in kw:
                kw[key] = tuple(int(v) for v in kw[key])
        return cls(**kw)


def decoder_rope(frames: int, height: int, width: int, extra: int, rotary_dim: int,
                 theta: float) -> tuple[mx.array, mx.array]:
    """cos, sin (L, rotary_dim) float32 for F*H*W voxel tokens then ``extra`` tokens at position 0.

    Each axis is normalised to [-1, 1) at cell centres and scaled by 2 pi; the three axes'
    angles are concatenated and then repeated for rotate-half.
    """
    inv_freq = (1.0 / theta ** np.arange(0, 1, 6 / rotary_dim, dtype=np.float32)).astype(np.float32)  # (n,)
    grids = [2.0 * (np.arange(0.5, size, dtype=np.float32) / np.float32(size)) - 1.0 for size in (frames, height, width)]
    pos = np.stack(np.meshgrid(*grids, indexing="ij"), axis=-1).reshape(-1, 3).astype(np.float32)
    pos = np.concatenate([pos, np.zeros((extra, 3), np.float32)])  # (L, 3)
    angles = mx.array(np.float32(2.0 * math.pi)) * mx.array(pos)[:, :, None] * mx.array(inv_freq)[None, None, :]
    angles = angles.reshape(pos.shape[0], -1)
    angles = mx.concatenate([angles, angles], axis=-1)
    return mx.cos(angles), mx.sin(angles)


def _rms(x: mx.array, eps: float) -> mx.array:
    """RMS norm without a weight, in float32."""
    x = x.astype(mx.float32)
    return x * mx.rsqrt(mx.mean(x * x, axis=-1, keepdims=True) + eps)


class DecoderAttention(nn.Module):
    """Full self-attention with biases, weightless per-head q/k RMS norms and partial rotate-half RoPE."""

    def __init__(self, cfg: H3VideoDecoderConfig):
        super().__init__()
        self.heads, self.head_dim, self.eps = (cfg.decoder_num_attention_heads, cfg.decoder_attention_head_dim,
                                               cfg.decoder_norm_eps)
        w = cfg.width
        self.to_q = nn.Linear(w, w)
        self.to_k = nn.Linear(w, w)
        self.to_v = nn.Linear(w, w)
        self.to_out = [nn.Linear(w, w)]

    def __call__(self, x: mx.array, rope) -> mx.array:
        b, n, w = x.shape

        def heads(t: mx.array) -> mx.array:  # (B, L, W) -> (B, H, L, Dh)
            return t.reshape(b, n, self.heads, self.head_dim).transpose(0, 2, 1, 3)

        q = apply_rope_half(_rms(heads(self.to_q(x)), self.eps).astype(x.dtype), *rope)
        k = apply_rope_half(_rms(heads(self.to_k(x)), self.eps).astype(x.dtype), *rope)
        o = mx.fast.scaled_dot_product_attention(q, k, heads(self.to_v(x)), scale=1.0 / math.sqrt(self.head_dim))
        return self.to_out[0](o.transpose(0, 2, 1, 3).reshape(b, n, w))


class _SwiGLU(nn.Module):
    def __init__(self, dim: int, inner: int):
        super().__init__()
        self.proj = nn.Linear(dim, 2 * inner)

    def __call__(self, x: mx.array) -> mx.array:
        value, gate = mx.split(self.proj(x), 2, axis=-1)
        return value * nn.silu(gate)


class _Placeholder(nn.Module):
    def __call__(self, x: mx.array) -> mx.array:
        return x


class _FeedForward(nn.Module):
    """diffusers FeedForward(mult, 'swiglu', bias): net.0.proj, net.2."""

    def __init__(self, dim: int, inner: int):
        super().__init__()
        self.net = [_SwiGLU(dim, inner), _Placeholder(), nn.Linear(inner, dim)]

    def __call__(self, x: mx.array) -> mx.array:
        return self.net[2](self.net[0](x))


class DecoderBlock(nn.Module):
    """Pre-norm attention and SwiGLU FFN, each residual scaled per channel (scale1, scale2)."""

    def __init__(self, cfg: H3VideoDecoderConfig):
        super().__init__()
        w = cfg.width
        self.norm1 = nn.RMSNorm(w, eps=cfg.decoder_norm_eps)
        self.attn = DecoderAttention(cfg)
        self.scale1 = mx.zeros((w,))
        self.norm2 = nn.RMSNorm(w, eps=cfg.decoder_norm_eps)
        self.ff = _FeedForward(w, cfg.decoder_ffn_mult * w)
        self.scale2 = mx.zeros((w,))

    def __call__(self, x: mx.array, rope) -> mx.array:
        x = x + self.attn(self.norm1(x), rope) * self.scale1
        return x + self.ff(self.norm2(x)) * self.scale2


class ViTDecoder(nn.Module):
    """Latent voxels (B, F, H, W, C) channels-last -> pixels (B, C_out, F * pt, H * p, W * p)."""

    def __init__(self, cfg: H3VideoDecoderConfig):
        super().__init__()
        self.cfg = cfg
        w = cfg.width
        pt, p = cfg.patch
        self.proj_in = nn.Linear(cfg.latent_channels, w)
        self.register_tokens = mx.zeros((1, cfg.decoder_num_register_tokens, w))
        self.transformer_blocks = [DecoderBlock(cfg) for _ in range(cfg.decoder_num_layers)]
        self.norm_out = nn.LayerNorm(w, eps=cfg.decoder_norm_eps)
        self.proj_out = nn.Linear(w, cfg.out_channels * pt * p * p)

    def __call__(self, voxels: mx.array) -> mx.array:
        cfg = self.cfg
        b, f, h, w, c = voxels.shape
        x = self.proj_in(voxels.reshape(b, f * h * w, c))  # (B, N, W)
        extra = cfg.decoder_num_register_tokens + 1  # the registers and one zero token, all at position 0
        suffix = mx.concatenate([mx.broadcast_to(self.register_tokens, (b, *self.register_tokens.shape[1:])),
                                 mx.zeros((b, 1, x.shape[-1]), dtype=x.dtype)], axis=1).astype(x.dtype)
        x = mx.concatenate([x, suffix], axis=1)
        rope = decoder_rope(f, h, w, extra, cfg.rotary_dim, cfg.decoder_rope_theta)
        for block in self.transformer_blocks:
            x = block(x, rope)
        x = self.proj_out(self.norm_out(x))[:, : f * h * w]
        pt, p = cfg.patch
        x = x.reshape(b, f, h, w, cfg.out_channels, pt, p, p).transpose(0, 4, 1, 5, 2, 6, 3, 7)
        return x.reshape(b, cfg.out_channels, f * pt, h * p, w * p)


class H3VideoClipDecoder(nn.Module):
    """One clip of denormalised latents (B, C, F, H, W) -> pixels (B, 3, F * 4, H * 16, W * 16), ImageNet-normalised."""

    def __init__(self, cfg: H3VideoDecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.post_quant_conv = nn.Linear(cfg.latent_channels, cfg.latent_channels)  # a 1x1x1 Conv3d
        self.decoder = ViTDecoder(cfg)

    def __call__(self, latents: mx.array) -> mx.array:
        if latents.ndim != 5 or latents.shape[1] != self.cfg.latent_channels:
            raise ValueError(f"h3 video decoder: latents of shape {list(latents.shape)}; must be (B, "
                             f"{self.cfg.latent_channels}, F, H, W)")
        voxels = self.post_quant_conv(latents.astype(mx.float32).transpose(0, 2, 3, 4, 1))  # (B, F, H, W, C)
        return self.decoder(voxels)


def load_h3_video_clip_decoder(folder: Path) -> H3VideoClipDecoder:
    """The clip decoder of a diffusers AutoencoderKLMiniMaxH3 folder, float32."""
    from daotai.mlx.weights import load_into, read_config, read_safetensors

    folder = Path(folder)
    config = read_config(folder)
    if config.get("_class_name", "AutoencoderKLMiniMaxH3") != "AutoencoderKLMiniMaxH3":
        raise BackendError(f"{folder}: config.json describes {config.get('_class_name')}, not an "
                           "AutoencoderKLMiniMaxH3; point at MiniMax-H3's vae folder")
    model = H3VideoClipDecoder(H3VideoDecoderConfig.from_dict(config))
    weights = []
    for name, value in read_safetensors(folder).items():
        if not name.startswith(("decoder.", "post_quant_conv.")) or name.endswith("rope.inv_freq"):
            continue
        if name == "post_quant_conv.weight":  # Conv3d (C, C, 1, 1, 1) -> Linear (C, C)
            value = value.reshape(value.shape[0], value.shape[1])
        weights.append((name, value.astype(mx.float32)))
    load_into(model, weights, f"h3 video decoder {folder}")
    return model
