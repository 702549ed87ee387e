"""Text-to-video sampling loop of Wan2.1 in MLX (classifier-free guidance + flow Euler or UniPC).

Loads a diffusers-format model folder (transformer/, vae/, text_encoder/, tokenizer/),
or a converted folder written by :mod:`daotai.mlx.convert`. No torch at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import numpy as np

from daotai.mlx.scheduler import SamplerSpec
from daotai.mlx.transformer import WanTransformer, WanTransformerConfig
from daotai.mlx.vae import WanVAEConfig, WanVAEDecoder
from daotai.mlx.weights import load_into, mapped_weights, read_config, vae_decoder_weights, vae_encoder_weights


@dataclass(frozen=True)
class SampleSettings:
    """Sampling knobs: steps, CFG scale (<= 1 disables the negative pass), flow shift, and the
    sampler (Euler unless a model folder's scheduler config says UniPC, see sampler_from_folder)."""

    steps: int = 30
    guidance: float = 5.0
    shift: float = 3.0
    sampler: SamplerSpec = SamplerSpec()
    # Which steps run the transformer (None: all). A skipped step reuses the last computed
    # velocity: the step cache of fast mode (daotai.render.speed.computed_steps decides).
    compute: tuple[bool, ...] | None = None


def build_transformer(config: dict) -> WanTransformer:
    """An unloaded transformer for a diffusers transformer config: Wan-VACE when it names VACE layers."""
    if config.get("vace_layers"):
        from daotai.mlx.vace import WanVACEConfig, WanVACETransformer

        return WanVACETransformer(WanVACEConfig.from_dict(config))
    return WanTransformer(WanTransformerConfig.from_dict(config))


def load_transformer(folder: Path, dtype=mx.float32) -> WanTransformer:
    """A WanTransformer (or WanVACETransformer) with the weights of a diffusers transformer/ folder."""
    model = build_transformer(read_config(folder))
    load_into(model, mapped_weights(folder, "transformer", dtype), f"{folder}")
    return model


def load_vae_decoder(folder: Path) -> WanVAEDecoder:
    """The VAE decoder of a diffusers vae/ folder, float32 (as diffusers runs Wan's VAE)."""
    model = WanVAEDecoder(WanVAEConfig.from_dict(read_config(folder)))
    load_into(model, vae_decoder_weights(folder), f"{folder}")
    return model


def load_vae_encoder(folder: Path):
    """The VAE encoder of a diffusers vae/ folder, float32 (for VACE / video-to-video inputs)."""
    from daotai.mlx.vae_encoder import WanVAEEncoder

    model = WanVAEEncoder(WanVAEConfig.from_dict(read_config(folder)))
    load_into(model, vae_encoder_weights(folder), f"{folder}")
    return model


def denoise(
    transformer: WanTransformer,
    latents: mx.array,
    cond: mx.array,
    uncond: mx.array | None,
    settings: SampleSettings,
) -> Iterator[tuple[int, mx.array, mx.array]]:
    """Yield (step index, latents after the step, clean estimate) for each step; latents (B, 16, T, H, W).

    The clean estimate is x0 = x_t - sigma v at the step's sigma (flow matching: v = noise - x0),
    the picture the step aims at; MLX computes it only if it is read (a live view of the shot).
    """
    sampler = settings.sampler.build(settings.steps, settings.shift)
    use_cfg = uncond is not None and settings.guidance > 1.0
    b = latents.shape[0]
    state = None  # the multistep sampler's history (UniPC); None for Euler
    v = None
    for i, t in enumerate(sampler.schedule.timesteps):
        if v is None or settings.compute is None or settings.compute[i]:
            ts = mx.full((b,), float(t), dtype=mx.float32)
            v = transformer(latents, ts, cond)
            if use_cfg:
                v_u = transformer(latents, ts, uncond)
                v = v_u + settings.guidance * (v - v_u)
        estimate = latents.astype(mx.float32) - float(sampler.schedule.sigmas[i]) * v.astype(mx.float32)  # lazy
        latents, state = sampler.step(i, latents.astype(mx.float32), v.astype(mx.float32), state)
        # the state's arrays are part of the graph too: evaluate them with the latents
        mx.eval(latents, state.arrays() if state is not None else [])
        yield i, latents, estimate


def decode_to_uint8(vae: WanVAEDecoder, latents: mx.array) -> np.ndarray:
    """Normalised latents (1, 16, T, h, w) -> frames (F, H, W, 3) uint8, F = 1 + 4 (T - 1)."""
    video = vae.decode(vae.denormalize(latents.astype(mx.float32)))  # (1, 3, F, H, W) in [-1, 1]
    video = np.array(mx.clip(video[0] / 2 + 0.5, 0.0, 1.0).transpose(1, 2, 3, 0))  # (F, H, W, 3) float
    return np.round(video * 255.0).astype(np.uint8)


def sample_video(
    transformer: WanTransformer,
    vae: WanVAEDecoder,
    latents: mx.array,
    cond: mx.array,
    uncond: mx.array | None,
    settings: SampleSettings,
    on_step: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Run every step then decode: returns (F, H, W, 3) uint8."""
    for i, stepped, _ in denoise(transformer, latents, cond, uncond, settings):
        latents = stepped
        if on_step is not None:
            on_step(i)
    return decode_to_uint8(vae, latents)


def load_text_encoder(folder: Path):
    """The UMT5 encoder of a text_encoder/ folder, float32."""
    from daotai.mlx.text_encoder import UMT5Config, UMT5Encoder

    model = UMT5Encoder(UMT5Config.from_dict(read_config(folder)))
    load_into(model, mapped_weights(folder, "text_encoder"), f"{folder}")
    return model


@dataclass(frozen=True)
class PromptTokenizer:
    """A `tokenizers` tokenizer.json plus the pad id; pads/truncates like diffusers' Wan pipeline."""

    path: Path
    pad_id: int

    def encode(self, prompts: list[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
        """Prompts -> ids (B, max_length) int32 and mask (B, max_length) int32, right-padded."""
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self.path))
        ids = np.full((len(prompts), max_length), self.pad_id, dtype=np.int32)
        mask = np.zeros((len(prompts), max_length), dtype=np.int32)
        for row, text in enumerate(prompts):
            got = tok.encode(text).ids[:max_length]
            ids[row, : len(got)] = got
            mask[row, : len(got)] = 1
        return ids, mask


def load_tokenizer(folder: Path) -> PromptTokenizer:
    """tokenizer/ folder -> PromptTokenizer (needs tokenizer.json; the pad token from its config)."""
    import json

    from daotai.errors import BackendError

    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        raise BackendError(f"{folder}: tokenizer.json missing (wan-mlx reads fast-tokenizer files only)")
    pad_id = 0
    cfg_path = Path(folder) / "tokenizer_config.json"
    if cfg_path.is_file():
        pad = json.loads(cfg_path.read_text(encoding="utf-8")).get("pad_token")
        if isinstance(pad, dict):
            pad = pad.get("content")
        if pad:
            from tokenizers import Tokenizer

            found = Tokenizer.from_file(str(path)).token_to_id(pad)
            pad_id = 0 if found is None else found
    return PromptTokenizer(path, pad_id)


def initial_latents(seed: int, shape: tuple[int, ...]) -> mx.array:
    """Seeded standard-normal latents (float32). numpy's PCG64, so the same on every platform;
    not the same noise as torch's generator (parity tests pass latents explicitly)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return mx.array(rng.standard_normal(shape, dtype=np.float32))
