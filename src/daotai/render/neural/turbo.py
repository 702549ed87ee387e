"""Turbo: a step-distilled LoRA together with the sampling it was distilled for (MiniMax-H3).

A turbo LoRA only works with the schedule it was trained on: its number of denoising steps, its
flow shift and the strength it is fused at. ``-O turbo=`` takes a .safetensors file (or a folder
holding one) or a catalog name (:func:`daotai.catalog.turbos`); the settings come, first found
first, from

1. the file's safetensors metadata (``__metadata__``): ``steps`` (transformer forwards), ``shift``
   (the video scheduler's flow shift), ``alpha`` (strength: ``W += alpha * B @ A``), optionally
   ``short_edge`` (the canvas it was distilled at, pixels) and ``partition`` (``transformer``,
   ``transformer_ref`` or ``both``);
2. the catalog row, when the option named one.

The user's ``steps`` / ``shift`` / ``turbo_alpha`` options override both, and each override is
said in a notice. Units: MiniMax-H3's ``steps`` option counts sigma points (forwards + 1), a
turbo's ``steps`` counts forwards, as the LoRAs are named ("4 step": 4 forwards, 5 sigma points).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from daotai import catalog
from daotai.errors import BackendError, OptionError
from daotai.render.neural.lora import LoraFile, resolve_lora
from daotai.render.neural.request import ModelDefaults

PARTITIONS = ("transformer", "transformer_ref", "both")
MAX_FORWARDS = 100  # a distilled schedule is short; more than this is a mislabelled file


@dataclass(frozen=True)
class TurboSampling:
    """The schedule a turbo LoRA was distilled for."""

    forwards: int  # transformer forwards (denoising steps)
    shift: float  # video scheduler flow shift
    alpha: float  # fuse strength: W += alpha * B @ A
    short_edge: int | None = None  # canvas short edge (pixels); None: the model's
    partition: str = "transformer"  # which MiniMax-H3 partition it is for


@dataclass(frozen=True)
class Turbo:
    """A resolved turbo LoRA: its file (hashed), its sampling, and where each setting came from."""

    label: str  # the catalog name, or the file's name
    lora: LoraFile
    sampling: TurboSampling
    sources: tuple[str, ...]  # "steps 4 (file metadata)", ... for the manifest

    def describe(self) -> str:
        """One line for the manifest: name, file, full sha256 and the sampling with its sources."""
        named = f"turbo {self.label}" + (f" ({self.lora.path.name})" if self.label != self.lora.path.name else "")
        return f"{named}: sha256 {self.lora.sha256}; " + ", ".join(self.sources)


def _positive_int(raw: str) -> int | None:
    value = int(raw)
    return value if 1 <= value <= MAX_FORWARDS else None


def _shift(raw: str) -> float | None:
    value = float(raw)
    return value if 0.0 < value <= 50.0 else None


def _alpha(raw: str) -> float | None:
    value = float(raw)
    return value if -4.0 <= value <= 4.0 and value != 0.0 else None


def _edge(raw: str) -> int | None:
    value = int(raw)
    return value if 256 <= value <= 2048 and value % 32 == 0 else None


def _partition(raw: str) -> str | None:
    return raw if raw in PARTITIONS else None


# metadata key -> (parser returning None for an out-of-range value, the rule as the error says it)
METADATA_RULES: dict[str, tuple[Callable[[str], Any], str]] = {
    "steps": (_positive_int, f"must be a whole number of forwards in 1..{MAX_FORWARDS}"),
    "shift": (_shift, "must be a number in (0, 50]"),
    "alpha": (_alpha, "must be a non-zero number in [-4, 4]"),
    "short_edge": (_edge, "must be a multiple of 32 pixels in 256..2048"),
    "partition": (_partition, f"must be one of {', '.join(PARTITIONS)}"),
}


def read_turbo_metadata(path: Path, option: str) -> dict[str, Any]:
    """The turbo settings in a safetensors file's ``__metadata__`` (only the keys of METADATA_RULES), checked."""
    from daotai.runtime.model_checks import read_safetensors_header

    metadata = read_safetensors_header(path).get("__metadata__") or {}
    found: dict[str, Any] = {}
    for key, (parse, rule) in METADATA_RULES.items():
        if key not in metadata:
            continue
        raw = str(metadata[key]).strip()
        try:
            value = parse(raw)
        except ValueError:
            value = None
        if value is None:
            raise OptionError.at("turbo", option, f"{path.name}: metadata {key}={raw!r} {rule}")
        found[key] = value
    return found


def find_turbo_file(row: catalog.TurboRow) -> Path:
    """The downloaded file of a catalog turbo in the Hugging Face cache (newest snapshot first), or a refusal
    that says where to get it."""
    from daotai.runtime.model_lookup import hub_cache_dir

    storage = hub_cache_dir() / ("models--" + row.repo_id.replace("/", "--")) / "snapshots"
    snapshots = sorted(storage.glob("*"), key=os.path.getmtime, reverse=True) if storage.is_dir() else []
    for snapshot in snapshots:
        found = sorted(snapshot.glob(f"**/{row.file_pattern}"))
        if found:
            return found[0]
    raise OptionError.at("turbo", row.name, f"is not downloaded (looked for {row.file_pattern} in {storage}); "
                                            f"download it from https://huggingface.co/{row.repo_id} "
                                            "and pass its file: -O turbo=PATH")


def turbo_file(value: str) -> Path:
    """The .safetensors file a turbo option names: a catalog name's downloaded file, or the file / folder given."""
    from daotai.render.neural.lora import lora_path

    row = catalog.turbo_row(value)
    return find_turbo_file(row) if row is not None else lora_path(value, "turbo")


def resolve_turbo(value: str, steps: int | None = None, shift: float | None = None) -> Turbo:
    """The turbo ``value`` names (file, folder or catalog name) with its sampling: metadata, then the row.

    ``steps`` / ``shift``: the user's own options, which may stand in for settings a bare file lacks.
    """
    row = catalog.turbo_row(value)
    lora = resolve_lora(str(turbo_file(value)))  # the path is checked: resolve_lora only hashes it
    metadata = read_turbo_metadata(lora.path, value)
    fallback = {} if row is None else {"steps": row.forwards, "shift": row.shift, "alpha": row.alpha,
                                        "short_edge": row.short_edge, "partition": row.partition}
    chosen: dict[str, Any] = {}
    sources: list[str] = []
    for key in METADATA_RULES:
        if key in metadata:
            chosen[key], where = metadata[key], "file metadata"
        elif key in fallback:
            chosen[key], where = fallback[key], f"catalog row {row.name}" if row else ""
        else:
            continue
        sources.append(f"{key} {chosen[key]:g} ({where})" if isinstance(chosen[key], float)
                       else f"{key} {chosen[key]} ({where})")
    missing = [k for k, given in (("steps", steps), ("shift", shift)) if k not in chosen and given is None]
    if missing:
        names = ", ".join(catalog.turbos())
        raise OptionError.at("turbo", value, f"{lora.path.name} names no {' or '.join(missing)} in its metadata "
                                             f"(keys {', '.join(METADATA_RULES)}); pass -O {'= -O '.join(missing)}= "
                                             f"or name a catalog turbo ({names})")
    for key, given, as_points in (("steps", steps, True), ("shift", shift, False)):
        if key not in chosen and given is not None:  # a bare file: the user's option stands in
            sources.append(f"{key} {given - 1 if as_points else given:g} (-O {key}={given:g})")
    if "alpha" not in chosen:
        sources.append("alpha 1 (none given: full strength)")
    sampling = TurboSampling(forwards=int(chosen.get("steps", max(1, (steps or 2) - 1))),
                             shift=float(chosen.get("shift", shift or 0.0)), alpha=float(chosen.get("alpha", 1.0)),
                             short_edge=chosen.get("short_edge"), partition=chosen.get("partition", "transformer"))
    return Turbo(row.name if row is not None else lora.path.name, lora, sampling, tuple(sources))


def turbo_defaults(defaults: ModelDefaults, turbo: Turbo, steps: int | None, shift: float | None,
                   alpha: float | None) -> tuple[ModelDefaults, float, list[str]]:
    """(defaults with the turbo's schedule, the fuse strength, notices of the user's overrides).

    ``steps`` counts sigma points (MiniMax-H3's option), the turbo's forwards + 1.
    """
    sampling = turbo.sampling
    notes = []
    turbo_points = sampling.forwards + 1
    if steps is not None and steps != turbo_points:
        notes.append(f"turbo {turbo.label}: steps={steps} ({steps - 1} forwards) overrides the {sampling.forwards} "
                     "forwards it was distilled for")
    if shift is not None and shift != sampling.shift:
        notes.append(f"turbo {turbo.label}: shift={shift:g} overrides the shift {sampling.shift:g} it was distilled with")
    if alpha is not None and alpha != sampling.alpha:
        notes.append(f"turbo {turbo.label}: turbo_alpha={alpha:g} overrides its alpha {sampling.alpha:g}")
    chosen = replace(defaults, steps=steps if steps is not None else turbo_points,
                     shift=shift if shift is not None else sampling.shift)
    return chosen, alpha if alpha is not None else sampling.alpha, notes


def partitions_for(turbo: Turbo) -> tuple[str, ...]:
    """The MiniMax-H3 partitions the turbo is fused into."""
    return ("transformer", "transformer_ref") if turbo.sampling.partition == "both" else (turbo.sampling.partition,)


def check_turbo_covers(turbo: Turbo, workflows: set[str], family: str) -> None:
    """Refuse a plan whose workflows run a partition the turbo is not for (its short schedule would be run on
    undistilled weights)."""
    table = catalog.family(family).workflows
    covered = set(partitions_for(turbo))
    for workflow in sorted(workflows):
        needs = [c for c in table.get(workflow, ()) if c.startswith("transformer")]
        uncovered = [c for c in needs if c not in covered]
        if uncovered:
            raise BackendError(f"turbo: {turbo.label} is for the {', '.join(sorted(covered))} partition; the plan's "
                               f"{workflow} shots run {uncovered[0]}: force -O workflow= to one it covers, or use a "
                               f"turbo made for {uncovered[0]}")
