#!/usr/bin/env bash
# Render the bundled example script with the embedded previz backend into out/example.
set -euo pipefail
cd "$(dirname "$0")/.."
DAOTAI_EXTRAS="${DAOTAI_EXTRAS-}" bash scripts/setup.sh  # the base install is all previz needs
exec .venv/bin/daotai render examples/office.json -o out/example "$@"
