"""Wan2.1 VAE encoder in MLX, numerically matching diffusers' AutoencoderKLWan.encode.

Used to bring existing video into Wan's latent space (VACE conditioning, video-to-video).
diffusers encodes the first frame on its own, then chunks of 4 frames, carrying the last
frames of every causal convolution across chunks. Two rules make that streaming equal to a
whole-sequence pass, and both are reproduced here:

- each causal 3x3x3 convolution sees the stream's previous 2 frames (zeros at the start);
- each temporal downsampler passes the stream's first frame through untouched, then runs
  its stride-2 time convolution over (previous frame, new frames): frames (0,1,2), (2,3,4), ...

So 1 + 4k frames become 1 + k latent frames. ``chunked=True`` (default) streams exactly as
diffusers does and bounds memory by one chunk; ``chunked=False`` runs the whole sequence at
once. Both give the same result. Arrays inside are channels-last: (B, T, H, W, C).
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

from daotai.errors import BackendError
from daotai.mlx.vae import CausalConv3d, Conv2d, MidBlock, ResBlock, RMSNormC, WanVAEConfig, _Placeholder

FIRST_CHUNK, CHUNK = 1, 4  # frames per encoder call, as diffusers streams them
SPATIAL = 8  # three stride-2 downsamplers


class Downsample(nn.Module):
    """Per frame: zero-pad right and bottom by one, 3x3 stride-2 conv; 3D mode also halves time."""

    def __init__(self, dim: int, temporal: bool):
        super().__init__()
        # index 0 is diffusers' ZeroPad2d, which has no weights; keeping the slot keeps the names
        self.resample = [_Placeholder(), Conv2d(dim, dim, 3, stride=2, padding=0)]
        self.temporal = temporal
        if temporal:
            self.time_conv = CausalConv3d(dim, dim, (3, 1, 1), (0, 0, 0), stride=(2, 1, 1))

    def __call__(self, x: mx.array, state: dict | None = None) -> mx.array:
        """(B, T, H, W, C) -> (B, T', H/2, W/2, C); T' = T for 2D, (T - 1) / 2 + 1 over a whole 3D stream."""
        b, t, h, w, c = x.shape
        y = mx.pad(x.reshape(b * t, h, w, c), [(0, 0), (0, 1), (0, 1), (0, 0)])
        y = self.resample[1](y)  # (B*T, H/2, W/2, C)
        x = y.reshape(b, t, y.shape[1], y.shape[2], c)
        if not self.temporal:
            return x
        if state is None:
            # whole sequence: frame 0 as is, then the stride-2 windows starting at frame 0
            return mx.concatenate([x[:, :1], self.time_conv(x)], axis=1) if t >= 3 else x
        prev = state.get(id(self))
        state[id(self)] = x[:, -1:]
        if prev is None:  # the stream's first chunk passes through
            return x
        return self.time_conv(mx.concatenate([prev, x], axis=1))


class Encoder(nn.Module):
    """conv_in, residual blocks with downsamplers, mid block, RMS norm, SiLU, conv_out (2 z channels)."""

    def __init__(self, cfg: WanVAEConfig):
        super().__init__()
        mult = list(cfg.dim_mult)
        dims = [cfg.base_dim * u for u in [1] + mult]
        self.conv_in = CausalConv3d(cfg.in_channels, dims[0], (3, 3, 3), (1, 1, 1))
        blocks: list[nn.Module] = []
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            for _ in range(cfg.num_res_blocks):
                blocks.append(ResBlock(cin, cout))
                cin = cout
            if i != len(mult) - 1:
                blocks.append(Downsample(cout, bool(cfg.temperal_downsample[i])))
        self.down_blocks = blocks
        self.mid_block = MidBlock(dims[-1])
        self.norm_out = RMSNormC(dims[-1])
        self.conv_out = CausalConv3d(dims[-1], 2 * cfg.z_dim, (3, 3, 3), (1, 1, 1))

    def __call__(self, x: mx.array, state: dict | None = None) -> mx.array:
        x = self.conv_in(x, state)
        for blk in self.down_blocks:
            x = blk(x, state)
        x = self.mid_block(x, state)
        return self.conv_out(nn.silu(self.norm_out(x)), state)


def check_video_shape(shape: tuple[int, ...]) -> None:
    """Raise BackendError unless shape is (B, C, 1 + 4k, H, W) with H and W multiples of 8."""
    if len(shape) != 5:
        raise BackendError(f"VAE encode: video shape {tuple(shape)} must be (batch, channels, frames, height, width)")
    _, _, f, h, w = shape
    if f < 1 or (f - 1) % CHUNK:
        raise BackendError(f"VAE encode: frames={f} must be 1 + 4k (1, 5, 9, ...); Wan's VAE compresses time by 4")
    if h % SPATIAL or w % SPATIAL:
        raise BackendError(f"VAE encode: size {w}x{h} must be a multiple of {SPATIAL} in both directions")


class WanVAEEncoder(nn.Module):
    """encoder + quant_conv; encode() takes diffusers-layout video (B, 3, F, H, W) in [-1, 1]."""

    def __init__(self, cfg: WanVAEConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.quant_conv = CausalConv3d(2 * cfg.z_dim, 2 * cfg.z_dim, (1, 1, 1), (0, 0, 0))

    def moments(self, video: mx.array, chunked: bool = True) -> tuple[mx.array, mx.array]:
        """Video (B, C, 1 + 4k, H, W) -> posterior (mean, logvar), each (B, z, 1 + k, H/8, W/8).

        logvar is clamped to [-30, 20] as diffusers' DiagonalGaussianDistribution does.
        """
        check_video_shape(video.shape)
        x = video.astype(mx.float32).transpose(0, 2, 3, 4, 1)  # (B, F, H, W, C)
        if chunked:
            state: dict = {}
            parts = []
            bounds = [(0, FIRST_CHUNK)] + [(s, s + CHUNK) for s in range(FIRST_CHUNK, x.shape[1], CHUNK)]
            for lo, hi in bounds:
                part = self.encoder(x[:, lo:hi], state)
                # evaluate now so this chunk's graph (and its full-resolution buffers) is freed
                mx.eval(part, [v for v in state.values() if isinstance(v, mx.array)])
                parts.append(part)
            h = mx.concatenate(parts, axis=1)
        else:
            h = self.encoder(x)
        h = self.quant_conv(h).transpose(0, 4, 1, 2, 3)  # (B, 2z, T', H/8, W/8)
        z = self.cfg.z_dim
        return h[:, :z], mx.clip(h[:, z:], -30.0, 20.0)

    def encode(self, video: mx.array, chunked: bool = True) -> mx.array:
        """The posterior's mode (its mean): what Wan's pipelines use as the latents of a video."""
        return self.moments(video, chunked)[0]

    def normalize(self, latents: mx.array) -> mx.array:
        """Apply the latent normalisation Wan's pipelines use: (latents - mean) / std per channel."""
        mean = mx.array(self.cfg.latents_mean).reshape(1, -1, 1, 1, 1)
        std = mx.array(self.cfg.latents_std).reshape(1, -1, 1, 1, 1)
        return (latents - mean) / std
