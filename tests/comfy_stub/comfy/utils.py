"""The progress bar, as ComfyUI 0.3.64's ``comfy.utils`` gives it to nodes.

ComfyUI's server installs a global hook (``set_progress_bar_global_hook``) that sends each update
to the browser for the running node, and raises ``InterruptProcessingException`` there when the
user pressed stop; a bar made while no hook is set reports nowhere. The test harness installs a
hook that records the updates.
"""

from __future__ import annotations

from typing import Any, Callable

PROGRESS_BAR_ENABLED = True
PROGRESS_BAR_HOOK: Callable[..., None] | None = None


def set_progress_bar_enabled(enabled: bool) -> None:
    """Turn the console's progress bars on or off."""
    global PROGRESS_BAR_ENABLED
    PROGRESS_BAR_ENABLED = enabled


def set_progress_bar_global_hook(function: Callable[..., None] | None) -> None:
    """The function every ProgressBar made from now on reports to: ``hook(value, total, preview, node_id=...)``."""
    global PROGRESS_BAR_HOOK
    PROGRESS_BAR_HOOK = function


class ProgressBar:
    """A node's progress: ``total`` steps, reported through the hook set when it was made."""

    def __init__(self, total: int, node_id: str | None = None):
        self.total = total
        self.current = 0
        self.hook = PROGRESS_BAR_HOOK
        self.node_id = node_id

    def update_absolute(self, value: int, total: int | None = None, preview: Any = None) -> None:
        """Set the bar to ``value`` (of ``total``, when given), clamped to the total."""
        if total is not None:
            self.total = total
        self.current = min(value, self.total)
        if self.hook is not None:
            self.hook(self.current, self.total, preview, node_id=self.node_id)

    def update(self, value: int) -> None:
        """Advance the bar by ``value`` steps."""
        self.update_absolute(self.current + value)
