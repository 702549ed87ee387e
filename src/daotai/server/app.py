"""The local video service: an OpenAI Videos-shaped API plus native script endpoints.

``create_app(data_dir, token)`` builds the FastAPI app. Rendering never happens in this
process: a dispatcher thread hands jobs to worker processes (see ``worker.py``) and every
reply is read from the SQLite job store, so the server keeps answering while a worker
crashes. Clients only ever name jobs and uploaded images by opaque ids and deliverables by
fixed names; file paths come from the store, never from a request.
"""


import asyncio
import hashlib
import hmac
import json
import math
import re
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from daotai.errors import Issue, ScriptError
from daotai.server.store import (
    TERMINAL,
    IdempotencyConflict,
    Job,
    JobStore,
    NewJob,
    NotFound,
    QueueFull,
    StoreError,
    Upload,
    UploadConflict,
    body_hash,
    valid_job_id,
    valid_upload_id,
)
from daotai.server.references import reference_issues
from daotai.server.worker import Dispatcher, DispatcherConfig

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
IMAGE_MAGIC = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG", b"RIFF": "WEBP"}
OUTPUT_NAME = r"^[a-z_]{1,32}(\.[A-Za-z0-9_-]{1,64})?$"
JOB_ID_PATTERN = r"^video_[0-9a-f]{32}$"
IDEM_KEY_PATTERN = r"^[!-~]{1,255}$"  # visible ASCII: safe in a header and in logs
MAX_PLAN_PREVIEW_FRAMES = 20_000  # a preview diagram must stay quick; real runs have no such cap
SECONDS_PATTERN = r"^(?:[1-9]|[1-5][0-9]|60)$"
_EVEN_WIDTH = r"(?:6[468]|[7-9][02468]|[1-9][0-9][02468]|[1-6][0-9]{2}[02468]|7[0-5][0-9][02468]|76[0-7][02468]|7680)"
_EVEN_HEIGHT = r"(?:6[468]|[7-9][02468]|[1-9][0-9][02468]|[1-3][0-9]{2}[02468]|4[0-2][0-9][02468]|43[01][02468]|4320)"
SIZE_PATTERN = f"^{_EVEN_WIDTH}x{_EVEN_HEIGHT}$"
MEDIA_TYPES = {
    ".mp4": "video/mp4", ".mov": "video/quicktime", ".mkv": "video/x-matroska", ".jpg": "image/jpeg",
    ".png": "image/png", ".webp": "image/webp", ".json": "application/json", ".otio": "application/json",
}
# Pillow format → media type; phone cameras write MPO, a JPEG with extra pictures appended.
IMAGE_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg", "WEBP": "image/webp"}


@dataclass(frozen=True)
class ServerConfig:
    """Everything that shapes one server instance."""

    data_dir: Path
    token: str | None = None
    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    concurrency: int = 1
    queue_limit: int = 100
    max_body_bytes: int = 16 * 1024 * 1024
    max_upload_bytes: int = 10 * 1024 * 1024
    max_upload_pixels: int = 40_000_000  # 40 MP: a large photo, far below a decompression bomb
    max_seconds: float = 60.0
    poll_after_ms: int = 500
    retry_after_s: int = 5
    start_dispatcher: bool = True

    def host_allowed(self, hostname: str) -> bool:
        """Whether a Host header names this server (DNS-rebinding guard)."""
        return hostname in LOCAL_HOSTS or hostname == self.host or hostname in self.allowed_hosts


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token."""
    from daotai.errors import DaotaiError

    if host not in LOCAL_HOSTS and not token:
        raise DaotaiError(
            f"--host: {host!r} is not a loopback address; serving beyond this machine needs --token "
            "(or DAOTAI_TOKEN) so that every request must carry it"
        )


# ------------------------------------------------------------------ errors


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None,
               param: str | None = None, **extra: Any) -> dict[str, Any]:
    """The OpenAI error shape: {"error": {message, type, param, code}} (+ extra keys)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}, **extra}


def _json_response(status: int, body: Any, headers: dict[str, str] | None = None):
    from fastapi.responses import JSONResponse

    return JSONResponse(body, status_code=status, headers=headers)


def issue_dicts(issues: tuple[Issue, ...] | list[Issue]) -> list[dict[str, str]]:
    """Issues as `daotai validate --json` prints them."""
    return [{"path": i.path, "value": repr(i.value), "rule": i.rule} for i in issues]


# ------------------------------------------------------------------ request guard (ASGI)


class Guard:
    """Token, Host/Origin/Sec-Fetch-Site, content type and body size checks before any route."""

    def __init__(self, app: Any, config: ServerConfig):
        self.app = app
        self.config = config

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        problem = self._check(scope["method"], headers)
        if problem is not None:
            status, message, code = problem
            await _json_response(status, error_body(message, code=code))(scope, receive, send)
            return
        if scope["method"] in ("POST", "PUT", "PATCH"):
            body = bytearray()
            while True:  # read up to the cap, then stop: nothing past it is ever parsed
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                if len(body) > self.config.max_body_bytes:
                    await _json_response(413, error_body(
                        f"body: more than {self.config.max_body_bytes} bytes", code="body_too_large"
                    ))(scope, receive, send)
                    return
                if not message.get("more_body"):
                    break
            replay = [{"type": "http.request", "body": bytes(body), "more_body": False}]

            async def receive_again() -> dict:
                return replay.pop() if replay else await receive()

            await self.app(scope, receive_again, send)
            return
        await self.app(scope, receive, send)

    def _check(self, method: str, headers: dict[str, str]) -> tuple[int, str, str] | None:
        token = self.config.token
        if token:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return 401, "Authorization: a valid 'Bearer <token>' header is required", "unauthorized"
        host = headers.get("host", "")
        try:
            hostname = urlsplit("//" + host).hostname or ""
        except ValueError:  # e.g. an unclosed IPv6 bracket
            hostname = ""
        if not self.config.host_allowed(hostname):
            return 403, f"Host: {host!r} is not a name of this server", "host_not_allowed"
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                return 403, f"Sec-Fetch-Site: {site!r} requests are refused (cross-site)", "cross_site"
            origin = headers.get("origin")
            if origin is not None and _netloc(origin) != host:
                return 403, f"Origin: {origin!r} does not match Host {host!r}", "cross_origin"
        if method in ("POST", "PUT", "PATCH"):
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind not in ("application/json", "multipart/form-data"):
                return 415, f"Content-Type: {kind or 'none'!r} is not accepted; send application/json or multipart/form-data", "unsupported_media_type"
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.config.max_body_bytes):
                return 413, f"Content-Length: {length} exceeds the {self.config.max_body_bytes} byte limit", "body_too_large"
        return None


def _netloc(url: str) -> str | None:
    """host[:port] of a URL, or None when it does not parse."""
    try:
        return urlsplit(url).netloc
    except ValueError:
        return None


# ------------------------------------------------------------------ uploads


# The child prints "WIDTH HEIGHT FORMAT"; exit code 3 means more pixels than allowed.
_DECODE_CHILD = r"""
import resource, sys, warnings
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
resource.setrlimit(resource.RLIMIT_CPU, (10, 10))
from PIL import Image
src, dst, max_pixels = sys.argv[1], sys.argv[2], int(sys.argv[3])
Image.MAX_IMAGE_PIXELS = max_pixels
warnings.simplefilter("error", Image.DecompressionBombWarning)
try:
    im = Image.open(src, formats=["PNG", "JPEG", "WEBP"])
except (Image.DecompressionBombError, Image.DecompressionBombWarning):
    sys.exit(3)
with im:
    w, h = im.size
    if w * h > max_pixels or w < 1 or h < 1:
        sys.exit(3)
    im.load()
    if dst != "-":
        im.convert("RGB").save(dst, format="PNG")
    print(w, h, im.format)
"""


class ImageRejected(ValueError):
    """An uploaded image that is refused: ``status`` and ``code`` say how to answer."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_image"):
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class CheckedImage:
    """What decoding an upload found (and the re-encoded PNG, when one was asked for)."""

    width: int
    height: int
    content_type: str
    png: Path | None


def check_image(data: bytes, staging: Path, max_pixels: int, field: str = "input_reference",
                keep_png: bool = True, timeout_s: float = 20.0) -> CheckedImage:
    """Decode uploaded bytes fully in a memory- and CPU-limited subprocess; raises ImageRejected.

    The type comes from the bytes (magic numbers, then the decoder), never from the client's
    file name or part header. With ``keep_png`` the pixels are re-encoded as an RGB PNG.
    """
    if not data:
        raise ImageRejected(f"{field}: the file is empty", code="empty_file")
    if not any(data.startswith(magic) for magic in IMAGE_MAGIC) or (data.startswith(b"RIFF") and data[8:12] != b"WEBP"):
        raise ImageRejected(f"{field}: must be a PNG, JPEG or WebP image", code="unsupported_image_type")
    staging.mkdir(parents=True, exist_ok=True)
    import secrets

    stem = secrets.token_hex(8)
    src, dst = staging / f"{stem}.upload", staging / f"{stem}.png"
    src.write_bytes(data)
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _DECODE_CHILD, str(src), str(dst) if keep_png else "-", str(max_pixels)],
            capture_output=True, timeout=timeout_s, check=False,
        )
    except subprocess.TimeoutExpired:
        dst.unlink(missing_ok=True)
        raise ImageRejected(f"{field}: decoding took longer than {timeout_s:g} s") from None
    finally:
        src.unlink(missing_ok=True)
    parts = done.stdout.decode("ascii", "replace").split()
    if done.returncode != 0 or len(parts) != 3 or parts[2] not in IMAGE_TYPES or (keep_png and not dst.is_file()):
        dst.unlink(missing_ok=True)
        if done.returncode == 3:
            raise ImageRejected(f"{field}: the image has more than {max_pixels} pixels", 413, "image_too_large")
        raise ImageRejected(f"{field}: not a decodable PNG/JPEG/WebP image of at most {max_pixels} pixels")
    return CheckedImage(int(parts[0]), int(parts[1]), IMAGE_TYPES[parts[2]], dst if keep_png else None)


def decode_upload(data: bytes, staging: Path, max_pixels: int, timeout_s: float = 20.0) -> Path:
    """Decode an uploaded image in a limited subprocess and re-encode it as PNG; raises ValueError."""
    png = check_image(data, staging, max_pixels, timeout_s=timeout_s).png
    assert png is not None
    return png


def upload_object(upload: Upload) -> dict[str, Any]:
    """A stored reference image as the API shows it."""
    return {
        "id": upload.id, "object": "daotai.upload", "sha256": upload.sha256, "width": upload.width,
        "height": upload.height, "content_type": upload.content_type, "bytes": upload.bytes,
        "created_at": int(upload.created_at), "reference": f"upload:{upload.id}",
        "url": f"/v1/uploads/{upload.id}/content",
    }


# ------------------------------------------------------------------ request → job


def video_script(prompt: str, seconds: float, size: str, reference: bool) -> dict[str, Any]:
    """The one-shot director's script that an OpenAI-style request stands for."""
    subject: dict[str, Any] = {"id": "subject", "appearance": prompt[:2000]}
    if reference:
        subject["reference_images"] = ["reference.png"]
    return {
        "title": prompt[:200] or "video",
        "size": size,
        "characters": [subject],
        "shots": [{"shot_id": "s01", "duration": seconds, "action": prompt, "prompt": prompt}],
    }


def parse_seconds(value: Any, limit: float) -> float:
    """Clip length from the `seconds` field (a string upstream); raises ValueError."""
    try:
        seconds = float(str(value).strip())
    except ValueError:
        raise ValueError(f"seconds: {value!r} must be a number of seconds") from None
    if not math.isfinite(seconds) or not 0 < seconds <= limit:
        raise ValueError(f"seconds: {value!r} must be more than 0 and at most {limit:g}")
    return seconds


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
    outputs = [
        {"name": o.name, "bytes": o.bytes, "sha256": o.sha256, "url": f"/v1/jobs/{job.id}/files/{o.name}"}
        for o in sorted(job.outputs.values(), key=lambda o: o.name)
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


def output_path(store: JobStore, job: Job, name: str) -> Path | None:
    """The file of a named deliverable, from the store; None unless it is a regular file inside out/."""
    item = job.outputs.get(name)
    if item is None or job.status != "completed":
        return None
    root = (store.job_dir(job.id) / "out").resolve()
    path = root / item.relpath
    if path.is_symlink() or not path.is_file():
        return None
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        return None
    return resolved


# ------------------------------------------------------------------ the app


def create_app(data_dir: str | Path, token: str | None = None, *, host: str = "127.0.0.1",
               concurrency: int = 1, queue_limit: int = 100, start_dispatcher: bool = True,
               cluster: str | None = None, speed: str | None = None, **options: Any):
    """The FastAPI app serving jobs stored under ``data_dir``."""
    from fastapi import FastAPI, Header, Path as PathParam, Query, Request
    from fastapi.responses import FileResponse, StreamingResponse
    from pydantic import BaseModel
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException

    check_bind(host, token)
    config = ServerConfig(data_dir=Path(data_dir).resolve(), token=token, host=host, concurrency=concurrency,
                          queue_limit=queue_limit, start_dispatcher=start_dispatcher, **options)
    store = JobStore(config.data_dir)
    dispatcher = Dispatcher(store, DispatcherConfig(concurrency=concurrency, cluster=cluster, speed=speed))

    @asynccontextmanager
    async def lifespan(_app: Any):
        store.recover()
        if config.start_dispatcher:
            dispatcher.start()
        try:
            yield
        finally:
            dispatcher.stop()

    app = FastAPI(title="daotai video service", version="1", lifespan=lifespan)
    app.state.store = store
    app.state.dispatcher = dispatcher
    app.state.config = config

    # ---- response models (they make /openapi.json describe what we send)

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

    class Health(BaseModel):
        status: Literal["ok"]
        queued: int
        in_progress: int
        workers: int

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

    errors = {code: {"model": ErrorReply} for code in (400, 401, 403, 404, 409, 413, 415, 429)}

    @app.exception_handler(StoreError)
    async def _store_error(_request: Request, exc: StoreError):
        if isinstance(exc, NotFound):
            return _json_response(404, error_body(str(exc), code="not_found"))
        if isinstance(exc, IdempotencyConflict):
            return _json_response(409, error_body(str(exc), code="idempotency_conflict"))
        if isinstance(exc, UploadConflict):
            return _json_response(409, error_body(str(exc), code="upload_conflict", param="file"))
        if isinstance(exc, QueueFull):
            return _json_response(429, error_body(str(exc), kind="rate_limit_error", code="queue_full"),
                                  headers={"Retry-After": str(config.retry_after_s)})
        return _json_response(400, error_body(str(exc)))

    @app.exception_handler(ScriptError)
    async def _script_error(_request: Request, exc: ScriptError):
        first = exc.issues[0] if exc.issues else None
        return _json_response(422, error_body(
            str(first) if first else "invalid script", code="invalid_script",
            param=first.path if first else None, issues=issue_dicts(exc.issues),
        ))

    @app.exception_handler(HTTPException)
    async def _http_error(_request: Request, exc: HTTPException):
        return _json_response(exc.status_code, error_body(str(exc.detail)), headers=getattr(exc, "headers", None))

    def poll_headers(job: Job) -> dict[str, str]:
        return {} if job.status in TERMINAL else {"openai-poll-after-ms": str(config.poll_after_ms)}

    def visible(job_id: str) -> Job:
        if not valid_job_id(job_id):
            raise NotFound(f"video_id: {job_id[:80]!r} is not a valid id")
        return store.get(job_id)

    def check_idem_key(key: str | None) -> str | None:
        if key is not None and re.fullmatch(IDEM_KEY_PATTERN, key) is None:
            raise HTTPException(400, "Idempotency-Key: must be 1 to 255 visible ASCII characters")
        return key

    # ---- health

    @app.get("/health", response_model=Health, tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness and queue depth (answers while workers render or crash)."""
        counts = store.counts()
        return {"status": "ok", "queued": counts.get("queued", 0), "in_progress": counts.get("in_progress", 0),
                "workers": len(dispatcher.worker_pids())}

    # ---- OpenAI Videos API

    from daotai.render.registry import backend_names

    video_fields = {
        "prompt": {"type": "string", "minLength": 1, "maxLength": 4000, "pattern": r"\S",
                   "description": "what happens; becomes the shot's action and prompt"},
        "model": {"type": "string", "enum": backend_names(), "default": "previz",
                  "description": "a daotai render backend"},
        "seconds": {"type": "string", "pattern": SECONDS_PATTERN, "default": "4",
                    "description": f"clip length in whole seconds, 1 to {config.max_seconds:g}"},
        "size": {"type": "string", "pattern": SIZE_PATTERN, "default": "1280x720",
                 "description": "WIDTHxHEIGHT in pixels, both even (64..7680 x 64..4320)"},
    }
    video_body = {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"type": "object", "required": ["prompt"], "properties": video_fields}},
                "multipart/form-data": {"schema": {
                    "type": "object", "required": ["prompt"],
                    "properties": {**video_fields, "input_reference": {
                        "type": "string", "format": "binary",
                        "description": "PNG, JPEG or WebP image of the subject (at most 10 MB, 40 MP)"}},
                }},
            },
        }
    }

    @app.post("/v1/videos", response_model=Video, responses=errors, openapi_extra=video_body, tags=["videos"])
    async def create_video(request: Request, idempotency_key: str | None = Header(None, max_length=255, pattern=IDEM_KEY_PATTERN)):
        """Queue a one-shot video from a prompt (OpenAI Videos API shape; `model` is a daotai backend)."""
        from daotai.render.registry import BACKENDS
        from daotai.script.load import parse_document, validate_script

        key = check_idem_key(idempotency_key)
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        upload: bytes | None = None
        if kind == "application/json":
            data = parse_document(await request.body(), "json", source="body")
            if not isinstance(data, dict):
                raise HTTPException(400, "body: must be a JSON object")
            if data.get("input_reference") is not None:
                raise HTTPException(400, "input_reference: send the image as a multipart file upload")
        else:
            try:
                form = await request.form(max_files=1, max_fields=16, max_part_size=config.max_upload_bytes)
            except Exception as exc:  # malformed multipart of any kind is the client's problem
                raise HTTPException(400, f"body: not valid multipart/form-data ({type(exc).__name__})") from None
            data = {}
            for name, value in form.multi_items():
                if name == "input_reference" and not isinstance(value, str):
                    upload = await value.read(config.max_upload_bytes + 1)
                    if len(upload) > config.max_upload_bytes:
                        raise HTTPException(413, f"input_reference: larger than {config.max_upload_bytes} bytes")
                elif isinstance(value, str):
                    data[name] = value
        prompt = data.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > 4000:
            raise HTTPException(400, "prompt: required, a non-empty string of at most 4000 characters")
        model = data.get("model") or "previz"
        if not isinstance(model, str) or model not in BACKENDS:
            raise HTTPException(400, f"model: {str(model)[:60]!r} is not a daotai backend; choose one of: {', '.join(sorted(BACKENDS))}")
        try:
            seconds = parse_seconds(data.get("seconds", "4"), config.max_seconds)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        size = data.get("size") or "1280x720"
        if not isinstance(size, str) or len(size) > 16:
            raise HTTPException(400, "size: must be 'WIDTHxHEIGHT', e.g. '1280x720'")
        script = video_script(prompt, seconds, size, reference=upload is not None)
        try:
            validate_script(script, source="request")
        except ScriptError as exc:
            raise HTTPException(400, "; ".join(str(i) for i in exc.issues)[:1000]) from None
        reference = None
        if upload is not None:
            try:
                reference = await run_in_threadpool(
                    decode_upload, upload, config.data_dir / "staging", config.max_upload_pixels
                )
            except ValueError as exc:
                raise HTTPException(400, str(exc)) from None
        import hashlib

        request_hash = body_hash({
            "endpoint": "videos", "prompt": prompt, "model": model, "seconds": str(data.get("seconds", "4")),
            "size": size, "reference": hashlib.sha256(upload).hexdigest() if upload is not None else None,
        })
        spec = NewJob("video", model, f"{seconds:g}", size, json.dumps(script), prompt=prompt)
        created = False
        try:
            job, created = await run_in_threadpool(store.create, spec, key, request_hash, config.queue_limit)
            if reference is not None and created:
                folder = store.job_dir(job.id)
                folder.mkdir(parents=True, exist_ok=True)
                reference.replace(folder / "reference.png")
        finally:
            if reference is not None and not created:
                reference.unlink(missing_ok=True)  # a replayed or refused request keeps no upload
        return _json_response(200, video_object(job), headers=poll_headers(job))

    @app.get("/v1/videos", response_model=VideoList, responses=errors, tags=["videos"])
    def list_videos(after: str | None = Query(None, max_length=64, pattern=JOB_ID_PATTERN), limit: int = Query(20, ge=1, le=100),
                    order: Literal["asc", "desc"] = Query("desc")):
        """A page of videos; continue with `after` = the previous page's `last_id`."""
        if after is not None and not valid_job_id(after):
            raise HTTPException(400, f"after: {after!r} is not a valid id")
        jobs, more = store.list(after=after, limit=limit, order=order)
        data = [video_object(j) for j in jobs]
        return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": more}

    @app.get("/v1/videos/{video_id}", response_model=Video, responses=errors, tags=["videos"])
    def retrieve_video(video_id: str = PathParam(..., max_length=64)):
        """One video job (send again after `openai-poll-after-ms` while it is active)."""
        job = visible(video_id)
        return _json_response(200, video_object(job), headers=poll_headers(job))

    @app.delete("/v1/videos/{video_id}", response_model=VideoDeleted, responses=errors, tags=["videos"])
    def delete_video(video_id: str = PathParam(..., max_length=64)):
        """Delete a video; a queued or running job is cancelled first."""
        visible(video_id)
        job = store.request_cancel(video_id, delete=True)
        if job.status in TERMINAL:
            shutil.rmtree(store.job_dir(video_id) / "out", ignore_errors=True)
        return {"id": video_id, "object": "video.deleted", "deleted": True}

    @app.get("/v1/videos/{video_id}/content", responses={
        200: {"content": {"video/mp4": {}, "image/jpeg": {}}, "description": "the file"}, **errors}, tags=["videos"])
    def video_content(video_id: str = PathParam(..., max_length=64),
                      variant: Literal["video", "thumbnail", "spritesheet"] = Query("video")):
        """The finished video, its middle-frame thumbnail or a spritesheet of frames."""
        job = visible(video_id)
        if job.status != "completed":
            raise HTTPException(409, f"video_id: {video_id!r} is {job.status}, not completed")
        path = output_path(store, job, variant)
        if path is None:
            raise NotFound(f"variant: {variant!r} is not available for {video_id!r}")
        return FileResponse(path, media_type=MEDIA_TYPES.get(path.suffix, "application/octet-stream"))

    # ---- reference images for scripts

    upload_body = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["file"], "properties": {"file": {
            "type": "string", "format": "binary",
            "description": f"one PNG, JPEG or WebP image (at most {config.max_upload_bytes} bytes and "
                           f"{config.max_upload_pixels} pixels); its type is read from its bytes"}},
    }}}}}

    def refuse_upload(status: int, message: str, code: str):
        return _json_response(status, error_body(message, code=code, param="file"))

    @app.post("/v1/uploads", status_code=201, response_model=UploadReply,
              responses={**errors, 200: {"model": UploadReply, "description": "the same bytes were uploaded before"}},
              openapi_extra=upload_body, tags=["uploads"])
    async def create_upload(request: Request):
        """Store a reference image for scripts; name it in `characters[].reference_images` as `upload:<id>`.

        The image is fully decoded in a limited subprocess before it is kept. Uploads are content
        addressed: the same bytes always give the same id (201 the first time, 200 after)."""
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "multipart/form-data":
            return refuse_upload(415, "Content-Type: an upload is sent as multipart/form-data with one part named 'file'",
                                 "unsupported_media_type")
        try:
            form = await request.form(max_files=1, max_fields=8, max_part_size=64 * 1024)
        except Exception as exc:  # malformed multipart of any kind is the client's problem
            return refuse_upload(400, f"body: not valid multipart/form-data ({type(exc).__name__})", "invalid_multipart")
        parts = [(name, value) for name, value in form.multi_items() if not isinstance(value, str)]
        if len(parts) != 1 or parts[0][0] != "file":
            return refuse_upload(400, "file: send exactly one image, as the multipart part named 'file'", "missing_file")
        data = await parts[0][1].read(config.max_upload_bytes + 1)
        if len(data) > config.max_upload_bytes:
            return refuse_upload(413, f"file: larger than {config.max_upload_bytes} bytes", "file_too_large")
        sha256 = hashlib.sha256(data).hexdigest()
        upload = await run_in_threadpool(store.upload_by_sha, sha256)
        created = False
        if upload is None:  # new bytes: decode them before anything is kept
            try:
                image = await run_in_threadpool(check_image, data, config.data_dir / "staging",
                                                config.max_upload_pixels, "file", False)
            except ImageRejected as exc:
                return refuse_upload(exc.status, str(exc), exc.code)
            upload, created = await run_in_threadpool(
                store.add_upload, data, sha256, image.content_type, image.width, image.height)
        return _json_response(201 if created else 200, upload_object(upload))

    def known_upload(upload_id: str) -> Upload:
        upload = store.find_upload(upload_id) if valid_upload_id(upload_id) else None
        if upload is None:
            raise NotFound(f"upload_id: {upload_id[:80]!r} is not a stored upload")
        return upload

    @app.get("/v1/uploads/{upload_id}", response_model=UploadReply, responses=errors, tags=["uploads"])
    def upload_info(upload_id: str = PathParam(..., max_length=64)):
        """What is known about one uploaded image."""
        return upload_object(known_upload(upload_id))

    @app.get("/v1/uploads/{upload_id}/content", responses={200: {"content": {t: {} for t in sorted(set(IMAGE_TYPES.values()))},
             "description": "the image, byte for byte as uploaded"}, **errors}, tags=["uploads"])
    def upload_content(upload_id: str = PathParam(..., max_length=64)):
        """The uploaded image (looked up by id in the store; its bytes never change)."""
        upload = known_upload(upload_id)
        path = store.upload_path(upload)
        if path is None:
            raise NotFound(f"upload_id: {upload_id!r} has no stored file")
        return FileResponse(path, media_type=upload.content_type,
                            headers={"Cache-Control": "private, max-age=31536000, immutable"})

    # ---- native endpoints: whole scripts

    script_body = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
        "$ref": "#/components/schemas/DaotaiScript"}}}}}

    @app.post("/v1/jobs", status_code=202, response_model=JobReply, responses={**errors, 422: {"model": ErrorReply}},
              openapi_extra=script_body, tags=["jobs"])
    async def submit_script(request: Request, backend: str = Query("previz", max_length=64),
                            preset: str | None = Query(None, max_length=32),
                            idempotency_key: str | None = Header(None, max_length=255, pattern=IDEM_KEY_PATTERN)):
        """Queue a whole director's script; invalid scripts get 422 with every issue's JSON path.

        Reference images: each entry of `characters[].reference_images` names an image uploaded
        with `POST /v1/uploads`, written `upload:<id>` (e.g. `upload:img_0123456789abcdef0123456789abcdef`,
        the `reference` field of the upload reply). The server never reads a file path a client
        sends: a path, or an id it does not hold, is a 422 naming
        `characters[i].reference_images[j]`. The job's manifest (`files/manifest`) lists every
        reference used under `references`, with its sha256."""
        from daotai.render.registry import BACKENDS
        from daotai.script.load import parse_document, validate_script
        from daotai.script.presets import apply_preset

        key = check_idem_key(idempotency_key)
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise HTTPException(415, "Content-Type: a script is sent as application/json")
        if backend not in BACKENDS:
            raise HTTPException(400, f"backend: {backend!r} is not a daotai backend; choose one of: {', '.join(sorted(BACKENDS))}")
        data = parse_document(await request.body(), "json", source="body")
        script = validate_script(data, source="body")
        refs = await run_in_threadpool(reference_issues, script, store)
        if refs:
            raise ScriptError(refs, "body")
        if preset is not None:
            script = apply_preset(script, preset)
        total = sum(s.duration for s in script.shots)
        canonical = script.model_dump(mode="json", by_alias=True)
        request_hash = body_hash({"endpoint": "jobs", "script": canonical, "backend": backend, "preset": preset})
        spec = NewJob("script", backend, f"{total:g}", f"{script.size.width}x{script.size.height}",
                      json.dumps(canonical), prompt=script.title, preset=None)
        job, _created = await run_in_threadpool(store.create, spec, key, request_hash, config.queue_limit)
        return _json_response(202, job_object(job, store.shots(job.id)), headers=poll_headers(job))

    @app.get("/v1/jobs/{job_id}", response_model=JobReply, responses=errors, tags=["jobs"])
    def job_status(job_id: str = PathParam(..., max_length=64)):
        """Status, per-shot progress and deliverables of any job."""
        job = visible(job_id)
        return _json_response(200, job_object(job, store.shots(job_id)), headers=poll_headers(job))

    @app.delete("/v1/jobs/{job_id}", response_model=JobReply, responses=errors, tags=["jobs"])
    def cancel_job(job_id: str = PathParam(..., max_length=64)):
        """Cancel a queued or running job (its files stay until it is deleted)."""
        visible(job_id)
        job = store.request_cancel(job_id)
        return job_object(job, store.shots(job_id))

    @app.get("/v1/jobs/{job_id}/events", responses={200: {"content": {"text/event-stream": {}},
             "description": "server-sent events"}, **errors}, tags=["jobs"])
    async def job_events(job_id: str = PathParam(..., max_length=64),
                         last_event_id: str | None = Header(None, max_length=20)):
        """Server-sent events of a job (status, progress, notices, outputs) until it ends."""
        await run_in_threadpool(visible, job_id)
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

    @app.get("/v1/jobs/{job_id}/files/{name}", responses={200: {"content": {"application/octet-stream": {}},
             "description": "the file"}, **errors}, tags=["jobs"])
    def job_file(job_id: str = PathParam(..., max_length=64),
                 name: str = PathParam(..., max_length=100, pattern=OUTPUT_NAME)):
        """One deliverable by name: video, thumbnail, spritesheet, contact_sheet, manifest, qc, timeline,
        plan, control_index, shot.<id>, depth.<id>, depth_preview.<id>, mask.<id>."""
        job = visible(job_id)
        if job.status != "completed":
            raise HTTPException(409, f"job_id: {job_id!r} is {job.status}, not completed")
        path = output_path(store, job, name)
        if path is None:
            raise NotFound(f"name: {name!r} is not a deliverable of {job_id!r}")
        return FileResponse(path, media_type=MEDIA_TYPES.get(path.suffix, "application/octet-stream"),
                            filename=path.name)

    # ---- helpers for the web console: validate, vocabulary, plan preview

    @app.post("/v1/scripts/validate", responses={**errors}, openapi_extra=script_body, tags=["scripts"])
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

    @app.get("/v1/schema", tags=["scripts"])
    def schema_and_vocabulary() -> dict[str, Any]:
        """The script JSON Schema plus the canonical vocabularies, presets and backends."""
        from daotai.script import vocab
        from daotai.script.jsonschema import script_json_schema
        from daotai.script.schema import SIZE_PRESETS

        vocabulary = {name: [m.value for m in enum] for name, enum in (
            ("framing", vocab.Framing), ("angle", vocab.Angle), ("camera", vocab.CameraType),
            ("easing", vocab.Easing), ("time_of_day", vocab.TimeOfDay), ("transition", vocab.TransitionKind),
        )}
        return {"schema": script_json_schema(), "vocabulary": vocabulary,
                "presets": list(SIZE_PRESETS), "backends": backend_names()}

    @app.post("/v1/plan", responses={**errors}, openapi_extra=script_body, tags=["scripts"])
    async def plan_preview(request: Request):
        """Top-down camera diagrams of every shot: subject, camera start/end, view direction, fov.

        Like validate, an invalid script is an answer (valid: false, issues), not an HTTP error:
        the console asks while the director is still typing."""
        from daotai.script.load import parse_document, validate_script

        try:
            data = parse_document(await request.body(), "json", source="body")
            script = validate_script(data, source="body")
        except ScriptError as exc:
            return {"valid": False, "issues": issue_dicts(exc.issues), "shots": []}
        frames = sum(s.duration for s in script.shots) * script.fps
        if frames > MAX_PLAN_PREVIEW_FRAMES:
            issue = Issue("shots", f"{frames:.0f} frames", f"a plan preview covers at most {MAX_PLAN_PREVIEW_FRAMES} frames")
            return {"valid": False, "issues": issue_dicts([issue]), "shots": []}
        return {"valid": True, "issues": [], "shots": await run_in_threadpool(plan_diagrams, script)}

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
    return _guarded(app, config)


def _camera_pose(frame: Any) -> dict[str, Any]:
    """Position and top-down view direction ([x, z], unit) of one planned camera frame."""
    m = frame.cam_to_world  # 4x4 row-major; column 2 is camera +z, the view is -z
    forward = (-m[2], -m[10])
    norm = math.hypot(*forward) or 1.0
    return {"position": [m[3], m[7], m[11]], "forward": [forward[0] / norm, forward[1] / norm], "fov": frame.fov}


def plan_diagrams(script: Any) -> list[dict[str, Any]]:
    """Per shot, what a top-down camera diagram needs, taken from the real plan."""
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


SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


class SecurityHeaders:
    """Adds the CSP and friends to every HTTP response that does not already set them."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                present = {k.decode("latin-1").lower() for k, _ in message.get("headers", [])}
                extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


WEB_DIR = Path(__file__).with_name("web")


def mount_console(app: Any) -> None:
    """Serve the browser console from the package at /console/ and send / there."""
    from fastapi.responses import RedirectResponse
    from starlette.staticfiles import StaticFiles

    @app.get("/", include_in_schema=False)
    def root() -> Any:
        return RedirectResponse("/console/", status_code=307)

    app.mount("/console", StaticFiles(directory=WEB_DIR, html=True), name="console")


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


def _guarded(app: Any, config: ServerConfig) -> Any:
    """Install the request guard as the outermost layer, keeping `app` a FastAPI object."""
    app.add_middleware(Guard, config=config)
    app.add_middleware(SecurityHeaders)  # added last, so outermost: guard refusals carry them too
    return app
