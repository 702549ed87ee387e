"""Finding a model on disk: a registry name in the Hugging Face cache, or a local diffusers folder.

A model is a registry name (``wan2.1-t2v-1.3b``) or a local diffusers folder (one with a
``model_index.json``); nothing here downloads. The commit a pull or an update fetched is
recorded in ``models.json`` under the user's config folder, and that is the snapshot a registry
name loads; the record is read and written here, next to the lookup that depends on it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daotai import catalog
from daotai.catalog import ModelRow
from daotai.errors import BackendError, DependencyMissing
from daotai.files import atomic_write_text
from daotai.runtime.licences import config_dir, licence_acceptance, licence_text
from daotai.runtime.model_checks import INDEX_NAME, MANIFEST_NAME, MODULAR_INDEX_NAME, check_manifest, read_manifest
from daotai.runtime.model_space import folder_bytes

COMMIT = re.compile(r"[0-9a-f]{40}")  # a git commit hash: a revision that never moves
PULLS_NAME = "models.json"  # under config_dir(): the commit each registry model was pulled or updated to


@dataclass(frozen=True)
class ResolvedModel:
    """A model folder on disk ready for the safety checks and loading."""

    name: str  # registry name or the folder as given
    path: Path
    spec: ModelRow | None  # None for a local folder


# ------------------------------------------------------------------ locating


def hub_library() -> Any:
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
    hub_library()  # DependencyMissing when huggingface_hub is absent
    from huggingface_hub import constants  # a submodule: the package's lazy attributes do not include it

    return Path(constants.HF_HUB_CACHE)


def hub_storage(spec: ModelRow) -> Path:
    """The cache folder of a registry model's repository (models--owner--name)."""
    return hub_cache_dir() / ("models--" + spec.repo_id.replace("/", "--"))


def cached_path(spec: ModelRow) -> Path | None:
    """The local snapshot of a registry model, or None when not downloaded.

    The commit the catalog pins, else the one recorded by the last pull or update, else the
    one the cache's ref of the catalog's revision (main) names. Read from the cache's layout
    directly: the hub's own lookup refuses snapshots pulled without some files (pickles are
    never pulled), and the files themselves are checked against the manifest on load.
    """
    storage = hub_storage(spec)
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
    return BackendError(f"{needed_by}: {row.name} is not downloaded (looked in {hub_storage(row)}); download it "
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


def record_pull(spec: ModelRow, commit: str, workflow: str | None, how: str) -> dict[str, Any]:
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
