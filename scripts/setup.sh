#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with daotai and its test tools, plus, on
# Debian/Ubuntu as root, the system packages that are missing: Mesa's EGL driver (headless
# OpenGL for previz) and a CJK font (Chinese labels), and for the dev extra Chromium (web
# console tests), poppler-utils (storyboard PDF test) and Xvfb (GLX previz test). It lists
# them, each with what it is for, before installing anything.
#   DAOTAI_NO_SYSTEM_PACKAGES=1  install no system package: list what is missing and the apt-get command
#   DAOTAI_SKIP_CHROMIUM=1       everything but Chromium
#   DAOTAI_EXTRAS=a,b            the Python extras to install (default below; empty: the base install)
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

dev_extras() {
  case ",$EXTRAS," in *,dev,*) return 0 ;; esac
  return 1
}

# System packages are gathered first, then said (what and why), then installed in one go, so
# nothing reaches the system unannounced. DAOTAI_NO_SYSTEM_PACKAGES=1 skips the install and
# prints the command to run instead. Each entry: packages, what they are for, what happens
# without them, and whether set-up can go on without them (optional) or not (required).
PACKAGES=()
WHY=()
WITHOUT=()
REQUIRED=()
wanted=0
want() {
  PACKAGES[$wanted]=$1
  WHY[$wanted]=$2
  WITHOUT[$wanted]=$3
  REQUIRED[$wanted]=$4
  wanted=$((wanted + 1))
}

if [ "$OS" = Linux ]; then
  # Headless previz on Linux renders through EGL; macOS (CGL) and Windows (WGL) have their own.
  if need_gl_libs; then
    want "libegl1 libegl-mesa0 libgl1-mesa-dri" "Mesa's EGL driver: headless OpenGL for the previz renderer" \
      "previz cannot render on this machine" required
  fi
  # Chinese names on previz labels and contact sheets need a CJK font (without one, labels fall
  # back to the ASCII character id). macOS ships CJK fonts.
  if need_cjk_font; then
    want "fontconfig fonts-wqy-microhei" "a CJK font: Chinese names on previz labels and contact sheets" \
      "labels show character ids instead of Chinese names" optional
  fi
  # The web console's end-to-end tests drive Debian's Chromium through Playwright (never a
  # browser that Playwright would download).
  if dev_extras && [ ! -x /usr/bin/chromium ] && [ "${DAOTAI_SKIP_CHROMIUM:-0}" != 1 ]; then
    want "chromium" "Chromium: the web console's browser tests (tests/test_web_console.py)" \
      "the web console tests fail" optional
  fi
  # The console's storyboard test renders the printed PDF with poppler's pdftoppm/pdftotext.
  if dev_extras && ! command -v pdftoppm >/dev/null 2>&1; then
    want "poppler-utils" "poppler's pdftoppm: the storyboard PDF test renders the printed board" \
      "the board PDF is checked without rendering it" optional
  fi
  # The previz tests also render through GLX on a virtual X display (the non-EGL context path a
  # Mac or a desktop Linux session takes).
  if dev_extras && ! command -v Xvfb >/dev/null 2>&1; then
    want "xvfb" "Xvfb: a virtual X display for the previz test of the GLX context" \
      "the GLX previz test is skipped" optional
  fi
fi

say_wanted() {
  local i=0
  while [ "$i" -lt "$wanted" ]; do
    echo "  ${PACKAGES[$i]}: ${WHY[$i]} (without it ${WITHOUT[$i]})" >&2
    i=$((i + 1))
  done
}

if [ "$wanted" -gt 0 ]; then
  all=""
  i=0
  while [ "$i" -lt "$wanted" ]; do
    all="$all ${PACKAGES[$i]}"
    i=$((i + 1))
  done
  if [ "${DAOTAI_NO_SYSTEM_PACKAGES:-0}" = 1 ]; then
    echo "setup: not installing system packages (DAOTAI_NO_SYSTEM_PACKAGES=1); missing here:" >&2
    say_wanted
    if [ -f /etc/debian_version ]; then
      echo "setup: to install them yourself: sudo apt-get install$all" >&2
    fi
  elif on_debian; then
    echo "setup: installing system packages with apt-get (DAOTAI_NO_SYSTEM_PACKAGES=1 skips this):" >&2
    say_wanted
    apt-get update -qq >/dev/null || echo "setup: apt-get update failed; installing from the current lists" >&2
    i=0
    while [ "$i" -lt "$wanted" ]; do
      # shellcheck disable=SC2086  # the package list is meant to split into words
      if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${PACKAGES[$i]} >/dev/null; then
        if [ "${REQUIRED[$i]}" = required ]; then
          echo "setup: could not install ${PACKAGES[$i]}: ${WITHOUT[$i]}" >&2
          exit 1
        fi
        echo "setup: could not install ${PACKAGES[$i]}; ${WITHOUT[$i]}" >&2
      fi
      i=$((i + 1))
    done
  else
    # Not root on Debian, or another system: say what is missing and leave it to the user.
    echo "setup: system packages missing here (install them with your package manager):" >&2
    say_wanted
    if [ -f /etc/debian_version ]; then
      echo "setup: on Debian/Ubuntu: sudo apt-get install$all" >&2
    fi
  fi
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
