"""The safety rules a model folder must pass before any weight is read into memory.

Kept apart from finding, downloading and loading models because every one of those runs these
checks, and they need nothing but the folder itself. The rules:

- only safetensors: pickle formats (.bin .pt .pth .ckpt .pkl) are refused even when a
  library could read them "weights only" (that path has had code-execution bugs);
- ``trust_remote_code`` is never set, and every component in ``model_index.json`` must
  come from diffusers or transformers (anything else would need downloaded code);
- every safetensors header is parsed: size limit, known dtypes, contiguous offsets and a
  file length that matches (catches truncated downloads);
- formats this loader cannot run (GGUF, TensorRT engines, ONNX, NVFP4-packed checkpoints)
  get an error that says what to use instead;
- a sha256 manifest (``.daotai-sha256.json`` in the model folder) written by ``pull`` (from
  the hub's own metadata) or ``verify --record`` is checked: files whose size or mtime
  changed since are re-hashed on load; ``verify`` re-hashes everything.

Modular pipelines (a ``modular_model_index.json`` instead of ``model_index.json``, e.g.
MiniMax-H3) follow the same rules; their blocks must be diffusers' own (no ``auto_map`` code),
and a family whose checkpoint is split into partitions is checked per workflow (only the
components a render needs must be present).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Iterable, Iterator

from daotai import catalog
from daotai.catalog import ModelRow
from daotai.errors import BackendError, DependencyMissing
from daotai.files import atomic_write_text, sha256_file

MANIFEST_NAME = ".daotai-sha256.json"
INDEX_NAME = "model_index.json"
MODULAR_INDEX_NAME = "modular_model_index.json"  # diffusers' modular pipelines (ModularPipeline.save_pretrained)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
UNSUPPORTED_SUFFIXES = {
    ".gguf": "GGUF checkpoints are not loaded through diffusers pipelines here; use the diffusers (safetensors) release of the model",
    ".engine": "TensorRT engines only run under TensorRT; use the diffusers (safetensors) release of the model",
    ".plan": "TensorRT plans only run under TensorRT; use the diffusers (safetensors) release of the model",
    ".onnx": "ONNX exports are not run by this backend; use the diffusers (safetensors) release of the model",
}
# safetensors dtypes torch can hold on every device; packed FP4 (NVFP4/MXFP4) is not among them.
SAFE_DTYPES = frozenset(
    {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2", "U16", "U32", "U64"}
)
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit
ALLOWED_LIBRARIES = frozenset({"diffusers", "transformers"})
HASH_CHUNK = 8 * 1024 * 1024


# ------------------------------------------------------------------ safety checks


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """Parse and validate a safetensors header; raise BackendError naming the file and the rule."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise BackendError(f"{path}: truncated safetensors file ({size} bytes); delete it and pull the model again")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES or length > size - 8:
            raise BackendError(f"{path}: corrupt safetensors header (declares {length} bytes in a {size}-byte file); pull the model again")
        raw = fh.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BackendError(f"{path}: corrupt safetensors header (not JSON); pull the model again") from None
    if not isinstance(header, dict):
        raise BackendError(f"{path}: corrupt safetensors header (not a JSON object); pull the model again")
    metadata = header.get("__metadata__") or {}
    if isinstance(metadata, dict) and any("nvfp4" in str(v).lower() or "fp4" == str(v).lower() for v in metadata.values()):
        raise BackendError(f"{path}: an NVFP4-quantised checkpoint, which this loader cannot run; use the bf16 diffusers release")
    spans = []
    for key, info in header.items():
        if key == "__metadata__":
            continue
        if not isinstance(info, dict) or "dtype" not in info or "data_offsets" not in info:
            raise BackendError(f"{path}: corrupt safetensors header (tensor {key!r} has no dtype/offsets); pull the model again")
        if info["dtype"] not in SAFE_DTYPES:
            raise BackendError(
                f"{path}: tensor {key!r} has dtype {info['dtype']!r}, which this loader cannot run here; "
                "use the bf16/fp16 diffusers release of the model"
            )
        start, end = info["data_offsets"]
        spans.append((int(start), int(end)))
    spans.sort()
    cursor = 0
    for start, end in spans:
        if start != cursor or end < start:
            raise BackendError(f"{path}: corrupt safetensors header (overlapping or gapped tensor data); pull the model again")
        cursor = end
    if 8 + length + cursor != size:
        raise BackendError(
            f"{path}: truncated or padded safetensors file ({size} bytes on disk, header needs {8 + length + cursor}); "
            "delete it and pull the model again"
        )
    return header


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    return sha256_file(path, HASH_CHUNK)


def model_files(folder: Path) -> Iterator[Path]:
    """Every regular file of a model folder (symlinks into the hub's blob store followed)."""
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != MANIFEST_NAME and ".cache" not in path.relative_to(folder).parts:
            yield path


def check_checkpoint_folder(folder: Path, spec: ModelRow) -> list[Path]:
    """A pulled checkpoint (no model_index.json): safetensors only, every header readable; returns them."""
    weights = sorted(p for p in model_files(folder) if p.suffix == ".safetensors")
    if not weights:
        raise BackendError(f"{folder}: no .safetensors file matching {', '.join(spec.checkpoint_files)}; "
                           f"{spec.repo_id} is not laid out as {spec.name} expects")
    for path in model_files(folder):
        if path.suffix in PICKLE_SUFFIXES:
            raise BackendError(f"{path}: pickle files are refused (they can run code when loaded)")
    for path in weights:
        read_safetensors_header(path)  # a truncated or forged header is refused here
    return weights



def is_modular(folder: Path) -> bool:
    """Whether a model folder holds a modular pipeline (modular_model_index.json, no model_index.json)."""
    return not (folder / INDEX_NAME).is_file() and (folder / MODULAR_INDEX_NAME).is_file()


def read_model_index(folder: Path) -> dict[str, Any]:
    """model_index.json of a diffusers folder (modular_model_index.json for a modular pipeline)."""
    name = MODULAR_INDEX_NAME if is_modular(folder) else INDEX_NAME
    try:
        index = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BackendError(f"{folder}/{name}: unreadable ({exc}); pull the model again") from None
    if not isinstance(index, dict) or "_class_name" not in index:
        raise BackendError(f"{folder}/{name}: has no _class_name; it is not a diffusers pipeline folder")
    return index


def components_of(index: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Component name → (library, class) from a (modular) model index; optional (null) entries skipped.

    model_index.json lists ``[library, class]``; modular_model_index.json ``[library, class, spec]``.
    """
    found = {}
    for key, value in index.items():
        if key.startswith("_") or not isinstance(value, list) or len(value) not in (2, 3):
            continue
        library, cls = value[0], value[1]
        if library is None or cls is None:
            continue
        found[key] = (str(library), str(cls))
    return found


def config_of(index: dict[str, Any]) -> dict[str, Any]:
    """The plain settings of a modular model index (canvas sizes and the like): everything but components."""
    return {k: v for k, v in index.items() if not k.startswith("_") and not isinstance(v, list)}


def _check_modular_blocks(folder: Path, index: dict[str, Any]) -> None:
    """A modular pipeline's blocks must be diffusers' own: custom block code would have to be run."""
    blocks = index.get("_blocks_class_name")
    config = folder / "modular_config.json"
    if config.is_file() or any(folder.glob("*.py")):
        raise BackendError(f"{folder}: carries its own pipeline code (modular_config.json / .py files), "
                           "which daotai never runs; use the model's diffusers release")
    try:
        import diffusers
    except ImportError:
        raise DependencyMissing("diffusers", "neural", "neural rendering") from None
    if not isinstance(blocks, str) or getattr(diffusers, blocks, None) is None:
        raise BackendError(f"{folder}/{MODULAR_INDEX_NAME}: _blocks_class_name {blocks!r} is not a diffusers class; "
                           "daotai runs only diffusers' own blocks")


def _diffusers_pipeline_module(library: str, cls: str) -> bool:
    """Whether ``library`` names one of diffusers' own pipeline packages defining ``cls`` (LTX-2's index lists its
    connectors and vocoder as ``["ltx2", ...]``): code that ships with diffusers, not downloaded code."""
    import importlib
    import importlib.util

    if not library.isidentifier():
        return False
    try:
        if importlib.util.find_spec("diffusers") is None or importlib.util.find_spec(f"diffusers.pipelines.{library}") is None:
            return False
        return hasattr(importlib.import_module(f"diffusers.pipelines.{library}"), cls)
    except ImportError:
        return False


def _has_weights(cls: str) -> bool:
    """Whether a component class carries tensors (models do; schedulers, tokenizers, processors don't)."""
    return not any(word in cls for word in ("Scheduler", "Tokenizer", "Processor", "FeatureExtractor"))


def check_model_folder(folder: Path, family: str | None = None, components: Iterable[str] | None = None,
                       missing_hint: str = "pull the model again") -> dict[str, Any]:
    """Run every safety rule on a model folder before loading; returns its (modular) model index.

    ``components``: check only these (a workflow's partition of a split checkpoint); each must be
    in the index and on disk, else the error ends with ``missing_hint``. None: every component.
    """
    index = read_model_index(folder)
    pipelines = catalog.family(family).pipelines if family is not None else ()
    if family is not None and index["_class_name"] not in pipelines:
        raise BackendError(
            f"{folder}: is a {index['_class_name']} model; the {family!r} backend needs one of {', '.join(pipelines)}"
        )
    if is_modular(folder):
        _check_modular_blocks(folder, index)
    listed = components_of(index)
    for name, (library, cls) in listed.items():
        if library not in ALLOWED_LIBRARIES and not _diffusers_pipeline_module(library, cls):
            raise BackendError(
                f"{folder}: component {name!r} comes from {library!r}, which would need remote code; daotai never runs it"
            )
    wanted = list(listed) if components is None else list(components)
    for name in wanted:
        if name not in listed:
            raise BackendError(f"{folder}: has no component {name!r} in its model index; {missing_hint}")
        library, cls = listed[name]
        sub = folder / name
        if not sub.is_dir():
            raise BackendError(f"{folder}: component {name!r} ({cls}) is missing; {missing_hint}")
        weights = [p for p in sub.rglob("*") if p.is_file()]
        for path in weights:
            message = UNSUPPORTED_SUFFIXES.get(path.suffix.lower())
            if message:
                raise BackendError(f"{path}: {message}")
        tensors = [p for p in weights if p.suffix == ".safetensors"]
        pickles = [p for p in weights if p.suffix.lower() in PICKLE_SUFFIXES]
        if pickles and not tensors:
            raise BackendError(
                f"{pickles[0]}: pickle weights are refused (they can run code when loaded); "
                "use a release with .safetensors files"
            )
        if _has_weights(cls) and not tensors:
            raise BackendError(f"{folder}: component {name!r} ({cls}) has no .safetensors weights; pull the model again")
        for path in tensors:
            read_safetensors_header(path)
    check_manifest(folder, full=False)
    return index


# ------------------------------------------------------------------ sha256 manifests


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's sha256 manifest, or None when it has none."""
    path = folder / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise BackendError(f"{path}: unreadable manifest; run: daotai models verify {folder} --record") from None


def write_folder_manifest(folder: Path, expected: dict[str, str] | None = None, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """Hash every file (checking ``expected`` hashes from the hub first) and record them."""
    files = {}
    for path in model_files(folder):
        rel = path.relative_to(folder).as_posix()
        digest = sha256_of(path)
        want = (expected or {}).get(rel)
        if want is not None and want != digest:
            raise BackendError(f"{path}: sha256 {digest[:12]}… does not match the hub's {want[:12]}…; delete it and pull again")
        stat = path.stat()
        files[rel] = {"sha256": digest, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    manifest = {"source": source or {"kind": "local"}, "files": files}
    atomic_write_text(folder / MANIFEST_NAME, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def check_manifest(folder: Path, full: bool = True) -> int:
    """Compare files with the manifest; ``full`` re-hashes all, else only changed ones. Returns files checked."""
    manifest = read_manifest(folder)
    if manifest is None:
        if full:
            raise BackendError(f"{folder}: has no sha256 manifest; record one with: daotai models verify {folder} --record")
        return 0
    checked = 0
    for rel, info in manifest.get("files", {}).items():
        path = folder / rel
        if not path.is_file():
            raise BackendError(f"{path}: listed in the manifest but missing; pull the model again")
        stat = path.stat()
        if stat.st_size != info["size"]:
            raise BackendError(f"{path}: {stat.st_size} bytes, the manifest says {info['size']}; pull the model again")
        if full or stat.st_mtime_ns != info.get("mtime_ns"):
            if sha256_of(path) != info["sha256"]:
                raise BackendError(f"{path}: sha256 does not match the manifest (corrupt or modified); pull the model again")
            checked += 1
    return checked
