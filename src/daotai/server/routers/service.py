"""``GET /health``: liveness, queue depth and warm workers."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from daotai.server.schemas import Health
from daotai.server.state import ServerState


def build_router(state: ServerState) -> APIRouter:
    """The service routes of one server."""
    router = APIRouter(tags=["service"])
    store, dispatcher = state.store, state.dispatcher

    @router.get("/health", response_model=Health)
    def health() -> dict[str, Any]:
        """Liveness and queue depth (answers while workers render or crash); with `daotai serve
        --warm`, each warm worker and whether its backend is loaded yet."""
        counts = store.counts()
        return {"status": "ok", "queued": counts.get("queued", 0), "in_progress": counts.get("in_progress", 0),
                "workers": len(dispatcher.worker_pids()), "warm": dispatcher.warm_workers()}

    return router
