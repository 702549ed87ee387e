"""H.264 encoded as runs of whole GOPs side by side, joined by copying their packets.

x264 gives the same bytes for the same frames only at a fixed thread count, so one encoder keeps
at most its ``FRAME_THREADS`` cores busy however many the machine has: a neural shot whose 121
frames all exist at once then waits on one encoder. Every GOP daotai writes is closed (it opens
with an IDR picture and nothing in it refers outside), so a shot can be cut into runs of whole
GOPs at fixed frame numbers, each run encoded by an encoder of its own, and the runs joined by
copying their compressed packets (:func:`daotai.encode.remux.copy_segments`).

Where the runs are cut depends only on the GOP length and the frame count, and each run's bytes
only on its frames and the settings, so the file is the same on every machine whether its runs
were encoded one after the other or eight at once: the number of encoders at work follows the
machine's cores, the bytes do not. A clip shorter than two runs is one run, the same bytes as
a single encoder writes.

Frames are copied into the run's queue as they are written (the caller may reuse its buffer) and
converted to YUV by the run's own thread, so colour conversion is spread over the cores too.
At most ``in_flight`` frames wait at once, which bounds memory at a few hundred MB at any size.
"""

from __future__ import annotations

import math
import queue
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from daotai.errors import EncodeError
from daotai.files import publish, remove_quietly
from daotai.runtime.cores import usable_cores

# A run holds at least this many frames (whole GOPs): each run pays an encoder's start-up and its
# pipeline filling, and an IDR picture with x264's options SEI.
RUN_MIN_FRAMES = 16
# A last run shorter than this joins the run before it instead (libx265 can leave a one- or two-
# frame MP4 unfinishable; video.SAMPLE_FRAMES): a clip's runs are then at least this long.
TAIL_MIN_FRAMES = 4
# Frames copied and waiting for their encoder, all runs together, in bytes of RGB.
IN_FLIGHT_BYTES = 384 * 2**20
_DONE = object()  # a run's queue ends with this


@dataclass(frozen=True)
class RunLayout:
    """Where a clip's runs start: every ``run_frames`` frames, the last run at least ``tail`` long."""

    run_frames: int
    tail: int = TAIL_MIN_FRAMES

    @classmethod
    def for_gop(cls, gop_frames: int) -> RunLayout:
        """Runs of whole GOPs of ``gop_frames``, at least RUN_MIN_FRAMES long."""
        return cls(gop_frames * max(1, math.ceil(RUN_MIN_FRAMES / gop_frames)))

    def runs(self, frames: int) -> list[tuple[int, int]]:
        """[first, end) of each run of a clip of ``frames`` frames."""
        starts = [s for s in range(0, frames, self.run_frames) if s == 0 or frames - s >= self.tail]
        return [(s, e) for s, e in zip(starts, [*starts[1:], frames], strict=True)]


def encoders_for(threads: int, cores: int | None = None) -> int:
    """Runs encoded at once on this machine's cores (at least 2, so the next run starts while the
    last one drains; 1 for x264's "auto" threads, which would take every core itself).

    A run is a GOP or two, too short for x264's frame threads to fill: on 16 cores, five 24-frame
    runs of 768x512 took the same time with 2 frame threads each as with 4 (0.13 s), so each
    encoder is counted as two cores at most."""
    if threads <= 0:
        return 1
    if cores is None:
        cores = usable_cores()
    return max(2, min(16, cores // min(threads, 2)))


class _Run:
    """One encoder writing frames [first, …) into a hidden temp file beside the target."""

    def __init__(self, first: int, output: Any, convert: Callable[[Any, np.ndarray], Any],
                 permits: threading.Semaphore, slots: threading.Semaphore):
        self.first = first
        self.frames = 0  # frames queued
        self.output = output  # video._AtomicOutput, finished (not published) when the run ends
        self.error: BaseException | None = None
        self._convert = convert
        self._permits, self._slots = permits, slots
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=f"daotai-gop-run-{first}", daemon=True)
        self._thread.start()

    def put(self, frame: np.ndarray) -> None:
        self._queue.put(frame)
        self.frames += 1

    def end(self) -> None:
        """No more frames: the encoder flushes and closes its file."""
        self._queue.put(_DONE)

    def join(self) -> None:
        self._thread.join()

    def _work(self) -> None:
        try:
            while (item := self._queue.get()) is not _DONE:
                try:
                    if self.error is None:
                        self.output.encode(self._convert(self.output, item))
                except BaseException as error:  # noqa: BLE001 - handed to the writer's caller
                    self.error = error
                finally:
                    self._permits.release()
            if self.error is None:
                try:
                    self.output.finish()
                except BaseException as error:  # noqa: BLE001
                    self.error = error
        finally:
            self._slots.release()


def _abandon(runs: list[_Run]) -> None:
    for run in runs:
        run.error = run.error or EncodeError("abandoned")
        run.end()


class GopRunsOutput:
    """The video stream of one H.264 file, encoded as runs of whole GOPs (see the module doc).

    Same protocol as ``video._AtomicOutput`` for the writer: ``put(rgb)``, ``commit()``,
    ``discard()``, ``frames``; ``open_run(target)`` makes a run's output (an ``_AtomicOutput``)
    and ``convert(output, rgb)`` a frame it encodes."""

    def __init__(self, path: Path, layout: RunLayout, frame_bytes: int, encoders: int,
                 open_run: Callable[[Path], Any], convert: Callable[[Any, np.ndarray], Any]):
        self.path = path
        self.frames = 0
        self._layout = layout
        self._open_run, self._convert = open_run, convert
        # more than the frames a new run holds back, or the writer could wait on itself
        in_flight = max(layout.tail + 2, IN_FLIGHT_BYTES // max(1, frame_bytes))
        self._permits = threading.Semaphore(in_flight)
        self._slots = threading.Semaphore(max(1, encoders))
        self._runs: list[_Run] = []
        self._pending: list[np.ndarray] = []  # frames of a run not yet known to be long enough
        self._closed = False
        # A writer dropped without close() or abort(): its runs stop, and their temp files go
        # with them (each run's output removes its own when collected).
        self._finalizer = weakref.finalize(self, _abandon, self._runs)

    def put(self, rgb: np.ndarray) -> None:
        """Queue one (H, W, 3) uint8 RGB frame (copied) for its run's encoder."""
        if self._closed:
            raise EncodeError(f"{str(self.path)!r}: the writer is already closed")
        self._raise_failed()
        self._permits.acquire()
        frame = np.array(rgb, copy=True)
        if not self._runs:
            self._start_run([frame])
        elif self.frames - self._runs[-1].first < self._layout.run_frames:
            self._runs[-1].put(frame)
        else:  # a new run starts here once it is known to hold at least `tail` frames
            self._pending.append(frame)
            if len(self._pending) == self._layout.tail:
                self._runs[-1].end()
                self._start_run(self._pending)
                self._pending = []
        self.frames += 1

    def _start_run(self, frames: list[np.ndarray]) -> None:
        self._slots.acquire()
        try:
            output = self._open_run(self.path)
        except BaseException:
            self._slots.release()
            raise
        run = _Run(self.frames + 1 - len(frames), output, self._convert, self._permits, self._slots)
        self._runs.append(run)
        for frame in frames:
            run.put(frame)

    def _raise_failed(self) -> None:
        for run in self._runs:
            if run.error is not None:
                error = run.error
                self.discard()
                if isinstance(error, EncodeError):
                    raise error
                raise EncodeError(f"{str(self.path)!r}: encoding frames from {run.first} on failed: "
                                  f"{error}") from error

    def commit(self) -> None:
        """Finish every run and join them into the target (a single run is renamed onto it)."""
        if self._closed:
            return
        if self.frames == 0:
            self.discard()
            raise EncodeError(f"{str(self.path)!r}: no frames were written; refusing an empty video")
        try:
            for frame in self._pending:  # too few for a run of their own: the last run takes them
                self._runs[-1].put(frame)
            self._pending = []
            self._runs[-1].end()
            for run in self._runs:
                run.join()
            self._raise_failed()
            if len(self._runs) == 1:
                publish(self._runs[0].output.temp, self.path)
            else:
                self._join()
        except BaseException:
            self.discard()
            raise
        self._closed = True
        self._finalizer.detach()

    def _join(self) -> None:
        from daotai.encode.remux import Segment, copy_segments

        segments = [Segment(run.output.temp, 0, run.frames) for run in self._runs]
        rate = self._runs[0].output.spec.fps
        copy_segments(segments, self.path, Fraction(rate))
        for run in self._runs:
            remove_quietly(run.output.temp)

    def discard(self) -> None:
        """Stop every run and delete their files; the target is left untouched."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        self._pending = []
        for run in self._runs:
            run.error = run.error or EncodeError("discarded")
            run.end()
        for run in self._runs:
            run.join()
            run.output.discard()
