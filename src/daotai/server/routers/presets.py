"""Named render presets saved on the server: a backend, its options and a size, offered by the console.

A preset is what a team settles on ("wan-draft": wan, 20 steps, fast, the preview size), saved
once and picked by name. Each is a small JSON file under ``<data>/presets/``, checked when it
is saved exactly as a job's backend and options are checked, so a job made from it is never
refused for them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from starlette.exceptions import HTTPException

from daotai.errors import OptionError
from daotai.server.schemas import ErrorReply, error_responses
from daotai.server.state import ServerState
from daotai.server.store import NotFound

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"
PRESET_NAME = re.compile(NAME_PATTERN)
PRESET_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "additionalProperties": False,
    "properties": {"backend": {"type": "string", "default": "previz"},
                   "options": {"type": "object", "description": "the backend's options (daotai backends)"},
                   "size": {"type": ["string", "null"], "description": "a size preset: preview, draft, final"},
                   "description": {"type": "string", "maxLength": 500}}}}}}}
PRESET_FIELDS = ("backend", "options", "size", "description")


def checked_preset(name: str, body: Any) -> dict[str, Any]:
    """A preset as stored: {name, backend, options (validated, as given), size, description};
    OptionError naming the field otherwise."""
    from daotai.render.registry import backend_names, spec_for
    from daotai.script.schema import SIZE_PRESETS

    if not isinstance(body, dict):
        raise OptionError.at("body", body, "must be an object: backend, options, size, description")
    unknown = [key for key in body if key not in PRESET_FIELDS]
    if unknown:
        raise OptionError.at(unknown[0], body[unknown[0]], "is not a field of a preset", PRESET_FIELDS)
    backend = body.get("backend", "previz")
    if backend not in backend_names():
        raise OptionError.at("backend", backend, "is not a daotai backend", backend_names())
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise OptionError.at("options", options, "must be an object of backend options")
    spec_for(backend).validate_options(options)
    size = body.get("size")
    if size is not None and size not in SIZE_PRESETS:
        raise OptionError.at("size", size, "is not a size preset", tuple(SIZE_PRESETS))
    description = body.get("description") or ""
    if not isinstance(description, str) or len(description) > 500:
        raise OptionError.at("description", description, "must be text of at most 500 characters")
    return {"name": name, "object": "daotai.preset", "backend": backend, "options": options, "size": size,
            "description": description}


def build_router(state: ServerState) -> APIRouter:
    """The preset routes of one server."""
    from daotai.files import atomic_write_text

    router = APIRouter(tags=["presets"])
    folder = state.store.data_dir / "presets"
    errors = error_responses()

    def path_of(name: str):
        if PRESET_NAME.fullmatch(name) is None:
            raise HTTPException(400, f"name: {name[:60]!r} must be 1 to 40 lower-case letters, digits, - or _")
        return folder / f"{name}.json"

    @router.get("/v1/presets")
    def list_presets() -> dict[str, Any]:
        """Every saved preset, by name."""
        found = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            try:
                found.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue  # a half-removed file; the next listing will not have it
        return {"object": "list", "data": found}

    @router.put("/v1/presets/{name}", responses={**errors, 422: {"model": ErrorReply}}, openapi_extra=PRESET_BODY)
    async def save_preset(request: Request, name: str = PathParam(..., max_length=40, pattern=NAME_PATTERN)):
        """Save (or replace) a preset: `{"backend", "options", "size", "description"}`, each
        checked as a job's would be (422 naming the field)."""
        from daotai.script.load import parse_document

        path = path_of(name)
        preset = checked_preset(name, parse_document(await request.body(), "json", source="body"))
        atomic_write_text(path, json.dumps(preset, indent=1, ensure_ascii=False) + "\n")
        return preset

    @router.get("/v1/presets/{name}", responses=errors)
    def get_preset(name: str = PathParam(..., max_length=40, pattern=NAME_PATTERN)):
        """One saved preset."""
        path = path_of(name)
        if not path.is_file():
            raise NotFound(f"name: no preset {name!r} is saved")
        return json.loads(path.read_text(encoding="utf-8"))

    @router.delete("/v1/presets/{name}", responses=errors)
    def delete_preset(name: str = PathParam(..., max_length=40, pattern=NAME_PATTERN)):
        """Remove a saved preset."""
        path = path_of(name)
        if not path.is_file():
            raise NotFound(f"name: no preset {name!r} is saved")
        path.unlink()
        return {"name": name, "object": "daotai.preset", "deleted": True}

    return router
