"""MiniMax-H3's audio decoder in MLX: latents -> 32 kHz mono waveform, as diffusers' AutoencoderKLMiniMaxH3Audio.decode.

A 1x1 projection widens the latent (32 channels, 40 a second) to the decoder trunk, then a
BigVGAN decoder upsamples by 800 (5, 5, 2, 2, 2, 2, 2) with transposed convolutions, each
stage followed by anti-aliased multi-periodicity blocks: dilated convolutions, each behind a
SnakeBeta activation run at twice the rate (Kaiser-sinc upsample, activate, low-pass
downsample) so its harmonics do not alias. The output is clamped to [-1, 1]. Stereo is two
batch items, one per channel.

Layout is channels-last, (B, T, C), MLX's convolution layout; the checkpoint's weight-normed
convolutions (``weight_g``, ``weight_v``) are folded into plain weights when loading. The
released decoder is float32 (it degrades audibly in bfloat16), so this one is float32 too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from daotai.errors import BackendError


@dataclass(frozen=True)
class H3AudioDecoderConfig:
    """The decoder half of diffusers' AutoencoderKLMiniMaxH3Audio config; defaults are the released model's."""

    latent_channels: int = 32
    latent_dim: int = 2048
    decoder_dim: int = 1024
    decoder_rates: tuple[int, ...] = (5, 5, 2, 2, 2, 2, 2)
    decoder_kernel_sizes: tuple[int, ...] = (9, 9, 4, 4, 4, 4, 4)
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    sampling_rate: int = 32000
    latents_mean: tuple[float, ...] | None = None  # per channel; the sampler's latents are normalised with these
    latents_std: tuple[float, ...] | None = None

    @classmethod
    def from_dict(cls, cfg: dict) -> "H3AudioDecoderConfig":
        """Build from a diffusers config.json dict (the encoder's keys ignored)."""
        kw = {k: v for k, v in cfg.items() if k in cls.__dataclass_fields__}
        for key in ("decoder_rates", "decoder_kernel_sizes", "resblock_kernel_sizes"):
            if key in kw:
                kw[key] = tuple(int(v) for v in kw[key])
        if "resblock_dilation_sizes" in kw:
            kw["resblock_dilation_sizes"] = tuple(tuple(int(d) for d in ds) for ds in kw["resblock_dilation_sizes"])
        for key in ("latents_mean", "latents_std"):
            if kw.get(key) is not None:
                kw[key] = tuple(float(v) for v in kw[key])
        return cls(**kw)


class SnakeBeta(nn.Module):
    """x + sin(e^alpha x)^2 / (e^beta + 1e-9), per channel, on (B, T, C)."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = mx.zeros((channels,))
        self.beta = mx.zeros((channels,))

    def __call__(self, x: mx.array) -> mx.array:
        return x + (1.0 / (mx.exp(self.beta) + 1e-9)) * mx.sin(mx.exp(self.alpha) * x) ** 2


class _Filtered(nn.Module):
    """Holds a (1, 1, K) Kaiser-sinc ``filter`` as the checkpoint stores it (loaded, not recomputed)."""

    def __init__(self, kernel_size: int):
        super().__init__()
        self.filter = mx.zeros((1, 1, kernel_size))

    def depthwise(self, channels: int) -> mx.array:
        """The filter as an MLX depthwise weight (C, K, 1)."""
        return mx.broadcast_to(self.filter.reshape(1, -1, 1), (channels, self.filter.shape[-1], 1))


class UpSample(_Filtered):
    """ratio x anti-aliased upsampling: replicate pad, depthwise transposed Kaiser-sinc conv, crop."""

    def __init__(self, ratio: int, kernel_size: int):
        super().__init__(kernel_size)
        self.ratio = ratio
        self.pad = kernel_size // ratio - 1
        self.crop_left = self.pad * ratio + (kernel_size - ratio) // 2
        self.crop_right = self.pad * ratio + (kernel_size - ratio + 1) // 2

    def __call__(self, x: mx.array) -> mx.array:
        c = x.shape[-1]
        x = mx.pad(x, [(0, 0), (self.pad, self.pad), (0, 0)], mode="edge")
        x = self.ratio * mx.conv_transpose1d(x, self.depthwise(c), stride=self.ratio, groups=c)
        return x[:, self.crop_left : x.shape[1] - self.crop_right]


class LowPass(_Filtered):
    """Anti-aliased downsampling: replicate pad, depthwise Kaiser-sinc conv with a stride."""

    def __init__(self, ratio: int, kernel_size: int):
        super().__init__(kernel_size)
        self.stride = ratio
        self.pad_left = kernel_size // 2 - int(kernel_size % 2 == 0)
        self.pad_right = kernel_size // 2

    def __call__(self, x: mx.array) -> mx.array:
        c = x.shape[-1]
        x = mx.pad(x, [(0, 0), (self.pad_left, self.pad_right), (0, 0)], mode="edge")
        return mx.conv1d(x, self.depthwise(c), stride=self.stride, groups=c)


class DownSample(nn.Module):
    """Named as the checkpoint nests it: ``downsample.lowpass.filter``."""

    def __init__(self, ratio: int, kernel_size: int):
        super().__init__()
        self.lowpass = LowPass(ratio, kernel_size)

    def __call__(self, x: mx.array) -> mx.array:
        return self.lowpass(x)


class AliasFreeSnake(nn.Module):
    """Upsample x2 -> SnakeBeta -> downsample x2 (BigVGAN's anti-aliased activation, 12-tap filters)."""

    def __init__(self, channels: int, ratio: int = 2, kernel_size: int = 12):
        super().__init__()
        self.act = SnakeBeta(channels)
        self.upsample = UpSample(ratio, kernel_size)
        self.downsample = DownSample(ratio, kernel_size)

    def __call__(self, x: mx.array) -> mx.array:
        return self.downsample(self.act(self.upsample(x)))


class AMPBlock(nn.Module):
    """Per dilation: act -> dilated conv -> act -> conv, added to the input."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...]):
        super().__init__()
        self.convs1 = [nn.Conv1d(channels, channels, kernel_size, padding=(kernel_size * d - d) // 2, dilation=d)
                       for d in dilations]
        self.convs2 = [nn.Conv1d(channels, channels, kernel_size, padding=(kernel_size - 1) // 2) for _ in dilations]
        self.activations = [AliasFreeSnake(channels) for _ in range(2 * len(dilations))]

    def __call__(self, x: mx.array) -> mx.array:
        for i, (conv1, conv2) in enumerate(zip(self.convs1, self.convs2, strict=True)):
            residual = conv1(self.activations[2 * i](x))
            x = x + conv2(self.activations[2 * i + 1](residual))
        return x


class ConvTranspose(nn.Module):
    """A transposed Conv1d with torch's padding rule, weight (C_out, K, C_in)."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int):
        super().__init__()
        self.stride, self.padding = stride, (kernel - stride) // 2
        self.weight = mx.zeros((cout, kernel, cin))
        self.bias = mx.zeros((cout,))

    def __call__(self, x: mx.array) -> mx.array:
        return mx.conv_transpose1d(x, self.weight, stride=self.stride, padding=self.padding) + self.bias


class BigVGANDecoder(nn.Module):
    """(B, T, latent_dim) -> (B, T * prod(rates), 1) waveform in [-1, 1]."""

    def __init__(self, cfg: H3AudioDecoderConfig):
        super().__init__()
        d = cfg.decoder_dim
        self.kernels = len(cfg.resblock_kernel_sizes)
        self.conv_pre = nn.Conv1d(cfg.latent_dim, d, 7, padding=3)
        # one-element lists: the checkpoint names the upsamplers ``ups.<i>.0``
        self.ups = [[ConvTranspose(d // 2**i, d // 2 ** (i + 1), k, r)]
                    for i, (r, k) in enumerate(zip(cfg.decoder_rates, cfg.decoder_kernel_sizes, strict=True))]
        self.resblocks = [AMPBlock(d // 2 ** (i + 1), k, tuple(ds))
                          for i in range(len(cfg.decoder_rates))
                          for k, ds in zip(cfg.resblock_kernel_sizes, cfg.resblock_dilation_sizes, strict=True)]
        channels = d // 2 ** len(cfg.decoder_rates)
        self.activation_post = AliasFreeSnake(channels)
        self.conv_post = nn.Conv1d(channels, 1, 7, padding=3, bias=False)

    def __call__(self, x: mx.array) -> mx.array:
        x = self.conv_pre(x)
        for i, up in enumerate(self.ups):
            x = up[0](x)
            blocks = self.resblocks[i * self.kernels : (i + 1) * self.kernels]
            total = blocks[0](x)
            for block in blocks[1:]:
                total = total + block(x)
            x = total / self.kernels
        return mx.clip(self.conv_post(self.activation_post(x)), -1.0, 1.0)


class H3AudioDecoder(nn.Module):
    """Latents (B, latent_channels, T), denormalised -> waveform (B, 1, T * 800), as diffusers' decode."""

    def __init__(self, cfg: H3AudioDecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.dec_in_proj = nn.Conv1d(cfg.latent_channels, cfg.latent_dim, 1)
        self.decoder = BigVGANDecoder(cfg)

    def __call__(self, latents: mx.array) -> mx.array:
        if latents.ndim != 3 or latents.shape[1] != self.cfg.latent_channels:
            raise ValueError(f"h3 audio decoder: latents of shape {list(latents.shape)}; must be (B, "
                             f"{self.cfg.latent_channels}, T)")
        x = self.decoder(self.dec_in_proj(latents.astype(mx.float32).transpose(0, 2, 1)))  # (B, T * 800, 1)
        return x.transpose(0, 2, 1)


def folded_audio_decoder_weights(tensors: dict[str, mx.array]) -> list[tuple[str, mx.array]]:
    """The decoder's tensors from diffusers names, weight norm folded and convolutions channels-last.

    weight = g * v / ||v||, the norm over every axis but the first (torch's weight_norm, dim 0);
    Conv1d (O, I, K) -> (O, K, I); ConvTranspose1d (I, O, K) -> (O, K, I).
    """
    out = []
    for name, value in tensors.items():
        if not name.startswith(("decoder.", "dec_in_proj.")) or name.endswith(".weight_g"):
            continue
        value = value.astype(mx.float32)
        if name.endswith(".weight_v"):
            g = tensors[name[: -len("_v")] + "_g"].astype(mx.float32)
            norm = mx.sqrt(mx.sum(value * value, axis=tuple(range(1, value.ndim)), keepdims=True))
            value, name = g * value / norm, name[: -len("_v")]
        if name.endswith(".weight") and value.ndim == 3:
            value = value.transpose(1, 2, 0) if ".ups." in name else value.transpose(0, 2, 1)
        out.append((name, value))
    return out


def load_h3_audio_decoder(folder: Path) -> H3AudioDecoder:
    """The decoder of a diffusers AutoencoderKLMiniMaxH3Audio folder (config.json + safetensors)."""
    from daotai.mlx.weights import load_into, read_config, read_safetensors

    folder = Path(folder)
    config = read_config(folder)
    if config.get("_class_name", "AutoencoderKLMiniMaxH3Audio") != "AutoencoderKLMiniMaxH3Audio":
        raise BackendError(f"{folder}: config.json describes {config.get('_class_name')}, not an "
                           "AutoencoderKLMiniMaxH3Audio; point at MiniMax-H3's audio_vae folder")
    model = H3AudioDecoder(H3AudioDecoderConfig.from_dict(config))
    load_into(model, folded_audio_decoder_weights(read_safetensors(folder)), f"h3 audio decoder {folder}")
    return model


def denormalize_audio(latents: np.ndarray, mean, std) -> np.ndarray:
    """Latents as sampled (B, C, T) -> as the decoder reads them: latents * std + mean, per channel."""
    mean = np.asarray(mean, dtype=np.float32).reshape(1, -1, 1)
    std = np.asarray(std, dtype=np.float32).reshape(1, -1, 1)
    return latents * std + mean
