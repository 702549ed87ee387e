"""Helpers for the web console: validate a script, the vocabulary, top-down plan previews."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from daotai.errors import BackendError, Issue, ScriptError
from daotai.server.job_request import read_job_request
from daotai.server.references import reference_issues
from daotai.server.schemas import SCRIPT_BODY, ErrorReply, error_responses, issue_dicts
from daotai.server.state import ServerState

MAX_PLAN_PREVIEW_FRAMES = 20_000  # a preview diagram must stay quick; real runs have no such cap


def _camera_pose(frame: Any) -> dict[str, Any]:
    """Position and top-down view direction ([x, z], unit) of one planned camera frame."""
    m = frame.cam_to_world  # 4x4 row-major; column 2 is camera +z, the view is -z
    forward = (-m[2], -m[10])
    norm = math.hypot(*forward) or 1.0
    return {"position": [m[3], m[7], m[11]], "forward": [forward[0] / norm, forward[1] / norm], "fov": frame.fov}


def plan_diagrams(script: Any) -> list[dict[str, Any]]:
    """Per shot, what a top-down camera diagram needs, taken from the real plan (PlanError if it cannot be made)."""
    from daotai.plan.planner import plan_script

    plan = plan_script(script)
    aspect = plan.width / plan.height
    out = []
    for shot in plan.shots:
        first = shot.character_frames[0] if shot.character_frames else ()
        out.append({
            "shot_id": shot.shot_id, "frames": shot.frames, "duration_s": shot.duration_s,
            "subject": shot.subject, "aim_point": list(shot.aim_point), "aspect": aspect,
            "start": _camera_pose(shot.cameras[0]), "end": _camera_pose(shot.cameras[-1]),
            "path": [_camera_pose(c)["position"] for c in shot.cameras[:: max(1, len(shot.cameras) // 24)]],
            "characters": [{"id": c.id, "position": list(c.position), "facing": c.facing} for c in first],
        })
    return out


WORD_FOLDING = "lower-case, trim, drop ' and ’, turn spaces, hyphens and dots into _, then runs of _ into one"


def alias_tables() -> dict[str, Any]:
    """Every spelling the script accepts for an enum value, keyed by the schema's $defs name.

    ``aliases[def][folded spelling] = canonical value`` (spellings folded as ``word_folding``
    says, the way :func:`daotai.script.vocab.normalise_word` does); ``alias_presets[def][spelling]``
    holds the fields a camera alias also sets (``推`` is a dolly with ``direction: in``);
    ``key_aliases[model][field]`` lists the other names a field of a model ($defs name, or
    ``Script``) may be written under (``对白`` for a shot's dialogue, ``color`` for a colour).
    """
    from daotai.script import spellings, vocab
    from daotai.script.jsonschema import script_json_schema

    # By the JSON Schema $defs name of each aliased enum.
    aliases: dict[str, dict[str, str]] = {name: dict(table) for name, table in (
        ("Framing", vocab.FRAMING_ALIASES), ("Angle", vocab.ANGLE_ALIASES), ("Easing", vocab.EASING_ALIASES),
        ("TimeOfDay", vocab.TIME_OF_DAY_ALIASES), ("TransitionKind", vocab.TRANSITION_ALIASES),
        ("Direction", vocab.DIRECTION_ALIASES), ("SetPieceKind", vocab.SET_PIECE_ALIASES),
        ("PropType", vocab.PROP_ALIASES),
        ("SetKit", vocab.SET_KIT_ALIASES),
    )}
    aliases["CameraType"] = {word: canonical for word, (canonical, _) in vocab.CAMERA_ALIASES.items()}
    presets = {"CameraType": {word: dict(fields) for word, (_, fields) in vocab.CAMERA_ALIASES.items() if fields}}
    schema = script_json_schema()
    models = {"Script": schema, **schema.get("$defs", {})}
    keys: dict[str, dict[str, list[str]]] = {
        model: {field: list(names) for field, names in fields.items()}
        for model, fields in spellings.ALTERNATIVE_KEYS.items()}
    for field, names in vocab.KEY_ALIASES.items():
        for model, node in models.items():
            if field in node.get("properties", {}):
                keys.setdefault(model, {}).setdefault(field, []).extend(names)
    return {"aliases": aliases, "alias_presets": presets, "word_folding": WORD_FOLDING, "key_aliases": keys}


def render_plan(state: ServerState, script: Any, backend: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Which shots a job of this script would render and which it would reuse from the data
    folder's shot cache: the worker's own settings and plan, references placed as it places them."""
    import json
    import shutil
    import tempfile

    from daotai.render.registry import spec_for
    from daotai.run.recheck import planned_reuse
    from daotai.server.worker import job_plan, job_settings

    store = state.store
    store.data_dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".render-plan-", dir=store.data_dir))
    try:  # a job folder of its own: upload references are placed (linked) there, as the worker does
        plan, _ = job_plan(json.dumps(script.model_dump(mode="json", by_alias=True)), "script", None, store, folder)
        settings = job_settings(store.data_dir, backend, "script", options, state.dispatcher.config.cluster,
                                state.dispatcher.config.speed)
        try:
            shots = planned_reuse(plan, settings, source=folder / "script.json")
        except BackendError:  # e.g. the model is not downloaded: nothing can be reused, every shot renders
            shots = [{"shot_id": s.shot_id, "key": None, "render": "rendered"} for s in plan.shots]
        outline = spec_for(backend).shot_outline  # e.g. which workflow each H3 shot uses, on what references
        if outline is not None:
            by_id = {s.shot_id: s for s in plan.shots}
            for entry in shots:
                entry.update(outline(plan, by_id[entry["shot_id"]], options))
        return shots
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def build_router(state: ServerState) -> APIRouter:
    """The script helper routes of one server."""
    from daotai.render.registry import backend_names

    router = APIRouter(tags=["scripts"])
    store = state.store
    errors = error_responses()

    @router.post("/v1/scripts/validate", responses={**errors}, openapi_extra=SCRIPT_BODY)
    async def validate_only(request: Request):
        """Validate a script without queueing it: {valid, issues[{path, value, rule}], total_seconds}."""
        from daotai.script.load import parse_document, validate_script

        try:
            data = parse_document(await request.body(), "json", source="body")
            script = validate_script(data, source="body")
        except ScriptError as exc:
            return {"valid": False, "issues": issue_dicts(exc.issues), "total_seconds": None}
        refs = await run_in_threadpool(reference_issues, script, store)
        if refs:  # the same rule as POST /v1/jobs, so the console shows it before submitting
            return {"valid": False, "issues": issue_dicts(refs), "total_seconds": None}
        return {"valid": True, "issues": [], "total_seconds": sum(s.duration for s in script.shots)}

    @router.get("/v1/schema")
    def schema_and_vocabulary() -> dict[str, Any]:
        """The script JSON Schema, the canonical vocabularies with every alias, presets and backends."""
        from daotai.script import vocab
        from daotai.script.jsonschema import script_json_schema
        from daotai.script.schema import SIZE_PRESETS

        vocabulary = {name: [m.value for m in enum] for name, enum in (
            ("framing", vocab.Framing), ("angle", vocab.Angle), ("camera", vocab.CameraType),
            ("easing", vocab.Easing), ("time_of_day", vocab.TimeOfDay), ("transition", vocab.TransitionKind),
            ("direction", vocab.Direction), ("set_piece", vocab.SetPieceKind), ("prop", vocab.PropType),
            ("set", vocab.SetKit),
        )}
        return {"schema": script_json_schema(), "vocabulary": vocabulary, **alias_tables(),
                "presets": list(SIZE_PRESETS), "backends": backend_names()}

    @router.post("/v1/schema/read", responses={**errors}, openapi_extra=SCRIPT_BODY)
    async def read_script(request: Request):
        """How the service reads a script's words: {valid, script, issues}.

        `script` is the canonical form (every alias, shorthand, other field name and value
        written as words, such as "slow push in", "2.5 s" or "brown", resolved; defaults
        filled), so an editor can show what a word means; an invalid script answers
        `valid: false` with its issues, like validate."""
        from daotai.script.load import parse_document, validate_script

        try:
            data = parse_document(await request.body(), "json", source="body")
            script = validate_script(data, source="body")
        except ScriptError as exc:
            return {"valid": False, "script": None, "issues": issue_dicts(exc.issues)}
        return {"valid": True, "script": script.model_dump(mode="json"), "issues": []}

    @router.post("/v1/plan", responses={**errors, 422: {"model": ErrorReply}}, openapi_extra=SCRIPT_BODY)
    async def plan_preview(request: Request):
        """Top-down camera diagrams of every shot: subject, camera start/end, view direction, fov.

        Like validate, an invalid script is an answer (valid: false, issues), not an HTTP error:
        the console asks while the director is still typing. A valid script that cannot be
        planned (e.g. a crossfade into the first shot) is a 422 naming the field's JSON path."""
        from daotai.script.load import parse_document, validate_script

        try:
            data = parse_document(await request.body(), "json", source="body")
            script = validate_script(data, source="body")
        except ScriptError as exc:
            return {"valid": False, "issues": issue_dicts(exc.issues), "shots": []}
        frames = sum(s.duration for s in script.shots) * script.fps
        if frames > MAX_PLAN_PREVIEW_FRAMES:
            issue = Issue("shots", f"{frames:.0f} frames",
                          f"a plan preview covers at most {MAX_PLAN_PREVIEW_FRAMES} frames")
            return {"valid": False, "issues": issue_dicts([issue]), "shots": []}
        return {"valid": True, "issues": [], "shots": await run_in_threadpool(plan_diagrams, script)}

    @router.post("/v1/scripts/render-plan", responses={**errors, 422: {"model": ErrorReply}}, openapi_extra=SCRIPT_BODY)
    async def plan_render(request: Request, backend: str = Query("previz", max_length=64),
                          preset: str | None = Query(None, max_length=32)):
        """Before Render: which shots a job of this script would render and which it would reuse
        unchanged from the service's shot cache. Takes what `POST /v1/jobs` takes (the script,
        an optional `options` object, `backend` and `preset`) and queues nothing.

        Answers `{valid, issues, cache, shots: [{shot_id, key, render: "rendered" | "reused"}],
        rendered: [shot ids], reused: [shot ids]}`; an invalid script is an answer like validate
        (`valid: false`), a wrong option a 422 naming `options.<field>`."""
        job_request = await read_job_request(request, backend, preset)
        options = job_request.options
        empty = {"cache": False, "shots": [], "rendered": [], "reused": []}
        try:
            script = await run_in_threadpool(job_request.validated, store)
        except ScriptError as exc:  # an answer, as validate gives one: the console asks while editing
            return {"valid": False, "issues": issue_dicts(exc.issues), **empty}
        script = job_request.with_preset(script)
        shots = await run_in_threadpool(render_plan, state, script, backend, options)
        return {"valid": True, "issues": [], "cache": any(s["key"] for s in shots), "shots": shots,
                "rendered": [s["shot_id"] for s in shots if s["render"] == "rendered"],
                "reused": [s["shot_id"] for s in shots if s["render"] == "reused"]}

    return router
