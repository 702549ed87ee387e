"""Reference images, soundtracks and footage in scripts sent to the service: ``upload:<id>`` names, never paths.

A client cannot make the server read its disk, so ``characters[].reference_images`` of a
submitted script may only name images uploaded through ``POST /v1/uploads``, as
``upload:img_<32 hex>``. The stored script keeps those names (they are content addressed,
so they mean the same bytes forever); just before rendering, the worker links each named
upload into the job folder as ``references/<sha256>.<ext>`` and hands the renderer a copy of
the script whose entries are those relative paths (the job folder is the worker's current
folder and the base folder of the script's relative paths). A soundtrack (``upload:snd_…``) and
a shot's ``reference_video.path`` (``upload:vid_…``) are placed the same way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daotai.errors import BackendError, Issue
from daotai.server.store import JobStore, Upload

UPLOAD_REF = re.compile(r"^upload:(img_[0-9a-f]{32})$")
UPLOAD_REF_FORM = "upload:img_<32 hex digits>"
SOUND_REF = re.compile(r"^upload:(snd_[0-9a-f]{32})$")
SOUND_REF_FORM = "upload:snd_<32 hex digits>"
VIDEO_REF = re.compile(r"^upload:(vid_[0-9a-f]{32})$")
VIDEO_REF_FORM = "upload:vid_<32 hex digits>"
REFERENCE_DIR = "references"  # inside the job folder


@dataclass(frozen=True)
class ResolvedReference:
    """One ``upload:<id>`` entry of a script and the file it became for the renderer."""

    character: str
    index: int
    reference: str  # as written in the script: upload:<id>
    path: str  # relative to the job folder
    sha256: str
    bytes: int
    content_type: str
    width: int
    height: int
    shot: str = ""  # the shot whose reference_video it is ("" for looks and the soundtrack)

    def manifest_entry(self) -> dict[str, Any]:
        entry = {"character": self.character, "index": self.index, "reference": self.reference, "path": self.path,
                 "sha256": self.sha256, "bytes": self.bytes, "content_type": self.content_type,
                 "width": self.width, "height": self.height}
        return {**entry, "shot": self.shot} if self.shot else entry


def reference_issues(script: Any, store: JobStore) -> list[Issue]:
    """Every reference image entry that is not the name of a stored upload, by JSON path."""
    issues = []
    for i, character in enumerate(script.characters):
        for j, ref in enumerate(character.reference_images):
            path = f"characters[{i}].reference_images[{j}]"
            match = UPLOAD_REF.fullmatch(ref)
            if match is None:
                issues.append(Issue(path, ref, f"the server reads no file paths; upload the image with POST "
                                               f"/v1/uploads and name it as '{UPLOAD_REF_FORM}'"))
            elif store.find_upload(match.group(1)) is None:
                issues.append(Issue(path, ref, "is not a stored upload; POST /v1/uploads returns the id to use"))
    for i, shot in enumerate(getattr(script, "shots", ())):
        footage = getattr(shot, "reference_video", None)
        if footage is None:
            continue
        path = f"shots[{i}].reference_video.path"
        match = VIDEO_REF.fullmatch(footage.path)
        if match is None:
            issues.append(Issue(path, footage.path, f"the server reads no file paths; upload the video with POST "
                                                    f"/v1/uploads and name it as '{VIDEO_REF_FORM}'"))
        elif store.find_upload(match.group(1)) is None:
            issues.append(Issue(path, footage.path, "is not a stored upload; POST /v1/uploads returns the id to use"))
    soundtrack = getattr(script, "soundtrack", None)
    if soundtrack is not None:
        match = SOUND_REF.fullmatch(soundtrack.path)
        if match is None:
            issues.append(Issue("soundtrack.path", soundtrack.path, f"the server reads no file paths; upload the "
                                f"sound file with POST /v1/uploads and name it as '{SOUND_REF_FORM}'"))
        elif store.find_upload(match.group(1)) is None:
            issues.append(Issue("soundtrack.path", soundtrack.path,
                                "is not a stored upload; POST /v1/uploads returns the id to use"))
    return issues


def _link_or_copy(source: Path, target: Path) -> None:
    """Place ``source`` at ``target`` atomically: a hard link (no extra disk) or, across devices, a copy."""
    from daotai.files import atomic_path, link_or_copy

    with atomic_path(target) as temp:
        link_or_copy(source, temp)


def materialise_references(script: dict[str, Any], store: JobStore, job_dir: Path) -> tuple[dict[str, Any], list[ResolvedReference]]:
    """A copy of a stored script whose ``upload:<id>`` entries are files in ``job_dir/references/``.

    Each file is checked against the sha256 recorded at upload time, so a render never uses
    bytes other than the ones the client sent. Raises BackendError (the job fails clearly)
    for an entry that is not an upload name or whose upload is gone or altered.
    """
    resolved_script = {**script, "characters": [dict(c) for c in script.get("characters") or []]}
    found: list[ResolvedReference] = []
    for i, character in enumerate(resolved_script["characters"]):
        refs = list(character.get("reference_images") or [])
        for j, ref in enumerate(refs):
            where = f"characters[{i}].reference_images[{j}]"
            match = UPLOAD_REF.fullmatch(ref) if isinstance(ref, str) else None
            if match is None:
                raise BackendError(f"{where}: {ref!r} is not an upload name ({UPLOAD_REF_FORM})")
            upload = store.find_upload(match.group(1))
            source = store.upload_path(upload) if upload is not None else None
            if upload is None or source is None:
                raise BackendError(f"{where}: upload {match.group(1)!r} is no longer stored")
            relpath = _place(upload, source, job_dir, where)
            refs[j] = relpath
            found.append(ResolvedReference(str(character.get("id")), j, ref, relpath, upload.sha256, upload.bytes,
                                           upload.content_type, upload.width, upload.height))
        if refs:
            character["reference_images"] = refs
    shots = resolved_script.get("shots")
    if isinstance(shots, list):
        resolved_script["shots"] = shots = [dict(shot) if isinstance(shot, dict) else shot for shot in shots]
        for i, shot in enumerate(shots):
            footage = shot.get("reference_video") if isinstance(shot, dict) else None
            if footage is None:
                continue
            entry = {"path": footage} if isinstance(footage, str) else dict(footage)
            where = f"shots[{i}].reference_video.path"
            match = VIDEO_REF.fullmatch(str(entry.get("path")))
            if match is None:
                raise BackendError(f"{where}: {entry.get('path')!r} is not an upload name ({VIDEO_REF_FORM})")
            upload = store.find_upload(match.group(1))
            source = store.upload_path(upload) if upload is not None else None
            if upload is None or source is None:
                raise BackendError(f"{where}: upload {match.group(1)!r} is no longer stored")
            reference = entry["path"]
            entry["path"] = _place(upload, source, job_dir, where)
            shot["reference_video"] = entry
            found.append(ResolvedReference("", -1, reference, entry["path"], upload.sha256, upload.bytes,
                                           upload.content_type, upload.width, upload.height, str(shot.get("shot_id"))))
    soundtrack = resolved_script.get("soundtrack")
    if soundtrack is not None:
        entry = {"path": soundtrack} if isinstance(soundtrack, str) else dict(soundtrack)
        match = SOUND_REF.fullmatch(str(entry.get("path")))
        if match is None:
            raise BackendError(f"soundtrack.path: {entry.get('path')!r} is not an upload name ({SOUND_REF_FORM})")
        upload = store.find_upload(match.group(1))
        source = store.upload_path(upload) if upload is not None else None
        if upload is None or source is None:
            raise BackendError(f"soundtrack.path: upload {match.group(1)!r} is no longer stored")
        reference = entry["path"]
        entry["path"] = _place(upload, source, job_dir, "soundtrack.path")
        resolved_script["soundtrack"] = entry
        found.append(ResolvedReference("", -1, reference, entry["path"], upload.sha256, upload.bytes,
                                       upload.content_type, 0, 0))
    return resolved_script, found


def _place(upload: Upload, source: Path, job_dir: Path, where: str) -> str:
    """Link one upload into the job folder (once) and check its bytes; the path relative to job_dir."""
    from daotai.files import sha256_file

    relpath = f"{REFERENCE_DIR}/{upload.sha256}{source.suffix}"
    target = job_dir / relpath
    if not target.is_file() or target.is_symlink():
        target.parent.mkdir(parents=True, exist_ok=True)
        _link_or_copy(source, target)
    if sha256_file(target) != upload.sha256:
        target.unlink(missing_ok=True)
        raise BackendError(f"{where}: the stored file of upload {upload.id!r} no longer matches its sha256")
    return relpath


def record_references(manifest_path: Path, references: list[ResolvedReference]) -> None:
    """Add the references a render used (with their sha256) to its manifest.json, atomically.

    The manifest promises enough to reproduce a render; reference images are inputs of the
    neural backends, so their exact bytes are named there too.
    """
    from daotai.files import atomic_write_text

    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["references"] = [r.manifest_entry() for r in references]
    atomic_write_text(manifest_path, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
