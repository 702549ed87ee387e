#!/usr/bin/env bash
# Lint, then run the whole test suite (sets itself up first). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# ruff's rules and exceptions live in pyproject.toml ([tool.ruff]); any finding fails the run.
.venv/bin/ruff check src tests bench
set +e
.venv/bin/python -m pytest -q "$@"
status=$?
set -e
if [ "$status" = 5 ]; then
  echo "test.sh: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
