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
    latents_mean: tuple[float, ...] | None = None  # per channel; the sampler's latents are normalised with these
    latents_std: tuple[float, ...] | None = None

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
        for key in ("latents_mean", "latents_std"):
            if kw.get(key) is not None:
                kw[key] = tuple(float(v) for v in kw[key])
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


# ---- the whole decode: temporal chunks cross-faded, each chunk spatially tiled and blended ----

@dataclass(frozen=True)
class VideoTiling:
    """Pixel tile size and least overlap; the released model was decoded with 256 / 64 (diffusers' defaults)."""

    tile: int = 256
    overlap: int = 64


RELEASED_TILING = VideoTiling()
PIXEL_MEAN = (0.485, 0.456, 0.406)  # the decoder's output is ImageNet-normalised RGB over [0, 1]
PIXEL_STD = (0.229, 0.224, 0.225)


def denormalize_video(latents: mx.array, cfg: H3VideoDecoderConfig) -> mx.array:
    """Sampled latents (B, C, T, H, W) -> as the decoder reads them: latents * std + mean per channel."""
    c = cfg.latent_channels
    mean = mx.array(cfg.latents_mean or (0.0,) * c, dtype=mx.float32).reshape(1, c, 1, 1, 1)
    std = mx.array(cfg.latents_std or (1.0,) * c, dtype=mx.float32).reshape(1, c, 1, 1, 1)
    return latents.astype(mx.float32) * std + mean


def to_unit_rgb(pixels: mx.array) -> mx.array:
    """Decoder output (B, 3, F, H, W), ImageNet-normalised -> RGB in [0, 1], same shape."""
    mean = mx.array(PIXEL_MEAN, dtype=mx.float32).reshape(1, 3, 1, 1, 1)
    std = mx.array(PIXEL_STD, dtype=mx.float32).reshape(1, 3, 1, 1, 1)
    return mx.clip(pixels * std + mean, 0.0, 1.0)


def split_tiles(length: int, tile: int, min_overlap: int, step: int) -> tuple[list[int], list[int], list[int]]:
    """Tile starts, lengths and overlaps over ``length`` pixels: the fewest tiles whose overlaps are all at least
    ``min_overlap``, the slack spread round-robin over the overlaps in whole ``step``s (latent-aligned)."""
    if tile >= length:
        return [0], [length], []
    count = math.ceil(length / tile)
    while tile * count - min_overlap * (count - 1) < length:
        count += 1
    overlaps = [min_overlap] * (count - 1)
    for i in range((tile * count - sum(overlaps) - length) // step):
        overlaps[i % (count - 1)] += step
    starts = [0]
    for overlap in overlaps:
        starts.append(starts[-1] + tile - overlap)
    return starts, [tile] * count, overlaps


def blend(a: mx.array, b: mx.array, extent: int, axis: int) -> mx.array:
    """``b`` with its first ``extent`` entries along ``axis`` cross-faded linearly from ``a``'s last ones."""
    extent = min(a.shape[axis], b.shape[axis], extent)
    shape = [1] * b.ndim
    shape[axis] = extent
    ramp = (mx.arange(extent, dtype=mx.float32) / extent).reshape(shape).astype(b.dtype)
    tail = [slice(None)] * a.ndim
    tail[axis] = slice(a.shape[axis] - extent, None)
    head = [slice(None)] * b.ndim
    head[axis] = slice(0, extent)
    rest = [slice(None)] * b.ndim
    rest[axis] = slice(extent, None)
    mixed = a[tuple(tail)] * (1 - ramp) + b[tuple(head)] * ramp
    return mixed if extent == b.shape[axis] else mx.concatenate([mixed, b[tuple(rest)]], axis=axis)


def stitch(tiles: list[list[mx.array]], height_overlaps: list[int], width_overlaps: list[int]) -> mx.array:
    """Join decoded tiles (…, H, W): each blended into its upper and left neighbour, overlaps cropped."""
    rows = []
    for i, row in enumerate(tiles):
        kept = []
        for j, tile in enumerate(row):
            if i > 0:
                tile = blend(tiles[i - 1][j], tile, height_overlaps[i - 1], axis=-2)
            if j > 0:
                tile = blend(row[j - 1], tile, width_overlaps[j - 1], axis=-1)
            if i < len(tiles) - 1:
                tile = tile[..., : tile.shape[-2] - height_overlaps[i], :]
            if j < len(row) - 1:
                tile = tile[..., : tile.shape[-1] - width_overlaps[j]]
            kept.append(tile)
        rows.append(mx.concatenate(kept, axis=-1))
    return mx.concatenate(rows, axis=-2)


@dataclass(frozen=True)
class ClipGeometry:
    """How the encoder chunked time, which the decode mirrors (17 frames a clip, 3 trailing latents dropped)."""

    clip_length: int = 17
    token_drop: int = 3
    temporal_ratio: int = 4

    @property
    def chunk_tokens(self) -> int:
        return math.ceil(self.clip_length / self.temporal_ratio)

    @property
    def pre_padding(self) -> int:
        """Leading decoded frames of a chunk that are not part of the video."""
        return (-self.clip_length) % self.temporal_ratio

    @property
    def token_overlap(self) -> int:
        return (-self.token_drop) % self.chunk_tokens

    @property
    def frame_overlap(self) -> int:
        return max(self.token_overlap * self.temporal_ratio - self.pre_padding, 0)


def decode_video(decoder: H3VideoClipDecoder, latents: mx.array, geometry: ClipGeometry = ClipGeometry(),
                 tiling: VideoTiling | None = RELEASED_TILING) -> mx.array:
    """Denormalised latents (B, C, T, H, W) -> pixels (B, 3, F, H * 16, W * 16) as diffusers' decode: latent chunks
    decoded with their overlap, consecutive chunks cross-faded over ``frame_overlap`` frames, padding trimmed."""
    chunk, drop = geometry.chunk_tokens, geometry.token_drop
    chunk_frames = chunk * geometry.temporal_ratio
    tokens = latents.shape[2] + drop
    pad = (-tokens) % chunk
    chunks = (tokens + pad) // chunk - int(drop > 0)
    if pad:
        latents = mx.concatenate([latents, mx.repeat(latents[:, :, -1:], pad, axis=2)], axis=2)
    pieces, overlap = [], None
    for i in range(chunks):
        clip = decode_clip(decoder, latents[:, :, i * chunk : i * chunk + chunk + geometry.token_overlap], tiling)
        for j in range(int(drop > 0) + 1):
            piece = clip[:, :, j * chunk_frames : (j + 1) * chunk_frames][:, :, geometry.pre_padding :]
            if j == 0:
                pieces.append(piece if overlap is None else blend(overlap, piece, geometry.frame_overlap, axis=2))
            else:
                overlap = piece
    if overlap is not None:
        pieces.append(overlap)
    video = mx.concatenate(pieces, axis=2)
    if pad:
        # a chunk's last latent covers clip_length % ratio frames, the others ratio frames
        tail = geometry.clip_length % geometry.temporal_ratio
        real = latents.shape[2] - pad
        extra = sum(tail if tail and (real + k) % chunk == 0 else geometry.temporal_ratio for k in range(pad))
        video = video[:, :, : video.shape[2] - extra]
    return video


def decode_clip(decoder: H3VideoClipDecoder, latents: mx.array, tiling: VideoTiling | None) -> mx.array:
    """One chunk, in spatial tiles laid out in pixels (latent-aligned) and stitched, or whole when tiling is None."""
    if tiling is None:
        return decoder(latents)
    _, ratio = decoder.cfg.patch
    ys, y_lengths, y_overlaps = split_tiles(latents.shape[-2] * ratio, tiling.tile, tiling.overlap, ratio)
    xs, x_lengths, x_overlaps = split_tiles(latents.shape[-1] * ratio, tiling.tile, tiling.overlap, ratio)
    rows = [[decoder(latents[..., y // ratio : (y + h) // ratio, x // ratio : (x + w) // ratio])
             for x, w in zip(xs, x_lengths, strict=True)] for y, h in zip(ys, y_lengths, strict=True)]
    return stitch(rows, y_overlaps, x_overlaps)
