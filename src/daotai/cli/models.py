"""``daotai models …``: list, pull, update, verify, path, rm and convert the video models in the cache.

The functions are plain; the package registers them under the names in :data:`COMMANDS`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from daotai.cli.common import out


def models_list() -> None:
    """Known models, their hub repos and whether they are downloaded (size on disk, upstream commit)."""
    from daotai import catalog
    from daotai.runtime.model_lookup import pulled_model

    for spec in catalog.models().values():
        pulled = pulled_model(spec)
        state = "not downloaded" if pulled is None else (
            f"[green]downloaded[/green] {pulled.bytes / 1e9:.1f} GB on disk, commit "
            f"{(pulled.commit or 'unknown')[:12]} {pulled.path}")
        out.print(f"{spec.name:28} {spec.family:9} {spec.repo_id}@{spec.revision or 'main'} ~{spec.size_gb:g} GB  "
                  f"{spec.licence}  {state}")


def models_pull(
    name: str = typer.Argument(..., help="registry name (see: daotai models list)"),
    workflow: str = typer.Option(None, "--workflow", help="only the components one workflow loads (minimax-h3: "
                                                          "t2va, fl2va or ref2va)"),
    accept_licence: bool = typer.Option(False, "--accept-licence", help="accept the model's licence (shown when "
                                                                        "refused); recorded once"),
) -> None:
    """Download a model (resumable), check every file's sha256 against the hub and record a manifest."""
    from daotai.runtime.model_downloads import pull

    out.print(f"[green]pulled[/green] {name} → {pull(name, workflow=workflow, accept_licence=accept_licence)}")


def models_update(
    name: str = typer.Argument(..., help="registry name of a pulled model"),
    prune: bool = typer.Option(False, "--prune", help="delete the previous snapshot once the new one is verified"),
) -> None:
    """Fetch the newest upstream commit of a pulled model, verify it and use it from now on."""
    from daotai.runtime.model_downloads import update

    result = update(name, prune=prune)
    if result.before == result.after:
        out.print(f"[green]up to date[/green] {name} at commit {result.after[:12]}")
        return
    kept = f"; {result.freed / 1e9:.1f} GB of the previous snapshot freed" if result.freed else (
        f"; the previous commit {(result.before or '?')[:12]} stays in the cache (--prune removes it)")
    out.print(f"[green]updated[/green] {name}: commit {(result.before or '?')[:12]} → {result.after[:12]}, "
              f"verified → {result.path}{kept}")


def models_verify(
    model: str = typer.Argument(..., help="registry name or diffusers folder"),
    record: bool = typer.Option(False, "--record", help="hash the files now and record them as the manifest"),
) -> None:
    """Check a model's files: formats, safetensors headers and every sha256 against its manifest."""
    from daotai.runtime.model_checks import check_manifest, check_model_folder, write_folder_manifest
    from daotai.runtime.model_lookup import resolve_model

    resolved = resolve_model(model)
    if record:
        write_folder_manifest(resolved.path)
    check_model_folder(resolved.path)
    count = check_manifest(resolved.path, full=True)
    out.print(f"[green]ok[/green] {resolved.path}: {count} files match the manifest")


def models_path(model: str = typer.Argument(..., help="registry name or diffusers folder")) -> None:
    """Print the folder a model loads from."""
    from daotai.runtime.model_lookup import resolve_model

    sys.stdout.write(f"{resolve_model(model).path}\n")


def models_rm(name: str = typer.Argument(..., help="registry name")) -> None:
    """Delete a downloaded model from the cache."""
    from daotai.runtime.model_downloads import remove

    freed = remove(name)
    out.print(f"removed {name} ({freed / 1e9:.1f} GB freed)" if freed else f"{name} was not downloaded")


def models_convert(
    model: str = typer.Argument(..., help="registry name or diffusers Wan / MiniMax-H3 folder"),
    to: str = typer.Option("mlx", "--to", help="target runtime (only: mlx)"),
    bits: int = typer.Option(4, "--bits", help="transformer weight bits: 4 | 8"),
    group_size: int = typer.Option(64, "--group-size", help="weights sharing one scale: 32 | 64 | 128"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="new folder (default: <model>-mlx-<bits>bit-g<group>)"),
) -> None:
    """Convert a Wan or MiniMax-H3 model for wan-mlx / h3-mlx (quantised transformer + manifest of hashes)."""
    from daotai.errors import BackendError

    if to != "mlx":
        raise BackendError(f"--to: {to!r} is not supported; the only target is 'mlx'")
    from daotai.mlx import require_mlx

    require_mlx("daotai models convert --to mlx")
    from daotai.mlx.convert import COPIED, convert
    from daotai.mlx.h3_convert import convert_h3, converted_bytes, is_h3_folder
    from daotai.mlx.quantize import QuantSpec
    from daotai.render.wan_mlx import _resolve
    from daotai.runtime.model_space import check_free_space, convert_bytes

    source = _resolve(model)
    dest = output or Path(f"{source.name}-mlx-{bits}bit-g{group_size}")
    QuantSpec(bits, group_size)  # a bad --bits / --group-size is named before the space is estimated
    if is_h3_folder(source):  # MiniMax-H3: both transformer partitions, the rest read from the source folder
        check_free_space(dest, converted_bytes(source, bits, group_size), f"models convert {model}")
        out.print(f"[green]converted[/green] {source} → {convert_h3(source, dest, bits, group_size)}")
        return
    check_free_space(dest, convert_bytes(source, bits, group_size, COPIED), f"models convert {model}")
    out.print(f"[green]converted[/green] {source} → {convert(source, dest, bits, group_size)}")


# Subcommand names in the order ``daotai models --help`` lists them.
COMMANDS = (("list", models_list), ("pull", models_pull), ("update", models_update), ("verify", models_verify),
            ("path", models_path), ("rm", models_rm), ("convert", models_convert))
