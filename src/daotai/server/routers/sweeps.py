"""Sweeps: one script rendered over a grid of seeds and backend settings, as a group of jobs with one id.

``POST /v1/sweeps`` takes what ``POST /v1/jobs`` takes plus ``sweep``: lists of seeds and of
values for the backend's ``steps``, ``guidance`` and ``speed``. Every combination becomes an
ordinary job (queued, rendered, cancelled and fetched like any other); the group is a small
JSON file under ``<data>/sweeps/`` naming its jobs and what each one varies.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from daotai.errors import Issue, OptionError, ScriptError
from daotai.server.job_request import read_job_request
from daotai.server.schemas import SCRIPT_BODY, ErrorReply, error_responses, json_response
from daotai.server.state import ServerState, job_disk_bytes
from daotai.server.store import NewJob, NotFound, QueueFull

SWEEP_FIELDS = ("seed", "steps", "guidance", "speed")  # seed: the script's; the rest: backend options
MAX_VALUES = 16  # per field
MAX_JOBS = 64  # per sweep: a grid this large is already hours of a neural backend
SWEEP_ID = re.compile(r"^sweep_[0-9a-f]{24}$")


def sweep_grid(sweep: Any, backend: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the sweep's values, each checked (OptionError / ScriptError naming
    ``sweep.<field>[i]``): a list of {field: value}, in the order the fields are listed."""
    from daotai.render.registry import spec_for

    if not isinstance(sweep, dict) or not sweep:
        raise OptionError.at("sweep", sweep, f"must be an object of value lists, e.g. {{\"seed\": [1, 2, 3]}}; "
                                             f"fields: {', '.join(SWEEP_FIELDS)}", SWEEP_FIELDS)
    spec = spec_for(backend)
    axes: list[list[tuple[str, Any]]] = []
    for name, values in sweep.items():
        if name not in SWEEP_FIELDS:
            raise OptionError.at(f"sweep.{name}", values, f"is not a field a sweep varies; fields: "
                                                          f"{', '.join(SWEEP_FIELDS)}", SWEEP_FIELDS)
        if not isinstance(values, list) or not 1 <= len(values) <= MAX_VALUES or len(set(map(json.dumps, values))) != len(values):
            raise OptionError.at(f"sweep.{name}", values, f"must be a list of 1 to {MAX_VALUES} different values")
        for i, value in enumerate(values):
            if name == "seed":
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**32 - 1:
                    raise ScriptError([Issue(f"sweep.seed[{i}]", value, "must be a whole number from 0 to 4294967295")])
            elif name not in spec.options.model_fields:
                raise OptionError.at(f"sweep.{name}", values, f"backend {backend!r} has no option {name!r}; "
                                                              f"its options: {', '.join(spec.options.model_fields)}")
            else:
                try:
                    spec.validate_options({**options, name: value})
                except OptionError as exc:
                    raise OptionError.at(f"sweep.{name}[{i}]", value, str(exc).splitlines()[0]) from None
        axes.append([(name, value) for value in values])
    grid = [dict(combination) for combination in itertools.product(*axes)]
    if len(grid) > MAX_JOBS:
        raise OptionError.at("sweep", {k: len(v) for k, v in sweep.items()},
                             f"makes {len(grid)} jobs; a sweep makes at most {MAX_JOBS}")
    return grid


def build_router(state: ServerState) -> APIRouter:
    """The sweep routes of one server."""
    router = APIRouter(tags=["sweeps"])
    config, store = state.config, state.store
    errors = error_responses()
    folder = store.data_dir / "sweeps"

    def sweep_object(record: dict[str, Any]) -> dict[str, Any]:
        jobs = []
        for item in record["jobs"]:
            try:
                job = store.get(item["id"])
                status, progress = job.status, int(job.progress)
            except NotFound:
                status, progress = "deleted", 0
            jobs.append({**item, "status": status, "progress": progress, "url": f"/v1/jobs/{item['id']}"})
        done = sum(j["status"] in ("completed", "failed", "cancelled", "deleted") for j in jobs)
        return {"id": record["id"], "object": "daotai.sweep", "created_at": record["created_at"],
                "backend": record["backend"], "sweep": record["sweep"], "count": len(jobs), "finished": done,
                "jobs": jobs}

    @router.post("/v1/sweeps", status_code=202, responses={**errors, 422: {"model": ErrorReply},
                                                           507: {"model": ErrorReply}},
                 openapi_extra=SCRIPT_BODY)
    async def submit_sweep(request: Request, backend: str = Query("previz", max_length=64),
                           preset: str | None = Query(None, max_length=32)):
        """Queue one script over a grid of settings: one job per combination, one sweep id.

        The body is what `POST /v1/jobs` takes plus `sweep`, e.g. `{"seed": [1, 2, 3], "steps":
        [20, 40]}` (fields: seed, and the backend's steps, guidance, speed; up to 16 values each,
        64 jobs in all). Each value is checked like an option (422 naming `sweep.<field>[i]`)
        before anything is queued. `GET /v1/sweeps/{id}` lists the jobs with their status."""
        import time

        job_request = await read_job_request(request, backend, preset, extra=("sweep",))
        if not isinstance(job_request.body, dict):
            raise HTTPException(400, "body: must be a JSON object (a script with a `sweep` object)")
        options, sweep = job_request.options, job_request.extra["sweep"]
        grid = sweep_grid(sweep, backend, options)
        script = await job_request.script(store)
        waiting = store.counts().get("queued", 0)
        if waiting + len(grid) > config.queue_limit:
            raise QueueFull(f"queue: {waiting} jobs are waiting; {len(grid)} more would pass the limit, "
                            f"{config.queue_limit}")
        total = sum(s.duration for s in script.shots)
        disk_bytes = job_disk_bytes(script, backend, controls=True)
        await run_in_threadpool(store.check_space, disk_bytes * len(grid), f"the sweep's {len(grid)} jobs")
        jobs = []
        for variation in grid:
            varied = script.model_copy(update={"seed": variation["seed"]}) if "seed" in variation else script
            job_options = {**options, **{k: v for k, v in variation.items() if k != "seed"}}
            spec = NewJob("script", backend, f"{total:g}", f"{script.size.width}x{script.size.height}",
                          json.dumps(varied.model_dump(mode="json", by_alias=True)), prompt=script.title, preset=None,
                          options=json.dumps(job_options, sort_keys=True) if job_options else None,
                          disk_bytes=disk_bytes)
            job, _ = await run_in_threadpool(store.create, spec, None, None, config.queue_limit)
            jobs.append({"id": job.id, "variation": variation})
        record = {"id": f"sweep_{secrets.token_hex(12)}", "created_at": int(time.time()), "backend": backend,
                  "sweep": sweep, "jobs": jobs}
        from daotai.files import atomic_write_text

        atomic_write_text(folder / f"{record['id']}.json", json.dumps(record, indent=1) + "\n")
        return json_response(202, await run_in_threadpool(sweep_object, record))

    @router.get("/v1/sweeps/{sweep_id}", responses=errors)
    def sweep_status(sweep_id: str = PathParam(..., max_length=64)):
        """A sweep's jobs, what each varies, and their status."""
        path = folder / f"{sweep_id}.json"
        if SWEEP_ID.fullmatch(sweep_id) is None or not path.is_file():
            raise NotFound(f"sweep_id: {sweep_id[:80]!r} is not a sweep of this server")
        return sweep_object(json.loads(path.read_text(encoding="utf-8")))

    return router
