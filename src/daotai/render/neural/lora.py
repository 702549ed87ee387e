"""LoRA files folded into a transformer's weights (MiniMax-H3's two partitions routed explicitly).

A LoRA is loaded through diffusers' own reader (which converts the community layouts), fused into
the base weights at the asked scale and its adapter layers removed again: the transformer then
runs at exactly its usual speed, and every later lever (int8 or FP8 weights, compile) sees plain
linear layers. Only safetensors files are read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daotai.errors import BackendError, OptionError

ADAPTER = "daotai_lora"


@dataclass(frozen=True)
class LoraFile:
    """A LoRA safetensors file, resolved and hashed (what the manifest records)."""

    path: Path
    sha256: str

    def describe(self, scale: float, partition: str) -> str:
        return f"LoRA {self.path.name} (sha256 {self.sha256[:12]}…) fused into {partition} at scale {scale:g}"


def resolve_lora(value: str) -> LoraFile:
    """The LoRA file ``value`` names (a .safetensors file, or a folder holding exactly one), hashed."""
    path = lora_path(value)
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return LoraFile(path.resolve(), digest.hexdigest())


def lora_path(value: str, option: str = "lora") -> Path:
    """The LoRA file ``value`` names (a .safetensors file, or a folder holding exactly one), checked; errors
    name ``option``."""
    path = Path(value).expanduser()
    if path.is_dir():
        found = sorted(path.glob("*.safetensors"))
        if len(found) != 1:
            raise OptionError.at(option, value, f"a folder must hold exactly one .safetensors file; it holds "
                                                f"{len(found)}")
        path = found[0]
    if not path.is_file():
        raise OptionError.at(option, value, "must be an existing .safetensors file or a folder holding one")
    if path.suffix != ".safetensors":
        raise OptionError.at(option, value, "must be a .safetensors file (pickled weights are never loaded)")
    return path


def h3_lora_state(lora: LoraFile, partition: str) -> tuple[dict, str]:
    """(state dict, key prefix) of ``lora`` for one MiniMax-H3 partition ("transformer" | "transformer_ref").

    diffusers' reader converts community layouts to ``transformer.``-prefixed keys; a file saved for
    the reference partition carries ``transformer_ref.`` keys. A file with keys for both partitions
    gives each its own; a file for one partition is applied to the partition the user named.
    """
    from diffusers.modular_pipelines import MiniMaxH3ModularPipeline

    try:
        state, _ = MiniMaxH3ModularPipeline.lora_state_dict(str(lora.path), use_safetensors=True,
                                                             return_lora_metadata=True)
    except Exception as exc:  # diffusers raises ValueError/KeyError/OSError for files it cannot read
        raise BackendError(f"lora: {lora.path.name} is not a LoRA diffusers can read for MiniMax-H3: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc
    prefixes = {key.split(".", 1)[0] for key in state}
    if partition in prefixes:
        return state, partition
    if prefixes == {"transformer"}:  # one partition's file, routed where the user asked
        return state, "transformer"
    raise BackendError(f"lora: {lora.path.name} holds layers for {', '.join(sorted(prefixes))}, none for {partition}")


LORA_FACTORS = (".lora_A.weight", ".lora_B.weight")


def check_lora_shapes(transformer: Any, state: dict, prefix: str, source: str) -> None:
    """Refuse a LoRA whose layers this (torch) transformer lacks or whose factors do not fit them.

    A LoRA of layer ``W`` (out, in) holds ``A`` (rank, in) and ``B`` (out, rank); a file made for
    another model or size names layers that are missing here or has other widths. peft would skip
    unknown layers with a warning and fail on a width deep in its loader: this names the file, the
    key and both shapes first.
    """
    modules = dict(transformer.named_modules())

    def linear_shape(layer: str) -> tuple[int, int] | None | bool:
        module = modules.get(layer)
        if module is None:
            return False
        weight = getattr(module, "weight", None)
        return tuple(weight.shape) if weight is not None and weight.ndim == 2 else None

    check_factor_shapes(lora_factors(state, prefix, source), linear_shape, prefix, source)


def lora_factors(state: dict, prefix: str, source: str) -> dict[str, dict[str, tuple[str, tuple[int, ...]]]]:
    """layer → {".lora_A.weight" | ".lora_B.weight": (key, shape)} of the keys under ``prefix.``; refuses a
    state with none."""
    start = prefix + "."
    factors: dict[str, dict[str, tuple[str, tuple[int, ...]]]] = {}
    for key, tensor in state.items():
        if not key.startswith(start):
            continue
        for suffix in LORA_FACTORS:
            if key.endswith(suffix):
                layer = key[len(start):-len(suffix)]
                factors.setdefault(layer, {})[suffix] = (key, tuple(tensor.shape))
    if not factors:
        raise BackendError(f"lora: {source} holds no lora_A/lora_B factors under {prefix!r}")
    return factors


def check_factor_shapes(factors: dict, linear_shape: Any, prefix: str, source: str) -> None:
    """Refuse factors for a layer ``linear_shape(layer)`` says is missing (False) or not linear (None), or whose
    shapes do not fit its (out, in)."""
    start = prefix + "."
    for layer, found in sorted(factors.items()):
        shape = linear_shape(layer)
        key = next(iter(found.values()))[0]
        if shape is False:
            raise BackendError(f"lora: {source}: {key} is for a layer {layer!r} this transformer does not have "
                               f"(a LoRA for another model?)")
        if shape is None:
            raise BackendError(f"lora: {source}: {key} is for {layer!r}, which is not a linear layer here")
        out_features, in_features = shape
        if len(found) != 2:
            missing = next(s for s in LORA_FACTORS if s not in found)
            raise BackendError(f"lora: {source}: {key} has no {start}{layer}{missing} beside it")
        a_key, a_shape = found[".lora_A.weight"]
        b_key, b_shape = found[".lora_B.weight"]
        rank = a_shape[0] if len(a_shape) == 2 else -1
        want = {a_key: (a_shape, (rank, in_features)), b_key: (b_shape, (out_features, rank))}
        for wrong_key, (got, expected) in want.items():
            if got != expected:
                raise BackendError(f"lora: {source}: {wrong_key} has shape {list(got)}, but layer {layer!r} is "
                                   f"{in_features} -> {out_features} (needs {list(expected)} at rank {rank}): a "
                                   "LoRA for another model or size")


def fuse_lora(transformer: Any, state: dict, prefix: str, scale: float, source: str = "the LoRA") -> int:
    """Load ``state`` (keys under ``prefix.``) into ``transformer``, fold it in at ``scale``, drop the adapter.

    Every layer's factors are checked against the transformer first (:func:`check_lora_shapes`);
    ``source`` names the file in errors. Returns how many linear layers the LoRA changed.
    """
    check_lora_shapes(transformer, state, prefix, source)
    try:
        transformer.load_lora_adapter(state, prefix=prefix, adapter_name=ADAPTER)
    except Exception as exc:
        raise BackendError(f"lora: does not fit the transformer: {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
    from peft.tuners.tuners_utils import BaseTunerLayer

    changed = sum(1 for module in transformer.modules() if isinstance(module, BaseTunerLayer))
    transformer.fuse_lora(lora_scale=scale, adapter_names=[ADAPTER])
    transformer.unload_lora()  # keeps the fused weights, removes the adapter layers
    return changed
