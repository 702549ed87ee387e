#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with daotai and its test tools,
# plus Mesa's EGL driver for the headless previz renderer when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
EXTRAS=${DAOTAI_EXTRAS-dev,server,neural,cluster,mlx}

need_gl_libs() {
  ! compgen -G "/usr/lib/*/libEGL.so.1" >/dev/null ||
    ! compgen -G "/usr/lib/*/libEGL_mesa.so.0" >/dev/null ||
    ! compgen -G "/usr/lib/*/dri/swrast_dri.so" >/dev/null
}

need_cjk_font() {
  ! command -v fc-list >/dev/null || [ -z "$(fc-list :lang=zh 2>/dev/null | head -n 1)" ]
}

# Chinese names on previz labels and contact sheets need a CJK font (optional: without
# one, labels fall back to the ASCII character id).
if need_cjk_font && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing a CJK font for labels (fonts-wqy-microhei)" >&2
  (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fontconfig fonts-wqy-microhei >/dev/null) ||
    echo "setup: could not install a CJK font; labels will use character ids" >&2
fi

if need_gl_libs; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Mesa EGL (headless OpenGL for previz)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libegl1 libegl-mesa0 libgl1-mesa-dri >/dev/null
  else
    echo "setup: Mesa EGL not found; install it (Debian/Ubuntu: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri)" >&2
  fi
fi

# The web console's end-to-end tests drive Debian's Chromium through Playwright (never a
# browser that Playwright would download).
if [[ ",$EXTRAS," == *,dev,* ]] && [ ! -x /usr/bin/chromium ] && [ "${DAOTAI_SKIP_CHROMIUM:-0}" != 1 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Chromium (web console tests)" >&2
    (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ||
      echo "setup: could not install Chromium; tests/test_web_console.py will fail" >&2
  else
    echo "setup: /usr/bin/chromium not found; install it (Debian/Ubuntu: apt-get install chromium)" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi

# Reinstall only when the project's requirements changed since the last set-up. The stamp
# lists the extras installed; a request for a subset of them (the render command asks for
# none) is already satisfied.
stamp=.venv/.daotai-setup
hash="$(sha256sum pyproject.toml | cut -d' ' -f1)"
satisfied() {
  [ -f "$stamp" ] || return 1
  read -r have_hash have_extras < "$stamp" || true
  [ "$have_hash" = "$hash" ] || return 1
  local extra
  for extra in ${EXTRAS//,/ }; do
    case ",$have_extras," in *",$extra,"*) ;; *) return 1 ;; esac
  done
}
if ! satisfied; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  case ",$EXTRAS," in
    # Pinned so pip takes the CPU wheel instead of downloading a multi-GB CUDA build.
    *,neural,*) .venv/bin/python -m pip install -q "torch==2.13.0" ;;
  esac
  if [ -n "$EXTRAS" ]; then
    .venv/bin/python -m pip install -q -e ".[${EXTRAS}]"
  else
    .venv/bin/python -m pip install -q -e .
  fi
  echo "$hash $EXTRAS" > "$stamp"
fi
