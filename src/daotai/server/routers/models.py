"""``GET /v1/models``: the backends this service renders with and the models pulled for them,
in the OpenAI shape (``client.models.list()`` reads it), each with what it can do."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi import Path as PathParam
from starlette.exceptions import HTTPException

from daotai.server.schemas import error_responses, json_response
from daotai.server.state import ServerState

OWNER = "daotai"


def backend_entry(spec: Any) -> dict[str, Any]:
    """A backend as a model object: its id is what `model` of /v1/videos (or `backend` of /v1/jobs) takes."""
    return {"id": spec.name, "object": "model", "created": 0, "owned_by": OWNER,
            "daotai": {"kind": "backend", "summary": spec.summary, "family": spec.family,
                       "device_class": spec.device_class, "controls": spec.controls, "sound": spec.sound,
                       "default_model": spec.default_model, "options": list(spec.option_names())}}


def pulled_models() -> list[dict[str, Any]]:
    """Catalog models found in the Hugging Face cache, as model objects (none without the neural extra)."""
    from daotai import catalog
    from daotai.errors import DependencyMissing
    from daotai.render.registry import specs

    try:
        from daotai.runtime.model_lookup import cached_path
    except ImportError:
        return []
    found = []
    for row in catalog.models().values():
        try:
            where = cached_path(row)
        except DependencyMissing:
            return []
        if where is None:
            continue
        backends = [s.name for s in specs().values() if s.family == row.family]
        found.append({"id": row.name, "object": "model", "created": 0, "owned_by": OWNER,
                      "daotai": {"kind": "model", "family": row.family, "backends": backends,
                                 "repo_id": row.repo_id, "licence": row.licence, "size_gb": row.size_gb}})
    return found


def build_router(state: ServerState) -> APIRouter:
    """The model routes of one server."""
    router = APIRouter(tags=["models"])
    errors = error_responses()

    def entries() -> list[dict[str, Any]]:
        from daotai.render.registry import specs

        return [backend_entry(spec) for spec in specs().values()] + pulled_models()

    @router.get("/v1/models", responses=errors)
    def list_models():
        """Every backend (pass its id as `model`) and every pulled model (pass it as the `model` option)."""
        return json_response(200, {"object": "list", "data": entries()})

    @router.get("/v1/models/{model_id}", responses=errors)
    def get_model(model_id: str = PathParam(..., max_length=128)):
        """One backend or pulled model."""
        for entry in entries():
            if entry["id"] == model_id:
                return json_response(200, entry)
        raise HTTPException(404, f"model: {model_id!r} is neither a backend nor a pulled model")

    return router
