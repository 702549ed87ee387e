"""The `h3` backend's options, and the checks made of them before any work: the model's licence, the
LoRA files a job carries."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import Field, field_validator

from daotai import catalog
from daotai.render.spec import DiffusersOptions

FAMILY = "h3"
DEFAULT_MODEL = "minimax-h3"  # the released model (a local folder of its weights is under its licence too)
TURBO_HELP = ("a step-distilled LoRA (a .safetensors file, a folder holding one, or a catalog name such as "
              "h3-turbo-4step-768p) run with the steps, shift and alpha it was distilled for (steps/shift override them)")
TURBO_ALPHA_HELP = "strength the turbo LoRA is fused at (None: its own alpha)"


class H3Options(DiffusersOptions):
    """Options of the `h3` backend."""

    workflow: Literal["auto", "t2va", "fl2va", "ref2va"] = Field(
        "auto", description="auto: ref2va for camera moves or characters with looks, else t2va; or force one")
    accept_licence: bool = Field(False, description="accept the model's licence (shown when refused); recorded once")
    # MiniMax-H3's schedule holds `steps` sigma points ending at 0: steps - 1 forwards, so at least 2.
    steps: int | None = Field(None, ge=2, le=1000, description="sigma points (steps - 1 transformer forwards; None: 50)")
    # MiniMax-H3 is guidance-distilled and reads its prompt whole: these inherited options do not apply.
    guidance: None = Field(None, description="not used: MiniMax-H3 is guidance-distilled (one forward per step)")
    max_sequence_length: None = Field(None, description="not used: MiniMax-H3's prompt budget is the h3 family's")
    speed: Literal["off", "exact", "fast"] | None = Field(
        None, description="exact (default): attention kernel and compiled blocks | fast: also FP8 linears and a "
                          "step cache (approximate) | off: diffusers' own kernels")
    weights: Literal["bf16", "int8"] | None = Field(
        None, description="int8: the transformer's block weights stored as int8 rows (half the memory, "
                          "approximate, no faster) for cards that cannot hold bf16")
    lora: str | None = Field(None, description="a LoRA .safetensors file (or a folder holding one), fused into "
                                               "the weights when the partition loads")
    @field_validator("lora")
    @classmethod
    def _lora_is_a_safetensors_file(cls, value: str | None) -> str | None:
        """Refuse a missing or pickled LoRA when the options are read, not after the model has loaded."""
        if value is not None:
            path = Path(value).expanduser()
            if not (path.is_dir() or (path.is_file() and path.suffix == ".safetensors")):
                raise ValueError("must be an existing .safetensors file (pickled weights are never loaded) or a "
                                 "folder holding one")
        return value

    segment_seconds: float | None = Field(
        None, description="longest generation a long shot is split into (None: the model's longest, 15 s); shorter "
                          "segments need less memory per generation and make more joins")

    @field_validator("segment_seconds")
    @classmethod
    def _segment_within_the_models_range(cls, value: float | None) -> float | None:
        """A segment is one generation: it must lie within the lengths MiniMax-H3 generates."""
        snap = catalog.family(FAMILY).snap
        if value is not None and not (snap.min_seconds or 0.0) <= value <= (snap.max_seconds or 0.0):
            raise ValueError(f"must lie within MiniMax-H3's {snap.min_seconds:g}-{snap.max_seconds:g} s generations")
        return value

    carry_looks: bool = Field(
        False, description="carry each character's best-seen frame of the finished shots (large, frontal, sharp; "
                           "chosen from the plan's character masks) into later shots as an extra picture reference")
    lora_scale: float = Field(1.0, ge=-4.0, le=4.0, description="strength the LoRA is fused at")
    lora_partition: Literal["transformer", "transformer_ref", "both"] = Field(
        "transformer", description="which partition the LoRA is for: transformer (t2va, fl2va), "
                                   "transformer_ref (ref2va) or both")
    turbo: str | None = Field(None, description=TURBO_HELP)
    turbo_alpha: float | None = Field(None, ge=-4.0, le=4.0, description=TURBO_ALPHA_HELP)

    @field_validator("turbo")
    @classmethod
    def _turbo_is_a_file_or_a_known_name(cls, value: str | None) -> str | None:
        """Refuse an unknown turbo name or a missing / pickled file when the options are read."""
        return checked_turbo(value)

    def shots_depend_on_earlier(self) -> bool:
        """Carried looks come from the shots rendered before."""
        return self.carry_looks


def checked_turbo(value: str | None) -> str | None:
    """``value`` when it is a catalog turbo or an existing .safetensors file (or a folder), else ValueError."""
    if value is None or catalog.turbo_row(value) is not None:
        return value
    path = Path(value).expanduser()
    if not (path.is_dir() or (path.is_file() and path.suffix == ".safetensors")):
        raise ValueError("must be an existing .safetensors file (pickled weights are never loaded), a folder "
                         f"holding one, or a catalog turbo ({', '.join(catalog.turbos())})")
    return value


def check_licence(model: str, accepted: bool, option: str, how: str) -> str | None:
    """Refuse (OptionError at ``option``, saying ``how`` to accept) unless MiniMax-H3's licence was accepted, now
    or before; the acceptance as a manifest line (None for a model that needs none)."""
    from daotai.runtime.licences import require_licence

    row = catalog.model_row(model)
    if row is None:
        # A local folder of MiniMax-H3 weights is under the released model's licence too.
        row = catalog.model_row(DEFAULT_MODEL)
    if row is None:
        return None
    folder = Path(model).expanduser()
    outcome = require_licence(row, accepted, option=option, how=how, folder=folder if folder.is_dir() else None)
    if outcome is None:
        return None
    record, now = outcome
    when = "accepted now" if now else f"accepted {record.get('accepted_at', '')} ({record.get('how', '')})"
    return f"licence: {row.licence} {when}; summary shown: {'; '.join(row.licence_summary)}"


def lora_files(options: Mapping[str, Any]) -> tuple[Path, ...]:
    """The LoRA files the options fuse into the weights (``lora``, ``turbo``), for the shot cache's key.

    A file that cannot be found is left out: the backend refuses it, with its own message, when it starts."""
    from daotai.errors import DaotaiError
    from daotai.render.neural.lora import lora_path
    from daotai.render.neural.turbo import turbo_file

    found = []
    for name, locate in (("lora", lora_path), ("turbo", turbo_file)):
        value = options.get(name)
        if value:
            try:
                found.append(locate(str(value)))
            except DaotaiError:
                continue
    return tuple(found)
