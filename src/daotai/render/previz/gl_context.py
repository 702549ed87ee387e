"""The OpenGL context previz draws in: which backend each platform gets (EGL on Linux, else the
platform's own; DAOTAI_GL forces one), the headless context itself, and a line naming it.

Apart from the renderer because more than the renderer opens one: ``daotai doctor`` opens a
context to report the driver, and the thread count fixed by the first context is a fact of the
process, not of one renderer.
"""

from __future__ import annotations

import os
from typing import Any

from daotai.errors import BackendError

EGL_HINT = (
    "OpenGL via EGL is unavailable: install Mesa's EGL driver "
    "(Debian/Ubuntu: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri; "
    "Fedora: dnf install mesa-libEGL mesa-dri-drivers)"
)
RASTERISER_THREADS = "1"  # llvmpipe threads unless LP_NUM_THREADS is set (see create_context)
GL_BACKENDS = ("egl", "glx", "default")  # DAOTAI_GL: egl (Linux default), glx (an X display), default
GL_HINTS = {
    "egl": EGL_HINT,
    "glx": "OpenGL via GLX needs an X display (DISPLAY, e.g. under Xvfb) and Mesa's GL driver",
    "Darwin": "macOS did not give an OpenGL 3.3 core context (CGL); previz needs a Mac with OpenGL 4.1",
    "Windows": "Windows did not give an OpenGL 3.3 context (WGL); update the graphics driver",
}


def context_backend(system: str | None = None, choice: str | None = None) -> str | None:
    """The moderngl context backend: EGL on Linux (headless), else the platform's own (CGL, WGL).

    ``choice`` (default: $DAOTAI_GL) forces one: ``egl``, ``glx`` (an X display, as CI uses to run
    the non-EGL path a Mac runs) or ``default`` (moderngl's choice for the platform).
    """
    import platform

    system = system or platform.system()
    choice = (os.environ.get("DAOTAI_GL", "") if choice is None else choice).strip().lower()
    if choice and choice not in GL_BACKENDS:
        raise BackendError(f"DAOTAI_GL: {choice!r} must be one of {', '.join(GL_BACKENDS)}")
    if choice == "default" or (not choice and system != "Linux"):
        return None  # macOS: a CGL core-profile context (OpenGL 4.1); Windows: WGL
    if choice == "glx":
        return None  # on Linux moderngl's default standalone context is GLX
    return "egl"


def create_context() -> Any:
    """A standalone headless OpenGL 3.3 core context for this platform, or BackendError saying what to install."""
    import platform

    try:
        import moderngl
    except ImportError as exc:  # a base dependency; only a broken install gets here
        raise BackendError("the previz renderer needs the 'moderngl' package: pip install moderngl") from exc
    # Mesa's llvmpipe reads its rasteriser thread count once, when the first context of the
    # process opens; by default it takes one thread per core. One thread is the default here:
    # (1) a run keeps the main thread and the encoder processes busy on the other cores, and on
    # 2 cores one rasteriser thread spent ~20 % less CPU per 1080p frame than two (bench/previz.py);
    # (2) llvmpipe's pixels can depend on its thread count (an orbit shot differed between 1 and 2
    # threads), so a fixed count keeps renders byte-identical across machines with different core
    # counts and across processes (cluster workers, the server's workers). An LP_NUM_THREADS
    # already set wins: a many-core machine may trade that reproducibility for speed.
    os.environ.setdefault("LP_NUM_THREADS", RASTERISER_THREADS)
    backend = context_backend()
    try:
        if backend is None:
            return moderngl.create_standalone_context(require=330)
        return moderngl.create_standalone_context(backend=backend, require=330)
    except Exception as exc:  # noqa: BLE001  (glcontext raises plain Exception when a library or driver is missing)
        system = platform.system()
        hint = GL_HINTS.get(backend or "", GL_HINTS.get(system, GL_HINTS["glx"] if system == "Linux" else ""))
        raise BackendError(f"{hint} ({exc})") from exc


def describe_context(ctx: Any) -> str:
    """One line naming the OpenGL renderer and version of a context (manifests and doctor show it)."""
    info = ctx.info
    return f"{info.get('GL_RENDERER', '?')}; OpenGL {info.get('GL_VERSION', '?')}"
