"""The local video service: an OpenAI Videos-shaped API plus native script endpoints.

``create_app(data_dir, token)`` builds the FastAPI app. Rendering never happens in this
process: a dispatcher thread hands jobs to worker processes (see ``worker.py``) and every
reply is read from the SQLite job store, so the server keeps answering while a worker
crashes. Clients only ever name jobs and uploaded images by opaque ids and deliverables by
fixed names; file paths come from the store, never from a request.

The parts: ``routers/`` (one APIRouter per area, built from the shared ``ServerState``),
``schemas.py`` (reply models, request-body schemas, JSON shapes), ``security.py`` (bind
check, request guard, security headers), ``images.py`` (the upload sandbox). This module
only assembles them and translates the ``daotai.errors`` tree into replies, in one handler:

    ScriptError, OptionError, PlanError   422  {error, issues: [{path, value, rule}]}
    DependencyMissing                     501
    DiskFull                              507  disk_full: where, bytes free, bytes needed (also a stray
                                               "no space left on device" from any route)
    Cancelled                             409
    BackendError, EncodeError, QualityError, any other DaotaiError   500 (one-line message)
    the store's refusals                  404 unknown id, 409 idempotency/upload conflict,
                                          429 queue full (Retry-After), 400 otherwise
    anything else (a bug)                 500 internal_error
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from daotai.errors import DaotaiError, disk_full_cause
from daotai.server.schemas import error_body, issue_dicts, json_response, script_components
from daotai.server.security import check_bind, guarded
from daotai.server.state import ServerConfig, ServerState
from daotai.server.store import IdempotencyConflict, JobStore, NotFound, QueueFull, StoreError, UploadConflict
from daotai.server.worker import Dispatcher, DispatcherConfig

WEB_DIR = Path(__file__).with_name("web")


def create_app(data_dir: str | Path, token: str | None = None, *, host: str = "127.0.0.1",
               concurrency: int = 1, queue_limit: int = 100, start_dispatcher: bool = True,
               cluster: str | None = None, speed: str | None = None, warm: tuple[str, ...] = (),
               cache_bytes: int | None = None, **options: Any):
    """The FastAPI app serving jobs stored under ``data_dir``; ``cache_bytes`` caps its shot cache
    (None: daotai.run.cache's default; never more than a quarter of the data folder's disk)."""
    from fastapi import FastAPI, Request
    from starlette.exceptions import HTTPException

    from daotai.server.routers import jobs, models, presets, scripts, service, sweeps, uploads, videos

    check_bind(host, token)
    config = ServerConfig(data_dir=Path(data_dir).resolve(), token=token, host=host, concurrency=concurrency,
                          queue_limit=queue_limit, start_dispatcher=start_dispatcher, **options)
    store = JobStore(config.data_dir)
    dispatcher = Dispatcher(store, DispatcherConfig(concurrency=concurrency, cluster=cluster, speed=speed,
                                                    warm=tuple(warm), cache_bytes=cache_bytes))
    state = ServerState(config, store, dispatcher)

    @asynccontextmanager
    async def lifespan(_app: Any):
        store.hold_open()  # the job database stays readable if the disk fills up
        store.recover()
        trim_cache(config.data_dir, cache_bytes)  # a smaller cap (or disk) than last time takes effect now
        if config.start_dispatcher:
            dispatcher.start()
        try:
            yield
        finally:
            dispatcher.stop()
            store.release()

    app = FastAPI(title="daotai video service", version="1", lifespan=lifespan)
    app.state.store = store
    app.state.dispatcher = dispatcher
    app.state.config = config

    @app.exception_handler(DaotaiError)
    async def _daotai_error(_request: Request, exc: DaotaiError):
        return error_response(exc, config)

    @app.exception_handler(HTTPException)
    async def _http_error(_request: Request, exc: HTTPException):
        # A route's RequestRefused names the field at fault (OpenAI's param) and may carry a code
        body = error_body(str(exc.detail), param=getattr(exc, "param", None), code=getattr(exc, "code", None))
        return json_response(exc.status_code, body, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal_error(_request: Request, exc: Exception):
        full = disk_full_cause(exc)
        if full is not None:  # a write no route expected to fail: still the disk, not a bug
            return error_response(store.disk_full(writing=os.fsdecode(full.filename) if full.filename else None),
                                  config)
        # Starlette logs the exception (with its traceback) after this reply is sent.
        return json_response(500, error_body("internal error: this is a bug in daotai; the server log has the details",
                                             kind="server_error", code="internal_error"))

    for area in (service, videos, models, uploads, jobs, sweeps, presets, scripts):  # the order of /openapi.json's paths
        app.include_router(area.build_router(state))

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            document = get_openapi(title=app.title, version=app.version, routes=app.routes)
            document.setdefault("components", {}).setdefault("schemas", {}).update(script_components())
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi
    if WEB_DIR.is_dir():
        mount_console(app)
    return guarded(app, config)


def trim_cache(data_dir: Path, cache_bytes: int | None) -> list[str]:
    """Bring the data folder's shot cache under its cap (the keys of the entries removed)."""
    from daotai.run.cache import ShotCache
    from daotai.server.worker import job_settings

    settings = job_settings(data_dir, "previz", "script", None, cache_bytes=cache_bytes)
    if settings.cache is None or not os.path.isdir(settings.cache):
        return []
    return ShotCache(settings.cache, settings.cache_bytes).evict()


def error_response(exc: DaotaiError, config: ServerConfig):
    """The reply to an error of the daotai tree (status from the class, see ``daotai.errors``)."""
    if isinstance(exc, StoreError):
        return _store_error_response(exc, config)
    status = exc.http_status
    issues = tuple(getattr(exc, "issues", ()))
    if status == 422:
        first = issues[0] if issues else None
        message = str(first) if first is not None else _first_line(exc)
        valid = tuple(getattr(exc, "valid", ()))
        if valid:
            message += f"; valid options: {', '.join(valid)}"
        return json_response(422, error_body(message, code=exc.code, param=first.path if first is not None else None,
                                             issues=issue_dicts(issues)))
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return json_response(status, error_body(_first_line(exc), kind=kind, code=exc.code))


def _store_error_response(exc: StoreError, config: ServerConfig):
    """The store's refusals: unknown ids, idempotency and upload conflicts, a full queue."""
    if isinstance(exc, NotFound):
        return json_response(404, error_body(str(exc), code="not_found"))
    if isinstance(exc, IdempotencyConflict):
        return json_response(409, error_body(str(exc), code="idempotency_conflict"))
    if isinstance(exc, UploadConflict):
        return json_response(409, error_body(str(exc), code="upload_conflict", param="file"))
    if isinstance(exc, QueueFull):
        return json_response(429, error_body(str(exc), kind="rate_limit_error", code="queue_full"),
                             headers={"Retry-After": str(config.retry_after_s)})
    return json_response(400, error_body(str(exc)))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def mount_console(app: Any) -> None:
    """Serve the browser console from the package at /console/ and send / there."""
    from fastapi.responses import RedirectResponse
    from starlette.staticfiles import StaticFiles

    @app.get("/", include_in_schema=False)
    def root() -> Any:
        return RedirectResponse("/console/", status_code=307)

    app.mount("/console", StaticFiles(directory=WEB_DIR, html=True), name="console")
