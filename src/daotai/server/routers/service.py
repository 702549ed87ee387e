"""``GET /health``: liveness and queue depth."""

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
        """Liveness and queue depth (answers while workers render or crash)."""
        counts = store.counts()
        return {"status": "ok", "queued": counts.get("queued", 0), "in_progress": counts.get("in_progress", 0),
                "workers": len(dispatcher.worker_pids())}

    return router
