"""A tiny MLX MiniMax-H3 transformer, a packed layout for it and its quantisation error (tests and bench share it).

The widths are multiples of 128 so every block linear takes group sizes 32, 64 and 128, as the
released model's do (5376, 7168, 14336 and 2688 all divide by 128).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from daotai.mlx.h3_config import H3TransformerConfig

QUANT_CFG = H3TransformerConfig(
    num_attention_heads=2, attention_head_dim=64, hidden_size=128, num_layers=2, num_refiner_layers=1, ffn_dim=256,
    in_channels=4, audio_in_channels=8, text_dim=64, freq_dim=32, time_embed_hidden_dim=64, time_embed_dim=128,
    rope_freq_dim=8,
)


def random_h3(seed: int, cfg: H3TransformerConfig = QUANT_CFG):
    """The MLX transformer with MLX's default (fan-in uniform) init drawn from ``seed``, norms at 1."""
    import mlx.core as mx

    from daotai.mlx.h3_transformer import H3Transformer

    mx.random.seed(seed)
    model = H3Transformer(cfg)
    mx.eval(model.parameters())
    return model


def t2va_layout(text: int = 8, latent_frames: int = 3, latent_height: int = 8, latent_width: int = 8,
                audio_latents: int = 6, video_t: float = 0.7, audio_t: float = 0.4):
    """A small t2va H3Layout, [text | target audio | target video], audio and video at their own noise levels."""
    from daotai.mlx.h3_layout import keyframe_rows, with_timesteps

    rows = keyframe_rows([1] * text, latent_frames, latent_height, latent_width, audio_latents)
    return with_timesteps(rows, video_t, audio_t)


def inputs_for(layout, cfg: H3TransformerConfig = QUANT_CFG, seed: int = 7):
    """Random (video, audio, text) rows matching ``layout``: (1, n, channels) float32 each."""
    import mlx.core as mx

    rng = np.random.default_rng(seed)
    shapes = ((len(layout.video_indices), cfg.video_patch_dim), (len(layout.audio_indices), cfg.audio_in_channels),
              (len(layout.text_indices), cfg.text_dim))
    return tuple(mx.array(rng.standard_normal((1, *s)).astype(np.float32)) for s in shapes)


def rel_l2(a, b) -> float:
    """||a - b|| / ||b|| in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@dataclass(frozen=True)
class QuantError:
    """Relative L2 errors of one setting's video and audio outputs.

    weights_*: quantised from float32 and run in float32 against float32 (the weights' error alone);
    converted_*_vs_fp32 / _vs_bf16: quantised from the bfloat16 weights and run in bfloat16, as a
    conversion of the published checkpoint is, against the float32 and the bfloat16 model.
    """

    weights_video: float
    weights_audio: float
    converted_video_vs_fp32: float
    converted_audio_vs_fp32: float
    converted_video_vs_bf16: float
    converted_audio_vs_bf16: float
    layers: int  # linears quantised


def to_published_precision(model) -> None:
    """Cast the block stack to bfloat16 in place; the checkpoint's float32 modules stay float32."""
    import mlx.core as mx
    from mlx.utils import tree_flatten, tree_unflatten

    from daotai.mlx.h3_transformer import is_float32_module

    params = tree_flatten(model.parameters())
    model.update(tree_unflatten([(k, v if is_float32_module(k) else v.astype(mx.bfloat16)) for k, v in params]))


def quantisation_error(bits: int | None, group_size: int = 64, skip: tuple[str, ...] = (), seed: int = 0) -> QuantError:
    """The tiny model's errors at ``bits`` and ``group_size`` (None: no quantisation, bfloat16 alone)."""
    import mlx.core as mx

    from daotai.mlx.quantize import H3_BLOCK_PREFIXES, QuantSpec, quantize_transformer

    layout = t2va_layout()
    rows = inputs_for(layout)

    def run(model) -> list:
        return [o.astype(mx.float32) for o in model(*rows, layout)]

    def quantised(model) -> int:
        return 0 if bits is None else len(quantize_transformer(model, QuantSpec(bits, group_size),
                                                                H3_BLOCK_PREFIXES, skip))

    ref32 = run(random_h3(seed))
    weights_only = random_h3(seed)
    quantised(weights_only)
    weights_out = run(weights_only)
    converted = random_h3(seed)
    to_published_precision(converted)
    ref16 = run(converted)
    layers = quantised(converted)
    out = run(converted)
    return QuantError(rel_l2(weights_out[0], ref32[0]), rel_l2(weights_out[1], ref32[1]), rel_l2(out[0], ref32[0]),
                      rel_l2(out[1], ref32[1]), rel_l2(out[0], ref16[0]), rel_l2(out[1], ref16[1]), layers)
