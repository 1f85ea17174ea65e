"""compute_usage: broker usage (+ EMA across runs) and Pulsar's per-bundle time averages.

State that must survive between runs is never applied twice by a retried task: the broker usage
EMA starts from the latest value of an *earlier* run (``latest_broker_ema(exclude_run_id=...)``),
and BundleData averages are stored as ``{"runId", "before", "after"}`` so a retry of the same run
starts again from ``before``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulsar_rebalance.core.contract.load_json import bundle_data_from_json, local_broker_data_from_json
from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData
from pulsar_rebalance.pipeline.collect import broker_load_row
from pulsar_rebalance.pipeline.params import resource_weights


def carried(entry: Mapping[str, Any] | None, run_id: str) -> Any:
    """The value a run starts from: ``before`` if this run already wrote the entry, else ``after``."""
    if not entry:
        return None
    if "runId" not in entry:  # written by something else: take it as the current value
        return entry
    return entry.get("before") if entry.get("runId") == run_id else entry.get("after")


def latest(entry: Mapping[str, Any]) -> Any:
    """The newest value of a carried entry (what the current run produced, or the last run's)."""
    return entry.get("after") if "runId" in entry else entry


def carry(run_id: str, before: Any, after: Any) -> dict[str, Any]:
    return {"runId": run_id, "before": before, "after": after}


def parse_reports(reports: Mapping[str, Mapping[str, Any]]) -> dict[str, LocalBrokerData]:
    """Each broker's LocalBrokerData, parsed once per stage."""
    return {b: local_broker_data_from_json(r, f"load-report[{b}]") for b, r in sorted(reports.items())}


def broker_usage_rows(
    reports: Mapping[str, Mapping[str, Any]],
    parsed: Mapping[str, LocalBrokerData],
    prev_ema: Mapping[str, float] | None,
    cfg,
) -> list[dict[str, Any]]:
    """broker_load rows with Pulsar's weighted max usage and its EMA (history = loadBalancerHistoryResourcePercentage)."""
    h = cfg.load_balancer_history_resource_percentage
    weights = resource_weights(cfg)
    rows = []
    for broker, report in sorted(reports.items()):
        d = parsed[broker]
        u = d.max_resource_usage_with_weight(*weights)
        prev = (prev_ema or {}).get(broker)
        ema = u if prev is None else prev * h + (1 - h) * u
        rows.append(broker_load_row(broker, report, weights=weights, ema=ema, parsed=d))
    return rows


def update_time_averages(
    parsed: Mapping[str, LocalBrokerData], previous: Mapping[str, Any], run_id: str
) -> dict[str, dict[str, Any]]:
    """Pulsar leader's updateBundleData(): fold each broker's lastStats into the bundle's BundleData.

    ``previous`` maps bundle -> carried entry. Returns bundle -> new carried entry.
    """
    out: dict[str, dict[str, Any]] = {}
    for _, data in sorted(parsed.items()):
        for bundle, stats in data.last_stats.items():
            start = carried(previous.get(bundle), run_id)
            bd = bundle_data_from_json(start, f"bundleData.{bundle}") if start else BundleData.new_default()
            bd.update(stats)
            out[bundle] = carry(run_id, start, bd.to_json())
    return out


def bundle_load_rows(
    parsed: Mapping[str, LocalBrokerData],
    averages: Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """bundle_load rows: this run's sample (lastStats) + the short/long-term averages after it."""
    rows = []
    for broker, data in sorted(parsed.items()):
        for bundle, st in data.last_stats.items():
            bd = averages[bundle]["after"]
            rows.append(
                {
                    "bundle": bundle,
                    "broker_id": broker,
                    "msg_rate_in": st.msg_rate_in,
                    "msg_rate_out": st.msg_rate_out,
                    "msg_throughput_in": st.msg_throughput_in,
                    "msg_throughput_out": st.msg_throughput_out,
                    "topics": st.topics,
                    "producers": st.producer_count,
                    "consumers": st.consumer_count,
                    "short_term": bd.get("shortTermData"),
                    "long_term": bd.get("longTermData"),
                }
            )
    return rows
