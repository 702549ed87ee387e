"""MiniMax-H3 joint video + audio transformer in MLX, numerically matching diffusers' MiniMaxH3Transformer3DModel.

The model runs one stack of self-attention blocks over a single packed sequence of L rows
that holds the text condition, the conditioning rows (keyframes, or image / video / audio
references), the target audio rows and the target video rows. There is no cross-attention:
modality shows only in the input projections, the per-row AdaLN modality tag and the two
output heads. Building that layout (row order, (t, h, w) positions, tags, per-row
timesteps) is the caller's job; :class:`H3Layout` carries it and checks it once.

Both published partitions (``transformer`` for t2va / fl2va, ``transformer_ref`` for ref2va)
are this architecture with different weights; they differ only in the layout they are fed.

Parameter names mirror the diffusers module tree so a diffusers safetensors file loads with
the mapping in :func:`daotai.mlx.weights.map_h3_transformer_name`. Shapes: rows are (B, n, C)
and the structural arrays of the layout are shared by every batch item, as in diffusers.
"""

from __future__ import annotations

import math
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from daotai.errors import BackendError
from daotai.mlx.h3_config import MODALITIES, H3TransformerConfig
from daotai.mlx.h3_layout import H3Layout
from daotai.mlx.transformer import timestep_sinusoid

# The published checkpoint keeps these modules in float32 while the block stack is bfloat16;
# they sit at the model's inputs and outputs (and the timestep MLP feeds every block), where a
# rounding is not averaged away by later layers. Matched as name prefixes of the parameters.
FLOAT32_MODULES = ("proj_in.", "audio_proj_in.", "time_embedder.", "proj_out.", "audio_proj_out.")


def rope_cos_sin(position_ids: np.ndarray, rope_freq_dim: int, theta: float) -> tuple[mx.array, mx.array]:
    """(L, 3) positions -> cos, sin: (L, 6 * rope_freq_dim) float32, the three axes' angles twice over.

    float32 throughout, as the reference computes them: positions are fractional (5/3 rotary
    units a latent frame) and reach tens of thousands, so the rounding is part of the model.
    """
    inv_freq = 1.0 / theta ** (np.arange(0, 2 * rope_freq_dim, 2, dtype=np.float32) / np.float32(2 * rope_freq_dim))
    pos = mx.array(position_ids.astype(np.float32))  # (L, 3)
    angles = pos[:, :, None] * mx.array(inv_freq.astype(np.float32))[None, None, :]  # (L, 3, F)
    angles = angles.reshape(angles.shape[0], 3 * rope_freq_dim)  # [t angles | h angles | w angles]
    angles = mx.concatenate([angles, angles], axis=-1)  # (L, 6F)
    return mx.cos(angles), mx.sin(angles)


def apply_rope_half(x: mx.array, cos: mx.array, sin: mx.array) -> mx.array:
    """Rotate the leading cos.shape[-1] channels of each head of x (B, H, L, Dh), rotate-half convention."""
    r = cos.shape[-1]
    rot, rest = x[..., :r], x[..., r:]
    x1, x2 = rot[..., : r // 2], rot[..., r // 2 :]
    turned = mx.concatenate([-x2, x1], axis=-1)
    rot = rot * cos.astype(x.dtype) + turned * sin.astype(x.dtype)
    return mx.concatenate([rot, rest], axis=-1)


class Attention(nn.Module):
    """Self-attention over the packed sequence: per-head q/k RMS norms, optional 3-axis RoPE, no mask, no biases."""

    def __init__(self, cfg: H3TransformerConfig):
        super().__init__()
        self.heads = cfg.num_attention_heads
        self.head_dim = cfg.attention_head_dim
        inner = cfg.inner_dim
        self.to_q = nn.Linear(cfg.hidden_size, inner, bias=False)
        self.to_k = nn.Linear(cfg.hidden_size, inner, bias=False)
        self.to_v = nn.Linear(cfg.hidden_size, inner, bias=False)
        self.norm_q = nn.RMSNorm(cfg.attention_head_dim, eps=cfg.qk_norm_eps)
        self.norm_k = nn.RMSNorm(cfg.attention_head_dim, eps=cfg.qk_norm_eps)
        self.to_out = [nn.Linear(inner, cfg.hidden_size, bias=False)]

    def __call__(self, x: mx.array, rope: tuple[mx.array, mx.array] | None = None) -> mx.array:
        """x (B, L, hidden) -> (B, L, hidden)."""
        b, n, _ = x.shape

        def heads(t: mx.array) -> mx.array:  # (B, L, H*Dh) -> (B, L, H, Dh)
            return t.reshape(b, n, self.heads, self.head_dim)

        q = self.norm_q(heads(self.to_q(x))).transpose(0, 2, 1, 3)  # (B, H, L, Dh)
        k = self.norm_k(heads(self.to_k(x))).transpose(0, 2, 1, 3)
        v = heads(self.to_v(x)).transpose(0, 2, 1, 3)
        if rope is not None:
            q = apply_rope_half(q, *rope)
            k = apply_rope_half(k, *rope)
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(self.head_dim))
        return self.to_out[0](o.transpose(0, 2, 1, 3).reshape(b, n, self.heads * self.head_dim))


class _SwiGLUProj(nn.Module):
    """One Linear to 2 * inner, halves (value, gate) -> value * silu(gate) (diffusers' SwiGLU)."""

    def __init__(self, dim: int, inner: int):
        super().__init__()
        self.proj = nn.Linear(dim, 2 * inner, bias=False)

    def __call__(self, x: mx.array) -> mx.array:
        value, gate = mx.split(self.proj(x), 2, axis=-1)
        return value * nn.silu(gate)


class _Placeholder(nn.Module):
    """Stands in for diffusers' parameter-free Dropout so list indices match its names."""

    def __call__(self, x: mx.array) -> mx.array:
        return x


class FeedForward(nn.Module):
    """diffusers FeedForward(activation 'swiglu', no bias): net.0.proj -> SwiGLU -> net.2."""

    def __init__(self, dim: int, inner: int):
        super().__init__()
        self.net = [_SwiGLUProj(dim, inner), _Placeholder(), nn.Linear(inner, dim, bias=False)]

    def __call__(self, x: mx.array) -> mx.array:
        return self.net[2](self.net[0](x))


class RefinerBlock(nn.Module):
    """Plain pre-norm block over the projected text rows: no AdaLN, no RoPE."""

    def __init__(self, cfg: H3TransformerConfig):
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.ff = FeedForward(cfg.hidden_size, cfg.ffn_dim)

    def __call__(self, x: mx.array) -> mx.array:
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class TokenRefiner(nn.Module):
    """The text stream's refiner blocks and its closing norm."""

    def __init__(self, cfg: H3TransformerConfig):
        super().__init__()
        self.refiner_blocks = [RefinerBlock(cfg) for _ in range(cfg.num_refiner_layers)]
        self.final_norm = nn.RMSNorm(cfg.hidden_size, eps=cfg.final_norm_eps)

    def __call__(self, x: mx.array) -> mx.array:
        for block in self.refiner_blocks:
            x = block(x)
        return self.final_norm(x)


def _silu_to(temb: mx.array, linear: nn.Module) -> mx.array:
    """silu at temb's own (float32) precision, then cast to the projection's dtype: the reference's order."""
    return nn.silu(temb).astype(_param_dtype(linear))


class AdaLNModulation(nn.Module):
    """Shared timestep embedding -> the block's six modulation tables, one row per (timestep, modality)."""

    def __init__(self, cfg: H3TransformerConfig):
        super().__init__()
        self.hidden = cfg.hidden_size
        self.linear = nn.Linear(cfg.time_embed_dim, 6 * cfg.hidden_size * MODALITIES)

    def __call__(self, temb: mx.array) -> list[mx.array]:
        """temb (T, time_embed_dim) -> six (T * 3, hidden): shift, scale, gate (attention), shift, scale, gate (FFN)."""
        table = self.linear(_silu_to(temb, self.linear)).reshape(-1, 6 * self.hidden)  # rows t0m0, t0m1, t0m2, t1m0…
        return mx.split(table, 6, axis=-1)


class Block(nn.Module):
    """MiniMax-H3 block: AdaLN-modulated self-attention and SwiGLU FFN, modulation chosen per row."""

    def __init__(self, cfg: H3TransformerConfig):
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.ff = FeedForward(cfg.hidden_size, cfg.ffn_dim)
        self.adaln_proj = AdaLNModulation(cfg)

    def __call__(self, x: mx.array, temb: mx.array, adaln_rows: mx.array, rope) -> mx.array:
        """x (B, L, hidden), temb (T, time_embed_dim), adaln_rows (L,) -> (B, L, hidden)."""
        shift, scale, gate, shift_ff, scale_ff, gate_ff = (m[adaln_rows] for m in self.adaln_proj(temb))  # (L, hidden)
        x = x + gate * self.attn(self.norm1(x) * (1.0 + scale) + shift, rope)
        return x + gate_ff * self.ff(self.norm2(x) * (1.0 + scale_ff) + shift_ff)


class AdaLNOut(nn.Module):
    """Final RMS norm, shift/scale modulated by each row's timestep (not its modality)."""

    def __init__(self, cfg: H3TransformerConfig):
        super().__init__()
        self.norm = nn.RMSNorm(cfg.hidden_size, eps=cfg.final_norm_eps)
        self.linear = nn.Linear(cfg.time_embed_dim, 2 * cfg.hidden_size)

    def __call__(self, x: mx.array, temb: mx.array, timestep_rows: mx.array) -> mx.array:
        shift, scale = mx.split(self.linear(_silu_to(temb, self.linear)), 2, axis=-1)  # (T, hidden) each
        return self.norm(x) * (1.0 + scale[timestep_rows]) + shift[timestep_rows]


class _MLP2(nn.Module):
    """diffusers TimestepEmbedding: linear_1 -> silu -> linear_2."""

    def __init__(self, din: int, hidden: int, dout: int):
        super().__init__()
        self.linear_1 = nn.Linear(din, hidden)
        self.linear_2 = nn.Linear(hidden, dout)

    def __call__(self, x: mx.array) -> mx.array:
        return self.linear_2(nn.silu(self.linear_1(x)))


def _param_dtype(module: nn.Module) -> mx.Dtype:
    """The floating dtype a module computes in (a quantised Linear's scales carry it)."""
    leaf = getattr(module, "scales", None)
    return (leaf if leaf is not None else module.weight).dtype


class H3Transformer(nn.Module):
    """The MiniMax-H3 DiT; call with the three modalities' input rows and their :class:`H3Layout`."""

    def __init__(self, cfg: H3TransformerConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.hidden_size
        self.proj_in = nn.Linear(cfg.video_patch_dim, d)
        self.audio_proj_in = nn.Linear(cfg.audio_in_channels, d)
        self.context_embedder = nn.Linear(cfg.text_dim, d)
        self.time_embedder = _MLP2(cfg.freq_dim, cfg.time_embed_hidden_dim, cfg.time_embed_dim)
        self.token_refiner = TokenRefiner(cfg)
        self.transformer_blocks = [Block(cfg) for _ in range(cfg.num_layers)]
        self.norm_out = AdaLNOut(cfg)
        self.proj_out = nn.Linear(d, cfg.video_patch_dim)
        self.audio_proj_out = nn.Linear(d, cfg.audio_in_channels)

    def __call__(self, video: mx.array, audio: mx.array, text: mx.array, layout: H3Layout) -> tuple[mx.array, mx.array]:
        """video (B, Nv, video_patch_dim), audio (B, Na, audio_in_channels), text (B, Nt, text_dim), rows in the
        order of the layout's index arrays -> velocities (B, Nv, video_patch_dim), (B, Na, audio_in_channels)."""
        self._check_rows(video, audio, text, layout)
        x = self.pack(video, audio, text, layout)
        temb = self.embed_timesteps(layout.timestep)
        rope = rope_cos_sin(layout.position_ids, self.cfg.rope_freq_dim, self.cfg.rope_theta)
        adaln_rows = mx.array(layout.adaln_rows.astype(np.int32))
        for block in self.transformer_blocks:
            x = block(x, temb, adaln_rows, rope)
        return self.heads(x, temb, layout)

    def _check_rows(self, video: mx.array, audio: mx.array, text: mx.array, layout: H3Layout) -> None:
        """Refuse rows whose count or width disagrees with the layout or the config, naming which."""
        cfg = self.cfg
        for name, rows, width, index in (("video", video, cfg.video_patch_dim, layout.video_indices),
                                         ("audio", audio, cfg.audio_in_channels, layout.audio_indices),
                                         ("text", text, cfg.text_dim, layout.text_indices)):
            want = (index.shape[0], width)
            if rows.ndim != 3 or tuple(rows.shape[1:]) != want:
                raise ValueError(f"h3 transformer: {name} rows have shape {list(rows.shape)}; must be (B, {want[0]}, "
                                 f"{want[1]}) to match the layout and the config")
        if not video.shape[0] == audio.shape[0] == text.shape[0]:
            raise ValueError(f"h3 transformer: batch sizes differ (video {video.shape[0]}, audio {audio.shape[0]}, "
                             f"text {text.shape[0]}); every modality's rows must share the batch")

    def pack(self, video: mx.array, audio: mx.array, text: mx.array, layout: H3Layout) -> mx.array:
        """Project each modality and put its rows at their sequence positions: (B, L, hidden).

        The text stream (refined first) sets the packed sequence's dtype, as in the reference.
        """
        text_rows = self.token_refiner(self.context_embedder(text.astype(_param_dtype(self.context_embedder))))
        dt = text_rows.dtype
        video_rows = self.proj_in(video.astype(_param_dtype(self.proj_in))).astype(dt)
        audio_rows = self.audio_proj_in(audio.astype(_param_dtype(self.audio_proj_in))).astype(dt)
        rows = mx.concatenate([text_rows, video_rows, audio_rows], axis=1)  # (B, L, hidden), by modality
        return mx.take(rows, mx.array(layout.scatter_order.astype(np.int32)), axis=1)

    def embed_timesteps(self, timestep: np.ndarray) -> mx.array:
        """(T,) unscaled timesteps in [0, 1] -> (T, time_embed_dim), at the time MLP's precision."""
        sinusoid = timestep_sinusoid(mx.array(timestep), self.cfg.freq_dim)
        return self.time_embedder(sinusoid.astype(_param_dtype(self.time_embedder.linear_1)))

    def heads(self, x: mx.array, temb: mx.array, layout: H3Layout) -> tuple[mx.array, mx.array]:
        """Output norm, then each modality's head over that modality's rows only.

        The reference runs both heads over every row and selects afterwards; selecting first
        gives the same numbers and spares an (B, L, patch) product over the other rows.
        """
        x = self.norm_out(x, temb, mx.array(layout.timestep_indices.astype(np.int32)))
        video = mx.take(x, mx.array(layout.video_indices.astype(np.int32)), axis=1)
        audio = mx.take(x, mx.array(layout.audio_indices.astype(np.int32)), axis=1)
        video = self.proj_out(video.astype(_param_dtype(self.proj_out)))
        audio = self.audio_proj_out(audio.astype(_param_dtype(self.audio_proj_out)))
        return video, audio


def is_float32_module(name: str) -> bool:
    """True for a parameter the published checkpoint keeps in float32 (see FLOAT32_MODULES)."""
    return name.startswith(FLOAT32_MODULES)


def load_h3_transformer(folder: Path, dtype=mx.float32) -> H3Transformer:
    """A diffusers MiniMaxH3Transformer3DModel folder (config.json + safetensors) as an H3Transformer.

    The block stack is cast to ``dtype``; the float32 modules of the checkpoint stay float32.
    """
    from daotai.mlx.weights import load_into, map_h3_transformer_name, read_config, read_safetensors

    folder = Path(folder)
    config = read_config(folder)
    if config.get("_class_name", "MiniMaxH3Transformer3DModel") != "MiniMaxH3Transformer3DModel":
        raise BackendError(f"{folder}: config.json describes {config.get('_class_name')}, not a "
                           "MiniMaxH3Transformer3DModel; point at a MiniMax-H3 transformer folder")
    model = H3Transformer(H3TransformerConfig.from_dict(config))
    weights = []
    for name, value in read_safetensors(folder).items():
        mapped = map_h3_transformer_name(name, value)
        if mapped is None:
            continue
        key, val = mapped
        if mx.issubdtype(val.dtype, mx.floating):
            val = val.astype(mx.float32 if is_float32_module(key) else dtype)
        weights.append((key, val))
    load_into(model, weights, f"h3 transformer {folder}")
    return model


def quantize_h3(model: H3Transformer, bits: int, group_size: int = 64, keep_modulation: bool = False) -> list[str]:
    """Quantise the block and refiner linears of ``model`` in place (wan-mlx's quantiser); returns their paths.

    ``keep_modulation`` leaves every block's AdaLN projection at its loaded precision (~40 % of
    the released model's parameters stay 16-bit; bench/h3_mlx_quant.py measures both ways).
    """
    from daotai.mlx.quantize import H3_BLOCK_PREFIXES, QuantSpec, quantize_transformer

    skip = ("adaln_proj.linear",) if keep_modulation else ()
    return quantize_transformer(model, QuantSpec(bits, group_size), H3_BLOCK_PREFIXES, skip)


def save_h3_weights(model: H3Transformer, path: Path) -> None:
    """Write the model's parameters (quantised or not) as one safetensors file, by their MLX names."""
    from mlx.utils import tree_flatten

    mx.save_safetensors(str(path), dict(tree_flatten(model.parameters())))


def load_quantized_h3_transformer(folder: Path, bits: int, group_size: int, layers: list[str],
                                  keep_modulation: bool = False) -> H3Transformer:
    """An H3Transformer whose weights were saved quantised (:func:`save_h3_weights`) beside its config.json.

    ``layers`` are the quantised paths recorded when it was written: a model quantised
    differently is refused rather than loaded with mismatched packed weights.
    """
    from daotai.mlx.weights import load_into, read_config, read_safetensors

    folder = Path(folder)
    model = H3Transformer(H3TransformerConfig.from_dict(read_config(folder)))
    done = quantize_h3(model, bits, group_size, keep_modulation)
    if done != list(layers):
        raise BackendError(f"{folder}: the quantised layers ({len(done)}) differ from those recorded at conversion "
                           f"({len(layers)}); convert again")
    load_into(model, list(read_safetensors(folder).items()), f"quantised h3 transformer {folder}")
    return model

