"""Backends by name: the built-in specs plus those installed packages declare.

A backend module declares ``SPEC`` beside its class; this registry only knows where the
built-in modules are. Modules are imported when a spec is asked for, and a backend's optional
dependencies (torch, diffusers, mlx) only when it is built, so one backend's missing package
never breaks another.

Third-party backends register through the ``daotai.backends`` entry-point group (the way
OpenTimelineIO finds its adapters): each entry point loads to a :class:`BackendSpec`. They are
discovered on first use and cannot replace a built-in name; one that fails to load is skipped and
reported (:mod:`daotai.plugins`; ``DAOTAI_NO_PLUGINS=1`` loads none). An unknown name is the
user's typo, an :class:`OptionError` naming the nearest backends, not a backend failure.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from daotai.errors import OptionError
from daotai.plugins import load_group
from daotai.render.base import Backend
from daotai.render.spec import BackendEnv, BackendOptions, BackendSpec
from daotai.script.spellings import did_you_mean, nearest

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
    "daotai.render.ltx2",
    "daotai.render.h3_mlx",
)

_specs: dict[str, BackendSpec] | None = None


def _not_a_spec(obj: Any) -> str | None:
    return None if isinstance(obj, BackendSpec) else f"gave {type(obj).__name__}, not a daotai.render.spec.BackendSpec"


def _entry_point_specs() -> list[BackendSpec]:
    """Specs declared in the ``daotai.backends`` entry-point group by installed packages; one that
    fails to load is skipped and reported (:func:`daotai.plugins.skipped`), never breaking the rest."""
    return load_group(BACKEND_ENTRY_POINTS, _not_a_spec)


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


def unknown_backend(name: object, where: str = "--backend") -> OptionError:
    """The error for a backend name no spec has: an option error naming the closest names."""
    names = backend_names()
    # A lower cutoff than a script word's: backend names are short ('h3'), and any hint beats none
    hint = did_you_mean(nearest(str(name).strip().lower(), names, cutoff=0.5))
    return OptionError.at(where, name, f"is not a known backend{hint}; choose one of: {', '.join(names)}")


def check_backend(name: object, where: str = "--backend") -> BackendSpec:
    """The spec of the backend called ``name``; OptionError (exit 2, HTTP 422) at ``where`` naming
    the nearest names when there is none."""
    found = specs().get(name) if isinstance(name, str) else None
    if found is None:
        raise unknown_backend(name, where)
    return found


def spec_for(name: str) -> BackendSpec:
    """The spec of the backend called ``name`` (OptionError naming the nearest names if unknown)."""
    return check_backend(name)


def makes_controls(name: str) -> bool:
    """Whether the backend called ``name`` produces depth and mask control channels."""
    return spec_for(name).controls


def create_backend(name: str, options: Mapping[str, Any] | BackendOptions | None = None,
                   env: BackendEnv | None = None) -> Backend:
    """Build the backend registered under ``name`` with validated options."""
    return spec_for(name).build(options, env)
