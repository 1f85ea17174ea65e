"""Pulsar's load-report JSON in, :mod:`pulsar_rebalance.core.pulsar.load`'s data types out.

The JSON names are Pulsar's (``msgRateIn``, ``lastStats``, ``shortTermData``...). Every error is a
:class:`~pulsar_rebalance.errors.ScenarioError` naming the JSON path of the field. Unknown members are
ignored (Pulsar's payloads carry more than is modelled, e.g. ``protocols``).

Parsing speed matters (the ``decide`` benchmark parses 1,000 brokers and 100,000 bundle entries): the
``*_fast`` readers take a well-formed object without building any error path, and anything unusual falls
back to the validating reader, which names the offending field; no pydantic per row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pulsar_rebalance.core.contract.json_input import (
    field_path,
    opt_int,
    opt_list,
    opt_number,
    opt_str,
    req_int,
    req_mapping,
    req_number,
    require_object,
)
from pulsar_rebalance.core.pulsar.load import (
    BrokerLoadData,
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageBrokerData,
    TimeAverageMessageData,
    max_f32_percent,
)
from pulsar_rebalance.core.pulsar.split_algorithms import TopicRates
from pulsar_rebalance.errors import ScenarioError

_INF = math.inf
_NUMBER_TYPES = (int, float)  # exact types only: bool is rejected
_ZERO_USAGE = ResourceUsage(0.0, 0.0)


def resource_usage_from_json(obj: object, path: str) -> ResourceUsage:
    """Parse ``{"usage": number, "limit": number}``; both required, finite, non-negative."""
    o = require_object(obj, path)
    return ResourceUsage(req_number(o, "usage", path), req_number(o, "limit", path))


def namespace_bundle_stats_from_json(obj: object, path: str) -> NamespaceBundleStats:
    """The four rates and ``topics`` required; the counts default to 0 (see :class:`NamespaceBundleStats`)."""
    o = require_object(obj, path)
    return NamespaceBundleStats(
        msg_rate_in=req_number(o, "msgRateIn", path),
        msg_throughput_in=req_number(o, "msgThroughputIn", path),
        msg_rate_out=req_number(o, "msgRateOut", path),
        msg_throughput_out=req_number(o, "msgThroughputOut", path),
        consumer_count=opt_int(o, "consumerCount", path),
        producer_count=opt_int(o, "producerCount", path),
        topics=req_int(o, "topics", path),
        cache_size=opt_int(o, "cacheSize", path),
    )


def _stats_fast(obj: object) -> NamespaceBundleStats | None:
    """Parse well-formed NamespaceBundleStats without building error paths (None -> validating path)."""
    if type(obj) is not dict:
        return None
    ri = obj.get("msgRateIn")
    ti = obj.get("msgThroughputIn")
    ro = obj.get("msgRateOut")
    to = obj.get("msgThroughputOut")
    cc = obj.get("consumerCount", 0)
    pc = obj.get("producerCount", 0)
    tp = obj.get("topics")
    cs = obj.get("cacheSize", 0)
    if (
        type(ri) in _NUMBER_TYPES
        and type(ti) in _NUMBER_TYPES
        and type(ro) in _NUMBER_TYPES
        and type(to) in _NUMBER_TYPES
        and 0 <= ri < _INF  # type: ignore[operator]
        and 0 <= ti < _INF  # type: ignore[operator]
        and 0 <= ro < _INF  # type: ignore[operator]
        and 0 <= to < _INF  # type: ignore[operator]
        and type(cc) is int
        and type(pc) is int
        and type(tp) is int
        and type(cs) is int
        and cc >= 0
        and pc >= 0
        and tp >= 0
        and cs >= 0
    ):
        return NamespaceBundleStats(float(ri), float(ti), float(ro), float(to), cc, pc, tp, cs)  # type: ignore[arg-type]
    return None


def local_broker_data_from_json(obj: object, path: str) -> LocalBrokerData:
    """A modular load manager's load report; the rules (what is required, what is derived as Pulsar
    derives it) are in :class:`LocalBrokerData`'s docstring."""
    o = require_object(obj, path)
    report_type = o.get("loadReportType")
    if report_type is not None and report_type != LocalBrokerData.LOAD_REPORT_TYPE:
        raise ScenarioError(
            field_path(path, "loadReportType"), f"expected {LocalBrokerData.LOAD_REPORT_TYPE!r}, got {report_type!r}"
        )
    stats_key = "lastStats" if "lastStats" in o or "bundleStats" not in o else "bundleStats"
    raw_stats = req_mapping(o, stats_key, path)
    stats_path = field_path(path, stats_key)
    last_stats: dict[str, NamespaceBundleStats] = {}
    for bundle, raw in raw_stats.items():
        stats = _stats_fast(raw)
        last_stats[bundle] = (
            stats if stats is not None else namespace_bundle_stats_from_json(raw, f"{stats_path}.{bundle}")
        )

    def _usage(key: str, required: bool) -> ResourceUsage:
        if key not in o:
            if required:
                raise ScenarioError(field_path(path, key), "required object is missing")
            return _ZERO_USAGE
        return resource_usage_from_json(o[key], field_path(path, key))

    if "msgRateIn" in o and "msgRateOut" in o and "msgThroughputIn" in o and "msgThroughputOut" in o:
        rate_in = req_number(o, "msgRateIn", path)
        rate_out = req_number(o, "msgRateOut", path)
        thr_in = req_number(o, "msgThroughputIn", path)
        thr_out = req_number(o, "msgThroughputOut", path)
    else:
        # Pulsar's updateBundleData: broker rates are the sums of its bundles' stats (map order).
        for key in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"):
            if key in o:
                raise ScenarioError(
                    field_path(path, key),
                    "give all four of msgRateIn/msgRateOut/msgThroughputIn/msgThroughputOut or none "
                    "(none = sums over lastStats, as Pulsar computes them)",
                )
        rate_in = rate_out = thr_in = thr_out = 0.0
        for s in last_stats.values():
            thr_in += s.msg_throughput_in
            thr_out += s.msg_throughput_out
            rate_in += s.msg_rate_in
            rate_out += s.msg_rate_out

    raw_bundles = opt_list(o, "bundles", path)
    if raw_bundles is None:
        bundles: tuple[str, ...] = tuple(last_stats)
    else:
        bundles = _unique_strings(raw_bundles, field_path(path, "bundles"))

    def _count(key: str, derived: int) -> int:
        return opt_int(o, key, path, derived)

    return LocalBrokerData(
        cpu=_usage("cpu", True),
        memory=_usage("memory", False),
        direct_memory=_usage("directMemory", False),
        bandwidth_in=_usage("bandwidthIn", True),
        bandwidth_out=_usage("bandwidthOut", True),
        msg_throughput_in=thr_in,
        msg_throughput_out=thr_out,
        msg_rate_in=rate_in,
        msg_rate_out=rate_out,
        last_update=opt_int(o, "lastUpdate", path),
        last_stats=last_stats,
        num_topics=_count("numTopics", sum(s.topics for s in last_stats.values())),
        num_bundles=_count("numBundles", len(last_stats)),
        num_consumers=_count("numConsumers", sum(s.consumer_count for s in last_stats.values())),
        num_producers=_count("numProducers", sum(s.producer_count for s in last_stats.values())),
        bundles=bundles,
        last_bundle_gains=_unique_strings(
            opt_list(o, "lastBundleGains", path, []) or [], field_path(path, "lastBundleGains")
        ),
        last_bundle_losses=_unique_strings(
            opt_list(o, "lastBundleLosses", path, []) or [], field_path(path, "lastBundleLosses")
        ),
        web_service_url=opt_str(o, "webServiceUrl", path, allow_null=True),
        web_service_url_tls=opt_str(o, "webServiceUrlTls", path, allow_null=True),
        pulsar_service_url=opt_str(o, "pulsarServiceUrl", path, allow_null=True),
        pulsar_service_url_tls=opt_str(o, "pulsarServiceUrlTls", path, allow_null=True),
        persistent_topics_enabled=_opt_bool(o, "persistentTopicsEnabled", path, True),
        non_persistent_topics_enabled=_opt_bool(o, "nonPersistentTopicsEnabled", path, True),
        broker_version_string=opt_str(o, "brokerVersionString", path, allow_null=True),
    )


def _opt_bool(o: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
    if key not in o:
        return default
    value = o[key]
    if not isinstance(value, bool):
        raise ScenarioError(field_path(path, key), f"expected a boolean, got {value!r}")
    return value


def _unique_strings(items: Iterable[object], field: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise ScenarioError(f"{field}[{i}]", f"expected a string, got {item!r}")
        seen.setdefault(item, None)
    return tuple(seen)


def time_average_message_data_from_json(obj: object, path: str) -> TimeAverageMessageData:
    """All six members required; ``maxSamples >= 1`` (Pulsar divides by the sample count)."""
    fast = _tamd_fast(obj)
    if fast is not None:
        return fast
    o = require_object(obj, path)
    max_samples = req_int(o, "maxSamples", path)
    if max_samples < 1:
        raise ScenarioError(field_path(path, "maxSamples"), f"must be >= 1, got {max_samples}")
    return TimeAverageMessageData(
        max_samples=max_samples,
        num_samples=req_int(o, "numSamples", path),
        msg_throughput_in=req_number(o, "msgThroughputIn", path),
        msg_throughput_out=req_number(o, "msgThroughputOut", path),
        msg_rate_in=req_number(o, "msgRateIn", path),
        msg_rate_out=req_number(o, "msgRateOut", path),
    )


def _tamd_fast(obj: object) -> TimeAverageMessageData | None:
    """Parse a well-formed TimeAverageMessageData object without building any error path.

    100,000s of these are parsed per ``decide`` run; anything unusual returns None and the caller
    takes the validating path, which names the offending field.
    """
    if type(obj) is not dict:
        return None
    ms = obj.get("maxSamples")
    ns = obj.get("numSamples")
    ti = obj.get("msgThroughputIn")
    to = obj.get("msgThroughputOut")
    ri = obj.get("msgRateIn")
    ro = obj.get("msgRateOut")
    if (
        type(ms) is int
        and type(ns) is int
        and ms >= 1
        and ns >= 0
        and type(ti) in _NUMBER_TYPES
        and type(to) in _NUMBER_TYPES
        and type(ri) in _NUMBER_TYPES
        and type(ro) in _NUMBER_TYPES
        and 0 <= ti < _INF  # type: ignore[operator]
        and 0 <= to < _INF  # type: ignore[operator]
        and 0 <= ri < _INF  # type: ignore[operator]
        and 0 <= ro < _INF  # type: ignore[operator]
    ):
        return TimeAverageMessageData(ms, ns, float(ti), float(to), float(ri), float(ro))  # type: ignore[arg-type]
    return None


def bundle_data_from_json(obj: object, path: str) -> BundleData:
    """``{"shortTermData", "longTermData"}`` required, ``topics`` optional (0)."""
    fast = _bundle_data_fast(obj)
    if fast is not None:
        return fast
    o = require_object(obj, path)
    return BundleData(
        time_average_message_data_from_json(req_mapping(o, "shortTermData", path), field_path(path, "shortTermData")),
        time_average_message_data_from_json(req_mapping(o, "longTermData", path), field_path(path, "longTermData")),
        opt_int(o, "topics", path),
    )


def _bundle_data_fast(obj: object) -> BundleData | None:
    """Parse a well-formed BundleData without building error paths (None -> use the validating path)."""
    if type(obj) is not dict:
        return None
    topics = obj.get("topics", 0)
    if type(topics) is not int or topics < 0:
        return None
    st = _tamd_fast(obj.get("shortTermData"))
    lt = _tamd_fast(obj.get("longTermData"))
    if st is None or lt is None:
        return None
    return BundleData(st, lt, topics)


def time_average_broker_data_from_json(obj: object, path: str) -> TimeAverageBrokerData:
    """All eight members required."""
    o = require_object(obj, path)
    return TimeAverageBrokerData(**{attr: req_number(o, key, path) for key, attr in TimeAverageBrokerData.JSON_FIELDS})


def broker_load_data_from_json(obj: object, path: str) -> BrokerLoadData:
    """The extensible load manager's ``BrokerLoadData`` (see the type for the fields and defaults)."""
    o = require_object(obj, path)

    def _usage(key: str, required: bool) -> ResourceUsage:
        if key not in o:
            if required:
                raise ScenarioError(field_path(path, key), "required object is missing")
            return _ZERO_USAGE
        return resource_usage_from_json(o[key], field_path(path, key))

    cpu = _usage("cpu", True)
    direct = _usage("directMemory", False)
    bw_in = _usage("bandwidthIn", True)
    bw_out = _usage("bandwidthOut", True)
    thr_in = req_number(o, "msgThroughputIn", path)
    thr_out = req_number(o, "msgThroughputOut", path)
    max_usage = (
        req_number(o, "maxResourceUsage", path)
        if "maxResourceUsage" in o
        else max_f32_percent(cpu, direct, bw_in, bw_out)
    )
    return BrokerLoadData(
        cpu=cpu,
        memory=_usage("memory", False),
        direct_memory=direct,
        bandwidth_in=bw_in,
        bandwidth_out=bw_out,
        msg_throughput_in=thr_in,
        msg_throughput_out=thr_out,
        msg_rate_in=req_number(o, "msgRateIn", path),
        msg_rate_out=req_number(o, "msgRateOut", path),
        bundle_count=req_int(o, "bundleCount", path),
        topics=opt_int(o, "topics", path),
        max_resource_usage=max_usage,
        weighted_max_ema=req_number(o, "weightedMaxEMA", path),
        msg_throughput_ema=opt_number(o, "msgThroughputEMA", path, thr_in + thr_out),
        updated_at=req_int(o, "updatedAt", path),
        reported_at=opt_int(o, "reportedAt", path),
    )


def parse_bundle_data_map(obj: object, path: str) -> dict[str, BundleData]:
    """Parse ``{"tenant/ns/0x.._0x..": BundleData, ...}`` (a convenience for contracts)."""
    o = require_object(obj, path)
    out: dict[str, BundleData] = {}
    for bundle, raw in o.items():
        data = _bundle_data_fast(raw)
        out[bundle] = data if data is not None else bundle_data_from_json(raw, field_path(path, bundle))
    return out


def parse_local_broker_data_map(obj: object, path: str) -> dict[str, LocalBrokerData]:
    """Parse ``{"broker-id": LocalBrokerData, ...}`` (a convenience for contracts)."""
    o = require_object(obj, path)
    return {
        broker: local_broker_data_from_json(raw, f"{path}.{broker}" if path else broker) for broker, raw in o.items()
    }


def topic_rates_from_json(obj: object, path: str) -> TopicRates:
    """``{"msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"}``: all required,
    finite, non-negative (errors name e.g. ``topics.persistent://t/n/x.msgRateIn``)."""
    o = require_object(obj, path)
    return TopicRates(
        msg_rate_in=req_number(o, "msgRateIn", path),
        msg_rate_out=req_number(o, "msgRateOut", path),
        msg_throughput_in=req_number(o, "msgThroughputIn", path),
        msg_throughput_out=req_number(o, "msgThroughputOut", path),
    )


def topic_rates_map(raw: Mapping[str, Any], path: str) -> dict[str, TopicRates]:
    """Parse ``{"<full topic>": {msgRateIn, msgRateOut, msgThroughputIn, msgThroughputOut}}``."""
    return {topic: topic_rates_from_json(value, f"{path}.{topic}") for topic, value in raw.items()}
