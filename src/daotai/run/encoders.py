"""Where a shot's rendered frames go to be encoded: one sink per output stream (shot video,
depth, depth preview, mask), either a long-lived process of the run's
``daotai.encode.procsink.EncoderPool`` or a thread of this process fed through a bounded queue.

Encoder processes pay back their start-up only on long runs (:func:`use_encoder_processes`);
short runs, and ``render_shot`` called without a pool, encode on threads.
"""

from __future__ import annotations

import queue
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from daotai.errors import Cancelled, EncodeError
from daotai.plan.geometry import FAR_M, NEAR_M
from daotai.plan.model import Plan, ShotPlan
from daotai.run.settings import PipelineSettings, encode_settings_for, layout_for

QUEUE_DEPTH = 6  # frames in flight per encoder thread: overlap without much memory


_DONE = object()


_ABORT = object()


class _Sink:
    """Runs ``consume(iterator)`` in a thread; items arrive through a bounded queue."""

    def __init__(self, name: str, consume: Callable[[Iterator[Any]], Any]):
        self.name = name
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
        self._error: BaseException | None = None
        self.busy_s = 0.0
        self._thread = threading.Thread(target=self._run, args=(consume,), name=f"daotai-{name}", daemon=True)
        self._thread.start()

    def _items(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if item is _ABORT:
                raise Cancelled("encoding stopped")
            started = time.perf_counter()
            yield item
            self.busy_s += time.perf_counter() - started

    def _run(self, consume: Callable[[Iterator[Any]], Any]) -> None:
        try:
            consume(self._items())
        except BaseException as exc:  # noqa: BLE001  (reported to the producer in put()/finish())
            self._error = exc
            # Drain so a producer blocked on a full queue wakes up and sees the error.
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break

    def put(self, item: Any) -> None:
        while True:
            if self._error is not None:
                raise self._error
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                if not self._thread.is_alive():
                    raise EncodeError(f"{self.name} encoder stopped unexpectedly") from self._error

    def finish(self) -> None:
        self.put(_DONE)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def abort(self) -> None:
        try:
            self._queue.put(_ABORT, timeout=2.0)
        except queue.Full:
            pass
        self._thread.join(timeout=30.0)


# Encoder processes beat encoder threads by ~3.5 ms of wall time per megapixel-frame on two
# busy cores (median of bench/previz.py runs: 1080p 0.56x vs 0.50x real time, 360p with controls
# 1.68x vs 1.47x) but cost ~1 s to start; below this many pixels in a run, threads finish first.
ENCODER_PROCESS_MIN_PIXELS = 300_000_000  # ~145 frames at 1920x1080, ~1300 at 640x360


def use_encoder_processes(plan: Plan) -> bool:
    """Whether a local run encodes in processes (long runs) or threads (short ones)."""
    return sum(s.frames for s in plan.shots) * plan.width * plan.height >= ENCODER_PROCESS_MIN_PIXELS


def shot_sinks(plan: Plan, shot: ShotPlan, out_dir: Path, settings: PipelineSettings,
                encoders: Any = None) -> dict[str, Any]:
    """One sink per output stream: encoder processes from ``encoders`` (an EncoderPool), else threads."""
    fps = Fraction(*plan.fps_fraction)
    enc = encode_settings_for(settings, plan.width, plan.height)
    layout = layout_for(out_dir, settings)
    sid = shot.shot_id
    shot_path = layout.shot(sid)
    near, far = NEAR_M, FAR_M  # the renderer's clip planes (daotai.plan.geometry)
    if encoders is not None:
        from daotai.encode.procsink import StreamJob

        w, h = plan.width, plan.height
        jobs = {"shot": StreamJob("rgb", shot_path, w, h, fps, enc)}
        if settings.controls:
            jobs["depth"] = StreamJob("depth16", layout.depth(sid), w, h, fps)
            jobs["depth_preview"] = StreamJob("depth_preview", layout.depth_preview(sid), w, h, fps,
                                              near=near, far=far)
            jobs["mask"] = StreamJob("gray8", layout.mask(sid), w, h, fps)
        labels = {"shot": "video", "depth": "depth", "depth_preview": "depth preview", "mask": "mask"}
        sinks: dict[str, Any] = {}
        try:
            for stream, job in jobs.items():
                sinks[stream] = encoders.open(stream, f"{shot.shot_id} {labels[stream]}", job)
        except BaseException:
            for sink in sinks.values():
                sink.abort()
            raise
        return sinks

    from daotai.encode.video import VideoWriter, write_gray8, write_gray16, write_preview_h264
    from daotai.render.previz.control import depth_to_preview, depth_to_uint16_mm

    def write_rgb(frames: Iterator[np.ndarray]) -> None:
        with VideoWriter(shot_path, plan.width, plan.height, fps, enc) as writer:
            for frame in frames:
                writer.write(frame)

    sinks = {"shot": _Sink(f"{shot.shot_id} video", write_rgb)}
    if settings.controls:
        sinks["depth"] = _Sink(
            f"{shot.shot_id} depth",
            lambda frames: write_gray16((depth_to_uint16_mm(d) for d in frames), layout.depth(sid), fps),
        )
        sinks["depth_preview"] = _Sink(
            f"{shot.shot_id} depth preview",
            lambda frames: write_preview_h264(
                (depth_to_preview(d, near, far) for d in frames), layout.depth_preview(sid), fps
            ),
        )
        sinks["mask"] = _Sink(
            f"{shot.shot_id} mask",
            lambda frames: write_gray8(frames, layout.mask(sid), fps),
        )
    return sinks
