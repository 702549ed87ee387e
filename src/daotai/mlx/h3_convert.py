"""Convert MiniMax-H3's transformer partitions to 4/8-bit MLX weights (``daotai models convert minimax-h3 --to mlx``).

Layout written (only what changes; the ~70 GB of conditioner, VAEs and schedulers stay in the
source folder, which the manifest names and the backend reads):
  transformer/config.json, transformer/model.safetensors          t2va / fl2va partition, quantised
  transformer_ref/config.json, transformer_ref/model.safetensors  ref2va partition, quantised
  mlx_manifest.json   format, bits, group size, the quantised layers of each partition, the source
                      folder with the size and sha256 of each of its partition files, and the sha256
                      of every file written

The weights are quantised from the checkpoint's bfloat16 blocks (its float32 modules stay
float32), as ``bench/h3_mlx_quant.py`` measures them. The folder is built under a temp name
beside the output and renamed when complete, so a failed or killed conversion leaves nothing
under the final name; free space is checked before any weight is read.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterable

from daotai.errors import BackendError
from daotai.files import atomic_path, remove_temp_files, sha256_file

MANIFEST = "mlx_manifest.json"
FORMAT = "daotai-mlx-h3/1"
PARTITIONS = ("transformer", "transformer_ref")
H3_PIPELINE = "MiniMaxH3ModularPipeline"


def is_h3_folder(folder: Path) -> bool:
    """Whether ``folder`` is a MiniMax-H3 diffusers folder (its modular index names the H3 pipeline)."""
    from daotai.runtime.model_checks import MODULAR_INDEX_NAME

    index = Path(folder) / MODULAR_INDEX_NAME
    if not index.is_file():
        return False
    try:
        return json.loads(index.read_text(encoding="utf-8")).get("_class_name") == H3_PIPELINE
    except (OSError, json.JSONDecodeError):
        return False


def _safetensors_files(folder: Path) -> list[Path]:
    return sorted(Path(folder).glob("*.safetensors"))


def converted_bytes(source: Path, bits: int, group_size: int, partitions: Iterable[str] = PARTITIONS) -> int:
    """Bytes a conversion writes (an upper estimate, from the safetensors headers alone): each 2-D weight
    at ``bits`` plus a 16-bit scale and bias per group, every other tensor at its stored size."""
    from daotai.runtime.model_checks import read_safetensors_header

    total = 0
    for part in partitions:
        for path in _safetensors_files(Path(source) / part):
            for key, info in read_safetensors_header(path).items():
                if key == "__metadata__":
                    continue
                start, end = info["data_offsets"]
                shape = info.get("shape") or []
                if len(shape) == 2 and shape[-1] % group_size == 0:
                    total += int(shape[0] * shape[1] * (bits + 32 / group_size) / 8)
                else:
                    total += int(end) - int(start)
    return total


def _hash_files(root: Path, subs: Iterable[str]) -> dict[str, dict]:
    """{relative path: {sha256, size}} of every file under root/sub for each sub (the manifest skipped)."""
    out = {}
    for sub in subs:
        for p in sorted((root / sub).rglob("*")):
            if p.is_file() and p.name != MANIFEST:
                out[p.relative_to(root).as_posix()] = {"sha256": sha256_file(p), "size": p.stat().st_size}
    return out


def convert_h3(source: Path, dest: Path, bits: int = 4, group_size: int = 64,
               partitions: tuple[str, ...] = PARTITIONS, keep_modulation: bool = False) -> Path:
    """Write the converted folder ``dest`` from the MiniMax-H3 folder ``source``; returns dest.

    ``keep_modulation`` leaves the AdaLN projections at 16 bits (less error, ~17 GiB more a
    partition at full size; docs/mlx.md has both measured).
    """
    import gc

    import mlx.core as mx

    from daotai.mlx.h3_transformer import load_h3_transformer, quantize_h3, save_h3_weights
    from daotai.mlx.quantize import QuantSpec

    QuantSpec(bits, group_size)  # validates before any work
    source, dest = Path(source).resolve(), Path(dest)
    if not is_h3_folder(source):
        raise BackendError(f"convert: {source} is not a MiniMax-H3 folder (no modular index naming {H3_PIPELINE}); "
                           "pull it first: daotai models pull minimax-h3")
    bad = [p for p in partitions if p not in PARTITIONS]
    if bad or not partitions:
        raise BackendError(f"convert: partitions {list(partitions)} must be one or both of {', '.join(PARTITIONS)}")
    missing = [p for p in partitions if not (source / p / "config.json").is_file() or not _safetensors_files(source / p)]
    if missing:
        raise BackendError(f"convert: {source} lacks {', '.join(missing)} (config.json and safetensors); pull the "
                           "workflows that need them: daotai models pull minimax-h3")
    if dest.exists() and any(dest.iterdir()):
        raise BackendError(f"convert: output folder {dest} is not empty; choose a new folder")
    remove_temp_files(dest)  # what a killed conversion left
    layers: dict[str, list[str]] = {}
    with atomic_path(dest) as tmp:
        for part in partitions:
            # from the checkpoint's bfloat16 blocks: quantising its float32 upcast would round the same values
            model = load_h3_transformer(source / part, mx.bfloat16)
            layers[part] = quantize_h3(model, bits, group_size, keep_modulation)
            (tmp / part).mkdir(parents=True)
            save_h3_weights(model, tmp / part / "model.safetensors")
            shutil.copy2(source / part / "config.json", tmp / part / "config.json")
            del model  # one partition in memory at a time
            gc.collect()
            mx.clear_cache()
        manifest = {
            "format": FORMAT,
            "model": "minimax-h3",
            "bits": bits,
            "group_size": group_size,
            "keep_modulation": keep_modulation,
            "partitions": list(partitions),
            "quantized_layers": layers,
            "source": {"path": str(source), "files": _hash_files(source, partitions)},
            "files": {k: v["sha256"] for k, v in _hash_files(tmp, partitions).items()},
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if dest.exists():
            dest.rmdir()  # empty (checked above); the rename takes its place
    return dest


def read_h3_manifest(folder: Path) -> dict | None:
    """The h3 conversion manifest of ``folder``; None when it has none or another model's."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if data.get("format") == FORMAT else None


def check_h3_converted(folder: Path, verify_source: bool = False) -> dict:
    """Check a converted folder's files (sha256) and its source folder (sizes; sha256 with ``verify_source``)."""
    folder = Path(folder)
    manifest = read_h3_manifest(folder)
    if manifest is None:
        raise BackendError(f"{folder}: no {MANIFEST} of format {FORMAT}; not a converted h3-mlx folder")
    for rel, digest in manifest["files"].items():
        p = folder / rel
        if not p.is_file() or sha256_file(p) != digest:
            raise BackendError(f"{p}: missing or sha256 differs from {MANIFEST}; convert again")
    src = Path(manifest["source"]["path"])
    if not is_h3_folder(src):
        raise BackendError(f"{folder}: its source folder {src} (conditioner, VAEs, schedulers) is missing or not a "
                           "MiniMax-H3 folder; put it back there or convert again from where it is now")
    for rel, info in manifest["source"]["files"].items():
        p = src / rel
        if not p.is_file() or p.stat().st_size != info["size"]:
            raise BackendError(f"{p}: the source changed since conversion (size); convert again")
        if verify_source and sha256_file(p) != info["sha256"]:
            raise BackendError(f"{p}: the source changed since conversion (sha256); convert again")
    return manifest


def h3_source(folder: Path, verify_source: bool = False) -> tuple[Path, Path | None, dict | None]:
    """(the diffusers folder, the converted folder or None, its manifest or None) for a folder given as the model."""
    folder = Path(folder).resolve()
    manifest_path = folder / MANIFEST
    if manifest_path.is_file():
        data = json.loads(manifest_path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise BackendError(f"{folder}: converted for another model ({data.get('format')!r}, not {FORMAT!r}); "
                               "convert MiniMax-H3 with: daotai models convert minimax-h3 --to mlx --bits 4")
        manifest = check_h3_converted(folder, verify_source)
        return Path(manifest["source"]["path"]), folder, manifest
    if not is_h3_folder(folder):
        raise BackendError(f"{folder}: neither a MiniMax-H3 folder nor one converted from it; pull it with: daotai "
                           "models pull minimax-h3 (and convert it with: daotai models convert minimax-h3 --to mlx "
                           "--bits 4)")
    return folder, None, None


def load_converted_partition(folder: Path, name: str, manifest: dict):
    """One quantised partition of a checked converted folder as an H3Transformer."""
    from daotai.mlx.h3_transformer import load_quantized_h3_transformer

    if name not in manifest.get("partitions", ()):
        raise BackendError(f"{folder}: converted without {name}; convert again with both partitions")
    return load_quantized_h3_transformer(Path(folder) / name, int(manifest["bits"]), int(manifest["group_size"]),
                                         manifest["quantized_layers"][name], bool(manifest.get("keep_modulation")))
