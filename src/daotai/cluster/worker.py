"""The actor side of a cluster render: one warm backend that renders whole shots to files.

``ShotWorker`` is a plain class; the runner turns it into a Ray actor with two concurrency
groups of one thread each: ``render`` (the shot being rendered; always the same thread,
so a backend's GL context or CUDA stream stays on the thread that made it) and ``control``
(``poll`` and ``cancel``, answered while a shot renders). Files are encoded by the same
:func:`daotai.run.shots.render_shot` a local run uses, into a private temp folder, and
returned as bytes so the driver can place them atomically on any machine.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daotai.events import Output
from daotai.render.base import RunContext

TEMP_ROOT = "daotai-cluster"  # under the worker machine's temp folder: <pid>-<shot id>-<random>/


def _pid_alive(pid: int) -> bool:
    """Whether a process with this id still runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def sweep_stale(root: Path) -> list[Path]:
    """Remove temp folders left by workers that died mid-shot (their pid is gone); returns them."""
    removed = []
    for entry in root.glob("*-*") if root.is_dir() else ():
        head = entry.name.split("-", 1)[0]
        if entry.is_dir() and head.isdigit() and not _pid_alive(int(head)):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


@dataclass(frozen=True)
class ShotResult:
    """One finished shot: its record (samples, timings, relative file names) and file bytes."""

    record: Any  # daotai.run.records.ShotRecord
    blobs: dict[str, bytes]  # relative output path → file contents
    host: str
    pid: int


class ShotWorker:
    """Holds one backend between shots and renders the shots it is sent."""

    def __init__(self, backend: str, options: dict[str, Any], reference_root: str | None = None):
        from daotai.render.registry import create_backend
        from daotai.render.spec import BackendEnv

        self.backend_name = backend
        env = BackendEnv(reference_root=Path(reference_root) if reference_root else None)
        self._backend = create_backend(backend, options, env)
        self._lock = threading.Lock()
        self._events: list[Any] = []  # Progress / Notice events not yet polled
        self._ctx: RunContext | None = None
        # A killed worker cannot clean up after itself; the next one on its machine does.
        self._temp_root = Path(tempfile.gettempdir()) / TEMP_ROOT
        self._temp_root.mkdir(exist_ok=True)
        sweep_stale(self._temp_root)

    def info(self) -> dict[str, Any]:
        """Where this worker runs (host, pid) and the backend it holds."""
        return {"host": socket.gethostname(), "pid": os.getpid(), "backend": self.backend_name}

    def render(self, plan, shot_index: int, settings) -> ShotResult:
        """Render one shot of ``plan`` into a temp folder and return the finished files."""
        from daotai.run.records import ShotRecord
        from daotai.run.settings import layout_for
        from daotai.run.shots import render_shot

        shot = plan.shots[shot_index]
        ctx = RunContext()
        with self._lock:
            self._ctx = ctx
        temp = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-{shot.shot_id}-", dir=self._temp_root))
        try:
            layout_for(temp, settings).make_folders(controls=True)
            record = ShotRecord(shot.shot_id)
            for event in render_shot(self._backend, plan, shot, temp, settings, ctx, record):
                if not isinstance(event, Output):  # outputs are announced by the driver once placed
                    with self._lock:
                        self._events.append(event)
            blobs = {rel: (temp / rel).read_bytes() for rel in record.files.values()}
            return ShotResult(record, blobs, socket.gethostname(), os.getpid())
        finally:
            with self._lock:
                self._ctx = None
            shutil.rmtree(temp, ignore_errors=True)

    def poll(self) -> list[Any]:
        """Progress and notices since the last poll (drained)."""
        with self._lock:
            events, self._events = self._events, []
        return events

    def cancel(self) -> bool:
        """Stop the shot in progress at its next frame; True when one was running."""
        with self._lock:
            if self._ctx is None:
                return False
            self._ctx.cancel.set()
            return True

    def close(self) -> None:
        """Release the backend (GL context, model weights)."""
        self._backend.close()
