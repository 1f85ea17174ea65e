#!/usr/bin/env bash
# The README's test command: install (the project, and Debian's chromium for the browser tests), the static
# checks (ruff, mypy, the import-layering contract), then the whole test suite (slow end-to-end tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
bash scripts/install-browser.sh
export PATH="$PWD/.venv/bin:$PATH"
set +e
.venv/bin/python -m pytest -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi
exit "$rc"
