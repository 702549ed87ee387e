"""The stop button, as ComfyUI 0.3.64's ``comfy.model_management`` exposes it to nodes."""

from __future__ import annotations

import threading


class InterruptProcessingException(Exception):
    """Raised by a node that noticed the user pressed stop."""


_lock = threading.RLock()
_interrupted = False


def interrupt_current_processing(value: bool = True) -> None:
    """Press (or release, ``value=False``) the stop button."""
    global _interrupted
    with _lock:
        _interrupted = value


def processing_interrupted() -> bool:
    """Whether stop was pressed."""
    with _lock:
        return _interrupted


def throw_exception_if_processing_interrupted() -> None:
    """Raise InterruptProcessingException (and release the button) when stop was pressed."""
    global _interrupted
    with _lock:
        if _interrupted:
            _interrupted = False
            raise InterruptProcessingException()
