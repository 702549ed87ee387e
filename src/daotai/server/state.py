"""What every router of one server shares: its settings, its job store and its dispatcher.

``ServerState`` is built once by ``create_app`` and handed to each ``build_router``; it also
holds the few lookups several routers make the same way (a job by id, a deliverable's file,
the poll header), so every route answers them alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daotai.server.store import TERMINAL, Job, JobStore, NotFound, valid_job_id
from daotai.server.worker import Dispatcher

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
IDEM_KEY_PATTERN = r"^[!-~]{1,255}$"  # visible ASCII: safe in a header and in logs


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


@dataclass(frozen=True)
class ServerState:
    """The shared state the routers are built from."""

    config: ServerConfig
    store: JobStore
    dispatcher: Dispatcher

    def visible(self, job_id: str) -> Job:
        """The job with this id; NotFound (404) for an id that is malformed or unknown."""
        if not valid_job_id(job_id):
            raise NotFound(f"video_id: {job_id[:80]!r} is not a valid id")
        return self.store.get(job_id)

    def poll_headers(self, job: Job) -> dict[str, str]:
        """``openai-poll-after-ms`` while the job is still active, nothing once it has ended."""
        return {} if job.status in TERMINAL else {"openai-poll-after-ms": str(self.config.poll_after_ms)}

    def output_path(self, job: Job, name: str) -> Path | None:
        """The file of a named deliverable, from the store; None unless it is a regular file inside out/."""
        item = job.outputs.get(name)
        if item is None or job.status != "completed":
            return None
        root = (self.store.job_dir(job.id) / "out").resolve()
        path = root / item.relpath
        if path.is_symlink() or not path.is_file():
            return None
        resolved = path.resolve()
        if not resolved.is_relative_to(root):
            return None
        return resolved


def job_disk_bytes(script: Any, backend: str, controls: bool) -> int:
    """The disk space a job's render is expected to need in the data folder (daotai.diskspace):
    its files, plus the frames the shot cache keeps (the shot files themselves are linked into
    the cache). No shot is assumed reused: a job whose shots the cache holds needs less."""
    from daotai.diskspace import render_bytes
    from daotai.render.registry import spec_for

    frames = {shot.shot_id: max(1, round(shot.duration * script.fps)) for shot in script.shots}
    estimate = render_bytes(script.size.width, script.size.height, frames, controls,
                            neural=spec_for(backend).family is not None)
    return estimate.total + sum(estimate.samples.values())


def check_idem_key(key: str | None) -> str | None:
    """An Idempotency-Key header as given, or a 400 when it is not 1 to 255 visible ASCII characters."""
    from starlette.exceptions import HTTPException

    if key is not None and re.fullmatch(IDEM_KEY_PATTERN, key) is None:
        raise HTTPException(400, "Idempotency-Key: must be 1 to 255 visible ASCII characters")
    return key
