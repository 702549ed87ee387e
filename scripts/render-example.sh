#!/usr/bin/env bash
# Render the bundled example script with the embedded previz backend into out/example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/daotai render examples/office.json -o out/example "$@"
