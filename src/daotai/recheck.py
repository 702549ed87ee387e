"""`daotai qc DIR`: check a render folder again, after the fact (orchestration above qc).

It sits at the pipeline's level because it may render again: a backend whose spec says it is
``reproducible`` (previz) draws the sampled frames anew from plan.json for the encode-fidelity
check, instead of trusting frames read back from the files under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from daotai.errors import DaotaiError
from daotai.pipeline import fidelity_sample_indexes
from daotai.plan.layout import RenderLayout
from daotai.qc.report import QcReport, check_sequence, check_shot, finish_report


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
    settings = manifest.get("settings", {})
    spec = spec_for(settings.get("backend", "previz"))
    options = settings.get("options") or {}
    labels = bool(options.get("labels", spec.reproducible))  # name labels drawn over the figures
    backend = None
    shots = []
    try:
        for shot in plan.shots:
            files = next((s["files"] for s in manifest.get("shots", []) if s["shot_id"] == shot.shot_id), None)
            rel = files["shot"] if files else (layout.relative("shot", shot.shot_id)
                                               if layout.shot(shot.shot_id).is_file() else None)
            if rel is None:
                shots.append({"shot_id": shot.shot_id, "ok": False, "failures": ["shot file missing"]})
                continue
            samples = None
            if spec.reproducible:
                backend = backend or spec.build(options)
                samples = backend.render_frames(plan, shot, fidelity_sample_indexes(shot.frames))
            if console is not None:
                console.print(f"[dim]checking {shot.shot_id}…[/dim]")
            controls = {k: folder / files[k] for k in ("depth", "mask") if files and k in files}
            shots.append(check_shot(plan, shot, folder / rel, samples, controls=controls if files else None,
                                    labels=labels))
    finally:
        if backend is not None:
            backend.close()
    sequence = check_sequence(plan, layout.sequence) if layout.sequence.is_file() else None
    return finish_report(layout, shots, sequence)
