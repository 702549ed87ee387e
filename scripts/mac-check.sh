#!/usr/bin/env bash
# One command to run once on a Mac (it runs on Linux too): sets daotai up, then measures what this
# machine does with it — doctor, a previz render of every example with QC, MLX parity against
# torch, timed wan-mlx renders with peak memory per stage, hardware encoder speed and PSNR — into
# mac-check/mac-check.json and mac-check/mac-check.md. docs/mlx.md says how to read and send them.
#
#   scripts/mac-check.sh                  # the full check (tens of minutes with a pulled model)
#   scripts/mac-check.sh --quick          # about a minute: one example shot, tiny models only
#   scripts/mac-check.sh --report DIR     # write the report somewhere else (default: mac-check)
#   scripts/mac-check.sh --model NAME     # time this Wan model (default: wan2.1-t2v-1.3b when pulled)
#
# DAOTAI_CHECK_SKIP_SETUP=1 uses the existing .venv as it is (CI, or a second run).
# Bash 3.2 compatible (macOS's /bin/bash): no associative arrays, no ${x,,}, no mapfile.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${DAOTAI_CHECK_SKIP_SETUP:-0}" != 1 ]; then
  # neural: torch and diffusers for the parity check; mlx: the MLX route being checked
  DAOTAI_EXTRAS="${DAOTAI_EXTRAS-neural,mlx}" bash scripts/setup.sh
fi
if [ ! -x .venv/bin/daotai ]; then
  echo "mac-check: .venv/bin/daotai not found; run without DAOTAI_CHECK_SKIP_SETUP=1 to set up" >&2
  exit 1
fi
exec .venv/bin/daotai doctor --check "$@"
