"""Read ahead: pull a slow iterator (a decoder) on a worker thread while the consumer works.

Assembly decodes a clip, blends and encodes, one frame at a time. Decoding (FFmpeg and the
YUV→RGB maths) and x264 both release the GIL, so a decoder kept a few frames ahead on its own
thread overlaps the encoder instead of taking turns with it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["DEPTH", "read_ahead"]

T = TypeVar("T")

# Frames decoded ahead of the consumer: enough to ride over a slow frame of either side;
# at 1080p each holds 6 MB, so a few keep the memory of assembly small.
DEPTH = 4

_DONE = object()


class _Failed:
    """An exception raised by the source, carried over the queue to the consumer."""

    def __init__(self, error: BaseException):
        self.error = error


def read_ahead(source: Iterable[T], depth: int = DEPTH, name: str = "daotai-read-ahead") -> Iterator[T]:
    """The items of ``source`` in order, produced up to ``depth`` items ahead on a worker thread.

    An exception in the source is raised in the consumer at the item where it happened. When
    the consumer stops early (breaks, raises, or closes the generator), the worker stops at its
    next item and the source is closed on the worker's thread. The worker starts at the first
    item asked for.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth: {depth!r} must be an integer >= 1")
    items: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        """Queue an item, giving up when the consumer has gone; False when it has."""
        while not stop.is_set():
            try:
                items.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        iterator = iter(source)
        try:
            for item in iterator:
                if not put(item):
                    break
            else:
                put(_DONE)
        except BaseException as error:  # noqa: BLE001 - carried to the consumer and raised there
            put(_Failed(error))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    # Started by the consumer's first next(): a generator dropped unstarted leaves no thread behind.
    return _consume(items, stop, threading.Thread(target=work, name=name, daemon=True))


def _consume(items: queue.Queue[object], stop: threading.Event, worker: threading.Thread) -> Iterator[T]:
    """Generator side of read_ahead: yields queued items, re-raises the source's error."""
    worker.start()
    try:
        while True:
            item = items.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        worker.join()
