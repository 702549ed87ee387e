"""A denoise loop in a worker thread, bridged to a generator of events; one retry a tier lower."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Iterator

from daotai.errors import BackendError, Cancelled
from daotai.events import Event, Glimpse, Progress
from daotai.render.base import RunContext

_FINISHED = object()


LatentPicture = Callable[[Any], "tuple[int, Any] | None"]  # latents -> (frame index, (h, w, 3) uint8) or None


def run_steps(call: Callable[[Callable], Any], shot_id: str, total: int, ctx: RunContext,
              picture: LatentPicture | None = None) -> Iterator[Event | tuple]:
    """Run ``call(callback)`` in a thread; yield Progress per step, then ("result", value).

    ``callback`` is a diffusers ``callback_on_step_end``: it reports the step and sets
    ``pipe._interrupt`` when the run is cancelled, so the loop stops between steps. When the
    context asks for glimpses and ``picture`` gives one for the step's latents, a Glimpse with the
    step goes out too, at most every ``ctx.glimpse_every_s`` seconds.
    """
    events: queue.Queue = queue.Queue()
    started = time.perf_counter()
    state = {"cancelled": False, "last": started, "glimpsed": -float("inf")}

    def on_step_end(pipe: Any, step: int, timestep: Any, tensors: dict) -> dict:
        now = time.perf_counter()
        events.put(Progress("denoise", shot_id, step + 1, total, f"step {step + 1}/{total} {now - state['last']:.2f} s"))
        state["last"] = now
        every = ctx.glimpse_every_s
        if picture is not None and every is not None and now - state["glimpsed"] >= every:
            try:
                shown = picture(tensors.get("latents"))
            except Exception:  # noqa: BLE001  (a live picture is a courtesy: it never fails a render)
                shown = None
            if shown is not None:
                state["glimpsed"] = now
                events.put(Glimpse(shot_id, shown[0], shown[1], step + 1, total))
        if ctx.cancel.is_set() or state.get("abandoned"):
            state["cancelled"] = True
            pipe._interrupt = True
        return tensors

    def worker() -> None:
        try:
            events.put(("result", call(on_step_end)))
        except BaseException as exc:  # noqa: BLE001  (re-raised in the consumer's thread)
            events.put(("error", exc))
        events.put(_FINISHED)

    thread = threading.Thread(target=worker, name=f"daotai-denoise-{shot_id}", daemon=True)
    thread.start()
    outcome: tuple | None = None
    finished = False
    try:
        while True:
            item = events.get()
            if item is _FINISHED:
                finished = True
                break
            if isinstance(item, tuple):
                outcome = item
            else:
                yield item
    finally:
        if not finished:  # the consumer went away (closed generator): stop the loop at the next step
            state["abandoned"] = True
    thread.join()
    if state["cancelled"] or ctx.cancel.is_set():
        raise Cancelled(f"{shot_id}: stopped between denoising steps")
    if outcome is None:
        raise BackendError(f"{shot_id}: the pipeline ended without a result")
    if outcome[0] == "error":
        raise outcome[1]
    yield outcome


def step_callback_kwargs(callback: Callable) -> dict[str, Any]:
    """Pipeline keyword arguments that install the step callback."""
    return {"callback_on_step_end": callback, "callback_on_step_end_tensor_inputs": ["latents"]}


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message ('' when it has none)."""
    return str(exc).splitlines()[0] if str(exc) else ""


def retry_a_tier_lower(runner: Any, attempt: Callable[[], Iterator[Any]], *, failed: Callable[[BaseException], str],
                       exhausted: str, retrying: Callable[[str], Any],
                       passthrough: tuple[type[BaseException], ...] = (Cancelled,)) -> Iterator[Any]:
    """Run ``attempt()`` (a generator), and once more a memory tier lower if it ran out of memory.

    Other failures become BackendError(``failed(exc)``); ``passthrough`` errors propagate as they
    are; after the retry, or with no lower tier left, BackendError(``exhausted``). ``retrying(tier)``
    is yielded before the second attempt.
    """
    for round_ in (0, 1):
        try:
            yield from attempt()
            return
        except passthrough:
            raise
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise BackendError(failed(exc)) from exc
            lower = runner.step_down() if round_ == 0 else None
            if lower is None:
                raise BackendError(exhausted) from None
            yield retrying(lower)


def is_out_of_memory(exc: BaseException) -> bool:
    """True for a CUDA/MPS out-of-memory error."""
    name = type(exc).__name__
    return name == "OutOfMemoryError" or "out of memory" in str(exc).lower()
