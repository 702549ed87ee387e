"""Convert a diffusers Wan folder into an MLX folder with a 4/8-bit transformer.

Layout written (the same shape as a diffusers folder, so one loader reads both):
  model_index.json, vae/, text_encoder/, tokenizer/  copied unchanged (kept at full
      precision, see daotai.mlx.quantize for why)
  transformer/config.json                            copied
  transformer/model.safetensors                      quantised MLX weights
  mlx_manifest.json                                  bits, group size, the quantised layers,
      sha256 of every source transformer file and of every file written
Loading checks the written files against the manifest and the source files' sizes (and,
with ``verify_source``, their sha256) so a folder converted from other weights is refused.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from daotai.errors import BackendError
from daotai.files import atomic_path, remove_temp_files, sha256_file

MANIFEST = "mlx_manifest.json"
FORMAT = "daotai-mlx/1"
COPIED = ("model_index.json", "vae", "text_encoder", "tokenizer", "scheduler")


def _hash_tree(root: Path, sub: str) -> dict[str, dict]:
    """{relative path: {sha256, size}} for the files under root/sub (skipping the manifest)."""
    out = {}
    for p in sorted((root / sub).rglob("*") if (root / sub).is_dir() else [root / sub]):
        if p.is_file() and p.name != MANIFEST:
            out[p.relative_to(root).as_posix()] = {"sha256": sha256_file(p), "size": p.stat().st_size}
    return out


def convert(source: Path, dest: Path, bits: int = 4, group_size: int = 64) -> Path:
    """Write the converted folder ``dest`` from the diffusers Wan folder ``source``; returns dest."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from daotai.mlx.pipeline import load_transformer
    from daotai.mlx.quantize import QuantSpec, quantize_transformer

    spec = QuantSpec(bits, group_size)  # validates before any work
    source, dest = Path(source).resolve(), Path(dest)
    if not (source / "transformer" / "config.json").is_file():
        raise BackendError(f"convert: {source} has no transformer/config.json; expected a diffusers Wan folder")
    if dest.exists() and any(dest.iterdir()):
        raise BackendError(f"convert: output folder {dest} is not empty; choose a new folder")
    model = load_transformer(source / "transformer")
    layers = quantize_transformer(model, spec)
    remove_temp_files(dest)  # what a killed conversion left
    # Atomic publish: the folder is built under a temp name and renamed when complete (removed on
    # failure), so a half-written folder never carries the final name.
    with atomic_path(dest) as tmp:
        (tmp / "transformer").mkdir(parents=True)
        mx.save_safetensors(str(tmp / "transformer" / "model.safetensors"), dict(tree_flatten(model.parameters())))
        shutil.copy2(source / "transformer" / "config.json", tmp / "transformer" / "config.json")
        for name in COPIED:
            src = source / name
            if src.is_dir():
                shutil.copytree(src, tmp / name)
            elif src.is_file():
                shutil.copy2(src, tmp / name)
        manifest = {
            "format": FORMAT,
            "bits": bits,
            "group_size": group_size,
            "quantized_layers": layers,
            "source": {"path": str(source), "files": _hash_tree(source, "transformer")},
            "files": {k: v["sha256"] for sub in ("transformer", *COPIED) for k, v in _hash_tree(tmp, sub).items()},
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if dest.exists():
            dest.rmdir()  # empty (checked above); the rename takes its place
    return dest


def read_manifest(folder: Path) -> dict | None:
    """The conversion manifest of ``folder``, or None for a plain diffusers folder."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise BackendError(f"{path}: format {data.get('format')!r} is not {FORMAT!r}; convert again")
    return data


def check_converted(folder: Path, verify_source: bool = False) -> dict:
    """Check a converted folder's files (sha256) and its source's files; returns the manifest."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        raise BackendError(f"{folder}: no {MANIFEST}; not a converted wan-mlx folder")
    for rel, digest in manifest["files"].items():
        p = folder / rel
        if not p.is_file() or sha256_file(p) != digest:
            raise BackendError(f"{p}: missing or sha256 differs from {MANIFEST}; convert again")
    src = Path(manifest["source"]["path"])
    if src.is_dir():
        for rel, info in manifest["source"]["files"].items():
            p = src / rel
            if not p.is_file() or p.stat().st_size != info["size"]:
                raise BackendError(f"{p}: the source changed since conversion (size); convert again")
            if verify_source and sha256_file(p) != info["sha256"]:
                raise BackendError(f"{p}: the source changed since conversion (sha256); convert again")
    return manifest


def load_converted_transformer(folder: Path, verify_source: bool = False):
    """The quantised WanTransformer of a converted folder, after the manifest checks."""
    from daotai.mlx.pipeline import build_transformer
    from daotai.mlx.quantize import QuantSpec, quantize_transformer
    from daotai.mlx.weights import load_into, read_config, read_safetensors

    manifest = check_converted(folder, verify_source)
    model = build_transformer(read_config(Path(folder) / "transformer"))
    layers = quantize_transformer(model, QuantSpec(manifest["bits"], manifest["group_size"]))
    if layers != manifest["quantized_layers"]:
        raise BackendError(f"{folder}: quantised layers differ from {MANIFEST}; convert again")
    load_into(model, list(read_safetensors(Path(folder) / "transformer").items()), f"{folder}/transformer")
    return model
