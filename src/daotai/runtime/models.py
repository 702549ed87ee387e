"""Known video models, where their weights live, and a loader that refuses unsafe files.

A model is a registry name (``wan2.1-t2v-1.3b``) or a local diffusers folder (one with a
``model_index.json``). Safety rules, checked before any weight is read into memory:

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
every component is loaded from the folder itself whatever the index points at, and a family
whose checkpoint is split into partitions is checked and loaded per workflow (only the
components a render needs must be present).

Models whose licence must be accepted (``ModelRow.licence_gated``) are pulled and run only
after an explicit acceptance, recorded in ``licences.json`` under the user's config folder.

Disk space is checked before anything is written: ``pull`` and ``update`` need the bytes still
to download (from the hub's file sizes, less what the cache already holds; the catalog's size
when the hub gives none) plus a margin, ``models convert`` the folder it will write; a shortfall
is refused with how much is missing. The commit a pull or an update fetched is recorded in
``models.json`` under the user's config folder, and that is the snapshot a registry name loads;
a newer upstream commit is fetched only by ``models update NAME``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Iterable, Iterator

from daotai import catalog
from daotai.catalog import ModelRow
from daotai.errors import BackendError, DependencyMissing, Issue, OptionError
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
COMMIT = re.compile(r"[0-9a-f]{40}")  # a git commit hash: a revision that never moves
# Free space wanted beyond a download or a conversion: 5 % of it, at least 1 GiB. Filesystems
# slow down and other programs fail near 100 % full, and the estimate of a conversion is not
# exact; a hub download writes each file once (a blob renamed into place, no second copy).
SPACE_MARGIN_FRACTION = 0.05
SPACE_MARGIN_MIN_BYTES = 1 << 30
PULLS_NAME = "models.json"  # under config_dir(): the commit each registry model was pulled or updated to
ALLOWED_LIBRARIES = frozenset({"diffusers", "transformers"})
HASH_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ResolvedModel:
    """A model folder on disk ready for the safety checks and loading."""

    name: str  # registry name or the folder as given
    path: Path
    spec: ModelRow | None  # None for a local folder


# ------------------------------------------------------------------ locating


def _hub() -> Any:
    """huggingface_hub, or DependencyMissing."""
    try:
        import huggingface_hub
    except ImportError:
        raise DependencyMissing("huggingface_hub", "neural", "model downloads") from None
    return huggingface_hub


def spec_for(name: str) -> ModelRow:
    """The catalog row called ``name``."""
    spec = catalog.model_row(name)
    if spec is None:
        raise BackendError(
            f"--model: {name!r} is neither a known model ({', '.join(sorted(catalog.models()))}) nor a folder with "
            "model_index.json"
        )
    return spec


def hub_cache_dir() -> Path:
    """The Hugging Face cache folder as it is set now: $HF_HUB_CACHE, $HF_HOME/hub, else the hub's default."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    _hub()  # DependencyMissing when huggingface_hub is absent
    from huggingface_hub import constants  # a submodule: the package's lazy attributes do not include it

    return Path(constants.HF_HUB_CACHE)


def _storage(spec: ModelRow) -> Path:
    """The cache folder of a registry model's repository (models--owner--name)."""
    return hub_cache_dir() / ("models--" + spec.repo_id.replace("/", "--"))


def cached_path(spec: ModelRow) -> Path | None:
    """The local snapshot of a registry model, or None when not downloaded.

    The commit the catalog pins, else the one recorded by the last pull or update, else the
    one the cache's ref of the catalog's revision (main) names. Read from the cache's layout
    directly: the hub's own lookup refuses snapshots pulled without some files (pickles are
    never pulled), and the files themselves are checked against the manifest on load.
    """
    storage = _storage(spec)
    candidates = []
    if spec.revision and COMMIT.fullmatch(spec.revision):
        candidates.append(spec.revision)
    record = pulled_record(spec)
    if record is not None:
        candidates.append(record["commit"])
    ref = storage / "refs" / (spec.revision or "main")
    if ref.is_file():
        candidates.append(ref.read_text(encoding="utf-8").strip())
    for commit in candidates:
        path = storage / "snapshots" / commit
        if any((path / name).is_file() for name in (INDEX_NAME, MODULAR_INDEX_NAME)):
            return path
        if spec.checkpoint_files and (path / MANIFEST_NAME).is_file():  # a checkpoint: pulled and hashed
            return path
    return None


def pull_command(row: ModelRow) -> str:
    """The command that downloads ``row``: with --accept-licence while its licence still has to be accepted."""
    gated = row.licence_gated and licence_acceptance(row) is None
    return f"daotai models pull {row.name}" + (" --accept-licence" if gated else "")


def not_downloaded(row: ModelRow, needed_by: str) -> BackendError:
    """The error for a catalog model that is not downloaded: who needs it, where daotai looked and the
    command that downloads it (with its licence's points when the command accepts them)."""
    command = pull_command(row)
    licence = f" (it accepts the licence: {licence_text(row)})" if command.endswith("--accept-licence") else ""
    return BackendError(f"{needed_by}: {row.name} is not downloaded (looked in {_storage(row)}); download it "
                        f"(~{row.size_gb:g} GB) with: {command}{licence}")


def require_pulled(name_or_path: str, needed_by: str) -> None:
    """Refuse, before any work, a catalog model that is not downloaded (:func:`not_downloaded`).

    A folder, or a name the catalog does not know, is left to the loader, which says what is wrong
    with it; a row with no weights to download (a backend that reads only its settings) needs none."""
    if Path(name_or_path).expanduser().exists():
        return
    row = catalog.model_row(name_or_path)
    if row is not None and row.size_gb > 0 and cached_path(row) is None:
        raise not_downloaded(row, needed_by)


def checkpoint_folder(name: str) -> Path | None:
    """The pulled folder of a checkpoint row called ``name`` (checked against its manifest), or None
    when ``name`` is no such row; a row not pulled yet says how to pull it."""
    spec = catalog.model_row(name)
    if spec is None or not spec.checkpoint_files:
        return None
    path = cached_path(spec)
    if path is None:
        raise BackendError(f"checkpoint: {spec.name} is not downloaded; run: {pull_command(spec)}")
    check_manifest(path, full=False)
    return path


def check_checkpoint_folder(folder: Path, spec: ModelRow) -> list[Path]:
    """A pulled checkpoint (no model_index.json): safetensors only, every header readable; returns them."""
    weights = sorted(p for p in _files(folder) if p.suffix == ".safetensors")
    if not weights:
        raise BackendError(f"{folder}: no .safetensors file matching {', '.join(spec.checkpoint_files)}; "
                           f"{spec.repo_id} is not laid out as {spec.name} expects")
    for path in _files(folder):
        if path.suffix in PICKLE_SUFFIXES:
            raise BackendError(f"{path}: pickle files are refused (they can run code when loaded)")
    for path in weights:
        read_safetensors_header(path)  # a truncated or forged header is refused here
    return weights


def resolve_model(name_or_path: str) -> ResolvedModel:
    """A registry name or a local diffusers folder → its folder; never downloads."""
    candidate = Path(name_or_path).expanduser()
    if candidate.is_dir():
        if not any((candidate / name).is_file() for name in (INDEX_NAME, MODULAR_INDEX_NAME)):
            raise BackendError(f"--model: folder {candidate} has no {INDEX_NAME} (or {MODULAR_INDEX_NAME}); "
                               "it is not a diffusers model folder")
        return ResolvedModel(str(name_or_path), candidate.resolve(), None)
    if os.sep in name_or_path or name_or_path.startswith("."):
        raise BackendError(f"--model: folder {name_or_path} does not exist")
    spec = spec_for(name_or_path)
    path = cached_path(spec)
    if path is None:
        raise BackendError(
            f"--model: {spec.name} is not downloaded (looked in the Hugging Face cache); "
            f"run: {pull_command(spec)}"
        )
    return ResolvedModel(spec.name, path, spec)


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


def _files(folder: Path) -> Iterator[Path]:
    """Every regular file of a model folder (symlinks into the hub's blob store followed)."""
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != MANIFEST_NAME and ".cache" not in path.relative_to(folder).parts:
            yield path


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
    for path in _files(folder):
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


# ------------------------------------------------------------------ pull / rm


@dataclass(frozen=True)
class HubSnapshot:
    """What the hub says about one commit of a repository."""

    commit: str | None
    sha256: dict[str, str] = field(default_factory=dict)  # LFS files: their sha256 (also their blob name)
    sizes: dict[str, int] = field(default_factory=dict)  # every file the hub gave a size for
    blobs: dict[str, str] = field(default_factory=dict)  # every file: its blob name in the cache


def hub_snapshot(spec: ModelRow, revision: str | None = None) -> HubSnapshot:
    """The commit, file sizes and sha256 of ``revision`` (default: the catalog's), from the hub's metadata."""
    hub = _hub()
    info = hub.HfApi().model_info(spec.repo_id, revision=revision or spec.revision, files_metadata=True)
    sha256, sizes, blobs = {}, {}, {}
    for sibling in info.siblings or ():
        lfs = getattr(sibling, "lfs", None)
        sha = getattr(lfs, "sha256", None) if lfs is not None else None
        if sha is None and isinstance(lfs, dict):
            sha = lfs.get("sha256")
        if sha:
            sha256[sibling.rfilename] = sha
        if isinstance(getattr(sibling, "size", None), int):
            sizes[sibling.rfilename] = sibling.size
        blob = sha or getattr(sibling, "blob_id", None)
        if blob:
            blobs[sibling.rfilename] = blob
    return HubSnapshot(getattr(info, "sha", None), sha256, sizes, blobs)


def hub_sha256(spec: ModelRow) -> tuple[dict[str, str], str | None]:
    """Expected sha256 per file (LFS files) and the commit, from the hub's metadata."""
    snapshot = hub_snapshot(spec)
    return snapshot.sha256, snapshot.commit


# ------------------------------------------------------------------ disk space


def free_bytes(path: Path) -> int:
    """Free bytes on the filesystem that holds ``path`` (or would: its nearest existing folder)."""
    probe = Path(path).expanduser().absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def space_margin(needed: int) -> int:
    """Bytes kept free beyond ``needed`` (see SPACE_MARGIN_FRACTION)."""
    return max(int(needed * SPACE_MARGIN_FRACTION), SPACE_MARGIN_MIN_BYTES)


def _gb(count: float) -> str:
    return f"{count / 1e9:.2f} GB" if count < 1e10 else f"{count / 1e9:.1f} GB"


def check_free_space(folder: Path, needed: int, what: str, free: Any = None) -> int:
    """Refuse (BackendError) unless ``folder``'s filesystem has ``needed`` bytes plus the margin free.

    ``free``: the probe (default free_bytes; tests inject one). Returns the free bytes seen.
    """
    available = (free or free_bytes)(folder)
    margin = space_margin(needed)
    if available < needed + margin:
        raise BackendError(
            f"{what}: needs {_gb(needed + margin)} free in {folder} ({_gb(needed)} to write + {_gb(margin)} margin) "
            f"but {_gb(available)} is free: {_gb(needed + margin - available)} missing; free that much, or point "
            "HF_HOME (downloads) or -o (conversions) at a larger disk"
        )
    return available


def download_bytes(spec: ModelRow, snapshot: HubSnapshot, allow: list[str] | None, ignore: list[str]) -> int:
    """Bytes a pull of ``snapshot`` still has to write: the files it fetches, less what the cache holds.

    A file whose blob is in the cache costs nothing (unchanged files between commits share one);
    a partial download (``.incomplete``) costs the rest. Without sizes from the hub: the catalog's size.
    """
    from fnmatch import fnmatch

    def wanted(name: str) -> bool:
        return (allow is None or any(fnmatch(name, p) for p in allow)) and not any(fnmatch(name, p) for p in ignore)

    if not snapshot.sizes:
        return int(spec.size_gb * 1e9)
    blobs = _storage(spec) / "blobs"
    needed = 0
    for name, size in snapshot.sizes.items():
        if not wanted(name):
            continue
        blob = snapshot.blobs.get(name)
        done = blobs / blob if blob else None
        if done is not None and done.is_file() and done.stat().st_size == size:
            continue
        partial = blobs / f"{blob}.incomplete" if blob else None
        needed += size - (partial.stat().st_size if partial is not None and partial.is_file() else 0)
    return needed


def folder_bytes(folder: Path) -> int:
    """Bytes of every file in a folder (links into the hub's blob store followed)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def convert_bytes(source: Path, bits: int, group_size: int, copied: Iterable[str]) -> int:
    """Bytes a conversion writes (an upper estimate): the quantised transformer and the copied parts.

    Two-dimensional weights become ``bits`` per weight plus a 16-bit scale and bias per group;
    other tensors keep their size.
    """
    total = 0
    for path in sorted((Path(source) / "transformer").glob("*.safetensors")):
        for key, info in read_safetensors_header(path).items():
            if key == "__metadata__":
                continue
            start, end = info["data_offsets"]
            shape = info.get("shape") or []
            if len(shape) == 2 and shape[-1] % group_size == 0:
                total += int(shape[0] * shape[1] * (bits + 32 / group_size) / 8)
            else:
                total += int(end) - int(start)
    for name in copied:
        part = Path(source) / name
        total += folder_bytes(part) if part.is_dir() else part.stat().st_size if part.is_file() else 0
    return total


# ------------------------------------------------------------------ what was pulled


def _pulls_path() -> Path:
    return config_dir() / PULLS_NAME


def _read_pulls() -> dict[str, Any]:
    path = _pulls_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise BackendError(f"{path}: unreadable; delete it and pull the models again") from None
    return data if isinstance(data, dict) else {}


def pulled_record(spec: ModelRow) -> dict[str, Any] | None:
    """What the last pull or update of a registry model recorded (commit, when, workflow), or None."""
    record = _read_pulls().get(spec.name)
    if isinstance(record, dict) and record.get("repo_id") == spec.repo_id and isinstance(record.get("commit"), str):
        return record
    return None


def _record_pull(spec: ModelRow, commit: str, workflow: str | None, how: str) -> dict[str, Any]:
    from datetime import datetime, timezone

    records = _read_pulls()
    before = records.get(spec.name) if isinstance(records.get(spec.name), dict) else {}
    record = {"repo_id": spec.repo_id, "commit": commit, "revision": spec.revision or "main", "how": how,
              "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if workflow is not None:
        record["workflow"] = workflow
    if before.get("commit") and before.get("commit") != commit:
        record["previous"] = before["commit"]
    records[spec.name] = record
    path = _pulls_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(records, indent=1, sort_keys=True) + "\n")
    return record


@dataclass(frozen=True)
class PulledModel:
    """A downloaded registry model as ``models list`` shows it."""

    path: Path
    bytes: int  # on disk, this snapshot's files
    commit: str | None  # the upstream commit, from the folder's manifest


def pulled_model(spec: ModelRow) -> PulledModel | None:
    """Where a registry model is, its size on disk and the upstream commit pulled (None: not downloaded)."""
    path = cached_path(spec)
    if path is None:
        return None
    try:
        manifest = read_manifest(path) or {}
    except BackendError:
        manifest = {}
    commit = (manifest.get("source") or {}).get("commit") or (path.name if COMMIT.fullmatch(path.name) else None)
    return PulledModel(path, folder_bytes(path), commit)


def workflow_components(spec: ModelRow, workflow: str | None) -> tuple[str, ...] | None:
    """The components a workflow of ``spec``'s family loads (None: every component)."""
    if workflow is None:
        return None
    workflows = catalog.family(spec.family).workflows
    if workflow not in workflows:
        known = ", ".join(workflows) or "none (it loads as a whole)"
        raise OptionError([Issue("--workflow", workflow, f"is not a workflow of {spec.name}; its workflows: {known}")])
    return workflows[workflow]


def pull(name: str, workflow: str | None = None, accept_licence: bool = False) -> Path:
    """Download (resumable; HF_HOME / HF_ENDPOINT honoured), verify against the hub's sha256, record a manifest.

    ``workflow``: only the components that workflow loads (plus the index and licence files), for
    families whose checkpoint is split into partitions. A model whose licence must be accepted is
    pulled only once it was (``accept_licence`` now, or recorded before).
    """
    spec = spec_for(name)
    components = workflow_components(spec, workflow)
    require_licence(spec, accept_licence, option="--accept-licence", how="--accept-licence")
    return _fetch(spec, None, workflow, components, f"models pull {spec.name}")


def _fetch(spec: ModelRow, snapshot: HubSnapshot | None, workflow: str | None, components: tuple[str, ...] | None,
           what: str) -> Path:
    """Download one commit (``snapshot``, default the catalog's revision now) after checking disk space,
    verify every file against the hub's sha256, record a manifest and the commit; returns the folder."""
    hub = _hub()
    allow = None
    if spec.checkpoint_files:  # not a diffusers folder: only the files its backend reads
        allow = list(spec.checkpoint_files)
    elif components is not None:
        allow = [INDEX_NAME, MODULAR_INDEX_NAME, "README.md", "LICENSE*", "LICENCE*", *(f"{c}/*" for c in components)]
    else:
        # A diffusers folder is its index and its component folders. Some repositories also keep single-file
        # checkpoints at the top (LTX-2, LTX-Video: tens of GB each) that the folder loader never reads.
        allow = [INDEX_NAME, MODULAR_INDEX_NAME, "README.md", "LICENSE*", "LICENCE*", "*/*"]
    ignore = [f"*{s}" for s in PICKLE_SUFFIXES + tuple(UNSUPPORTED_SUFFIXES)]
    cache = hub_cache_dir()
    try:
        snapshot = snapshot or hub_snapshot(spec)
        check_free_space(cache, download_bytes(spec, snapshot, allow, ignore), what)
        folder = Path(
            hub.snapshot_download(
                spec.repo_id,
                revision=snapshot.commit or spec.revision,
                allow_patterns=allow,
                ignore_patterns=ignore,
                cache_dir=str(cache),
            )
        )
    except BackendError:  # too little space (or DependencyMissing): already says what to do
        raise
    except Exception as exc:  # noqa: BLE001  (the hub raises many kinds: each is a failed download, said in one line)
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
        raise BackendError(
            f"{what}: could not download {spec.repo_id} from {endpoint} ({type(exc).__name__}); "
            "check the network or set HF_ENDPOINT to a mirror, then run the command again (downloads resume)"
        ) from None
    expected = {k: v for k, v in snapshot.sha256.items() if (folder / k).exists()}
    source = {"kind": "hub", "repo_id": spec.repo_id, "commit": snapshot.commit}
    if workflow is not None:
        source["workflow"] = workflow
    missing = sorted(k for k, v in snapshot.sha256.items() if not (folder / k).exists()
                     and spec.checkpoint_files and any(fnmatch(k, p) for p in spec.checkpoint_files))
    if missing:
        raise BackendError(f"{what}: {', '.join(missing[:4])} did not arrive from {spec.repo_id}; run the command "
                           "again (downloads resume)")
    write_folder_manifest(folder, expected, source)
    if spec.checkpoint_files:
        check_checkpoint_folder(folder, spec)
    else:
        check_model_folder(folder, spec.family, components)
    _record_pull(spec, snapshot.commit or folder.name, workflow, what.split(" ")[1])
    return folder


@dataclass(frozen=True)
class Update:
    """What ``models update`` did: the commit before and after (equal: already up to date)."""

    name: str
    before: str | None
    after: str
    path: Path
    freed: int = 0  # bytes of the previous snapshot removed (--prune)


def update(name: str, prune: bool = False, accept_licence: bool = False) -> Update:
    """Fetch the newest commit of a pulled model's branch, verify it and record it (only when asked).

    A model the catalog pins to a commit is not updated. The previous snapshot stays in the cache
    unless ``prune``; until the new one is verified, the previous one is the one that loads.
    """
    spec = spec_for(name)
    if spec.revision and COMMIT.fullmatch(spec.revision):
        raise BackendError(f"models update {spec.name}: the catalog pins it to commit {spec.revision[:12]}; "
                           "a newer commit is not used")
    current = pulled_model(spec)
    if current is None:
        raise BackendError(f"models update {spec.name}: it is not downloaded; run: daotai models pull {spec.name}")
    record = pulled_record(spec) or {}
    workflow = record.get("workflow")
    components = workflow_components(spec, workflow)
    require_licence(spec, accept_licence, option="--accept-licence", how="--accept-licence")
    try:
        snapshot = hub_snapshot(spec)
    except DependencyMissing:
        raise
    except Exception as exc:  # noqa: BLE001  (the hub raises many kinds: each means it could not be asked)
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
        raise BackendError(f"models update {spec.name}: could not ask {endpoint} for the newest commit of "
                           f"{spec.repo_id} ({type(exc).__name__}); check the network") from None
    if snapshot.commit is not None and snapshot.commit == current.commit:
        return Update(spec.name, current.commit, current.commit, current.path)
    folder = _fetch(spec, snapshot, workflow, components, f"models update {spec.name}")
    freed = 0
    if prune and current.commit and current.commit != snapshot.commit:
        freed = _remove_revisions(spec, [current.commit])
    return Update(spec.name, current.commit, snapshot.commit or folder.name, folder, freed)


def _remove_revisions(spec: ModelRow, commits: list[str]) -> int:
    """Delete cached snapshots of ``spec`` by commit; returns bytes freed."""
    hub = _hub()
    try:
        cache = hub.scan_cache_dir(hub_cache_dir())
    except Exception:  # noqa: BLE001  (no cache folder: nothing to delete)
        return 0
    present = {rev.commit_hash for repo in cache.repos if repo.repo_id == spec.repo_id for rev in repo.revisions}
    wanted = [c for c in commits if c in present]
    if not wanted:
        return 0
    strategy = cache.delete_revisions(*wanted)
    freed = int(strategy.expected_freed_size)
    strategy.execute()
    return freed


def remove(name: str) -> int:
    """Delete a registry model's cached snapshots; returns bytes freed (0 when none were cached)."""
    spec = spec_for(name)
    hub = _hub()
    try:
        cache = hub.scan_cache_dir(hub_cache_dir())
    except Exception:  # noqa: BLE001  (no cache folder yet)
        return 0
    hashes = [rev.commit_hash for repo in cache.repos if repo.repo_id == spec.repo_id for rev in repo.revisions]
    if not hashes:
        return 0
    strategy = cache.delete_revisions(*hashes)
    freed = int(strategy.expected_freed_size)
    strategy.execute()
    return freed


# ------------------------------------------------------------------ loading


def _quiet_loading() -> None:
    """Silence the libraries' own progress bars: daotai reports loading as events."""
    import diffusers.utils.logging as diffusers_logging

    diffusers_logging.disable_progress_bar()
    try:
        import transformers.utils.logging as transformers_logging

        transformers_logging.disable_progress_bar()
    except ImportError:
        pass


def load_pipeline(name_or_path: str, family: str, runtime: Any) -> tuple[Any, ResolvedModel]:
    """Resolve, check and load a diffusers pipeline for ``family`` on ``runtime``'s dtypes (not moved yet)."""
    model = resolve_model(name_or_path)
    index = check_model_folder(model.path, family)
    try:
        import diffusers
    except ImportError:
        raise DependencyMissing("diffusers", "neural", "neural rendering") from None
    cls = getattr(diffusers, index["_class_name"])
    _quiet_loading()
    from daotai.runtime.device import vae_dtype_for

    dtypes = {
        "default": runtime.dtype("transformer"),
        "text_encoder": runtime.dtype("text_encoder"),
        "vae": vae_dtype_for(runtime, family),
    }
    try:
        pipe = cls.from_pretrained(
            str(model.path), dtype=dtypes, use_safetensors=True, local_files_only=True
        )
    except (OSError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackendError(f"{model.path}: could not load the {family} pipeline ({first}); pull the model again") from None
    return pipe, model


def _component_class(library: str, cls: str) -> Any:
    """The class a model index names, from diffusers or transformers (already checked as allowed)."""
    import importlib

    found = getattr(importlib.import_module(library), cls, None)
    if found is None:
        raise BackendError(f"component class {library}.{cls} is not in the installed {library}; upgrade it")
    return found


def modular_pipeline(model: ResolvedModel, family: str, components: Iterable[str], blocks: Any = None) -> Any:
    """Check a modular model folder for ``components`` and make its pipeline with none of them loaded yet.

    The pipeline class and blocks are diffusers' own (checked); the index's plain settings (canvas
    sizes…) are kept, its component locations are not: components come from this folder alone.
    ``blocks``: the blocks to run instead of the index's class (a variant of them, same components).
    """
    index = check_model_folder(model.path, family, components,
                               missing_hint=f"pull it again (daotai models pull {model.spec.name})" if model.spec
                               else "copy the whole model folder again")
    if not is_modular(model.path):
        raise BackendError(f"{model.path}: is not a modular pipeline folder (no {MODULAR_INDEX_NAME})")
    try:
        import diffusers
    except ImportError:
        raise DependencyMissing("diffusers", "neural", "neural rendering") from None
    _quiet_loading()
    pipeline_cls = getattr(diffusers, index["_class_name"])
    if blocks is None:
        blocks = getattr(diffusers, index["_blocks_class_name"])()
    settings = {"_class_name": index["_class_name"], "_blocks_class_name": index["_blocks_class_name"], **config_of(index)}
    return pipeline_cls(blocks=blocks, modular_config_dict=settings)


def load_components(pipe: Any, model: ResolvedModel, family: str, runtime: Any, names: Iterable[str]) -> list[str]:
    """Load ``names`` from a checked modular folder onto ``pipe`` (not moved yet); returns the names loaded.

    Weights load as safetensors only, in the device rule's dtypes (the VAEs in the family's VAE
    dtype). Components already on the pipeline are kept.
    """
    import torch

    from daotai.runtime.device import vae_dtype_for

    names = [n for n in names if getattr(pipe, n, None) is None]
    if not names:
        return []
    index = check_model_folder(model.path, family, names)
    listed = components_of(index)
    loaded = {}
    for name in names:
        library, cls_name = listed[name]
        cls = _component_class(library, cls_name)
        kwargs: dict[str, Any] = {"local_files_only": True}
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            role = "text_encoder" if name.startswith("text_encoder") else "vae" if "vae" in name else "transformer"
            kwargs["dtype"] = vae_dtype_for(runtime, family) if role == "vae" else runtime.dtype(role)
            kwargs["use_safetensors"] = True
        try:
            loaded[name] = cls.from_pretrained(str(model.path / name), **kwargs)
        except ImportError as exc:
            missing = "torchvision" if "torchvision" in str(exc).lower() else (getattr(exc, "name", None) or "a package")
            raise BackendError(
                f"{model.path}: component {name!r} ({cls_name}) needs {missing}, which is not installed; "
                f"install it with: pip install {missing} (the build that matches your torch)"
            ) from None
        except (OSError, ValueError, RuntimeError, TypeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendError(f"{model.path}: could not load component {name!r} ({first}); pull the model again") from None
    pipe.update_components(**loaded)
    return names


# ------------------------------------------------------------------ licences that must be accepted

LICENCES_NAME = "licences.json"


def config_dir() -> Path:
    """daotai's folder for the user's settings: $DAOTAI_CONFIG_DIR, else $XDG_CONFIG_HOME/daotai, else ~/.config/daotai."""
    explicit = os.environ.get("DAOTAI_CONFIG_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "daotai"


def licence_record_path() -> Path:
    """Where accepted licences are recorded."""
    return config_dir() / LICENCES_NAME


def _read_records() -> dict[str, Any]:
    path = licence_record_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise BackendError(f"{path}: unreadable; delete it and accept the licences again") from None
    return data if isinstance(data, dict) else {}


def licence_acceptance(row: ModelRow) -> dict[str, Any] | None:
    """The recorded acceptance of ``row``'s licence (for this licence name), or None."""
    record = _read_records().get(row.name)
    if isinstance(record, dict) and record.get("licence") == row.licence:
        return record
    return None


def record_licence_acceptance(row: ModelRow, how: str) -> dict[str, Any]:
    """Record that the user accepted ``row``'s licence (``how``: the option or flag that said so)."""
    from datetime import datetime, timezone

    records = _read_records()
    record = {"licence": row.licence, "url": row.licence_url, "summary": list(row.licence_summary), "how": how,
              "accepted_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    records[row.name] = record
    path = licence_record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(records, indent=1, sort_keys=True) + "\n")
    return record


def licence_files(folder: Path | None) -> list[Path]:
    """The licence files a model folder carries (LICENSE*, LICENCE*), if any."""
    if folder is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.upper().startswith(("LICENSE", "LICENCE")))


def licence_text(row: ModelRow, folder: Path | None = None) -> str:
    """One line a user can act on: the licence, its points, where the full text is."""
    where = ", ".join(str(p) for p in licence_files(folder)) or f"the licence file of {row.licence_url or row.repo_id}"
    return (f"{row.name} is under the {row.licence}: " + "; ".join(row.licence_summary)
            + f" (a summary, not legal advice: the full text in {where} governs)")


def require_licence(row: ModelRow, accepted: bool, *, option: str, how: str, folder: Path | None = None
                    ) -> tuple[dict[str, Any], bool] | None:
    """Check that ``row``'s licence was accepted (now through ``option``, or recorded before).

    Returns None when the model needs no acceptance, else (record, recorded_now). Refuses with an
    OptionError at ``option`` that shows the licence summary and how to accept it.
    """
    if not row.licence_gated:
        return None
    record = licence_acceptance(row)
    if record is not None:
        return record, False
    if accepted:
        return record_licence_acceptance(row, how), True
    raise OptionError([Issue(option, False, f"must be true to use {licence_text(row, folder)}; accept it with {how} "
                                            f"(recorded in {licence_record_path()})")])
