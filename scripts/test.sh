#!/usr/bin/env bash
# Lint, then run the whole test suite (sets itself up first). Extra arguments go to pytest.
# Set-up (scripts/setup.sh) lists the system packages it is about to install, each with what it
# is for, before installing them on Debian/Ubuntu as root: Mesa's EGL driver and a CJK font,
# and for the tests Chromium, poppler-utils and Xvfb.
#   DAOTAI_NO_SYSTEM_PACKAGES=1  install none (the tests that need one fail or are skipped; the
#                                set-up prints the apt-get command that would install them)
#   DAOTAI_TEST_WORKERS=N        pytest processes (default 2; 0: one process)
#   DAOTAI_TEST_TIER=fast|slow|all  which tests: fast (default) leaves out those marked slow (the
#                                longest end-to-end cases, ~7 minutes on 2 cores); slow runs only
#                                those; all runs both in one go. CI runs fast, then slow.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "test.sh: setting up .venv and missing system packages (scripts/setup.sh; DAOTAI_NO_SYSTEM_PACKAGES=1 skips the latter)" >&2
bash scripts/setup.sh
# ruff's rules and exceptions live in pyproject.toml ([tool.ruff]); any finding fails the run.
.venv/bin/ruff check src tests bench
set +e
# Two workers, a test file each at a time (module fixtures stay shared): 11.4 min instead of
# 13.7 for the whole suite on a 2-core machine. DAOTAI_TEST_WORKERS=0 runs in one process.
workers=${DAOTAI_TEST_WORKERS:-2}
tier=${DAOTAI_TEST_TIER:-fast}
case "$tier" in
  fast) select=(-m "not slow") ;;
  slow) select=(-m slow) ;;
  all) select=() ;;
  *) echo "test.sh: DAOTAI_TEST_TIER=$tier: choose fast, slow or all" >&2; exit 2 ;;
esac
echo "test.sh: the $tier tier of the suite (DAOTAI_TEST_TIER=fast|slow|all)" >&2
if [ "$workers" = 0 ]; then
  .venv/bin/python -m pytest -q "${select[@]}" "$@"
else
  .venv/bin/python -m pytest -q -n "$workers" --dist loadfile "${select[@]}" "$@"
fi
status=$?
set -e
if [ "$status" = 5 ]; then
  echo "test.sh: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
