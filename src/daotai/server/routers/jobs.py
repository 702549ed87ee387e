"""Whole director's scripts as jobs: ``/v1/jobs`` submit, status, cancel, events and files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from fastapi import APIRouter, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from daotai.server.job_request import read_job_request
from daotai.server.live import LIVE_FOLDER, LIVE_NAME, open_live_file, read_through
from daotai.server.schemas import (
    MEDIA_TYPES,
    OUTPUT_NAME,
    SCRIPT_BODY,
    ErrorReply,
    JobReply,
    error_responses,
    job_object,
    json_response,
)
from daotai.server.state import IDEM_KEY_PATTERN, ServerState, check_idem_key, job_disk_bytes
from daotai.server.store import TERMINAL, NewJob, NotFound, body_hash


def build_router(state: ServerState) -> APIRouter:
    """The job routes of one server."""
    router = APIRouter(tags=["jobs"])
    config, store = state.config, state.store
    errors = error_responses()

    @router.post("/v1/jobs", status_code=202, response_model=JobReply, responses={**errors, 422: {"model": ErrorReply},
                                                                             507: {"model": ErrorReply}},
                 openapi_extra=SCRIPT_BODY)
    async def submit_script(request: Request, backend: str = Query("previz", max_length=64),
                            preset: str | None = Query(None, max_length=32),
                            idempotency_key: str | None = Header(None, max_length=255, pattern=IDEM_KEY_PATTERN)):
        """Queue a whole director's script; invalid scripts get 422 with every issue's JSON path.

        Reference images: each entry of `characters[].reference_images` names an image uploaded
        with `POST /v1/uploads`, written `upload:<id>` (e.g. `upload:img_0123456789abcdef0123456789abcdef`,
        the `reference` field of the upload reply). The server never reads a file path a client
        sends: a path, or an id it does not hold, is a 422 naming
        `characters[i].reference_images[j]`. The job's manifest (`files/manifest`) lists every
        reference used under `references`, with its sha256.

        Backend options: an `options` object beside the script's fields (e.g. `{"steps": 20,
        "guidance": 4}`; `daotai backends` lists each backend's) is checked before the job is
        queued: an unknown or ill-typed option is a 422 naming `options.<field>` and the valid
        options. The manifest records the validated options. An unknown `backend` is a 422 naming
        the closest backends; a body that is not application/json is a 415."""
        key = check_idem_key(idempotency_key)
        job_request = await read_job_request(request, backend, preset)
        options = job_request.options
        script = await job_request.script(store)
        total = sum(s.duration for s in script.shots)
        canonical = script.model_dump(mode="json", by_alias=True)
        request_hash = body_hash({"endpoint": "jobs", "script": canonical, "backend": backend, "preset": preset,
                                  "options": options})
        spec = NewJob("script", backend, f"{total:g}", f"{script.size.width}x{script.size.height}",
                      json.dumps(canonical), prompt=script.title, preset=None,
                      options=json.dumps(options, sort_keys=True) if options else None,
                      disk_bytes=job_disk_bytes(script, backend, controls=True))
        # a disk without room for it (and the jobs before it) is a 507 disk_full, before it is queued
        job, _created = await run_in_threadpool(store.create, spec, key, request_hash, config.queue_limit)
        return json_response(202, job_object(job, store.shots(job.id)), headers=state.poll_headers(job))

    @router.get("/v1/jobs/{job_id}", response_model=JobReply, responses=errors)
    def job_status(job_id: str = PathParam(..., max_length=64)):
        """Status, per-shot progress and deliverables of any job."""
        job = state.visible(job_id)
        return json_response(200, job_object(job, store.shots(job_id)), headers=state.poll_headers(job))

    @router.delete("/v1/jobs/{job_id}", response_model=JobReply, responses=errors)
    def cancel_job(job_id: str = PathParam(..., max_length=64)):
        """Cancel a queued or running job (its files stay until it is deleted)."""
        state.visible(job_id)
        job = store.request_cancel(job_id)
        return job_object(job, store.shots(job_id))

    @router.get("/v1/jobs/{job_id}/events", responses={200: {"content": {"text/event-stream": {}},
                "description": "server-sent events"}, **errors})
    async def job_events(job_id: str = PathParam(..., max_length=64),
                         last_event_id: str | None = Header(None, max_length=20)):
        """Server-sent events of a job (status, progress, notices, outputs) until it ends."""
        await run_in_threadpool(state.visible, job_id)
        start = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0

        async def stream():
            seq = start
            idle = 0.0
            while True:
                # The job's status is read before its events: the terminal status and its last event
                # are committed together, so a job seen ended here has every event in the read below.
                job = await run_in_threadpool(store.get, job_id, True)
                events = await run_in_threadpool(store.events, job_id, seq)
                for event in events:
                    seq = event["seq"]
                    yield f"id: {seq}\nevent: {event['kind']}\ndata: {json.dumps(event['data'])}\n\n"
                if not events:
                    if job.status in TERMINAL:
                        return
                    idle += 0.2
                    if idle >= 10.0:  # a comment line keeps proxies from closing a quiet stream
                        idle = 0.0
                        yield ": keep-alive\n\n"
                    await asyncio.sleep(0.2)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    @router.get("/v1/jobs/{job_id}/files/{name}", responses={200: {"content": {"application/octet-stream": {}},
                "description": "the file"}, **errors})
    def job_file(job_id: str = PathParam(..., max_length=64),
                 name: str = PathParam(..., max_length=100, pattern=OUTPUT_NAME)):
        """One deliverable by name: video, thumbnail, spritesheet, contact_sheet, manifest, qc, timeline,
        timeline_xml, timeline_edl, timeline_audio_edl.<n>, plan, control_index, shot.<id>, depth.<id>,
        depth_preview.<id>, mask.<id>, camera_pose.<id>, camera_json.<id>, camera_usd.<id>,
        sequence_camera_usd, srt, vtt, boards, board_page.<nn> (every name `daotai.plan.layout` knows;
        the job's `outputs` list those it has)."""
        job = state.visible(job_id)
        if job.status != "completed":
            raise HTTPException(409, f"job_id: {job_id!r} is {job.status}, not completed")
        path = state.output_path(job, name)
        if path is None:
            raise NotFound(f"name: {name!r} is not a deliverable of {job_id!r}")
        return FileResponse(path, media_type=MEDIA_TYPES.get(path.suffix, "application/octet-stream"),
                            filename=path.name)

    @router.get("/v1/jobs/{job_id}/live/{name}", responses={200: {"content": {"image/jpeg": {}, "video/mp4": {}},
                "description": "the file as it is now"}, **errors})
    def job_live(job_id: str = PathParam(..., max_length=64),
                 name: str = PathParam(..., max_length=70, pattern=LIVE_NAME)):
        """While a job runs: ``preview``, a small JPEG of the frame being rendered (the job's ``preview``
        events say when it changed), or ``shot.<id>``, a shot's clip as soon as it is encoded (its
        ``output`` event carries ``live``). Gone once the job has ended: its deliverables take over."""
        state.visible(job_id)
        opened = open_live_file(store.job_dir(job_id) / LIVE_FOLDER, name)
        if opened is None:
            raise NotFound(f"name: {name!r} has nothing to show for {job_id!r} now (only while it runs, once made)")
        handle, size = opened
        return StreamingResponse(read_through(handle), headers={"Cache-Control": "no-store", "Content-Length": str(size)},
                                 media_type=MEDIA_TYPES.get(Path(handle.name).suffix, "application/octet-stream"))

    return router
