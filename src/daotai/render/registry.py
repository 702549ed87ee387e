"""Backends by name. Each entry is imported only when chosen, so optional dependencies of
one backend never break another."""

from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import Any

from daotai.errors import BackendError
from daotai.render.base import Backend

# name → "module:factory"; the factory takes keyword options and returns a Backend.
BACKENDS = MappingProxyType(
    {
        "previz": "daotai.render.previz.backend:PrevizBackend",
        "wan": "daotai.render.wan:WanBackend",
        "wan-vace": "daotai.render.wan_vace:WanVACEBackend",
        "ltx": "daotai.render.ltx:LTXBackend",
        "wan-mlx": "daotai.render.wan_mlx:WanMLXBackend",
    }
)


# Backends that yield depth and mask with every frame; the others run with controls off.
CONTROL_BACKENDS = frozenset({"previz"})


def makes_controls(name: str) -> bool:
    """Whether the backend called ``name`` produces depth and mask control channels."""
    return name in CONTROL_BACKENDS


def backend_names() -> list[str]:
    """Names accepted by ``--backend``."""
    return sorted(BACKENDS)


def create_backend(name: str, **options: Any) -> Backend:
    """Instantiate the backend registered under ``name``."""
    target = BACKENDS.get(name)
    if target is None:
        raise BackendError(f"--backend: {name!r} is not a known backend; choose one of: {', '.join(backend_names())}")
    module_name, factory_name = target.split(":")
    module = importlib.import_module(module_name)
    return getattr(module, factory_name)(**options)
