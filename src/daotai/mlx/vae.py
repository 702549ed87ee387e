"""Wan2.1 VAE decoder in MLX, numerically matching diffusers' AutoencoderKLWan.decode.

diffusers decodes one latent frame at a time with a cache of past activations; that is
the same as running each causal convolution over the whole sequence with zero padding in
front, except for the temporal upsamplers, which pass the first latent frame through
without their time convolution. This module can run either way: the whole sequence at once, or
chunk by chunk with explicit causal caches (the default: it bounds memory by a few frames),
and reproduces that first-frame rule explicitly in both.

Arrays inside are channels-last: (B, T, H, W, C). The encoder lives in
:mod:`daotai.mlx.vae_encoder` and reuses the blocks defined here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn


@dataclass(frozen=True)
class WanVAEConfig:
    """Fields of diffusers' AutoencoderKLWan config that the encoder and decoder need."""

    base_dim: int = 96
    decoder_base_dim: int | None = None
    z_dim: int = 16
    dim_mult: tuple[int, ...] = (1, 2, 4, 4)
    num_res_blocks: int = 2
    temperal_downsample: tuple[bool, ...] = (False, True, True)
    in_channels: int = 3
    out_channels: int = 3
    latents_mean: tuple[float, ...] = ()
    latents_std: tuple[float, ...] = ()

    @classmethod
    def from_dict(cls, cfg: dict) -> "WanVAEConfig":
        """Build from a diffusers config.json dict; Wan2.2's patchified/residual VAE is refused."""
        if cfg.get("is_residual") or cfg.get("patch_size"):
            raise ValueError("the Wan2.2 residual/patchified VAE is not supported by wan-mlx yet")
        if cfg.get("attn_scales"):
            raise ValueError("VAE attn_scales other than [] are not supported")
        names = set(cls.__dataclass_fields__)
        kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in cfg.items() if k in names}
        return cls(**kw)


class CausalConv3d(nn.Module):
    """3D convolution, causal in time (2*p_t zero frames in front), symmetric spatial padding."""

    def __init__(self, cin: int, cout: int, kernel: tuple[int, int, int], padding: tuple[int, int, int],
                 stride: tuple[int, int, int] = (1, 1, 1)):
        super().__init__()
        self.weight = mx.zeros((cout, *kernel, cin))  # (O, kt, kh, kw, I)
        self.bias = mx.zeros((cout,))
        self.pad = padding
        self.stride = stride

    def __call__(self, x: mx.array, state: dict | None = None) -> mx.array:
        """x (B, T, H, W, C) -> (B, T, H, W, O) (time/space sizes kept by the padding).

        With ``state`` (streaming), the input's last 2 frames are kept and put in front of
        the next chunk instead of zeros, which makes chunked output equal the whole-sequence one.
        """
        pt, ph, pw = self.pad
        front = 2 * pt
        if state is not None and pt:
            prev = state.get(id(self))
            if prev is not None:
                x = mx.concatenate([prev, x], axis=1)
                front -= prev.shape[1]
            state[id(self)] = x[:, -2:]
        if front or ph or pw:
            x = mx.pad(x, [(0, 0), (front, 0), (ph, ph), (pw, pw), (0, 0)])
        return mx.conv3d(x, self.weight, stride=self.stride) + self.bias


class Conv2d(nn.Module):
    """Per-frame 2D convolution; 'same' padding for odd kernels unless told otherwise."""

    def __init__(self, cin: int, cout: int, k: int, stride: int = 1, padding: int | None = None):
        super().__init__()
        self.weight = mx.zeros((cout, k, k, cin))  # (O, kh, kw, I)
        self.bias = mx.zeros((cout,))
        self.padding = k // 2 if padding is None else padding
        self.stride = stride

    def __call__(self, x: mx.array) -> mx.array:
        """x (N, H, W, C) -> (N, H', W', O), H' = (H + 2 pad - k) // stride + 1."""
        return mx.conv2d(x, self.weight, stride=self.stride, padding=self.padding) + self.bias


class RMSNormC(nn.Module):
    """Wan's RMS_norm: L2-normalise over channels, times sqrt(C) and gamma."""

    def __init__(self, dim: int):
        super().__init__()
        self.gamma = mx.ones((dim,))
        self.scale = math.sqrt(dim)

    def __call__(self, x: mx.array) -> mx.array:
        # F.normalize divides by max(||x||, 1e-12)
        n = mx.maximum(mx.sqrt(mx.sum(x * x, axis=-1, keepdims=True)), 1e-12)
        return x / n * self.scale * self.gamma


class _Placeholder(nn.Module):
    def __call__(self, x):
        return x


class ResBlock(nn.Module):
    """Norm-SiLU-conv twice, with a 1x1x1 shortcut when the width changes."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.norm1 = RMSNormC(cin)
        self.conv1 = CausalConv3d(cin, cout, (3, 3, 3), (1, 1, 1))
        self.norm2 = RMSNormC(cout)
        self.conv2 = CausalConv3d(cout, cout, (3, 3, 3), (1, 1, 1))
        if cin != cout:
            self.conv_shortcut = CausalConv3d(cin, cout, (1, 1, 1), (0, 0, 0))
        self.has_shortcut = cin != cout

    def __call__(self, x: mx.array, state: dict | None = None) -> mx.array:
        h = self.conv_shortcut(x) if self.has_shortcut else x
        x = self.conv1(nn.silu(self.norm1(x)), state)
        x = self.conv2(nn.silu(self.norm2(x)), state)
        return x + h


class AttnBlock(nn.Module):
    """Single-head self-attention over the pixels of each frame."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = RMSNormC(dim)
        self.to_qkv = Conv2d(dim, 3 * dim, 1)
        self.proj = Conv2d(dim, dim, 1)

    def __call__(self, x: mx.array) -> mx.array:
        b, t, h, w, c = x.shape
        y = self.to_qkv(self.norm(x.reshape(b * t, h, w, c))).reshape(b * t, 1, h * w, 3 * c)
        q, k, v = y[..., :c], y[..., c : 2 * c], y[..., 2 * c :]
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(c))  # (BT, 1, HW, C)
        o = self.proj(o.reshape(b * t, h, w, c)).reshape(b, t, h, w, c)
        return o + x


class Upsample(nn.Module):
    """Nearest x2 spatial upsampling + conv (to dim // 2); 3D mode also doubles time."""

    def __init__(self, dim: int, temporal: bool):
        super().__init__()
        self.resample = [_Placeholder(), Conv2d(dim, dim // 2, 3)]
        self.temporal = temporal
        if temporal:
            self.time_conv = CausalConv3d(dim, 2 * dim, (3, 1, 1), (1, 0, 0))

    def __call__(self, x: mx.array, state: dict | None = None) -> mx.array:
        b, t, h, w, c = x.shape
        if self.temporal:
            # the stream's first frame passes through; later frames go through the time conv
            # as their own causal stream (diffusers' "Rep" rule), each becoming two frames
            if state is None:
                head, rest = x[:, :1], x[:, 1:]
            elif id(self) not in state:
                state[id(self)] = True
                head, rest = x[:, :1], x[:, 1:]
            else:
                head, rest = x[:, :0], x
            n = rest.shape[1]
            if n:
                r = self.time_conv(rest, state).reshape(b, n, h, w, 2, c)  # (B, n, H, W, 2, C)
                r = r.transpose(0, 1, 4, 2, 3, 5).reshape(b, 2 * n, h, w, c)
                x = mx.concatenate([head, r], axis=1)
            t = x.shape[1]
        x = x.reshape(b * t, h, 1, w, 1, c)
        x = mx.broadcast_to(x, (b * t, h, 2, w, 2, c)).reshape(b * t, 2 * h, 2 * w, c)
        x = self.resample[1](x)
        return x.reshape(b, t, 2 * h, 2 * w, -1)


class MidBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.resnets = [ResBlock(dim, dim), ResBlock(dim, dim)]
        self.attentions = [AttnBlock(dim)]

    def __call__(self, x, state=None):
        return self.resnets[1](self.attentions[0](self.resnets[0](x, state)), state)


class UpBlock(nn.Module):
    def __init__(self, cin: int, cout: int, n_res: int, mode: str | None):
        super().__init__()
        self.resnets = [ResBlock(cin if i == 0 else cout, cout) for i in range(n_res + 1)]
        if mode is not None:
            self.upsamplers = [Upsample(cout, mode == "upsample3d")]
        self.has_up = mode is not None

    def __call__(self, x, state=None):
        for r in self.resnets:
            x = r(x, state)
        return self.upsamplers[0](x, state) if self.has_up else x


class Decoder(nn.Module):
    def __init__(self, cfg: WanVAEConfig):
        super().__init__()
        dim = cfg.decoder_base_dim or cfg.base_dim
        mult = list(cfg.dim_mult)
        dims = [dim * u for u in [mult[-1]] + mult[::-1]]
        temporal_up = list(cfg.temperal_downsample)[::-1]
        self.conv_in = CausalConv3d(cfg.z_dim, dims[0], (3, 3, 3), (1, 1, 1))
        self.mid_block = MidBlock(dims[0])
        blocks = []
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            if i > 0:
                cin = cin // 2  # the previous upsampler halved the width
            up = i != len(mult) - 1
            mode = ("upsample3d" if temporal_up[i] else "upsample2d") if up else None
            blocks.append(UpBlock(cin, cout, cfg.num_res_blocks, mode))
        self.up_blocks = blocks
        self.norm_out = RMSNormC(dims[-1])
        self.conv_out = CausalConv3d(dims[-1], cfg.out_channels, (3, 3, 3), (1, 1, 1))

    def __call__(self, z, state=None):
        x = self.mid_block(self.conv_in(z, state), state)
        for blk in self.up_blocks:
            x = blk(x, state)
        return self.conv_out(nn.silu(self.norm_out(x)), state)


class WanVAEDecoder(nn.Module):
    """post_quant_conv + decoder; decode() takes diffusers-layout latents (B, z, T, H, W)."""

    def __init__(self, cfg: WanVAEConfig):
        super().__init__()
        self.cfg = cfg
        self.post_quant_conv = CausalConv3d(cfg.z_dim, cfg.z_dim, (1, 1, 1), (0, 0, 0))
        self.decoder = Decoder(cfg)

    def decode(self, z: mx.array, chunked: bool = True) -> mx.array:
        """Latents (B, z, T, H, W) -> video (B, 3, 1 + 4(T-1), 8H, 8W) float in [-1, 1].

        ``chunked`` decodes one latent frame at a time with causal caches (peak memory of
        ~4 output frames instead of all of them); both modes give the same result.
        """
        x = self.post_quant_conv(z.transpose(0, 2, 3, 4, 1))  # (B, T, H, W, z)
        if chunked:
            state: dict = {}
            parts = []
            for i in range(x.shape[1]):
                part = self.decoder(x[:, i : i + 1], state)
                # evaluate now so the graph (and its full-size buffers) of this chunk is freed
                mx.eval(part, [v for v in state.values() if isinstance(v, mx.array)])
                parts.append(part)
            x = mx.concatenate(parts, axis=1)
        else:
            x = self.decoder(x)
        return mx.clip(x, -1.0, 1.0).transpose(0, 4, 1, 2, 3)

    def denormalize(self, latents: mx.array) -> mx.array:
        """Undo the latent normalisation the Wan pipeline applies before decoding."""
        mean = mx.array(self.cfg.latents_mean).reshape(1, -1, 1, 1, 1)
        std = mx.array(self.cfg.latents_std).reshape(1, -1, 1, 1, 1)
        return latents * std + mean
