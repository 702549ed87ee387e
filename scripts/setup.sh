#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with daotai and its test tools, plus, on
# Debian/Ubuntu as root, Mesa's EGL driver for the headless previz renderer when it is missing.
# Portable on purpose: Bash 3.2 (macOS's /bin/bash), no GNU-only tools (the hash is taken
# with Python), package-manager hints only where that package manager exists.
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS=${DAOTAI_EXTRAS-dev,server,neural,cluster,mlx,usd}
OS=$(uname -s)

# The first Python 3.11+ on the PATH (or $PYTHON when set).
find_python() {
  local candidate
  for candidate in ${PYTHON:-} python3.13 python3.12 python3.11 python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

if [ ! -x .venv/bin/python ]; then
  if ! PYTHON=$(find_python); then
    echo "setup: daotai needs Python 3.11 or newer; none was found on the PATH (set PYTHON=/path/to/python3.11)" >&2
    exit 1
  fi
fi

on_debian() {
  [ -f /etc/debian_version ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1
}

need_gl_libs() {
  ! compgen -G "/usr/lib/*/libEGL.so.1" >/dev/null ||
    ! compgen -G "/usr/lib/*/libEGL_mesa.so.0" >/dev/null ||
    ! compgen -G "/usr/lib/*/dri/swrast_dri.so" >/dev/null
}

need_cjk_font() {
  ! command -v fc-list >/dev/null 2>&1 || [ -z "$(fc-list :lang=zh 2>/dev/null | head -n 1)" ]
}

# Chinese names on previz labels and contact sheets need a CJK font (optional: without one,
# labels fall back to the ASCII character id). macOS ships CJK fonts.
if [ "$OS" = Linux ] && need_cjk_font && on_debian; then
  echo "setup: installing a CJK font for labels (fonts-wqy-microhei)" >&2
  (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fontconfig fonts-wqy-microhei >/dev/null) ||
    echo "setup: could not install a CJK font; labels will use character ids" >&2
fi

# Headless previz on Linux renders through EGL; macOS (CGL) and Windows (WGL) have their own.
if [ "$OS" = Linux ] && need_gl_libs; then
  if on_debian; then
    echo "setup: installing Mesa EGL (headless OpenGL for previz)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libegl1 libegl-mesa0 libgl1-mesa-dri >/dev/null
  elif [ -f /etc/debian_version ]; then
    echo "setup: Mesa EGL not found; install it (apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri)" >&2
  else
    echo "setup: Mesa's EGL driver not found; install Mesa's EGL and software rasteriser with your package manager" >&2
  fi
fi

# The web console's end-to-end tests drive Debian's Chromium through Playwright (never a
# browser that Playwright would download).
if [[ ",$EXTRAS," == *,dev,* ]] && [ "$OS" = Linux ] && [ ! -x /usr/bin/chromium ] && [ "${DAOTAI_SKIP_CHROMIUM:-0}" != 1 ]; then
  if on_debian; then
    echo "setup: installing Chromium (web console tests)" >&2
    (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ||
      echo "setup: could not install Chromium; tests/test_web_console.py will fail" >&2
  else
    echo "setup: /usr/bin/chromium not found; the web console tests need it" >&2
  fi
fi

# The console's storyboard test renders the printed PDF with poppler's pdftoppm/pdftotext.
if [[ ",$EXTRAS," == *,dev,* ]] && [ "$OS" = Linux ] && ! command -v pdftoppm >/dev/null 2>&1 && on_debian; then
  echo "setup: installing poppler-utils (storyboard PDF test)" >&2
  (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq poppler-utils >/dev/null) ||
    echo "setup: could not install poppler-utils; the board PDF is checked without rendering it" >&2
fi

# The previz tests also render through GLX on a virtual X display (the non-EGL context path a
# Mac or a desktop Linux session takes).
if [[ ",$EXTRAS," == *,dev,* ]] && [ "$OS" = Linux ] && ! command -v Xvfb >/dev/null 2>&1 && on_debian; then
  echo "setup: installing Xvfb (previz tests of the GLX context)" >&2
  (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xvfb >/dev/null) ||
    echo "setup: could not install Xvfb; the GLX previz test will be skipped" >&2
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi

# Reinstall only when the project's requirements changed since the last set-up. The stamp
# lists the extras installed; a request for a subset of them (the render command asks for
# none) is already satisfied.
stamp=.venv/.daotai-setup
hash=$(.venv/bin/python -c 'import hashlib; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())')
satisfied() {
  [ -f "$stamp" ] || return 1
  local have_hash have_extras extra
  read -r have_hash have_extras < "$stamp" || true
  [ "$have_hash" = "$hash" ] || return 1
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
