#!/usr/bin/env bash
# Runs the fault-injection suite (slow cases included) and rewrites the figure table of
# docs/fault-injection.md (the text above its "<!-- table -->" line is kept). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export PULSAR_REBALANCE_FAULT_REPORT="$PWD/docs/fault-injection.md"
exec bash scripts/test.sh tests/faults tests/simulator/test_fault_modes.py -q "$@"
