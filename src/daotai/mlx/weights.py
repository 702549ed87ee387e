"""Load diffusers-format safetensors into the MLX modules; the one place weight names are mapped.

Only ``.safetensors`` is read (through ``mx.load``, no torch needed). Pickle checkpoints
(``.bin``, ``.pt``, ``.ckpt``, ``.pth``) are refused: unpickling can execute code.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx

from daotai.errors import BackendError

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def safetensor_files(folder: Path) -> list[Path]:
    """The safetensors shards of a diffusers component folder; pickle-only folders are refused."""
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = [p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES] if folder.is_dir() else []
        if pickles:
            raise BackendError(
                f"{folder}: only pickle checkpoints found ({', '.join(pickles)}); wan-mlx loads safetensors only "
                "because unpickling can run arbitrary code"
            )
        raise BackendError(f"{folder}: no .safetensors files found")
    return files


def read_config(folder: Path) -> dict:
    """The component's config.json as a dict."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise BackendError(f"{folder}: config.json missing")
    return json.loads(path.read_text(encoding="utf-8"))


def read_safetensors(folder: Path) -> dict[str, mx.array]:
    """All tensors of all shards in a folder, by their diffusers names."""
    out: dict[str, mx.array] = {}
    for f in safetensor_files(folder):
        if f.suffix != ".safetensors":
            raise BackendError(f"{f}: refusing non-safetensors file")
        out.update(mx.load(str(f)))
    return out


def map_transformer_name(name: str, value: mx.array) -> tuple[str, mx.array] | None:
    """diffusers WanTransformer3DModel name/tensor -> MLX WanTransformer name/tensor (None = drop)."""
    if name in ("patch_embedding.weight", "vace_patch_embedding.weight"):
        # Conv3d (D, C, pt, ph, pw) -> Linear (D, C*pt*ph*pw); same flattening order as the patches
        return name, value.reshape(value.shape[0], -1)
    if ".norm_added_q." in name:  # legacy key diffusers also ignores
        return None
    return name, value


def map_vae_name(name: str, value: mx.array) -> tuple[str, mx.array] | None:
    """diffusers AutoencoderKLWan name/tensor -> MLX WanVAE name/tensor (convs to channels-last)."""
    if name.endswith(".weight") and value.ndim == 5:  # Conv3d (O, I, kt, kh, kw) -> (O, kt, kh, kw, I)
        return name, value.transpose(0, 2, 3, 4, 1)
    if name.endswith(".weight") and value.ndim == 4:  # Conv2d (O, I, kh, kw) -> (O, kh, kw, I)
        return name, value.transpose(0, 2, 3, 1)
    if name.endswith(".gamma") and value.ndim > 1:  # RMS_norm gamma (C, 1, 1[, 1]) -> (C,)
        return name, value.reshape(-1)
    return name, value


def map_umt5_name(name: str, value: mx.array) -> tuple[str, mx.array] | None:
    """transformers UMT5EncoderModel name/tensor -> MLX UMT5Encoder name (tied copy dropped)."""
    if name == "encoder.embed_tokens.weight":  # tied to shared.weight
        return None
    return name, value


def map_h3_transformer_name(name: str, value: mx.array) -> tuple[str, mx.array] | None:
    """diffusers MiniMaxH3Transformer3DModel name/tensor -> MLX H3Transformer name/tensor (None = drop).

    The MLX module tree mirrors diffusers' names one to one (``to_out.0``, ``ff.net.0.proj`` …);
    the rotary ``inv_freq`` buffer is recomputed from the config, so a checkpoint carrying it drops it.
    """
    if name.endswith("rope.inv_freq"):
        return None
    return name, value


MAPPERS = {"transformer": map_transformer_name, "vae": map_vae_name, "text_encoder": map_umt5_name,
           "h3_transformer": map_h3_transformer_name}


def mapped_weights(folder: Path, component: str, dtype=mx.float32) -> list[tuple[str, mx.array]]:
    """Read and rename a component's weights, cast floating tensors to dtype."""
    mapper = MAPPERS[component]
    out = []
    for name, value in read_safetensors(folder).items():
        m = mapper(name, value)
        if m is None:
            continue
        key, val = m
        if mx.issubdtype(val.dtype, mx.floating):
            val = val.astype(dtype)
        out.append((key, val))
    return out


def load_into(module, weights: list[tuple[str, mx.array]], what: str) -> None:
    """Load weights strictly (every parameter present, shapes equal), naming the first mismatch."""
    try:
        module.load_weights(weights, strict=True)
    except ValueError as exc:
        raise BackendError(f"{what}: weights do not match the model ({exc})") from exc
    mx.eval(module.parameters())


def vae_decoder_weights(folder: Path, dtype=mx.float32) -> list[tuple[str, mx.array]]:
    """The decoder half of a Wan VAE (post_quant_conv + decoder.*), channels-last."""
    keep = ("decoder.", "post_quant_conv.")
    return [(k, v) for k, v in mapped_weights(folder, "vae", dtype) if k.startswith(keep)]


def vae_encoder_weights(folder: Path, dtype=mx.float32) -> list[tuple[str, mx.array]]:
    """The encoder half of a Wan VAE (encoder.* + quant_conv), channels-last."""
    keep = ("encoder.", "quant_conv.")
    return [(k, v) for k, v in mapped_weights(folder, "vae", dtype) if k.startswith(keep)]
