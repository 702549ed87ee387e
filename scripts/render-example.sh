#!/usr/bin/env bash
# Render the bundled example script with the embedded previz backend into out/example.
# Set-up (scripts/setup.sh) lists any system package it would install (Mesa's EGL driver, a CJK
# font) with what it is for before installing it; DAOTAI_NO_SYSTEM_PACKAGES=1 installs none.
set -euo pipefail
cd "$(dirname "$0")/.."
DAOTAI_EXTRAS="${DAOTAI_EXTRAS-}" bash scripts/setup.sh  # the base install is all previz needs
exec .venv/bin/daotai render examples/office.json -o out/example "$@"
