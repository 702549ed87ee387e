#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with daotai and its test tools,
# plus Mesa's EGL driver for the headless previz renderer when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
EXTRAS=${DAOTAI_EXTRAS:-dev}

need_gl_libs() {
  ! compgen -G "/usr/lib/*/libEGL.so.1" >/dev/null ||
    ! compgen -G "/usr/lib/*/libEGL_mesa.so.0" >/dev/null ||
    ! compgen -G "/usr/lib/*/dri/swrast_dri.so" >/dev/null
}

if need_gl_libs; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Mesa EGL (headless OpenGL for previz)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libegl1 libegl-mesa0 libgl1-mesa-dri >/dev/null
  else
    echo "setup: Mesa EGL not found; install it (Debian/Ubuntu: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri)" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi

# Reinstall only when the project's requirements changed since the last set-up.
stamp=.venv/.daotai-setup
want="$(cat pyproject.toml | sha256sum | cut -d' ' -f1) $EXTRAS"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q -e ".[${EXTRAS}]"
  echo "$want" > "$stamp"
fi
