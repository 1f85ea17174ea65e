"""The imbalance watch's sample task (DAG ``pulsar_rebalance_imbalance_watch``): one sample per run.

Reads every broker's load report through Pulsar's admin API (``GET /admin/v2/broker-stats/load-report``
on each broker, what Pulsar's own load manager reads), takes the worst broker's max resource usage, and
decides with :func:`pulsar_rebalance.core.imbalance.watch_step` under the cluster's row lock in
``imbalance_watch`` (two overlapping watch runs cannot both trigger). When it decides to trigger, the
run id it will trigger is stored (and the watch disarmed) in the same transaction, *before* the
``trigger_rebalance`` task creates that run: a retried trigger reuses the id, so an episode starts at
most one run.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from typing import Any

from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json

log = logging.getLogger(__name__)

REBALANCE_DAG_ID = "pulsar_rebalance"


def worst_broker(client, cluster: str | None) -> tuple[str, str, float]:
    """``(cluster, broker, max resource usage)`` of the busiest broker, from the brokers' load reports."""

    if not cluster:
        clusters = client.clusters()
        if not clusters:
            raise RuntimeError(f"{client.base_url} reports no Pulsar cluster")
        cluster = clusters[0]
    usage = {
        broker: local_broker_data_from_json(client.load_report(broker), f"load-report[{broker}]").max_resource_usage()
        for broker in client.brokers(cluster)
    }
    if not usage:
        raise RuntimeError(f"cluster {cluster!r} has no active brokers")
    broker = max(usage, key=lambda b: (usage[b], b))
    return cluster, broker, usage[broker]


def watch_sample(
    url: str,
    *,
    cluster: str,
    admin_url: str,
    broker: str,
    worst: float,
    threshold: float,
    samples: int,
    trigger_run_id: str,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """Record one sample and decide; ``{"trigger": bool, "run_id": ..., "reason": ...}``."""
    from pulsar_rebalance.core.imbalance import WatchRule, watch_step
    from pulsar_rebalance.core.windows import window_state
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store import windows as store_windows
    from pulsar_rebalance.store.engine import make_engine, session_scope

    rule = WatchRule(threshold, samples)
    now = now or dt.datetime.now(dt.UTC)
    with session_scope(make_engine(url)) as s:
        cluster_id = repo.get_or_create_cluster(s, name=cluster, admin_url=admin_url)
        watch = store_windows.lock_watch(s, cluster_id=cluster_id)
        setting = store_windows.window_setting(s, cluster_id=cluster_id)
        window_open = setting is None or window_state(setting, now).open
        busy = store_windows.cluster_busy(s, cluster_id=cluster_id)
        step = watch_step(
            rule, over_count=watch.over_count, armed=watch.armed, worst=worst, window_open=window_open, busy=busy
        )
        store_windows.save_watch(
            s,
            cluster_id=cluster_id,
            over_count=step.over_count,
            armed=step.armed,
            sample_at=now,
            worst=worst,
            triggered_run_id=trigger_run_id if step.trigger else None,
        )
    log.info("Cluster %s: %s (worst broker %s).", cluster, step.reason, broker)
    return {"trigger": step.trigger, "run_id": trigger_run_id, "reason": step.reason, "cluster": cluster}


def sample_task(
    *, threshold: float, samples: int, cluster: str | None, run_id: str, admin_conn_id: str | None = None
) -> dict[str, Any]:
    """The ``sample_imbalance`` task body: read the load reports (through the watched DAG's admin
    Connection ``admin_conn_id``; default ``pulsar_admin_default``), record the sample, decide."""
    from pulsar_rebalance.orchestration.connections import ADMIN_CONN_ID, database_url, job_environment
    from pulsar_rebalance.pipeline.context import admin_client_from_env

    client = admin_client_from_env({**os.environ, **job_environment(admin_conn_id or ADMIN_CONN_ID)})
    try:
        name, broker, worst = worst_broker(client, cluster)
        admin_url = client.base_url
    finally:
        client.close()
    return watch_sample(
        database_url(),
        cluster=name,
        admin_url=admin_url,
        broker=broker,
        worst=worst,
        threshold=threshold,
        samples=samples,
        trigger_run_id=f"imbalance__{run_id}",
    )


def should_trigger(params: dict[str, Any], run_id: str, admin_conn_id: str | None = None, **_: Any) -> bool:
    """``sample_imbalance``'s callable (a ShortCircuitOperator): True lets ``trigger_rebalance`` run."""
    decided = sample_task(
        threshold=float(params["threshold"]),
        samples=int(params["samples"]),
        cluster=params.get("cluster") or None,
        run_id=run_id,
        admin_conn_id=admin_conn_id,
    )
    return bool(decided["trigger"])


WATCH_DAG_ID = "pulsar_rebalance_imbalance_watch"


def watch_dag_id(name: str) -> str:
    """The watch of cluster ``name`` (``core.clusters``): ``pulsar_rebalance_imbalance_watch`` for the
    default cluster, ``pulsar_rebalance_imbalance_watch_<name>`` for another."""
    from pulsar_rebalance.core import clusters

    return WATCH_DAG_ID if name == clusters.DEFAULT_NAME else f"{WATCH_DAG_ID}_{name}"


def build_watch_dags(environ: Mapping[str, str], doc_md: str | None = None) -> dict[str, Any]:
    """``{dag_id: DAG}``: one imbalance watch per cluster the rebalance DAG file builds a DAG for (the
    same names, ``core.clusters.cluster_names``), each reading its own cluster's admin Connection and
    triggering that cluster's DAG. Paused when created."""
    import pendulum
    from airflow.providers.standard.operators.python import ShortCircuitOperator
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
    from airflow.sdk import DAG, Param

    from pulsar_rebalance.core import clusters
    from pulsar_rebalance.errors import ConfigError

    try:
        names = clusters.cluster_names(environ)
    except ValueError as exc:
        raise ConfigError(str(exc), key=clusters.CLUSTERS_ENV) from None
    out: dict[str, Any] = {}
    for name in names:
        target = clusters.dag_id(name)
        with DAG(
            dag_id=watch_dag_id(name),
            description=f"Start a {target} run when the worst broker stays over a threshold (inside the window)",
            schedule=environ.get("PULSAR_REBALANCE_IMBALANCE_SCHEDULE", "*/5 * * * *") or None,
            start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
            catchup=False,
            max_active_runs=1,
            is_paused_upon_creation=True,
            render_template_as_native_obj=True,
            tags=["pulsar", "rebalance", f"cluster:{name}"],
            doc_md=doc_md,
            params={
                "threshold": Param(
                    float(environ.get("PULSAR_REBALANCE_IMBALANCE_THRESHOLD", "0.85")),
                    type="number",
                    exclusiveMinimum=0,
                    maximum=2,
                    description="the worst broker's max resource usage (fraction: 0.85 = 85 %) that counts as over",
                ),
                "samples": Param(
                    int(environ.get("PULSAR_REBALANCE_IMBALANCE_SAMPLES", "3")),
                    type="integer",
                    minimum=1,
                    maximum=1000,
                    description="consecutive samples (runs of this DAG) at or over the threshold before a run starts",
                ),
                "cluster": Param(None, type=["null", "string"], description="Pulsar cluster name; null = the first"),
            },
        ) as dag:
            sample_imbalance = ShortCircuitOperator(
                task_id="sample_imbalance",
                python_callable=should_trigger,
                op_kwargs={"admin_conn_id": clusters.conn_id(name)},
            )
            trigger_rebalance = TriggerDagRunOperator(
                task_id="trigger_rebalance",
                trigger_dag_id=target,
                trigger_run_id="imbalance__{{ run_id }}",  # recorded by sample_imbalance before this task runs
                conf={"cluster": "{{ params.cluster }}"},
                skip_when_already_exists=True,  # a retry never starts a second run
            )
            sample_imbalance >> trigger_rebalance
        out[dag.dag_id] = dag
    return out


__all__ = [
    "REBALANCE_DAG_ID",
    "WATCH_DAG_ID",
    "build_watch_dags",
    "sample_task",
    "should_trigger",
    "watch_dag_id",
    "watch_sample",
    "worst_broker",
]
