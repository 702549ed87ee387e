"""Downloading registry models from the Hugging Face hub: pull, update and remove.

Every file is verified against the hub's sha256 and recorded in the folder's manifest; disk
space is checked first (:mod:`daotai.runtime.model_space`) from the hub's file sizes, less what
the cache already holds (the catalog's size when the hub gives none). A newer upstream commit
is fetched only by ``models update NAME``; a model whose licence must be accepted is pulled
only once it was (:mod:`daotai.runtime.licences`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from daotai import catalog
from daotai.catalog import ModelRow
from daotai.errors import BackendError, DependencyMissing, Issue, OptionError
from daotai.runtime.licences import require_licence
from daotai.runtime.model_checks import (
    INDEX_NAME,
    MODULAR_INDEX_NAME,
    PICKLE_SUFFIXES,
    UNSUPPORTED_SUFFIXES,
    check_checkpoint_folder,
    check_model_folder,
    write_folder_manifest,
)
from daotai.runtime.model_lookup import (
    COMMIT,
    hub_cache_dir,
    hub_library,
    hub_storage,
    pulled_model,
    pulled_record,
    record_pull,
    spec_for,
)
from daotai.runtime.model_space import check_free_space

# ------------------------------------------------------------------ what the hub holds


@dataclass(frozen=True)
class HubSnapshot:
    """What the hub says about one commit of a repository."""

    commit: str | None
    sha256: dict[str, str] = field(default_factory=dict)  # LFS files: their sha256 (also their blob name)
    sizes: dict[str, int] = field(default_factory=dict)  # every file the hub gave a size for
    blobs: dict[str, str] = field(default_factory=dict)  # every file: its blob name in the cache


def hub_snapshot(spec: ModelRow, revision: str | None = None) -> HubSnapshot:
    """The commit, file sizes and sha256 of ``revision`` (default: the catalog's), from the hub's metadata."""
    hub = hub_library()
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
    blobs = hub_storage(spec) / "blobs"
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


# ------------------------------------------------------------------ pull / update / rm


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
    hub = hub_library()
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
    record_pull(spec, snapshot.commit or folder.name, workflow, what.split(" ")[1])
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
    hub = hub_library()
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
    hub = hub_library()
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
