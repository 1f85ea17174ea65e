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
from typing import Any

log = logging.getLogger(__name__)

REBALANCE_DAG_ID = "pulsar_rebalance"


def worst_broker(client, cluster: str | None) -> tuple[str, str, float]:
    """``(cluster, broker, max resource usage)`` of the busiest broker, from the brokers' load reports."""
    from pulsar_rebalance.core.load import LocalBrokerData

    if not cluster:
        clusters = client.clusters()
        if not clusters:
            raise RuntimeError(f"{client.base_url} reports no Pulsar cluster")
        cluster = clusters[0]
    usage = {
        broker: LocalBrokerData.from_json(client.load_report(broker), f"load-report[{broker}]").max_resource_usage()
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


def sample_task(*, threshold: float, samples: int, cluster: str | None, run_id: str) -> dict[str, Any]:
    """The ``sample_imbalance`` task body: read the load reports, record the sample, decide."""
    from pulsar_rebalance.orchestration.connections import database_url, job_environment
    from pulsar_rebalance.pipeline.context import admin_client_from_env

    client = admin_client_from_env({**os.environ, **job_environment()})
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


def should_trigger(params: dict[str, Any], run_id: str, **_: Any) -> bool:
    """``sample_imbalance``'s callable (a ShortCircuitOperator): True lets ``trigger_rebalance`` run."""
    decided = sample_task(
        threshold=float(params["threshold"]),
        samples=int(params["samples"]),
        cluster=params.get("cluster") or None,
        run_id=run_id,
    )
    return bool(decided["trigger"])


__all__ = ["REBALANCE_DAG_ID", "sample_task", "should_trigger", "watch_sample", "worst_broker"]
