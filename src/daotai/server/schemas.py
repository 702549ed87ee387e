"""What the service sends and accepts, in one place: reply models, request-body schemas, JSON shapes.

The pydantic models make ``/openapi.json`` describe the replies; the request bodies are
described by hand (``video_body``, ``upload_body``, ``SCRIPT_BODY``) because the routes read
them from the raw request (JSON or multipart, checked by our own rules). ``error_body`` is the
OpenAI error shape every refusal uses.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from daotai.errors import Issue
from daotai.server.footage import VIDEO_TYPES
from daotai.server.images import IMAGE_TYPES, SOUND_TYPES
from daotai.server.store import Job, Upload

OUTPUT_NAME = r"^[a-z_]{1,32}(\.[A-Za-z0-9_-]{1,64})?$"
JOB_ID_PATTERN = r"^video_[0-9a-f]{32}$"
SECONDS_PATTERN = r"^(?:[1-9]|[1-5][0-9]|60)$"
_EVEN_WIDTH = r"(?:6[468]|[7-9][02468]|[1-9][0-9][02468]|[1-6][0-9]{2}[02468]|7[0-5][0-9][02468]|76[0-7][02468]|7680)"
_EVEN_HEIGHT = r"(?:6[468]|[7-9][02468]|[1-9][0-9][02468]|[1-3][0-9]{2}[02468]|4[0-2][0-9][02468]|43[01][02468]|4320)"
SIZE_PATTERN = f"^{_EVEN_WIDTH}x{_EVEN_HEIGHT}$"
# The media type of every deliverable the render layout names, by suffix (tests/test_layout_outputs.py
# checks each kind has one): FCP 7 XML, a CMX 3600 EDL and the CameraCtrl pose file are text,
# a USD layer in its text form is model/vnd.usda.
MEDIA_TYPES = {
    ".mp4": "video/mp4", ".mov": "video/quicktime", ".mkv": "video/x-matroska", ".jpg": "image/jpeg",
    ".png": "image/png", ".webp": "image/webp", ".json": "application/json", ".otio": "application/json",
    ".srt": "application/x-subrip", ".vtt": "text/vtt", ".pdf": "application/pdf", ".xml": "application/xml",
    ".edl": "text/plain", ".txt": "text/plain", ".usda": "model/vnd.usda",
}
UPLOAD_MEDIA_TYPES = tuple(sorted(set(IMAGE_TYPES.values()) | set(SOUND_TYPES.values()) | set(VIDEO_TYPES.values())))


# ------------------------------------------------------------------ reply models


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorReply(BaseModel):
    error: ErrorInfo
    issues: list[dict[str, str]] | None = None


class VideoError(BaseModel):
    code: str
    message: str


class Video(BaseModel):
    id: str
    object: Literal["video"]
    model: str
    status: Literal["queued", "in_progress", "completed", "failed"]
    progress: int
    created_at: int
    completed_at: int | None
    expires_at: int | None
    prompt: str | None
    seconds: str
    size: str
    error: VideoError | None
    remixed_from_video_id: str | None


class VideoList(BaseModel):
    object: Literal["list"]
    data: list[Video]
    first_id: str | None
    last_id: str | None
    has_more: bool


class VideoDeleted(BaseModel):
    id: str
    object: Literal["video.deleted"]
    deleted: bool


class ShotStatus(BaseModel):
    shot_id: str
    frames: int
    done: int
    status: str


class OutputInfo(BaseModel):
    name: str
    kind: str  # the deliverable kind (daotai.plan.layout): shot, depth, sequence, qc, …
    shot_id: str | None  # the shot a per-shot file belongs to
    bytes: int
    sha256: str
    url: str


class JobError(BaseModel):
    code: str | None
    message: str | None


class JobReply(BaseModel):
    id: str
    object: Literal["daotai.job"]
    kind: str
    status: Literal["queued", "in_progress", "completed", "failed", "cancelled"]
    progress: int
    model: str
    created_at: int
    completed_at: int | None
    attempts: int
    error: JobError | None
    shots: list[ShotStatus]
    outputs: list[OutputInfo]


class WarmWorker(BaseModel):
    spec: str  # BACKEND[:MODEL] as given to `daotai serve --warm`
    pid: int
    ready: bool  # the backend is loaded: a job starts without loading it
    seconds: float | None = None  # how long the warm-up took
    error: str | None = None  # why the warm-up failed (the worker still serves jobs)


class Health(BaseModel):
    status: Literal["ok"]
    queued: int
    in_progress: int
    workers: int
    warm: list[WarmWorker] = []


class UploadReply(BaseModel):
    id: str
    object: Literal["daotai.upload"]
    sha256: str
    width: int
    height: int
    content_type: Literal["image/png", "image/jpeg", "image/webp"]
    bytes: int
    created_at: int
    reference: str
    url: str


def error_responses(*extra: int) -> dict[int | str, dict[str, Any]]:
    """The refusals every route may answer (400 … 429), plus ``extra`` statuses, for ``responses=``."""
    return {code: {"model": ErrorReply} for code in (400, 401, 403, 404, 409, 413, 415, 429, *extra)}


# ------------------------------------------------------------------ request bodies (OpenAPI only)


SCRIPT_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "$ref": "#/components/schemas/DaotaiScript"}}}}}


def video_body(backends: list[str], max_seconds: float) -> dict[str, Any]:
    """``POST /v1/videos``: the OpenAI fields, as JSON or as multipart with an ``input_reference`` image."""
    fields = {
        "prompt": {"type": "string", "minLength": 1, "maxLength": 4000, "pattern": r"\S",
                   "description": "what happens; becomes the shot's action and prompt"},
        "model": {"type": "string", "enum": backends, "default": "previz",
                  "description": "a daotai render backend"},
        "seconds": {"type": "string", "pattern": SECONDS_PATTERN, "default": "4",
                    "description": f"clip length in whole seconds, 1 to {max_seconds:g}"},
        "size": {"type": "string", "pattern": SIZE_PATTERN, "default": "1280x720",
                 "description": "WIDTHxHEIGHT in pixels, both even (64..7680 x 64..4320)"},
    }
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"type": "object", "required": ["prompt"], "properties": fields}},
                "multipart/form-data": {"schema": {
                    "type": "object", "required": ["prompt"],
                    "properties": {**fields, "input_reference": {
                        "type": "string", "format": "binary",
                        "description": "PNG, JPEG or WebP image of the subject (at most 10 MB, 40 MP)"}},
                }},
            },
        }
    }


def upload_body(max_bytes: int, max_pixels: int) -> dict[str, Any]:
    """``POST /v1/uploads``: one multipart part named ``file``."""
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["file"], "properties": {"file": {
            "type": "string", "format": "binary",
            "description": f"one PNG, JPEG or WebP image (at most {max_bytes} bytes and "
                           f"{max_pixels} pixels); its type is read from its bytes"}},
    }}}}}


def script_components() -> dict[str, Any]:
    """The director's script JSON Schema as OpenAPI components (DaotaiScript + its $defs)."""
    from daotai.script.jsonschema import script_json_schema

    schema = script_json_schema()
    defs = schema.pop("$defs", {})
    for key in ("$schema", "$id"):
        schema.pop(key, None)

    def relink(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: ("#/components/schemas/DaotaiScript_" + v.rsplit("/", 1)[-1]
                        if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/") else relink(v))
                    for k, v in node.items()}
        if isinstance(node, list):
            return [relink(v) for v in node]
        return node

    components = {f"DaotaiScript_{name}": relink(body) for name, body in defs.items()}
    components["DaotaiScript"] = relink(schema)
    return components


# ------------------------------------------------------------------ JSON shapes


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None,
               param: str | None = None, **extra: Any) -> dict[str, Any]:
    """The OpenAI error shape: {"error": {message, type, param, code}} (+ extra keys)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}, **extra}


def json_response(status: int, body: Any, headers: dict[str, str] | None = None):
    """A JSON reply with a status and headers."""
    from fastapi.responses import JSONResponse

    return JSONResponse(body, status_code=status, headers=headers)


def issue_dicts(issues: tuple[Issue, ...] | list[Issue]) -> list[dict[str, str]]:
    """Issues as `daotai validate --json` prints them."""
    return [{"path": i.path, "value": repr(i.value), "rule": i.rule} for i in issues]


def video_object(job: Job) -> dict[str, Any]:
    """A job in the OpenAI `video` object shape."""
    error = None
    if job.status in ("failed", "cancelled"):
        error = {"code": job.error_code or job.status, "message": job.error_message or job.status}
    return {
        "id": job.id,
        "object": "video",
        "model": job.model,
        # OpenAI has no 'cancelled' status: a cancelled job reads as failed with code 'cancelled'.
        "status": "failed" if job.status == "cancelled" else job.status,
        "progress": int(job.progress),
        "created_at": int(job.created_at),
        "completed_at": int(job.completed_at) if job.completed_at else None,
        "expires_at": None,
        "prompt": job.prompt,
        "seconds": job.seconds,
        "size": job.size,
        "error": error,
        "remixed_from_video_id": None,
    }


def job_object(job: Job, shots: list[dict[str, Any]]) -> dict[str, Any]:
    """A job in the native shape: status, per-shot progress and deliverables."""
    from daotai.plan.layout import parse_public_name

    outputs = [
        {"name": o.name, "kind": kind, "shot_id": shot_id, "bytes": o.bytes, "sha256": o.sha256,
         "url": f"/v1/jobs/{job.id}/files/{o.name}"}
        for o in sorted(job.outputs.values(), key=lambda o: o.name)
        for kind, shot_id in (parse_public_name(o.name),)
    ]
    return {
        "id": job.id,
        "object": "daotai.job",
        "kind": job.kind,
        "status": job.status,
        "progress": int(job.progress),
        "model": job.model,
        "created_at": int(job.created_at),
        "completed_at": int(job.completed_at) if job.completed_at else None,
        "attempts": job.attempts,
        "error": {"code": job.error_code, "message": job.error_message} if job.error_code else None,
        "shots": shots,
        "outputs": outputs,
    }


def upload_object(upload: Upload) -> dict[str, Any]:
    """A stored reference image as the API shows it."""
    return {
        "id": upload.id, "object": "daotai.upload", "sha256": upload.sha256, "width": upload.width,
        "height": upload.height, "content_type": upload.content_type, "bytes": upload.bytes,
        "created_at": int(upload.created_at), "reference": f"upload:{upload.id}",
        "url": f"/v1/uploads/{upload.id}/content",
    }
