"""Reference images for scripts: ``/v1/uploads`` store, describe and serve them.

Uploads are content addressed (the same bytes always get the same id) and fully decoded in
the image sandbox (``daotai.server.images``) before anything is kept. Scripts name them as
``upload:<id>`` (see ``daotai.server.references``).
"""

from __future__ import annotations

import hashlib

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from daotai.server.footage import check_video, video_container
from daotai.server.images import ImageRejected, check_image, check_sound, sound_container
from daotai.server.schemas import (
    UPLOAD_MEDIA_TYPES,
    ErrorReply,
    UploadReply,
    error_body,
    error_responses,
    json_response,
    upload_body,
    upload_object,
)
from daotai.server.state import ServerState
from daotai.server.store import NotFound, Upload, valid_upload_id


def build_router(state: ServerState) -> APIRouter:
    """The upload routes of one server."""
    router = APIRouter(tags=["uploads"])
    config, store = state.config, state.store
    errors = error_responses()

    def refuse_upload(status: int, message: str, code: str):
        return json_response(status, error_body(message, code=code, param="file"))

    @router.post("/v1/uploads", status_code=201, response_model=UploadReply,
                 responses={**errors, 507: {"model": ErrorReply}, 200: {"model": UploadReply,
                                            "description": "the same bytes were uploaded before"}},
                 openapi_extra=upload_body(config.max_upload_bytes, config.max_upload_pixels))
    async def create_upload(request: Request):
        """Store a reference image (`img_<id>`), a soundtrack (`snd_<id>`) or footage (`vid_<id>`) for scripts.

        Name an image in `characters[].reference_images`, a sound file as the script's
        `soundtrack` (path or `{"path": ...}`) and a video as a shot's `reference_video.path`, as
        `upload:<id>`. Every file is fully decoded in a limited subprocess before it is kept
        (sound: WAV, FLAC, MP3, AAC/M4A, Ogg/Opus, at most 30 minutes; width and height are 0;
        video: MP4, MOV, Matroska or WebM, at most 10 minutes and 4096x2160). Uploads are content addressed: the same bytes always
        give the same id (201 the first time, 200 after)."""
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "multipart/form-data":
            return refuse_upload(415, "Content-Type: an upload is sent as multipart/form-data with one part "
                                 "named 'file'", "unsupported_media_type")
        try:
            form = await request.form(max_files=1, max_fields=8, max_part_size=64 * 1024)
        except Exception as exc:  # noqa: BLE001  (malformed multipart of any kind is the client's problem)
            return refuse_upload(400, f"body: not valid multipart/form-data ({type(exc).__name__})",
                                 "invalid_multipart")
        parts = [(name, value) for name, value in form.multi_items() if not isinstance(value, str)]
        if len(parts) != 1 or parts[0][0] != "file":
            return refuse_upload(400, "file: send exactly one image, as the multipart part named 'file'",
                                 "missing_file")
        data = await parts[0][1].read(config.max_upload_bytes + 1)
        if len(data) > config.max_upload_bytes:
            return refuse_upload(413, f"file: larger than {config.max_upload_bytes} bytes", "file_too_large")
        sha256 = hashlib.sha256(data).hexdigest()
        upload = await run_in_threadpool(store.upload_by_sha, sha256)
        created = False
        if upload is None and video_container(data) is not None:
            # Footage for a shot's reference_video, kept as `vid_<id>`; an MP4 box holding sound alone
            # (M4A) is tried as a soundtrack below.
            try:
                video = await run_in_threadpool(check_video, data, config.data_dir / "staging", "file")
            except ImageRejected as exc:
                if exc.code != "no_video_stream" or sound_container(data) is None:
                    return refuse_upload(exc.status, str(exc), exc.code)
            else:
                upload, created = await run_in_threadpool(store.add_upload, data, sha256, video.content_type,
                                                          video.width, video.height)
        if upload is None and sound_container(data) is not None:
            # A soundtrack: decoded in the sandbox like images (a hostile file is refused with its
            # reason), then kept as `snd_<id>` for `soundtrack: "upload:snd_<id>"` in scripts.
            try:
                sound = await run_in_threadpool(check_sound, data, config.data_dir / "staging", "file")
            except ImageRejected as exc:
                return refuse_upload(exc.status, str(exc), exc.code)
            upload, created = await run_in_threadpool(store.add_upload, data, sha256, sound.content_type, 0, 0)
        elif upload is None:  # new image bytes: decode them before anything is kept
            try:
                image = await run_in_threadpool(check_image, data, config.data_dir / "staging",
                                                config.max_upload_pixels, "file", False)
            except ImageRejected as exc:
                return refuse_upload(exc.status, str(exc), exc.code)
            upload, created = await run_in_threadpool(
                store.add_upload, data, sha256, image.content_type, image.width, image.height)
        return json_response(201 if created else 200, upload_object(upload))

    def known_upload(upload_id: str) -> Upload:
        upload = store.find_upload(upload_id) if valid_upload_id(upload_id) else None
        if upload is None:
            raise NotFound(f"upload_id: {upload_id[:80]!r} is not a stored upload")
        return upload

    @router.get("/v1/uploads/{upload_id}", response_model=UploadReply, responses=errors)
    def upload_info(upload_id: str = PathParam(..., max_length=64)):
        """What is known about one uploaded image."""
        return upload_object(known_upload(upload_id))

    @router.get("/v1/uploads/{upload_id}/content", responses={200: {"content": {t: {} for t in UPLOAD_MEDIA_TYPES},
                "description": "the image, byte for byte as uploaded"}, **errors})
    def upload_content(upload_id: str = PathParam(..., max_length=64)):
        """The uploaded image (looked up by id in the store; its bytes never change)."""
        upload = known_upload(upload_id)
        path = store.upload_path(upload)
        if path is None:
            raise NotFound(f"upload_id: {upload_id!r} has no stored file")
        return FileResponse(path, media_type=upload.content_type,
                            headers={"Cache-Control": "private, max-age=31536000, immutable"})

    return router
