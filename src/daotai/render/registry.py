"""Backends by name: the built-in specs plus those installed packages declare.

A backend module declares ``SPEC`` beside its class; this registry only knows where the
built-in modules are. Modules are imported when a spec is asked for, and a backend's optional
dependencies (torch, diffusers, mlx) only when it is built, so one backend's missing package
never breaks another.

Third-party backends register through the ``daotai.backends`` entry-point group (the way
OpenTimelineIO finds its adapters): each entry point loads to a :class:`BackendSpec`. They are
discovered on first use and cannot replace a built-in name.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from daotai.errors import BackendError
from daotai.render.base import Backend
from daotai.render.spec import BackendEnv, BackendOptions, BackendSpec

BACKEND_ENTRY_POINTS = "daotai.backends"

# Where the built-in backends declare their SPEC; the order is the one `--help` lists them in.
BUILTIN_MODULES = (
    "daotai.render.previz.backend",
    "daotai.render.wan",
    "daotai.render.wan_vace",
    "daotai.render.wan_camera",
    "daotai.render.ltx",
    "daotai.render.wan_mlx",
    "daotai.render.wan_vace_mlx",
    "daotai.render.h3",
    "daotai.render.h3_mlx",
)

_specs: dict[str, BackendSpec] | None = None


def _entry_point_specs() -> list[BackendSpec]:
    """Specs declared in the ``daotai.backends`` entry-point group by installed packages."""
    from importlib.metadata import entry_points

    found = []
    for point in entry_points(group=BACKEND_ENTRY_POINTS):
        spec = point.load()
        if not isinstance(spec, BackendSpec):
            raise TypeError(f"entry point {point.name!r} ({point.value}) gave {type(spec).__name__}, "
                            "not a daotai.render.spec.BackendSpec")
        found.append(spec)
    return found


def specs() -> Mapping[str, BackendSpec]:
    """Every backend spec by name (built-in first), loaded once."""
    global _specs
    if _specs is None:
        loaded: dict[str, BackendSpec] = {}
        for module_name in BUILTIN_MODULES:
            spec = importlib.import_module(module_name).SPEC
            loaded[spec.name] = spec
        for spec in _entry_point_specs():
            loaded.setdefault(spec.name, spec)
        _specs = loaded
    return dict(_specs)


def reload() -> None:
    """Forget the loaded specs (after installing a package that declares a backend)."""
    global _specs
    _specs = None


def backend_names() -> list[str]:
    """Names accepted by ``--backend``."""
    return sorted(specs())


def spec_for(name: str) -> BackendSpec:
    """The spec of the backend called ``name``."""
    found = specs().get(name)
    if found is None:
        raise BackendError(f"--backend: {name!r} is not a known backend; choose one of: {', '.join(backend_names())}")
    return found


def makes_controls(name: str) -> bool:
    """Whether the backend called ``name`` produces depth and mask control channels."""
    return spec_for(name).controls


def create_backend(name: str, options: Mapping[str, Any] | BackendOptions | None = None,
                   env: BackendEnv | None = None) -> Backend:
    """Build the backend registered under ``name`` with validated options."""
    return spec_for(name).build(options, env)
