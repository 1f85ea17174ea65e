"""Pulsar rebalance: collect → usage → detect → plan → **human approval** → execute.

Each Spark task runs one thin entry point of ``spark_jobs/``; state lives in Postgres (plans,
approvals, bundle ranges, ownership history) and run-scoped Parquet. The plan waits at
``await_approval``: approve or reject it under **Browse → Required Actions** (the plan page is
under Browse → Rebalance plans), through Airflow's REST API, or with
``pulsar-rebalance plans approve|reject PLAN_ID``; nothing moves before that. Logic lives in the
``pulsar_rebalance`` package; this file only wires tasks.

One DAG per Pulsar cluster: Connection ``pulsar_admin_<name>`` → DAG ``pulsar_rebalance_<name>``
(``pulsar_admin_default`` → ``pulsar_rebalance``), named by ``AIRFLOW_CONN_PULSAR_ADMIN_<NAME>``
environment variables or the explicit list ``PULSAR_REBALANCE_CLUSTERS``.
"""

from __future__ import annotations

import os

from pulsar_rebalance.orchestration.dag_factory import build_dags

globals().update(build_dags(os.environ, doc_md=__doc__))
