"""Installed packages that extend daotai through entry points, loaded one by one.

Two groups are read: ``daotai.backends`` (render backends, :mod:`daotai.render.registry`) and
``daotai.models`` (catalog rows, :mod:`daotai.catalog`). A plugin that fails to import, raises
while loading or gives the wrong kind of object is skipped and remembered here, so one broken
package never takes previz or any other backend down with it (editorial tools treat their
adapters the same way); ``daotai backends`` and ``daotai doctor`` report what was skipped.

``DAOTAI_NO_PLUGINS=1`` turns every plugin off: only the built-in backends and rows load.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NO_PLUGINS_ENV = "DAOTAI_NO_PLUGINS"

# The plugins skipped at the last load of each group: group -> problems (replaced on every load).
_skipped: dict[str, tuple["PluginProblem", ...]] = {}


@dataclass(frozen=True)
class PluginProblem:
    """A plugin that was skipped: its entry point and what went wrong, in one line."""

    group: str
    name: str
    value: str  # the entry point's target, ``module:attribute``
    error: str

    def __str__(self) -> str:
        return f"plugin {self.name!r} ({self.group}: {self.value}) skipped: {self.error}"


def plugins_enabled() -> bool:
    """False when ``DAOTAI_NO_PLUGINS`` is set to anything but empty or 0."""
    return os.environ.get(NO_PLUGINS_ENV, "").strip().lower() in ("", "0", "false", "no")


def load_group(group: str, accept: Callable[[Any], str | None]) -> list[Any]:
    """The objects every entry point of ``group`` loads to, in the order found.

    ``accept(obj)`` returns None for an object of the right kind, else the reason it is not; a
    plugin that raises while loading or is refused is skipped and recorded (:func:`skipped`).
    Nothing is loaded when plugins are turned off."""
    loaded: list[Any] = []
    problems: list[PluginProblem] = []
    if plugins_enabled():
        from importlib.metadata import entry_points

        for point in entry_points(group=group):
            try:
                obj = point.load()
                reason = accept(obj)
            except Exception as error:  # noqa: BLE001 - another package's import; it must not break ours
                reason = f"{type(error).__name__}: {error}"
            if reason is None:
                loaded.append(obj)
            else:
                problems.append(PluginProblem(group, point.name, point.value, " ".join(str(reason).split())))
    _skipped[group] = tuple(problems)
    return loaded


def skip(problem: PluginProblem) -> None:
    """Record one more skipped plugin of ``problem.group`` (one a loader refused after loading it)."""
    _skipped[problem.group] = (*_skipped.get(problem.group, ()), problem)


def skipped() -> tuple[PluginProblem, ...]:
    """Every plugin skipped at the last load of each group."""
    return tuple(problem for problems in _skipped.values() for problem in problems)


__all__ = ["NO_PLUGINS_ENV", "PluginProblem", "load_group", "plugins_enabled", "skip", "skipped"]
