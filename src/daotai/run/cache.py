"""Incremental renders: each shot's files keyed by everything that determines them, and a
content-addressed cache of finished shots.

A shot's key is the sha256 of a canonical JSON of: the shot's plan (cameras, timing, staging,
prompt, seed, sound), the canvas, the scene and the characters (with the sha256 of every
reference image file), the soundtrack (its file's sha256, and whether the shot ends the picture,
where the soundtrack is ramped out), the backend, its validated options, the model's files (the
sha256 manifest daotai keeps in a model folder), the encode settings and control channels asked
for, and the versions of daotai and of the libraries that change pixels. Same key, same bytes: a
render reuses a cached shot instead of drawing it again.

An entry holds the shot's files, the frames the pipeline keeps for QC and the contact sheet
(lossless, so every deliverable built from them is byte-identical to a full render), and a
record with each file's sha256 (a damaged entry is found and rendered again). Entries are
written whole (a temp folder renamed into place) and never changed afterwards (their files are
made read-only); the least recently used go first when the cache outgrows its cap, which is at
most a quarter of the cache's file system (:data:`DISK_SHARE`).

An entry's files and a render's files are one file under two names where the file system
allows it (hard links, :func:`daotai.files.link_or_copy`): a rendered shot is linked into the
cache and a reused one linked into the output folder, so a shot's bytes are on the disk once
however many renders show it. This is safe because nothing in daotai writes into a file in
place (every writer renames a new file onto its target), so replacing or deleting one name
leaves the other whole; a file edited in place by another program is caught by the entry's
sha256 when it is next reused. Across file systems the files are copied.

An entry also keeps the shot's qc.json entry once it has been checked, under the QC variant
that made it (whether the camera was checked, and a fingerprint of the QC code): a render that
reuses a shot reuses its verdicts too, so only changed shots (and the sequence) are checked
again, and qc.json reads as a full check would write it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import stat
import sys
import time
from collections.abc import Generator
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from daotai import __version__
from daotai.files import atomic_path, link_or_copy, sha256_file

CACHE_FORMAT = 2  # bump when an entry's layout or the key's fields change
DEFAULT_CAP_BYTES = 20 * 1024**3  # a few hundred previz shots, or tens of 720p neural ones
# The cache never holds more than this share of its file system, whatever its cap: on a small disk
# (a 40 MB data folder) a 20 GB cap would let the cache take the room the renders it speeds up need.
DISK_SHARE = 0.25
READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH  # an entry's files: never written in place
# Libraries whose versions can change a shot's bytes (rasterising, encoding, sampling, resizing).
PIXEL_LIBRARIES = ("numpy", "av", "moderngl", "opencv-python-headless", "pillow", "torch", "diffusers",
                   "transformers", "mlx")
RECORD = "record.json"
FRAMES = "frames.npz"
ENTRIES = "entries"
QC_FOLDER = "qc"  # inside an entry: <variant>.json, the shot's qc.json entry




def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that can change pixels ('absent' when not installed)."""
    found = {}
    for name in PIXEL_LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


def file_sha256(path: Path, memo: dict[Path, str]) -> str:
    """sha256 of a file, computed once per run."""
    path = path.resolve()
    if path not in memo:
        memo[path] = sha256_file(path)
    return memo[path]


def model_fingerprint(folder: Path) -> str:
    """What identifies a model folder's weights: its sha256 manifest (written by `models pull` or
    `verify --record`), else every file's size and modification time (hashing gigabytes on each
    render would cost more than the render)."""
    from daotai.runtime.model_checks import MANIFEST_NAME

    manifest = folder / MANIFEST_NAME
    if manifest.is_file():
        files = json.loads(manifest.read_text(encoding="utf-8")).get("files", {})
        return "sha256:" + hashlib.sha256(json.dumps({k: v.get("sha256") for k, v in sorted(files.items())},
                                                     sort_keys=True).encode()).hexdigest()
    listing = sorted((p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                     for p in folder.rglob("*") if p.is_file())
    return "stat:" + hashlib.sha256(json.dumps(listing).encode()).hexdigest()


def resolve_model_folder(model: str) -> Path:
    """A model option (folder or catalog name) as its folder on disk (BackendError when absent)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    from daotai.runtime.model_lookup import resolve_model

    return resolve_model(model).path


def option_files(backend: str, options: dict[str, Any]) -> tuple[Path, ...]:
    """The files a backend's options bring into its frames (a LoRA), as its spec names them."""
    from daotai.render.registry import spec_for

    return tuple(spec_for(backend).option_files(options))


def fast_levers(backend: str, options: dict[str, Any]) -> dict[str, list] | None:
    """Fast mode's tuned choices for the backend's family, when the options ask for fast mode: the
    step-cache cadence (which transformer passes run) and the VAE levers (the decode's precision and
    layout). Both are tuned between releases, so they are part of the key."""
    if str(options.get("speed") or "").strip().lower() != "fast":
        return None
    from daotai.render.registry import spec_for
    from daotai.render.speed import fast_choices

    cadence, vae = fast_choices(spec_for(backend).fast_choices_family)
    return {"fast_step_cache": list(cadence), "fast_vae": list(vae)}


def key_fields(plan: Any, shot: Any, backend: str, options: dict[str, Any], controls: bool, encode: Any,
               source: Path | None, model: str | None, memo: dict[Path, str]) -> dict[str, Any]:
    """Everything that determines one shot's files, as JSON-ready values."""
    base = Path(source).resolve().parent if source is not None else Path.cwd()

    def referenced(path: str) -> str:
        file = Path(path) if Path(path).is_absolute() else base / path
        return file_sha256(file, memo) if file.is_file() else f"missing:{path}"

    characters = [c.model_dump(mode="json") for c in plan.characters]
    references = {ref: referenced(ref) for c in plan.characters
                  for ref in (*c.reference_images, *((c.voice,) if getattr(c, "voice", None) else ()))}
    footage = getattr(shot, "reference_video", None)
    if footage is not None:  # the footage a shot follows is an input of its pixels, by content
        references[footage.path] = footage.path if footage.path.startswith("upload:") else referenced(footage.path)
    soundtrack = getattr(plan, "soundtrack", None)
    sound = None
    if soundtrack is not None:
        # A silent shot's file carries its slice of the soundtrack, which is ramped out where the
        # picture ends: the same shot ends the film or not, and its sound differs.
        sound = {"track": soundtrack.model_dump(mode="json"),
                 "file": referenced(soundtrack.path) if not soundtrack.path.startswith("upload:") else soundtrack.path,
                 "ends_picture": shot.start_frame + shot.frames == plan.total_frames}
    files = option_files(backend, options)
    fast = fast_levers(backend, options)
    return {
        "format": CACHE_FORMAT,
        "daotai": __version__,
        "python": list(sys.version_info[:2]),
        "machine": platform.machine(),
        "libraries": library_versions(),
        "backend": backend,
        "options": options,
        # LoRA files the options name, by content (only where there are some: other keys stay as they were)
        **({"option_files": [file_sha256(path, memo) for path in files]} if files else {}),
        **(fast or {}),  # likewise only in fast mode
        "model": model_fingerprint(resolve_model_folder(model)) if model else None,
        "controls": controls,
        "encode": asdict(encode),
        "canvas": [plan.width, plan.height, list(plan.fps_fraction)],
        "scene": plan.scene.model_dump(mode="json"),
        "characters": characters,
        "references": references,
        "soundtrack": sound,
        "shot": shot.model_dump(mode="json"),
    }


def shot_key(fields: dict[str, Any]) -> str:
    """The key of a shot: sha256 of its fields' canonical JSON."""
    text = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=1)
def qc_code_fingerprint() -> str:
    """sha256 of the QC package's source: a change to any check invalidates stored verdicts
    (QC evolves between releases more often than the version number does)."""
    import daotai.qc

    folder = Path(daotai.qc.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def qc_variant(camera: bool) -> str:
    """What besides the shot's files decides its qc.json entry: the checks run and the QC code."""
    text = json.dumps({"camera": bool(camera), "qc": qc_code_fingerprint()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class ShotCache:
    """Finished shots by key under ``root/entries/<key>/``, capped at ``cap_bytes`` (least recently used go)."""

    def __init__(self, root: str | os.PathLike[str], cap_bytes: int = DEFAULT_CAP_BYTES):
        self.root = Path(root).expanduser()
        self.cap_bytes = int(cap_bytes)

    def _entry(self, key: str) -> Path:
        return self.root / ENTRIES / key

    def has(self, key: str) -> bool:
        """Whether a finished shot is stored under ``key`` (its files are checked only when taken)."""
        return (self._entry(key) / RECORD).is_file()

    def get(self, key: str, out_dir: Path) -> dict[str, Any] | None:
        """Place a cached shot's files in ``out_dir`` (linked where the file system allows, else
        copied; each appears whole at its path) and return its record with the kept frames; None
        when there is no sound entry (a damaged one is removed)."""
        entry = self._entry(key)
        record_path = entry / RECORD
        if not record_path.is_file():
            return None
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
            for kind in record["files"]:
                if sha256_file(entry / kind) != record["sha256"][kind]:
                    raise ValueError(f"{kind} does not match its sha256")
            with np.load(entry / FRAMES) as frames:
                samples = {int(name[1:]): frames[name] for name in frames.files if name.startswith("s")}
                middle = frames["middle"] if "middle" in frames.files else None
        except (OSError, ValueError, KeyError) as exc:
            shutil.rmtree(entry, ignore_errors=True)
            record = {"damaged": f"{type(exc).__name__}: {exc}"}
            return record
        for kind, rel in record["files"].items():
            with atomic_path(out_dir / rel) as temp:
                link_or_copy(entry / kind, temp)  # one file under two names on one file system
        now = time.time()
        os.utime(entry, (now, now))  # least recently used goes first
        return {**record, "samples": samples, "middle": middle}

    def put(self, key: str, out_dir: Path, record: Any) -> None:
        """Store a freshly rendered shot (its files in ``out_dir``, linked where the file system
        allows, else copied; and the frames its record keeps)."""
        entry = self._entry(key)
        if (entry / RECORD).is_file():
            return
        with atomic_path(entry) as temp:
            temp.mkdir()
            hashes = {}
            for kind, rel in record.files.items():
                link_or_copy(out_dir / rel, temp / kind)
                if os.name == "posix":  # (Windows cannot delete a read-only file's folder)
                    os.chmod(temp / kind, READ_ONLY)
                hashes[kind] = sha256_file(temp / kind)
            arrays = {f"s{i}": frame for i, frame in record.samples.items()}
            if record.middle is not None:
                arrays["middle"] = record.middle
            np.savez_compressed(temp / FRAMES, **arrays)
            data = {"key": key, "shot_id": record.shot_id, "files": record.files, "sha256": hashes,
                    "notices": list(record.notices), "audio": dict(getattr(record, "audio", {}) or {}),
                    "render_s": record.render_s, "stored_at": time.time()}
            (temp / RECORD).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        self.evict()

    def get_qc(self, key: str, variant: str) -> dict[str, Any] | None:
        """The qc.json entry stored for a shot under a QC variant; None when there is none (or unreadable)."""
        path = self._entry(key) / QC_FOLDER / f"{variant}.json"
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) else None

    def put_qc(self, key: str, variant: str, entry: dict[str, Any]) -> None:
        """Keep a shot's qc.json entry beside its files (nothing when the shot is not cached)."""
        folder = self._entry(key)
        if not (folder / RECORD).is_file():
            return
        with atomic_path(folder / QC_FOLDER / f"{variant}.json") as temp:
            temp.write_text(json.dumps(entry, ensure_ascii=False, allow_nan=False), encoding="utf-8")

    def size_bytes(self) -> int:
        """Bytes held by all entries (a file linked into an output folder counts in full)."""
        return sum(p.stat().st_size for p in (self.root / ENTRIES).rglob("*") if p.is_file()) \
            if (self.root / ENTRIES).is_dir() else 0

    def effective_cap(self) -> int:
        """The cap the cache keeps to: ``cap_bytes``, or less on a small file system (:data:`DISK_SHARE`)."""
        folder = self.root
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            total = shutil.disk_usage(folder).total
        except OSError:
            return self.cap_bytes
        return min(self.cap_bytes, int(total * DISK_SHARE))

    def _entries(self) -> list[tuple[float, str, int, int]]:
        """(last used, key, bytes held, bytes only the cache holds) per entry, least recently used first."""
        folder = self.root / ENTRIES
        if not folder.is_dir():
            return []
        found = []
        for entry in folder.iterdir():
            if entry.is_dir() and not entry.name.startswith("."):
                files = [p.stat() for p in entry.rglob("*") if p.is_file()]
                found.append((entry.stat().st_mtime, entry.name, sum(f.st_size for f in files),
                              sum(f.st_size for f in files if f.st_nlink == 1)))
        return sorted(found)

    def evict(self) -> list[str]:
        """Remove least recently used entries until the cache fits its (effective) cap; the keys removed."""
        entries = self._entries()
        cap = self.effective_cap()
        total = sum(size for _, _, size, _ in entries)
        removed = []
        for _, name, size, _ in entries:
            if total <= cap:
                break
            shutil.rmtree(self.root / ENTRIES / name, ignore_errors=True)
            total -= size
            removed.append(name)
        return removed

    def free_up(self, wanted: int, keep: frozenset[str] | set[str] = frozenset()) -> int:
        """Remove least recently used entries (none of ``keep``) until ``wanted`` bytes of the disk
        are freed; returns the bytes freed. An entry's files still linked into an output folder
        free nothing, so such entries are left alone."""
        freed = 0
        for _, name, _, own in self._entries():
            if freed >= wanted:
                break
            if name in keep or own == 0:
                continue
            shutil.rmtree(self.root / ENTRIES / name, ignore_errors=True)
            freed += own
        return freed


def check_render_reusing(plan: Any, out_dir: Path, records: list[Any], cache: ShotCache | None, camera: bool,
                         layout: Any, checks: Any = None) -> Generator[Any, None, Any]:
    """QC of a render where reused shots keep their stored qc.json entries: only the shots
    rendered now (and the sequence) are checked; their entries are stored for the next render.
    Without a cache, every shot is checked. Yields progress (and one notice); returns the report.
    ``checks``: the run's daotai.qc.parallel.ShotChecks, holding the shots handed in so far."""
    from daotai.events import Notice
    from daotai.qc.report import check_render

    variant = qc_variant(camera)
    known: dict[str, dict[str, Any]] = {}
    if cache is not None:
        for record in records:
            if record.reused and record.key:
                entry = cache.get_qc(record.key, variant)
                if entry is not None and entry.get("shot_id") == record.shot_id:
                    known[record.shot_id] = entry
    report = yield from check_render(plan, out_dir, records, camera=camera, layout=layout, known=known, checks=checks)
    if cache is not None:
        keys = {record.shot_id: record.key for record in records if record.key}
        for entry in report.shots:
            if entry["shot_id"] in keys and entry["shot_id"] not in known:
                cache.put_qc(keys[entry["shot_id"]], variant, entry)
    if known:
        yield Notice("info", f"qc: {len(known)} unchanged shot(s) keep their verdicts from an earlier check "
                             f"({', '.join(known)}); {len(records) - len(known)} checked now")
    return report
