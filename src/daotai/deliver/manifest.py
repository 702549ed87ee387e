"""manifest.json: enough to reproduce a render exactly and to prove what was delivered.

Versions of daotai and every library in the data path, the script and plan hashes, seeds,
settings, per-stage timings and the sha256 of every output file.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from daotai import __version__
from daotai.files import atomic_write_text, sha256_file
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan

if TYPE_CHECKING:
    from daotai.encode.video import EncodeSettings

LIBRARIES = ("pydantic", "numpy", "av", "moderngl", "opencv-python-headless", "pillow", "opentimelineio")
MANIFEST_VERSION = 1


def library_versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


def output_files(out_dir: Path) -> dict[str, str]:
    """sha256 of every file under the output folder but the manifest and hidden temp files (relative path → hex)."""
    manifest = RenderLayout(out_dir).manifest
    hashes = {}
    for path in sorted(out_dir.rglob("*")):
        if path.is_file() and path != manifest and not path.name.startswith("."):
            hashes[path.relative_to(out_dir).as_posix()] = sha256_file(path)
    return hashes


def write_manifest(plan: Plan, plan_text: str, out_dir: Path, settings, records, timings: dict[str, float],
                   source: Path | None, *, encode: EncodeSettings, sound: dict | None = None) -> dict:
    """Write manifest.json (atomically) and return it; ``encode`` is what the run encoded its videos with,
    ``sound`` the run's sound (soundtrack file and hash, what each shot carries, the mix's loudness)."""
    from daotai.deliver.timeline import editorial_retime

    script_sha = None
    if source is not None and Path(source).is_file():
        script_sha = sha256_file(source)
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "daotai_version": __version__,
        "python": sys.version.split()[0],
        "platform": f"{platform.system()} {platform.machine()}",
        "libraries": library_versions(),
        # resolved: which script file this is, so a render of another script into this folder is refused
        "source": {"path": str(source) if source else None, "sha256": script_sha,
                   "resolved": str(Path(source).resolve()) if source else None},
        "script_hash": plan.script_hash,
        "plan_sha256": hashlib.sha256(plan_text.encode("utf-8")).hexdigest(),
        "settings": {
            **{k: v for k, v in asdict(settings).items() if k != "skipped_outputs"},
            "effective_crf": encode.effective_crf,
            "tune": encode.tune,
            "preset": encode.preset,
            "pix_fmt": encode.pix_fmt,
            "size": [plan.width, plan.height],
            "fps": list(plan.fps_fraction),
        },
        "seeds": {"script": plan.seed, "shots": {s.shot_id: s.seed for s in plan.shots},
                  "characters": {c.id: c.seed for c in plan.characters}},
        "shots": [
            {
                "shot_id": r.shot_id,
                "files": r.files,
                "render_s": round(r.render_s, 4),
                "wall_s": round(r.wall_s, 4),
                # what the backend decided or saw: retiming, memory tier, retries, GPU health
                "notices": list(r.notices),
                **({"key": r.key, "render": "reused" if r.reused else "rendered"} if getattr(r, "key", None) else {}),
                **({"audio": dict(r.audio)} if getattr(r, "audio", None) else {}),
                # every take when the shot had retakes (daotai.run.retakes): seed, verdict, kept or not
                **({"takes": list(r.takes)} if getattr(r, "takes", None) else {}),
            }
            for r in records
        ],
        **({"sound": sound} if sound else {}),
        # outputs asked for but not written for want of an optional package: what, why, the install command
        "skipped_outputs": [dict(s) for s in getattr(settings, "skipped_outputs", ())],
        # FCP XML and EDL of a plan whose rate SMPTE timecode lacks: written at which rate, and how
        **({"timeline_editorial": retime.to_dict()} if (retime := editorial_retime(plan)) is not None else {}),
        "timings_s": {k: round(v, 4) for k, v in timings.items()},
        "files": output_files(out_dir),
    }
    atomic_write_text(RenderLayout(out_dir).manifest, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest
