"""Live servers on loopback for tests and tools: one in a subprocess, one in a thread."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(base_url: str, timeout_s: float = 30.0, headers: dict[str, str] | None = None) -> None:
    """Block until GET /health answers 200; RuntimeError after ``timeout_s``."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base_url}/health", timeout=1.0, headers=headers).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{base_url} did not become healthy within {timeout_s:g} s")


class ServerProcess:
    """``daotai serve`` in a subprocess (so a test can kill -9 it and start it again)."""

    def __init__(self, data_dir: Path, port: int | None = None, extra_args: tuple[str, ...] = ()):
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.extra_args = extra_args
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ServerProcess":
        """Start the server and wait for /health."""
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from daotai.cli import main; main()", "serve", "--port", str(self.port),
             "--data-dir", str(self.data_dir), *self.extra_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        try:
            wait_healthy(self.url)
        except RuntimeError:
            self.stop()
            raise
        return self

    def kill9(self) -> None:
        """SIGKILL the server, as a crash would."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM), then by force."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


@contextmanager
def thread_server(app: Any, port: int | None = None) -> Iterator[str]:
    """Serve an ASGI app with uvicorn in a thread on loopback; yields its base URL."""
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20.0
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError(f"uvicorn did not start on port {port}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
