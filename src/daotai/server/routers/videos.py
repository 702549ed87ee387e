"""The OpenAI Videos API: ``/v1/videos`` create, list, retrieve, delete and content.

A request stands for a one-shot script (``video_script``: the prompt read for film language,
the reading kept as the job's first event, ``prompt_read``); the real ``openai`` client works
against these routes. ``model`` names a daotai render backend.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from daotai.errors import ScriptError
from daotai.server.images import decode_upload
from daotai.server.schemas import (
    JOB_ID_PATTERN,
    MEDIA_TYPES,
    ErrorReply,
    Video,
    VideoDeleted,
    VideoList,
    error_responses,
    json_response,
    video_body,
    video_object,
)
from daotai.server.state import IDEM_KEY_PATTERN, ServerState, check_idem_key, job_disk_bytes
from daotai.server.store import TERMINAL, Job, NewJob, NotFound, body_hash, valid_job_id

if TYPE_CHECKING:
    from daotai.script.prompt_reader import PromptReading


class RequestRefused(HTTPException):
    """A request refused before any work, naming the field at fault (the OpenAI error's ``param``)
    and, where a client may act on it by code, a machine-readable ``code``."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(status, message)
        self.param = param
        self.code = code


def video_script(prompt: str, seconds: float, size: str, reference: bool) -> dict[str, Any]:
    """The one-shot director's script that an OpenAI-style request stands for: the prompt read
    for film language (framing, angle, camera move, time of day, setting, subject; see
    :mod:`daotai.script.prompt_reader`), the clip's length from ``seconds``."""
    from daotai.script.prompt_reader import read_prompt

    return read_prompt(prompt).script(seconds, size, reference)


def parse_seconds(value: Any, limit: float) -> float:
    """Clip length from the `seconds` field (a string upstream); raises ValueError."""
    try:
        seconds = float(str(value).strip())
    except ValueError:
        raise ValueError(f"seconds: {value!r} must be a number of seconds") from None
    if not math.isfinite(seconds) or not 0 < seconds <= limit:
        raise ValueError(f"seconds: {value!r} must be more than 0 and at most {limit:g}")
    return seconds


def build_router(state: ServerState) -> APIRouter:
    """The OpenAI Videos routes of one server."""
    router = APIRouter(tags=["videos"])
    errors = error_responses()
    _add_create_route(router, state, errors)  # registered first: the order of /openapi.json's operations
    _add_video_routes(router, state, errors)
    return router


def _add_create_route(router: APIRouter, state: ServerState, errors: dict[int | str, Any]) -> None:
    """``POST /v1/videos``: a prompt (and maybe an image) becomes a queued one-shot job."""
    from daotai.render.registry import backend_names

    config = state.config

    @router.post("/v1/videos", response_model=Video, responses={**errors, 507: {"model": ErrorReply}},
                 openapi_extra=video_body(backend_names(), config.max_seconds))
    async def create_video(request: Request,
                           idempotency_key: str | None = Header(None, max_length=255, pattern=IDEM_KEY_PATTERN)):
        """Queue a one-shot video from a prompt (OpenAI Videos API shape; `model` is a daotai backend).

        The prompt is read for film language, in English or Chinese, with any backend: framing
        ("close-up", "近景"), angle ("low angle", "仰拍"), camera move with direction, amount and
        speed ("slow push in", "pan left 20°", "推镜头"), time of day ("night", "夜"), weather,
        setting and subject become the shot's fields; `seconds` its length. The job's first
        event, `prompt_read` (`GET /v1/jobs/{id}/events`), says what was read from which words."""
        key = check_idem_key(idempotency_key)
        data, upload = await _request_fields(request, config.max_upload_bytes)
        prompt, model, seconds, size = _checked_fields(data, config.max_seconds)
        from daotai.script.prompt_reader import read_prompt

        reading = read_prompt(prompt)  # film language in the prompt becomes the shot's fields
        script = reading.script(seconds, size, reference=upload is not None)
        checked = _validated(script)
        reference = None
        if upload is not None:
            try:
                reference = await run_in_threadpool(
                    decode_upload, upload, config.data_dir / "staging", config.max_upload_pixels
                )
            except ValueError as exc:
                raise HTTPException(400, str(exc)) from None
        request_hash = body_hash({
            "endpoint": "videos", "prompt": prompt, "model": model, "seconds": str(data.get("seconds", "4")),
            "size": size, "reference": hashlib.sha256(upload).hexdigest() if upload is not None else None,
        })
        spec = NewJob("video", model, f"{seconds:g}", size, json.dumps(script), prompt=prompt,
                      disk_bytes=job_disk_bytes(checked, model, controls=False))
        job = await _create_job(state, spec, key, request_hash, reading, reference)
        return json_response(200, video_object(job), headers=state.poll_headers(job))


async def _request_fields(request: Request, max_upload_bytes: int) -> tuple[dict[str, Any], bytes | None]:
    """A create request's fields and its ``input_reference`` image (None without one): a JSON object,
    or multipart form data where the image is the one file part."""
    from daotai.script.load import parse_document

    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    upload: bytes | None = None
    if kind == "application/json":
        data = parse_document(await request.body(), "json", source="body")
        if not isinstance(data, dict):
            raise HTTPException(400, "body: must be a JSON object")
        if data.get("input_reference") is not None:
            raise HTTPException(400, "input_reference: send the image as a multipart file upload")
        return data, upload
    try:
        form = await request.form(max_files=1, max_fields=16, max_part_size=max_upload_bytes)
    except Exception as exc:  # noqa: BLE001  (malformed multipart of any kind is the client's problem)
        raise HTTPException(400, f"body: not valid multipart/form-data ({type(exc).__name__})") from None
    data = {}
    for name, value in form.multi_items():
        if name == "input_reference" and not isinstance(value, str):
            upload = await value.read(max_upload_bytes + 1)
            if len(upload) > max_upload_bytes:
                raise HTTPException(413, f"input_reference: larger than {max_upload_bytes} bytes")
        elif isinstance(value, str):
            data[name] = value
    return data, upload


def _checked_fields(data: dict[str, Any], max_seconds: float) -> tuple[str, str, float, str]:
    """The request's prompt, model, seconds and size, with OpenAI's defaults; a wrong one is refused
    naming its field (the error's ``param``)."""
    from daotai.render.registry import backend_names, unknown_backend

    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > 4000:
        raise RequestRefused(400, "prompt: required, a non-empty string of at most 4000 characters", "prompt")
    model = data.get("model") or "previz"
    if not isinstance(model, str) or model not in backend_names():
        # OpenAI answers a model it does not serve with 400 invalid_request_error at param "model"
        # (the official client raises BadRequestError); the message names the nearest backends
        raise RequestRefused(400, str(unknown_backend(model, "model").issues[0]), "model", "model_not_found")
    try:
        seconds = parse_seconds(data.get("seconds", "4"), max_seconds)
    except ValueError as exc:
        raise RequestRefused(400, str(exc), "seconds") from None
    size = data.get("size") or "1280x720"
    if not isinstance(size, str) or len(size) > 16:
        raise RequestRefused(400, "size: must be 'WIDTHxHEIGHT', e.g. '1280x720'", "size")
    return prompt, model, seconds, size


def _validated(script: dict[str, Any]) -> Any:
    """The request's script checked as any script is; its issues are the 400's message."""
    from daotai.script.load import validate_script

    try:
        return validate_script(script, source="request")
    except ScriptError as exc:
        raise HTTPException(400, "; ".join(str(i) for i in exc.issues)[:1000]) from None


async def _create_job(state: ServerState, spec: NewJob, key: str | None, request_hash: str,
                      reading: PromptReading, reference: Path | None) -> Job:
    """Store the job (or find the one an idempotency key already made). A new job gets its
    ``prompt_read`` event and keeps the decoded reference image; otherwise the image is dropped."""
    store = state.store
    created = False
    try:
        job, created = await run_in_threadpool(store.create, spec, key, request_hash, state.config.queue_limit)
        if created:  # what the prompt was read as, per field with the words it came from
            await run_in_threadpool(store.add_event, job.id, "prompt_read", reading.as_record())
        if reference is not None and created:
            folder = store.job_dir(job.id)
            folder.mkdir(parents=True, exist_ok=True)
            reference.replace(folder / "reference.png")
    finally:
        if reference is not None and not created:
            reference.unlink(missing_ok=True)  # a replayed or refused request keeps no upload
    return job


def _add_video_routes(router: APIRouter, state: ServerState, errors: dict[int | str, Any]) -> None:
    """List, retrieve, delete and download videos: the routes on jobs that already exist."""
    store = state.store

    @router.get("/v1/videos", response_model=VideoList, responses=errors)
    def list_videos(after: str | None = Query(None, max_length=64, pattern=JOB_ID_PATTERN),
                    limit: int = Query(20, ge=1, le=100), order: Literal["asc", "desc"] = Query("desc")):
        """A page of videos; continue with `after` = the previous page's `last_id`."""
        if after is not None and not valid_job_id(after):
            raise HTTPException(400, f"after: {after!r} is not a valid id")
        jobs, more = store.list(after=after, limit=limit, order=order)
        data = [video_object(j) for j in jobs]
        return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": more}

    @router.get("/v1/videos/{video_id}", response_model=Video, responses=errors)
    def retrieve_video(video_id: str = PathParam(..., max_length=64)):
        """One video job (send again after `openai-poll-after-ms` while it is active)."""
        job = state.visible(video_id)
        return json_response(200, video_object(job), headers=state.poll_headers(job))

    @router.delete("/v1/videos/{video_id}", response_model=VideoDeleted, responses=errors)
    def delete_video(video_id: str = PathParam(..., max_length=64)):
        """Delete a video; a queued or running job is cancelled first."""
        state.visible(video_id)
        job = store.request_cancel(video_id, delete=True)
        if job.status in TERMINAL:
            shutil.rmtree(store.job_dir(video_id) / "out", ignore_errors=True)
        return {"id": video_id, "object": "video.deleted", "deleted": True}

    @router.get("/v1/videos/{video_id}/content", responses={
        200: {"content": {"video/mp4": {}, "image/jpeg": {}}, "description": "the file"}, **errors})
    def video_content(video_id: str = PathParam(..., max_length=64),
                      variant: Literal["video", "thumbnail", "spritesheet"] = Query("video")):
        """The finished video, its middle-frame thumbnail or a spritesheet of frames."""
        job = state.visible(video_id)
        if job.status != "completed":
            raise HTTPException(409, f"video_id: {video_id!r} is {job.status}, not completed")
        path = state.output_path(job, variant)
        if path is None:
            raise NotFound(f"variant: {variant!r} is not available for {video_id!r}")
        return FileResponse(path, media_type=MEDIA_TYPES.get(path.suffix, "application/octet-stream"))
