"""Running the library's event generators for a front end without an event loop of its own.

The library's long work is a generator of events (:mod:`daotai.render.base`) that returns its
result; a ComfyUI node wants a plain call with a progress bar and a stop button. :func:`drive`
bridges the two: Progress events go to a callback, and a caller's interrupt flag sets the
run context's cancel event, so the library stops at its next check with
:class:`~daotai.errors.Cancelled`. Glimpses (a small picture of the shot so far, made only when
the context asks for them) go to their own callback, for a front end that can show a picture. A callback may raise (ComfyUI's progress hook raises when
stop was pressed): the generator is closed, so its clean-up runs, and the exception goes on.
"""

from __future__ import annotations

from typing import Callable, Generator, TypeVar

from daotai.events import Event, Glimpse, Progress
from daotai.render.base import RunContext

T = TypeVar("T")

ProgressHook = Callable[[int, int], None]  # (done, total)
GlimpseHook = Callable[[Glimpse], None]


def drive(events: Generator[Event, None, T], ctx: RunContext, on_progress: ProgressHook | None = None,
          interrupted: Callable[[], bool] | None = None, on_glimpse: GlimpseHook | None = None) -> T:
    """Run ``events`` to its return value, reporting Progress (and Glimpses) and passing on an interrupt
    as cancellation.

    ``ctx`` is the context ``events`` was made with: an interrupt sets its cancel event.
    """
    while True:
        if interrupted is not None and interrupted():
            ctx.cancel.set()
        try:
            event = next(events)
        except StopIteration as stop:
            return stop.value
        try:
            if on_progress is not None and isinstance(event, Progress) and event.total > 0:
                on_progress(event.done, event.total)
            elif on_glimpse is not None and isinstance(event, Glimpse):
                on_glimpse(event)
        except BaseException:
            events.close()  # a front end's stop raised in its progress call: the work ends here
            raise
