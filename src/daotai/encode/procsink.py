"""Encoder processes fed through shared-memory rings, so encoding runs beside a GIL-holding renderer.

The previz renderer holds the GIL while llvmpipe rasterises inside glReadPixels, which starves
encoder *threads*. Here each stream kind (shot video, depth, depth preview, mask) gets one
long-lived child process for a whole run, started with the "spawn" method (the parent holds a GL
context and threads, which "fork" would copy in a broken state). The parent copies each frame
into a free slot of a small shared-memory ring and sends only the slot number; the child encodes
straight from the slot and hands it back.

Guarantees (the same as the thread sinks they replace):

- The child writes through the atomic writers of :mod:`daotai.encode.video` (temp file + rename),
  so a file appears at its output path only when its stream finished cleanly.
- ``abort()`` (a parent exception, KeyboardInterrupt included) makes the child discard its temp
  file; a child that died is reported as an :class:`EncodeError` naming the stream, and its
  leftover temp file is removed by the parent.
- Children ignore SIGINT (the parent decides), and exit on their own when the parent goes away
  (closed pipe or a changed parent pid), deleting any temp file in progress.
- Shared memory is created and unlinked by the parent only.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from fractions import Fraction
from multiprocessing import connection
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from daotai.errors import EncodeError, disk_full_cause
from daotai.files import remove_temp_files  # temp siblings a killed writer left (re-exported)
from daotai.plan.geometry import FAR_M, NEAR_M

RING_SLOTS = 4  # frames in flight per stream: enough overlap, ~25 MB per RGB ring at 1080p
PARENT_POLL_S = 1.0  # how often an idle child checks that its parent is still alive
ABORT_WAIT_S = 30.0  # how long an abort waits for the child to discard its file before killing it
QUIT_WAIT_S = 5.0

# What a child does with the frames of one stream (see _consume).
KINDS = ("rgb", "depth16", "depth_preview", "gray8")


@dataclass(frozen=True)
class StreamJob:
    """One output file: what to write, where, and the shape of the frames that feed it."""

    kind: str  # one of KINDS
    path: Path
    width: int
    height: int
    fps: Fraction
    settings: Any = None  # EncodeSettings for "rgb"; unused otherwise
    near: float = NEAR_M  # depth preview clip range, metres (the previz clip planes)
    far: float = FAR_M

    def frame_spec(self) -> tuple[tuple[int, ...], str]:
        """Shape and dtype of one input frame of this stream."""
        if self.kind == "rgb":
            return (self.height, self.width, 3), "uint8"
        if self.kind in ("depth16", "depth_preview"):
            return (self.height, self.width), "float32"
        return (self.height, self.width), "uint8"


# ------------------------------------------------------------------ child side


class _ParentGone(BaseException):
    """The parent closed its end of the pipe or died; the child stops and cleans up."""


class _Abort(BaseException):
    """The parent asked to drop the file in progress."""


def _consume(job: StreamJob, frames: Iterator[np.ndarray]) -> int:
    """Encode every frame of one stream with the library's atomic writers; returns the count."""
    from daotai.encode.video import VideoWriter, write_gray8, write_gray16, write_preview_h264

    if job.kind == "rgb":
        count = 0
        with VideoWriter(job.path, job.width, job.height, job.fps, job.settings) as writer:
            for frame in frames:
                writer.write(frame)
                count += 1
        return count
    from daotai.render.previz.control import depth_to_preview, depth_to_uint16_mm

    if job.kind == "depth16":
        return write_gray16((depth_to_uint16_mm(d) for d in frames), job.path, job.fps)
    if job.kind == "depth_preview":
        return write_preview_h264((depth_to_preview(d, job.near, job.far) for d in frames), job.path, job.fps)
    return write_gray8(frames, job.path, job.fps)


class _ChildLink:
    """The child's end of the pipe, with a parent-alive check while waiting."""

    def __init__(self, conn: connection.Connection, parent_pid: int):
        self.conn = conn
        self.parent_pid = parent_pid

    def recv(self) -> tuple:
        """Next command from the parent; raises _ParentGone when there is no parent any more."""
        while not self.conn.poll(PARENT_POLL_S):
            if os.getppid() != self.parent_pid:
                raise _ParentGone()
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            raise _ParentGone() from None

    def send(self, message: tuple) -> None:
        """Reply to the parent; a vanished parent ends the child."""
        try:
            self.conn.send(message)
        except (BrokenPipeError, OSError):
            raise _ParentGone() from None


def _run_job(link: _ChildLink, job: StreamJob, ring: np.ndarray) -> None:
    """Encode one stream from ring slots until the parent says close or abort; always replies."""

    def frames() -> Iterator[np.ndarray]:
        while True:
            message = link.recv()
            if message[0] == "frame":
                slot = message[1]
                yield ring[slot]
                # The consumer asks for the next frame only after encoding (copying) this one.
                link.send(("free", slot))
            elif message[0] == "close":
                return
            else:  # "abort"
                raise _Abort()

    try:
        count = _consume(job, frames())
    except _Abort:
        link.send(("aborted",))
        return
    except Exception as exc:  # noqa: BLE001  (reported to the parent, which raises EncodeError naming the stream)
        full = disk_full_cause(exc)  # sent on, so the parent can say the disk is full (daotai.errors.DiskFull)
        disk = (full.errno, os.fsdecode(full.filename) if full.filename else None) if full is not None else None
        link.send(("error", f"{type(exc).__name__}: {exc}", disk))
        # Hand back slots still in flight until the parent ends the stream.
        while True:
            message = link.recv()
            if message[0] == "frame":
                link.send(("free", message[1]))
            elif message[0] in ("close", "abort"):
                link.send(("aborted",))
                return
    link.send(("done", count))


def _child_main(conn: connection.Connection, parent_pid: int) -> None:
    """Entry point of an encoder process: serve open → frames → close|abort until quit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent decides
    link = _ChildLink(conn, parent_pid)
    shm: SharedMemory | None = None
    try:
        import cv2

        import daotai.encode.video  # noqa: F401  (PyAV and numpy load now, while the parent sets up)

        # OpenCV's worker threads spin after each parallel call: in one of several encoder
        # processes sharing the cores with the renderer, that is CPU taken from the others
        # (1080p depth conversions in a loop: ~35% less CPU without them; the colour conversion:
        # the same CPU and a little more wall time, well within a frame).
        cv2.setNumThreads(1)

        while True:
            message = link.recv()
            if message[0] == "quit":
                return
            if message[0] == "ping":
                link.send(("pong",))
                continue
            if message[0] == "abort":  # an abort after the stream already ended (e.g. after an error)
                link.send(("aborted",))
                continue
            if message[0] != "open":
                continue
            _, job, shm_name, slots = message
            if shm is None or shm.name != shm_name:
                if shm is not None:
                    shm.close()
                shm = SharedMemory(name=shm_name)
            shape, dtype = job.frame_spec()
            ring = np.ndarray((slots, *shape), dtype=dtype, buffer=shm.buf)  # (slots, *frame) view
            _run_job(link, job, ring)
            del ring  # release the exported buffer so shm.close() can succeed
    except _ParentGone:
        pass
    finally:
        if shm is not None:
            try:
                shm.close()
            except BufferError:
                pass


# ------------------------------------------------------------------ parent side

class _Worker:
    """One encoder process and its shared-memory ring, reused stream after stream."""

    def __init__(self, stream: str, slots: int):
        self.stream = stream
        self.slots = slots
        context = multiprocessing.get_context("spawn")
        self.conn, child_conn = context.Pipe(duplex=True)
        self.process = context.Process(
            target=_child_main, args=(child_conn, os.getpid()), name=f"daotai-encode-{stream}", daemon=True
        )
        self.process.start()
        child_conn.close()  # only the child holds its end, so the child sees EOF if we go away
        self.shm: SharedMemory | None = None
        self.ring: np.ndarray | None = None

    def ensure_ring(self, shape: tuple[int, ...], dtype: str) -> None:
        """Make the ring fit ``slots`` frames of this shape (reallocated only when it changes)."""
        if self.ring is not None and self.ring.shape[1:] == shape and self.ring.dtype == np.dtype(dtype):
            return
        self.release_ring()
        nbytes = self.slots * int(np.prod(shape)) * np.dtype(dtype).itemsize
        self.shm = SharedMemory(create=True, size=max(nbytes, 1))
        self.ring = np.ndarray((self.slots, *shape), dtype=dtype, buffer=self.shm.buf)  # (slots, *frame)

    def release_ring(self) -> None:
        """Close and unlink the shared memory (the child maps it by name only while a stream is open)."""
        self.ring = None
        if self.shm is not None:
            shm, self.shm = self.shm, None
            try:
                shm.close()
            except BufferError:
                pass
            try:
                shm.unlink()
            except FileNotFoundError:
                pass

    def alive(self) -> bool:
        """Whether the child process is still running."""
        return self.process.is_alive()

    def stop(self) -> None:
        """Ask the child to exit, kill it if it does not, and free the ring."""
        try:
            if self.process.is_alive():
                try:
                    self.conn.send(("quit",))
                except OSError:
                    pass
                self.process.join(QUIT_WAIT_S)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(QUIT_WAIT_S)
        finally:
            self.conn.close()
            self.release_ring()


class ProcSink:
    """Feeds one stream of frames to an encoder process: put(frame)…, then finish() or abort()."""

    def __init__(self, name: str, worker: _Worker, job: StreamJob):
        self.name = name
        self._worker = worker
        self._job = job
        self._free = list(range(worker.slots))
        self._open = True
        self._ended = False  # the child acknowledged the end of this stream (done or aborted)
        self.busy_s = 0.0  # parent time spent waiting for a free slot
        shape, dtype = job.frame_spec()
        worker.ensure_ring(shape, dtype)
        self._send(("open", job, worker.shm.name, worker.slots))

    def _dead(self) -> EncodeError:
        """The error for a child that went away mid-stream (its temp file is removed here)."""
        self._open = False
        code = self._worker.process.exitcode
        remove_temp_files(self._job.path)
        return EncodeError(f"{self.name}: encoder process exited unexpectedly (exit code {code}); "
                           f"nothing was written to {self._job.path.name}")

    def _send(self, message: tuple) -> None:
        try:
            self._worker.conn.send(message)
        except OSError:
            self._worker.process.join(1.0)
            raise self._dead() from None

    def _reply(self, timeout: float | None) -> tuple | None:
        """Next message from the child, None on timeout; raises EncodeError if the child died."""
        conn, sentinel = self._worker.conn, self._worker.process.sentinel
        ready = connection.wait([conn, sentinel], timeout)
        if not ready:
            return None
        if conn in ready or conn.poll():
            try:
                return conn.recv()
            except (EOFError, OSError):
                pass
        self._worker.process.join(1.0)
        raise self._dead()

    def _handle(self, message: tuple) -> tuple | None:
        """Account a freed slot; raise a child's encode error; return end-of-stream replies."""
        if message[0] == "free":
            self._free.append(message[1])
            return None
        if message[0] == "error":
            self._open = False
            if message[2] is not None:  # the disk is full: the errno and file travel as the error's cause
                code, filename = message[2]
                raise EncodeError(f"{self.name}: {message[1]}") from OSError(code, os.strerror(code), filename)
            raise EncodeError(f"{self.name}: {message[1]}")
        return message

    def put(self, frame: np.ndarray) -> None:
        """Copy one frame into a free slot (waiting for one if needed) and hand it to the child."""
        if not self._open:
            raise EncodeError(f"{self.name}: the stream is closed")
        shape, _ = self._job.frame_spec()
        if frame.shape != shape:
            raise EncodeError(f"{self.name}: frame shape {frame.shape} must be {shape}")
        # Take back slots the child has finished with, and notice errors early.
        while self._worker.conn.poll():
            message = self._reply(0)
            if message is not None:
                self._handle(message)
        started = time.perf_counter()
        while not self._free:
            message = self._reply(None)
            if message is not None:
                self._handle(message)
        self.busy_s += time.perf_counter() - started
        slot = self._free.pop()
        np.copyto(self._worker.ring[slot], frame, casting="same_kind")
        self._send(("frame", slot))

    def finish(self) -> None:
        """End the stream and wait until the child has committed the file."""
        if not self._open:
            raise EncodeError(f"{self.name}: the stream is closed")
        self._send(("close",))
        while True:
            message = self._reply(None)
            if message is None:
                continue
            end = self._handle(message)
            if end is not None:
                self._open = False
                self._ended = True
                if end[0] != "done":
                    raise EncodeError(f"{self.name}: encoder ended the stream with {end[0]!r}")
                return

    def abort(self) -> None:
        """Drop the stream: the child discards its temp file; a stuck child is killed."""
        worker = self._worker
        if self._ended:
            return
        if not worker.alive():
            remove_temp_files(self._job.path)
            return
        try:
            worker.conn.send(("abort",))
            deadline = time.monotonic() + ABORT_WAIT_S
            while time.monotonic() < deadline:
                message = self._reply(max(0.0, deadline - time.monotonic()))
                if message is None:
                    break
                if message[0] in ("aborted", "done"):
                    self._open = False
                    self._ended = True
                    return
                # "free" or a late "error": the stream is being dropped anyway
        except (EncodeError, OSError):
            pass
        # No answer: kill the child (the pool starts a fresh one) and clean up after it.
        if worker.alive():
            worker.process.kill()
            worker.process.join(QUIT_WAIT_S)
        self._open = False
        remove_temp_files(self._job.path)


class EncoderPool:
    """Long-lived encoder processes, one per stream name, for a whole run; use as a context manager."""

    def __init__(self, slots: int = RING_SLOTS):
        if slots < 1:
            raise EncodeError(f"slots: {slots} must be >= 1")
        self.slots = slots
        self._workers: dict[str, _Worker] = {}

    def start(self, *streams: str) -> None:
        """Start processes ahead of use, so their imports overlap with the caller's setup."""
        for stream in streams:
            self._worker(stream)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until every started process has finished its imports and answers."""
        deadline = time.monotonic() + timeout
        for stream, worker in self._workers.items():
            try:
                worker.conn.send(("ping",))
                ready = connection.wait([worker.conn, worker.process.sentinel], max(0.0, deadline - time.monotonic()))
                if worker.conn in ready and worker.conn.recv() == ("pong",):
                    continue
            except (EOFError, OSError):
                pass
            worker.process.join(1.0)
            # The usual cause: "spawn" re-imports the main script, which must not start work at import.
            raise EncodeError(
                f"{stream} encoder process did not start (exit code {worker.process.exitcode}, waited up to "
                f"{timeout:g} s); a script that runs daotai must do so under `if __name__ == \"__main__\":`"
            )

    def _worker(self, stream: str) -> _Worker:
        worker = self._workers.get(stream)
        if worker is not None and not worker.alive():
            worker.stop()  # a child that died (or was killed) is replaced
            worker = None
        if worker is None:
            worker = self._workers[stream] = _Worker(stream, self.slots)
        return worker

    def open(self, stream: str, name: str, job: StreamJob) -> ProcSink:
        """Begin one output file on the ``stream`` process; ``name`` labels its errors."""
        if job.kind not in KINDS:
            raise EncodeError(f"kind: {job.kind!r} must be one of {', '.join(KINDS)}")
        return ProcSink(name, self._worker(stream), job)

    def pids(self) -> dict[str, int]:
        """Process id of each running encoder (for tests and diagnostics)."""
        return {stream: w.process.pid for stream, w in self._workers.items() if w.alive()}

    def close(self) -> None:
        """Stop every encoder process and unlink every ring."""
        workers, self._workers = self._workers, {}
        for worker in workers.values():
            worker.stop()

    def __enter__(self) -> EncoderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["EncoderPool", "ProcSink", "StreamJob", "RING_SLOTS", "remove_temp_files"]
