#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs the project deterministically.
# pyspark and the Spark provider's pyspark-client share site-packages/pyspark/: whichever installs
# last wins the overlapping files, so pyspark is force-reinstalled last (no deps) and then verified.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 is required"' 
java -version >/dev/null 2>&1 || { echo "Java 17+ is required for Spark (java not found)" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
stamp=.venv/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "[install] installing dependencies into .venv (first time: a few minutes)" >&2
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -c constraints.txt -e ".[dev]"
  PYSPARK_VERSION=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("pyspark"))')
  .venv/bin/pip install -q --force-reinstall --no-deps "pyspark==${PYSPARK_VERSION}"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
.venv/bin/python - <<'PY'
import importlib.metadata as m, pyspark
assert pyspark.__version__ == m.version("pyspark"), (pyspark.__version__, m.version("pyspark"))
PY
# Lighter Spark job start-up: the driver JVM's class-data-sharing archive (pipeline/jvm.py), built once.
.venv/bin/python -m pulsar_rebalance.pipeline.jvm --if-missing
