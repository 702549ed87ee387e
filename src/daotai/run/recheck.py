"""`daotai qc DIR`: check a render folder again, after the fact (orchestration above qc).

It sits at the pipeline's level because it may render again: a backend whose spec says it is
``reproducible`` (previz) draws the sampled frames anew from plan.json for the encode-fidelity
check, instead of trusting frames read back from the files under test.

Before the shots are checked, the folder's files are checked against manifest.json
(:func:`check_files`): a file changed since the render, one missing, a deliverable the manifest
does not list (left from another render), a file daotai does not write (a render folder holds
one render and nothing else), or a render that started in place and never finished (left by
a daotai older than staged renders).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from daotai.errors import DaotaiError
from daotai.files import sha256_file
from daotai.plan.layout import RenderLayout
from daotai.qc.report import QcReport, finish_report
from daotai.run.settings import PipelineSettings
from daotai.run.shots import fidelity_sample_indexes

# Files a render lists in its manifest that change afterwards by design: qc.json (``daotai qc``
# rewrites it), the server's previews of the sequence (made after the manifest) and the storyboard
# pages (``daotai boards`` writes them into a finished render).
_REWRITTEN_KINDS = ("qc", "thumbnail", "spritesheet", "manifest", "boards", "board_page")


def check_files(layout: RenderLayout, manifest: dict[str, Any]) -> dict[str, Any]:
    """The folder's files against the manifest's sha256 list: {"ok", "problems", counts}.

    Problems, each one line: an unfinished render (its in-progress marker is still there), a
    listed file missing or changed since the render, a deliverable the manifest does not list,
    a file no render writes (a user's notes, another tool's output: "foreign").
    """
    problems: list[str] = []
    marker = layout.in_progress
    if marker.is_file():
        try:
            started = json.loads(marker.read_text(encoding="utf-8")).get("started", "?")
        except (OSError, ValueError):
            started = "?"
        problems.append(f"a render into this folder started {started} and did not finish: its files may be "
                        "mixed with an earlier render's; render again into it (or a new folder) to finish")
    listed: dict[str, str] = manifest.get("files") or {}
    if not layout.manifest.is_file():
        problems.append("manifest.json is missing: nothing to check the files against")
    missing, changed = [], []
    for rel, digest in sorted(listed.items()):
        path = layout.root / rel
        try:
            kind = layout.classify_any(rel)[0]
        except ValueError:
            kind = None
        if kind in _REWRITTEN_KINDS:
            continue
        if not path.is_file():
            missing.append(rel)
        elif sha256_file(path) != digest:
            changed.append(rel)
    unlisted = [rel for rel, (kind, _) in layout.present_deliverables().items()
                if rel not in listed and kind not in _REWRITTEN_KINDS]
    foreign = layout.foreign_files(set(listed))
    if changed:
        problems.append(f"{len(changed)} file(s) changed since manifest.json was written: {', '.join(changed)}")
    if missing:
        problems.append(f"{len(missing)} file(s) listed in manifest.json are missing: {', '.join(missing)}")
    if unlisted:
        problems.append(f"{len(unlisted)} file(s) not from this render (manifest.json does not list them): "
                        f"{', '.join(unlisted)}")
    if foreign:
        problems.append(f"{len(foreign)} file(s) daotai did not write: {', '.join(foreign)}; a render folder "
                        "holds one render only (move them out)")
    return {"ok": not problems, "problems": problems, "checked": len(listed), "changed": changed,
            "missing": missing, "unlisted": unlisted, "foreign": foreign, "in_progress": marker.is_file()}



def planned_reuse(plan: Any, settings: PipelineSettings, source: Path | None = None) -> list[dict[str, Any]]:
    """Before a render: which shots it would reuse unchanged from its shot cache and which it
    would render, in plan order: ``[{"shot_id", "key", "render": "reused" | "rendered"}]``.

    The keys are made as :func:`daotai.run.pipeline.run` makes them (the backend's validated
    options, controls as the backend allows, the run's encode settings), so the answer is
    what the render will do; a cache entry found damaged at render time is rendered again.
    Without a cache every shot renders (key None). Option errors are raised as run raises them.
    """
    from dataclasses import replace

    from daotai.plan.planner import select_shots
    from daotai.render.registry import spec_for
    from daotai.run.cache import ShotCache
    from daotai.run.reuse import chain_cache_misses, shot_keys
    from daotai.run.settings import encode_settings_for, resolved_options

    if settings.shots:
        plan = select_shots(plan, list(settings.shots))
    settings = replace(settings, options=resolved_options(settings).model_dump())
    if settings.controls and not spec_for(settings.backend).controls:
        settings = replace(settings, controls=False)
    if settings.cache is None:
        return [{"shot_id": shot.shot_id, "key": None, "render": "rendered"} for shot in plan.shots]
    keys = shot_keys(plan, settings, encode_settings_for(settings, plan.width, plan.height), source)
    cache = ShotCache(settings.cache, settings.cache_bytes)
    rerun = set(chain_cache_misses(plan, settings, cache, keys))  # a chain with a change renders whole
    return [{"shot_id": shot.shot_id, "key": keys[shot.shot_id],
             "render": "reused" if shot.shot_id not in rerun and cache.has(keys[shot.shot_id]) else "rendered"}
            for shot in plan.shots]


def check_folder(folder: Path, console: Any = None) -> QcReport:
    """Re-run qc on a render folder and rewrite its qc.json."""
    from daotai.plan.planner import plan_from_json
    from daotai.render.registry import spec_for

    folder = Path(folder)
    layout = RenderLayout.find(folder)
    if not layout.plan.is_file():
        raise DaotaiError(f"{folder}: has no plan.json; is it a daotai render folder?")
    plan = plan_from_json(layout.plan.read_text(encoding="utf-8"))
    manifest = json.loads(layout.manifest.read_text(encoding="utf-8")) if layout.manifest.is_file() else {}
    folder_files = check_files(layout, manifest)
    settings = manifest.get("settings", {})
    spec = spec_for(settings.get("backend", "previz"))
    options = settings.get("options") or {}
    labels = bool(options.get("labels", spec.reproducible))  # name labels drawn over the figures
    from daotai.qc.parallel import ShotChecks
    from daotai.qc.report import hand_in_file, hand_in_sequence, shot_result

    backend = None
    missing: dict[str, dict[str, Any]] = {}
    # the same fast path as a render's QC: shots are checked by worker processes (while the next
    # shot's fidelity samples are drawn here), the sequence beside them
    with ShotChecks(plan) as checks:
        try:
            for shot in plan.shots:
                files = next((s["files"] for s in manifest.get("shots", []) if s["shot_id"] == shot.shot_id), None)
                rel = files["shot"] if files else (layout.relative("shot", shot.shot_id)
                                                   if layout.shot(shot.shot_id).is_file() else None)
                if rel is None:
                    missing[shot.shot_id] = {"shot_id": shot.shot_id, "ok": False, "failures": ["shot file missing"]}
                    continue
                samples = None
                if spec.reproducible:
                    backend = backend or spec.build(options)
                    samples = backend.render_frames(plan, shot, fidelity_sample_indexes(shot.frames))
                controls = {k: folder / files[k] for k in ("depth", "mask") if files and k in files}
                hand_in_file(checks, shot.shot_id, folder / rel, samples, controls=controls if files else None,
                             labels=labels)
        finally:
            if backend is not None:
                backend.close()
        if layout.sequence.is_file():
            hand_in_sequence(checks, layout.sequence)
        shots = []
        for number, shot in enumerate(plan.shots, start=1):
            if console is not None:
                console.print(f"[dim]qc: checking shot {number} of {len(plan.shots)} ({shot.shot_id})…[/dim]")
            shots.append(missing.get(shot.shot_id) or shot_result(checks, shot.shot_id))
        if console is not None and layout.sequence.is_file():
            console.print("[dim]qc: checking the sequence…[/dim]")
        sequence = checks.result("sequence") if layout.sequence.is_file() else None
    return finish_report(layout, shots, sequence, folder_files)
