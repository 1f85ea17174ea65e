#!/usr/bin/env bash
# The README's main job: install, then one complete rebalance run on embedded defaults
# (embedded PostgreSQL, local Spark, the simulated Pulsar cluster, Airflow). Unattended: AUTO_APPROVE=1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/pulsar-rebalance demo "$@"
