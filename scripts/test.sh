#!/usr/bin/env bash
# The README's test command: install (the project, and Debian's chromium for the browser tests), the static
# checks (ruff, mypy, the import-layering contract), then the whole test suite (slow end-to-end tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
bash scripts/install-browser.sh
export PATH="$PWD/.venv/bin:$PATH"

# Static checks (configured in pyproject.toml), each named in a one-line message when it fails.
check() {
  local name=$1
  shift
  echo "[static] $name" >&2
  "$@" || { echo "static check failed: $name ($*)" >&2; exit 1; }
}
check "ruff format" .venv/bin/ruff format --check .
check "ruff lint" .venv/bin/ruff check .
check "mypy (src/pulsar_rebalance; core and errors with the strict flags)" .venv/bin/mypy
# --strict itself as well: catches the strict flag list in pyproject.toml falling behind a newer mypy
check "mypy --strict (pulsar_rebalance.core)" .venv/bin/mypy --strict --cache-dir .mypy_cache/strict -p pulsar_rebalance.core
# PYTHONPATH: the contracts are checked on this checkout's src/, whichever checkout the venv installed
check "import layering (lint-imports)" env PYTHONPATH=src .venv/bin/lint-imports --no-logo

set +e
# --durations: the CI log names the slowest tests, so a suite drifting towards CI's time limit shows where.
# -n: two pytest-xdist workers (PULSAR_REBALANCE_TEST_WORKERS; 0 = one process), each with its own Postgres and
# SparkSession; --dist worksteal: a worker that runs out takes half of the other's queue. A later -n in "$@" wins.
.venv/bin/python -m pytest -p no:cacheprovider --durations=30 -n "${PULSAR_REBALANCE_TEST_WORKERS:-2}" \
  --dist worksteal "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi
exit "$rc"
