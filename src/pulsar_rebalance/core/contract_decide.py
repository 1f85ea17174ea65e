"""The ``decide`` JSON contract: run Pulsar's shedding (+ split trigger, + placement) over cycles.

``decide_scenario(doc) -> dict`` validates the **whole** document first (every error is a
:class:`~pulsar_rebalance.errors.ScenarioError` naming the JSON path, e.g.
``cycles[0].brokers.broker-1.cpu.usage``), then runs the cycles in order, carrying the strategy
state (EMA history, hit counts, recently unloaded bundles/brokers) from one cycle to the next.

Input (see docs/core-decide.md for the full description and an example)::

    {"shedding": "ThresholdShedder" | "OverloadShedder" | "UniformLoadShedder" | "AvgShedder"
                 | "TransferShedder" (+ opt-in variants, see core.shedders.SHEDDERS),
     "placement": "LeastLongTermMessageRate" | "LeastResourceUsageWithWeight" | "AvgShedder",  (optional)
     "config": {"<broker.conf key>": value},   (optional)
     "seed": 7,                                (optional, default 0: seeds every random tie-break)
     "state": {...},                           (optional: the "state" of a previous output)
     "assignDestinations": false,              (optional)
     "cycles": [CYCLE, ...]}

    CYCLE = {"brokers": {id: LocalBrokerData}, "bundleData": {bundle: BundleData},
             "timeAverageBrokerData": {id: TimeAverageBrokerData}, "brokerLoadData": {id: BrokerLoadData},
             "topBundlesLoadData": {id: [{"bundleName": b, "stats": NamespaceBundleStats}]},
             "recentlyUnloadedBundles": {bundle: ms}, "recentlyUnloadedBrokers": {id: ms},
             "nowMs": ms, "place": [bundle], "namespaceBundleCounts": {"tenant/ns": n},
             "availableBrokers": [id]}

Output: ``{"cycles": [{"label", "reason", "detail", "unloads", "executed", "splits", "placements", "stats"}],
"state": {...}, "shedding", "placement", "seed"}``. ``unloads`` is what the strategy selected;
``executed`` (``{"unloads", "dropped"}``) is what the leader's ``doLoadShedding`` would do with it
(destination from ``selectBroker`` over all brokers, the source included; drops with their reason).
The cycle order is: splits, then shedding, then ``place`` lookups (see :func:`_run_cycle`). The core
follows apache/pulsar commit 009a9bf2 (docs/core-decide.md).

Keys starting with ``_`` and ``description`` are ignored everywhere (comments); any other unknown
key is an error, so a misspelt option is never silently ignored.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.bundles import BundleRange, split_full_name
from pulsar_rebalance.core.config import PLACEMENT_STRATEGY_CLASSES, SHEDDING_STRATEGY_CLASSES, LoadBalancerConfig
from pulsar_rebalance.core.bundles import format_boundary
from pulsar_rebalance.core.decision import (
    Decision,
    DropReason,
    DroppedUnload,
    Placement,
    Reason,
    SplitDecision,
    Unload,
    skip,
)
from pulsar_rebalance.core.json_input import (
    json_type_name,
    check_int,
    field_path,
    require_object,
)
from pulsar_rebalance.core.load import (
    BrokerLoadData,
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    SystemResourceUsage,
    TimeAverageBrokerData,
    parse_bundle_data_map,
)
from pulsar_rebalance.core.placement import EXTENSIBLE_PLACEMENTS, PLACEMENTS
from pulsar_rebalance.core.planner import PlannerInput
from pulsar_rebalance.core.placement.assignment import (
    ModularPlacementContext,
    select_broker,
    select_broker_for_assignment,
)
from pulsar_rebalance.core.shedders import BASE_NAME, EXTENSIBLE_SHEDDERS, SHEDDERS
from pulsar_rebalance.core.shedders.base import ModularInput, namespace_of
from pulsar_rebalance.core.shedders.transfer_shedder import ExtensibleInput, top_k_bundles
from pulsar_rebalance.core.split_algorithms import TopicRates, get_split_boundaries, topic_rates_map
from pulsar_rebalance.core.split_trigger import extensible_bundles_to_split, modular_bundles_to_split
from pulsar_rebalance.core.snapshot import check_load_report, check_no_overlap
from pulsar_rebalance.core.state import StrategyState
from pulsar_rebalance.core.strategies import specs as strategy_specs
from pulsar_rebalance.errors import ConfigError, ScenarioError, SnapshotError

_TOP_KEYS = frozenset({"shedding", "placement", "config", "seed", "state", "assignDestinations", "cycles"})
_CYCLE_KEYS = frozenset(
    {
        "brokers",
        "bundleData",
        "timeAverageBrokerData",
        "brokerLoadData",
        "topBundlesLoadData",
        "recentlyUnloadedBundles",
        "recentlyUnloadedBrokers",
        "nowMs",
        "place",
        "namespaceBundleCounts",
        "availableBrokers",
        "bundleTopics",
    }
)


def _check_keys(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key in allowed or key == "description" or (isinstance(key, str) and key.startswith("_")):
            continue
        raise ScenarioError(field_path(path, key), f"unknown field; expected one of {', '.join(sorted(allowed))}")


# ---------------------------------------------------------------------------------------------
# Parsed scenario
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Cycle:
    """One validated cycle of input."""

    path: str
    brokers: dict[str, LocalBrokerData] | None
    bundle_data: dict[str, BundleData]
    bundle_data_given: bool
    time_average: dict[str, TimeAverageBrokerData] | None
    broker_load_data: dict[str, BrokerLoadData] | None
    top_bundles: dict[str, list[tuple[str, NamespaceBundleStats]]] | None
    recently_unloaded_bundles: dict[str, int]
    recently_unloaded_brokers: dict[str, int]
    now_ms: int | None
    place: list[str]
    namespace_bundle_counts: dict[str, int] | None
    available_brokers: list[str] | None
    bundle_topics: dict[str, dict[str, TopicRates]] | None = None
    """GlobalPlanner only: per bundle, its topics' rates (lets a split isolate a hot topic)."""


@dataclass(slots=True)
class Scenario:
    shedding: str
    placement: str
    config: LoadBalancerConfig
    seed: int
    state: StrategyState
    assign_destinations: bool
    cycles: list[Cycle] = field(default_factory=list)

    @property
    def extensible(self) -> bool:
        return self.shedding in EXTENSIBLE_SHEDDERS


class _BundleNames:
    """Validates full bundle names (``tenant/ns/0x.._0x..``), caching range strings (they repeat)."""

    def __init__(self) -> None:
        self._ranges: set[str] = set()

    def check(self, name: object, path: str) -> str:
        if not isinstance(name, str):
            raise ScenarioError(path, f"expected a bundle name string, got {json_type_name(name)}")
        namespace, sep, range_name = name.rpartition("/")
        if range_name in self._ranges and sep and namespace:
            return name
        try:
            split_full_name(name)
        except ValueError as exc:
            raise ScenarioError(path, str(exc)) from None
        if "/" not in namespace:
            raise ScenarioError(path, f"{name!r} is not a full bundle name: the namespace must be 'tenant/namespace'")
        BundleRange.parse(range_name, path)
        self._ranges.add(range_name)
        return name


def _ms_map(obj: Mapping[str, Any], key: str, path: str, names: _BundleNames | None) -> dict[str, int]:
    if key not in obj:
        return {}
    mp = field_path(path, key)
    raw = require_object(obj[key], mp)
    out: dict[str, int] = {}
    for name, value in raw.items():
        fp = field_path(mp, name)
        if names is not None:
            names.check(name, fp)
        out[name] = check_int(value, fp)
    return out


def _parse_cycle(raw: object, path: str, scenario: Scenario, names: _BundleNames) -> Cycle:
    obj = require_object(raw, path)
    _check_keys(obj, _CYCLE_KEYS, path)

    brokers: dict[str, LocalBrokerData] | None = None
    if "brokers" in obj:
        bp = field_path(path, "brokers")
        raw_brokers = require_object(obj["brokers"], bp)
        brokers = {}
        for broker, value in raw_brokers.items():
            p = field_path(bp, broker)
            if not broker:
                raise ScenarioError(p, "broker id must not be empty")
            data = LocalBrokerData.from_json(value, p)
            for i, bundle in enumerate(data.bundles):
                names.check(bundle, f"{p}.bundles[{i}]")
            for bundle in data.last_stats:
                names.check(bundle, f"{p}.lastStats.{bundle}")
            check_load_report(broker, data, p)
            brokers[broker] = data
        _check_one_owner(brokers, bp)

    bundle_data: dict[str, BundleData] = {}
    if "bundleData" in obj:
        bdp = field_path(path, "bundleData")
        bundle_data = parse_bundle_data_map(obj["bundleData"], bdp)
        for bundle in bundle_data:
            names.check(bundle, field_path(bdp, bundle))
    # else: derived at run time from the state's BundleData and the brokers' lastStats (_leader_bundle_data)

    time_average: dict[str, TimeAverageBrokerData] | None = None
    if "timeAverageBrokerData" in obj:
        tp = field_path(path, "timeAverageBrokerData")
        raw_ta = require_object(obj["timeAverageBrokerData"], tp)
        time_average = {b: TimeAverageBrokerData.from_json(v, field_path(tp, b)) for b, v in raw_ta.items()}

    broker_load_data: dict[str, BrokerLoadData] | None = None
    if "brokerLoadData" in obj:
        lp = field_path(path, "brokerLoadData")
        raw_ld = require_object(obj["brokerLoadData"], lp)
        broker_load_data = {b: BrokerLoadData.from_json(v, field_path(lp, b)) for b, v in raw_ld.items()}

    top_bundles: dict[str, list[tuple[str, NamespaceBundleStats]]] | None = None
    if "topBundlesLoadData" in obj:
        tbp = field_path(path, "topBundlesLoadData")
        raw_tb = require_object(obj["topBundlesLoadData"], tbp)
        top_bundles = {}
        for broker, items in raw_tb.items():
            ip = field_path(tbp, broker)
            if not isinstance(items, list):
                raise ScenarioError(ip, f"expected an array of {{bundleName, stats}}, got {json_type_name(items)}")
            entries: list[tuple[str, NamespaceBundleStats]] = []
            for k, item in enumerate(items):
                ep = field_path(ip, k)
                entry = require_object(item, ep)
                _check_keys(entry, frozenset({"bundleName", "stats"}), ep)
                if "bundleName" not in entry:
                    raise ScenarioError(field_path(ep, "bundleName"), "required string is missing")
                bundle = names.check(entry["bundleName"], field_path(ep, "bundleName"))
                if "stats" not in entry:
                    raise ScenarioError(field_path(ep, "stats"), "required object is missing")
                entries.append((bundle, NamespaceBundleStats.from_json(entry["stats"], field_path(ep, "stats"))))
            top_bundles[broker] = entries

    now_ms: int | None = None
    if "nowMs" in obj:
        now_ms = check_int(obj["nowMs"], field_path(path, "nowMs"))

    place: list[str] = []
    if "place" in obj:
        pp = field_path(path, "place")
        if not isinstance(obj["place"], list):
            raise ScenarioError(pp, f"expected an array of bundle names, got {json_type_name(obj['place'])}")
        place = [names.check(b, field_path(pp, i)) for i, b in enumerate(obj["place"])]

    counts: dict[str, int] | None = None
    if "namespaceBundleCounts" in obj:
        cp = field_path(path, "namespaceBundleCounts")
        raw_counts = require_object(obj["namespaceBundleCounts"], cp)
        counts = {}
        for ns, value in raw_counts.items():
            n = check_int(value, field_path(cp, ns))
            if n < 1:
                raise ScenarioError(field_path(cp, ns), f"a namespace has at least 1 bundle, got {n}")
            counts[ns] = n

    available: list[str] | None = None
    if "availableBrokers" in obj:
        ap = field_path(path, "availableBrokers")
        if not isinstance(obj["availableBrokers"], list):
            raise ScenarioError(ap, f"expected an array of broker ids, got {json_type_name(obj['availableBrokers'])}")
        available = []
        for i, b in enumerate(obj["availableBrokers"]):
            if not isinstance(b, str) or not b:
                raise ScenarioError(field_path(ap, i), "expected a non-empty broker id string")
            available.append(b)

    cycle = Cycle(
        path=path,
        brokers=brokers,
        bundle_data=bundle_data,
        bundle_data_given="bundleData" in obj,
        time_average=time_average,
        broker_load_data=broker_load_data,
        top_bundles=top_bundles,
        recently_unloaded_bundles=_ms_map(obj, "recentlyUnloadedBundles", path, names),
        recently_unloaded_brokers=_ms_map(obj, "recentlyUnloadedBrokers", path, None),
        now_ms=now_ms,
        place=place,
        namespace_bundle_counts=counts,
        available_brokers=available,
        bundle_topics=_bundle_topics(obj, path, names),
    )
    _check_cycle_shape(cycle, scenario)
    return cycle


def _check_one_owner(brokers: Mapping[str, LocalBrokerData], path: str) -> None:
    """The snapshot rules of core.snapshot that a cycle can break: a bundle under two brokers, or
    two bundles of a namespace whose ranges overlap, is a contradiction (Pulsar owns each hash once)."""
    owner: dict[str, str] = {}
    for broker, data in brokers.items():
        for bundle in dict.fromkeys((*data.bundles, *data.last_stats)):
            other = owner.setdefault(bundle, broker)
            if other != broker:
                raise SnapshotError(f"bundle {bundle} is under two brokers: {other} and {broker}",
                                    broker=broker, bundle=bundle, field=field_path(path, broker))
    check_no_overlap(owner, path)


def _bundle_topics(obj: Mapping[str, Any], path: str, names: _BundleNames) -> dict[str, dict[str, TopicRates]] | None:
    if "bundleTopics" not in obj:
        return None
    bp = field_path(path, "bundleTopics")
    out: dict[str, dict[str, TopicRates]] = {}
    for bundle, topics in require_object(obj["bundleTopics"], bp).items():
        p = field_path(bp, bundle)
        names.check(bundle, p)
        out[bundle] = topic_rates_map(require_object(topics, p), p)
    return out


def _check_cycle_shape(cycle: Cycle, scenario: Scenario) -> None:
    """Cross-field rules: what each shedder needs, and ids that must refer to known brokers."""
    path = cycle.path
    if scenario.extensible:
        if cycle.broker_load_data is None and cycle.brokers is None:
            raise ScenarioError(
                field_path(path, "brokerLoadData"),
                "TransferShedder needs brokerLoadData (extensible load reports) or brokers (LocalBrokerData to derive them from)",
            )
        if cycle.now_ms is None:
            raise ScenarioError(field_path(path, "nowMs"), "TransferShedder needs nowMs (it ignores load data older than the TTL)")
        if cycle.broker_load_data is None and cycle.top_bundles is not None:
            raise ScenarioError(
                field_path(path, "topBundlesLoadData"),
                "give topBundlesLoadData together with brokerLoadData (when derived from brokers, both are derived)",
            )
    elif cycle.brokers is None:
        raise ScenarioError(field_path(path, "brokers"), f"{scenario.shedding} needs brokers (LocalBrokerData load reports)")
    known = set(cycle.brokers or ()) | set(cycle.broker_load_data or ())
    if cycle.time_average is not None:
        for broker in cycle.time_average:
            if broker not in known:
                raise ScenarioError(field_path(field_path(path, "timeAverageBrokerData"), broker), "unknown broker (not in brokers)")
    if cycle.top_bundles is not None:
        for broker in cycle.top_bundles:
            if broker not in known:
                raise ScenarioError(field_path(field_path(path, "topBundlesLoadData"), broker), "unknown broker (not in brokerLoadData)")
    if cycle.bundle_topics is not None and not getattr(SHEDDERS[scenario.shedding], "plans_splits", False):
        raise ScenarioError(field_path(path, "bundleTopics"), "only used by GlobalPlanner")
    if cycle.available_brokers is not None and not scenario.extensible:
        raise ScenarioError(field_path(path, "availableBrokers"), "only used by TransferShedder (modular: available brokers = brokers)")


_PLACEMENT_BASE = {s.name: s.variant_of for s in strategy_specs("placement", selectable=False) if s.variant_of}


def _short_name(value: str, table: Mapping[str, tuple[str, ...]]) -> str:
    """Pulsar FQCN -> short class name (unknown values are returned unchanged)."""
    for name, fqcns in table.items():
        if value == name or value in fqcns:
            return name
    return value


def _resolve_names(doc: Mapping[str, Any], config: LoadBalancerConfig) -> tuple[str, str]:
    """The shedder and placement names: explicit fields win; explicit config keys must agree with them.

    Defaults: placement = ``loadBalancerLoadPlacementStrategy`` (LeastLongTermMessageRate), except
    AvgShedder (which places what it sheds: Pulsar pairs the two) and TransferShedder (the extensible
    load manager's LeastResourceUsageWithWeight).
    """
    given = config.model_fields_set  # keys the caller set (either spelling), not defaults
    cfg_shedding = config.load_balancer_load_shedding_strategy if "load_balancer_load_shedding_strategy" in given else None
    cfg_placement = config.load_balancer_load_placement_strategy if "load_balancer_load_placement_strategy" in given else None

    if "shedding" in doc:
        raw = doc["shedding"]
        if not isinstance(raw, str):
            raise ScenarioError("shedding", f"expected a strategy name string, got {json_type_name(raw)}")
        shedding = _short_name(raw, SHEDDING_STRATEGY_CLASSES)
        if shedding not in SHEDDERS:
            raise ScenarioError("shedding", f"unknown shedding strategy {raw!r}; known: {', '.join(SHEDDERS)}")
        if cfg_shedding is not None and cfg_shedding != BASE_NAME.get(shedding, shedding):
            raise ScenarioError(
                "config.loadBalancerLoadSheddingStrategy", f"{cfg_shedding!r} contradicts shedding {shedding!r}; give one of them"
            )
    elif cfg_shedding is not None:
        shedding = cfg_shedding
    else:
        raise ScenarioError("shedding", f"required: one of {', '.join(SHEDDERS)}")

    extensible = shedding in EXTENSIBLE_SHEDDERS
    table = EXTENSIBLE_PLACEMENTS if extensible else PLACEMENTS
    what = "TransferShedder (extensible load manager)" if extensible else "the modular load manager"
    if "placement" in doc:
        raw = doc["placement"]
        if not isinstance(raw, str):
            raise ScenarioError("placement", f"expected a strategy name string, got {json_type_name(raw)}")
        placement = _short_name(raw, PLACEMENT_STRATEGY_CLASSES)
        if placement not in table:
            raise ScenarioError("placement", f"unknown placement strategy {raw!r} for {what}; known: {', '.join(table)}")
        if cfg_placement is not None and cfg_placement != _PLACEMENT_BASE.get(placement, placement):
            raise ScenarioError(
                "config.loadBalancerLoadPlacementStrategy", f"{cfg_placement!r} contradicts placement {placement!r}; give one of them"
            )
    elif cfg_placement is not None:
        placement = cfg_placement
        if placement not in table:
            raise ScenarioError(
                "config.loadBalancerLoadPlacementStrategy", f"{placement!r} is not available for {what}; known: {', '.join(table)}"
            )
    elif extensible:
        placement = "LeastResourceUsageWithWeight"
    elif BASE_NAME.get(shedding, shedding) == "AvgShedder":
        placement = "AvgShedder"  # Pulsar's default placement (PR #26609), bound to the shedder
    else:
        # The default placement is AvgShedder (PR #26609), which Pulsar refuses beside another shedder;
        # with no placement given we keep the previous default instead of failing (docs/core-decide.md).
        placement = "LeastLongTermMessageRate"
    shed_base = BASE_NAME.get(shedding, shedding)
    if placement == "AvgShedder" and shed_base != "AvgShedder":
        # ModularLoadManagerImpl.initialize: a placement strategy that is also a shedding strategy must
        # equal the shedding strategy (IllegalArgumentException at broker start).
        raise ScenarioError(
            "placement", f"the load shedding strategy {shedding} can't work with the placement strategy AvgShedder "
            "(Pulsar refuses this pair at start); use AvgShedder for both, or another placement"
        )
    return shedding, placement


def parse_scenario(doc: object) -> Scenario:
    """Validate the whole ``decide`` document; nothing is computed before this succeeds."""
    root = require_object(doc, "$")
    _check_keys(root, _TOP_KEYS, "")
    config_raw: Mapping[str, Any] = {}
    if "config" in root:
        config_raw = require_object(root["config"], "config")
    try:
        config = LoadBalancerConfig.from_mapping(config_raw)
    except ConfigError as exc:
        raise ScenarioError(f"config.{exc.key}" if exc.key else "config", str(exc)) from None
    shedding, placement = _resolve_names(root, config)

    seed = 0
    if "seed" in root:
        seed = check_int(root["seed"], "seed", allow_negative=True)
    assign = False
    if "assignDestinations" in root:
        if not isinstance(root["assignDestinations"], bool):
            raise ScenarioError("assignDestinations", f"expected a boolean, got {json_type_name(root['assignDestinations'])}")
        assign = root["assignDestinations"]
    state = StrategyState.from_json(root["state"], "state") if "state" in root else StrategyState()

    if "cycles" not in root:
        raise ScenarioError("cycles", "required array is missing")
    raw_cycles = root["cycles"]
    if not isinstance(raw_cycles, list):
        raise ScenarioError("cycles", f"expected an array of cycles, got {json_type_name(raw_cycles)}")
    if not raw_cycles:
        raise ScenarioError("cycles", "at least one cycle is required")
    scenario = Scenario(shedding, placement, config, seed, state, assign)
    names = _BundleNames()
    scenario.cycles = [_parse_cycle(c, f"cycles[{i}]", scenario, names) for i, c in enumerate(raw_cycles)]
    return scenario


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------
def _now(cycle: Cycle) -> tuple[int | None, str]:
    if cycle.now_ms is not None:
        return cycle.now_ms, "input"
    stamps = [d.last_update for d in (cycle.brokers or {}).values() if d.last_update > 0]
    if stamps:
        return max(stamps), "derived: latest brokers.*.lastUpdate"
    return None, "unknown (no nowMs and no lastUpdate): recently-unloaded entries are not aged or recorded"


def _merge_recent(base: Mapping[str, int], extra: Mapping[str, int]) -> dict[str, int]:
    merged = dict(base)
    for key, ts in extra.items():
        if ts > merged.get(key, -1):
            merged[key] = ts
    return merged


def _derive_extensible(
    cycle: Cycle, config: LoadBalancerConfig, state: StrategyState
) -> tuple[dict[str, BrokerLoadData], dict[str, list[tuple[str, NamespaceBundleStats]]], StrategyState]:
    """Extension 4: the extensible reporters' output computed from modular load reports.

    ``BrokerLoadData.update`` with the report's resources and rates (EMA continued from the state,
    updatedAt = the report's lastUpdate or nowMs), and ``TopKBundles`` over ``lastStats`` with
    ``loadBalancerMaxNumberOfBundlesInBundleLoadReport``.
    """
    assert cycle.brokers is not None and cycle.now_ms is not None
    load: dict[str, BrokerLoadData] = {}
    top: dict[str, list[tuple[str, NamespaceBundleStats]]] = {}
    previous = state.transfer_broker_load_data
    saved: dict[str, Mapping[str, Any]] = {}  # brokers gone lose their BrokerLoadData (and its EMAs)
    k = config.load_balancer_max_number_of_bundles_in_bundle_load_report
    for broker, data in cycle.brokers.items():
        prev = previous.get(broker)
        bld = BrokerLoadData.from_json(prev, f"state.transferShedder.brokerLoadData.{broker}") if prev else BrokerLoadData()
        usage = SystemResourceUsage(data.cpu, data.memory, data.direct_memory, data.bandwidth_in, data.bandwidth_out)
        bld.update(
            usage,
            data.msg_throughput_in,
            data.msg_throughput_out,
            data.msg_rate_in,
            data.msg_rate_out,
            data.num_bundles,
            data.num_topics,
            config,
            now_ms=data.last_update if data.last_update > 0 else cycle.now_ms,
        )
        load[broker] = bld
        saved[broker] = bld.to_json()
        top[broker] = top_k_bundles(data.last_stats, k)
    return load, top, state.evolve(transfer_broker_load_data=saved)


def _namespace_counts(cycle: Cycle, top: Mapping[str, Sequence[tuple[str, Any]]] | None) -> dict[str, int]:
    """Distinct bundles per namespace present anywhere in the cycle (when not given)."""
    seen: set[str] = set(cycle.bundle_data)
    for data in (cycle.brokers or {}).values():
        seen.update(data.bundles)
        seen.update(data.last_stats)
    for entries in (top or {}).values():
        seen.update(b for b, _ in entries)
    counts: dict[str, int] = {}
    for bundle in seen:
        ns = namespace_of(bundle)
        counts[ns] = counts.get(ns, 0) + 1
    return counts


def _leader_bundle_data(cycle: Cycle, state: StrategyState) -> dict[str, BundleData]:
    """``updateBundleData`` when the caller gives no ``bundleData``: the leader's map from the state,
    each broker's ``lastStats`` sample added (unknown bundles start from Pulsar's defaults), and
    bundles no broker reports any more removed."""
    known = state.bundle_data
    out: dict[str, BundleData] = {}
    for data in (cycle.brokers or {}).values():
        for bundle, stats in data.last_stats.items():
            bd = out.get(bundle)
            if bd is None:
                prev = known.get(bundle)
                bd = BundleData.from_json(prev, f"state.bundleData.{bundle}") if prev else BundleData.new_default()
                out[bundle] = bd
            bd.update(stats)
    return out


def _split_decision(candidate: Any, config: LoadBalancerConfig) -> SplitDecision:
    """A split trigger's candidate with the boundaries/children the default algorithm gives on its range."""
    namespace, range_name = split_full_name(candidate.bundle)
    algorithm = config.default_namespace_bundle_split_algorithm
    boundaries: list[str] | None = None
    children: list[str] | None = None
    note = ""
    if algorithm == "range_equally_divide":
        rng_ = BundleRange.parse(range_name, "bundle")
        cut = get_split_boundaries(algorithm, rng_, config=config)
        if cut:
            points = [rng_.lower, *cut, rng_.upper]
            boundaries = [format_boundary(x) for x in cut]
            children = [f"{namespace}/{format_boundary(lo)}_{format_boundary(hi)}" for lo, hi in zip(points, points[1:])]
    else:
        note = f"{algorithm} needs the bundle's topics: boundaries are computed at execution (pulsar-rebalance split)"
    return SplitDecision(candidate.bundle, candidate.broker, candidate.reason, algorithm, boundaries, children,
                         config.load_balancer_auto_unload_split_bundles_enabled, note or None)


def _executed_unloads(
    scenario: Scenario,
    decision: Decision,
    available: Sequence[str],
    modular_ctx: Any,
    state: StrategyState,
    rng: random.Random,
) -> tuple[list[Unload], list[DroppedUnload], StrategyState]:
    """``ModularLoadManagerImpl.doLoadShedding`` after ``findBundlesForUnloading``.

    For each selected (broker, bundle), brokers in order of first selection: an excluded namespace
    is skipped; ``selectBroker(bundle)`` runs over all available brokers, the source included, with
    no preallocation; no broker -> dropped; the source itself -> dropped; else the bundle is
    unloaded to that destination.
    """
    config = scenario.config
    excluded = frozenset(config.load_balancer_shedding_excluded_namespaces)
    by_broker: dict[str, list[Unload]] = {}
    for u in decision.unloads:
        by_broker.setdefault(u.broker, []).append(u)
    executed: list[Unload] = []
    dropped: list[DroppedUnload] = []
    for broker, items in by_broker.items():
        for u in items:
            ns = namespace_of(u.bundle)
            if ns in excluded:
                dropped.append(DroppedUnload(u.broker, u.bundle, DropReason.EXCLUDED_NAMESPACE,
                                             f"namespace {ns} is in loadBalancerSheddingExcludedNamespaces", u.reason))
                continue
            p, state = select_broker(u.bundle, strategy=scenario.placement, candidates=list(available),
                                     ctx=modular_ctx(), config=config, state=state, rng=rng)
            if p.broker is None:
                dropped.append(DroppedUnload(u.broker, u.bundle, DropReason.NO_BROKER,
                                             f"no broker available to unload the bundle to ({p.reason})", u.reason))
            elif p.broker == u.broker:
                dropped.append(DroppedUnload(u.broker, u.bundle, DropReason.DESTINATION_IS_SOURCE,
                                             f"{scenario.placement} picked the current owner {u.broker}: {p.reason}",
                                             u.reason, p.tied))
            else:
                executed.append(Unload(u.broker, u.bundle, p.broker, u.reason, p.tied, p.reason))
    return executed, dropped, state


def _run_cycle(
    scenario: Scenario, cycle: Cycle, state: StrategyState, rng: random.Random
) -> tuple[dict[str, Any], StrategyState]:
    """One leader cycle, in this order: age the recently-unloaded maps; refresh the leader's view
    (``updateAll``: bundle data, then ``checkNamespaceBundleSplit``); ``doLoadShedding`` (strategy,
    then each unload's destination); then the ``place`` lookups (``selectBrokerForAssignment``)."""
    config = scenario.config
    now, now_source = _now(cycle)
    grace_ms = config.load_balancer_shedding_grace_period_minutes * 60_000
    recent_bundles = _merge_recent(state.recently_unloaded_bundles, cycle.recently_unloaded_bundles)
    if now is not None:
        # doLoadShedding / UnloadScheduler: forget bundles unloaded longer ago than the grace period.
        recent_bundles = {b: ts for b, ts in recent_bundles.items() if ts >= now - grace_ms}
    recent_brokers = _merge_recent(state.recently_unloaded_brokers, cycle.recently_unloaded_brokers)
    state = state.evolve(recently_unloaded_bundles=recent_bundles, recently_unloaded_brokers=recent_brokers)

    if scenario.placement == "LeastResourceUsageWithWeight" and not scenario.extensible and cycle.brokers is not None:
        # LeastResourceUsageWithWeight.onActiveBrokersChange: history of brokers no longer active is dropped
        kept = {b: v for b, v in state.lruww_avg_usage.items() if b in cycle.brokers}
        if len(kept) != len(state.lruww_avg_usage):
            state = state.evolve(lruww_avg_usage=kept)

    # updateBundleData: the leader's BundleData (given, or kept in the state and updated with lastStats)
    if cycle.bundle_data_given:
        bundle_data = dict(cycle.bundle_data)
    elif cycle.brokers is not None:
        bundle_data = _leader_bundle_data(cycle, state)
    else:
        bundle_data = {}

    shedder = SHEDDERS[scenario.shedding]
    top: dict[str, list[tuple[str, NamespaceBundleStats]]] | None = cycle.top_bundles
    load_data = cycle.broker_load_data
    if scenario.extensible:
        derived = load_data is None
        if derived:
            load_data, top, state = _derive_extensible(cycle, config, state)
        assert load_data is not None
        available = cycle.available_brokers if cycle.available_brokers is not None else list(
            dict.fromkeys([*load_data, *(cycle.brokers or {})])
        )
    else:
        assert cycle.brokers is not None
        available = list(cycle.brokers)

    # Splits first (updateAll -> checkNamespaceBundleSplit runs when load reports arrive). A planner
    # (GlobalPlanner) plans its own splits together with its moves: Pulsar's split trigger is not run.
    planner = getattr(shedder, "plans_splits", False)
    splits: list[SplitDecision] = []
    split_notes: list[str] = []
    if config.load_balancer_auto_bundle_split_enabled and not planner:
        derived_counts = _namespace_counts(cycle, top)
        counts = cycle.namespace_bundle_counts if cycle.namespace_bundle_counts is not None else derived_counts
        if scenario.extensible:
            # one split strategy per broker (Pulsar runs it on each broker): counts of brokers gone are dropped
            previous = state.split_hit_counts
            hit_counts: dict[str, dict[str, int]] = {}
            sources: Mapping[str, Mapping[str, NamespaceBundleStats]]
            if cycle.brokers is not None:
                sources = {b: d.last_stats for b, d in cycle.brokers.items()}
                src_path = "brokers.{}.lastStats"
            else:
                sources = {b: dict(entries) for b, entries in (top or {}).items()}
                src_path = "topBundlesLoadData.{}"
            for broker, stats in sources.items():
                found, hit_counts[broker] = extensible_bundles_to_split(
                    broker=broker,
                    bundle_stats=stats,
                    namespace_bundle_counts=_with_counts(counts, derived_counts, stats),
                    split_condition_hit_counts=previous.get(broker, {}),
                    config=config,
                    path=field_path(cycle.path, src_path.format(broker)),
                )
                splits.extend(_split_decision(c, config) for c in found)
            state = state.evolve(split_hit_counts=hit_counts)
        elif len(available) <= 1:
            # checkNamespaceBundleSplit: returns early when knownBrokers.size() <= 1
            split_notes.append(f"{len(available)} known broker(s): checkNamespaceBundleSplit does nothing")
        else:
            found = modular_bundles_to_split(
                brokers=cycle.brokers or {},
                bundle_data=bundle_data,
                namespace_bundle_counts=_with_counts(counts, derived_counts, _all_last_stats(cycle)),
                config=config,
                path=field_path(cycle.path, "brokers"),
            )
            for c in found:
                splits.append(_split_decision(c, config))
                # "Make sure the same bundle is not selected again": its BundleData is removed, so the
                # shedder of this cycle cannot select the split parent.
                bundle_data.pop(c.bundle, None)

    extra: dict[str, Any] = {"nowMs": now, "nowSource": now_source, "availableBrokers": len(available)}
    if split_notes:
        extra["splitNotes"] = split_notes
    if not (config.load_balancer_enabled and config.load_balancer_shedding_enabled):
        decision: Decision = skip(Reason.DISABLED, "loadBalancerEnabled or loadBalancerSheddingEnabled is false")
    elif len(available) <= 1:
        decision = skip(Reason.NO_BROKERS, f"{len(available)} available broker(s): no load shedding is performed")
    elif scenario.extensible:
        assert load_data is not None
        owned = None
        if cycle.brokers is not None:
            owned = {b: frozenset(d.bundles) for b, d in cycle.brokers.items()}
        inp = ExtensibleInput(
            broker_load_data=load_data,
            top_bundles=top or {},
            available_brokers=available,
            recently_unloaded_bundles=recent_bundles,
            recently_unloaded_brokers=recent_brokers,
            now_ms=cycle.now_ms or 0,
            owned_bundles=owned,
            excluded=frozenset(config.load_balancer_shedding_excluded_namespaces),
        )
        decision, state = shedder.find_bundles_for_unloading(inp, config, state)
    elif planner:
        # GlobalPlanner: one whole-cluster plan (moves with destinations, splits with boundaries)
        inp_p = PlannerInput(cycle.brokers or {}, bundle_data, recent_bundles, now, cycle.bundle_topics,
                             cycle.namespace_bundle_counts)
        decision, state = shedder.plan(inp_p, config, state)
        splits = list(decision.splits)
    else:
        inp_m = ModularInput(cycle.brokers or {}, bundle_data, recent_bundles)
        decision, state = shedder.find_bundles_for_unloading(inp_m, config, state)

    # Placement context (modular), built lazily: only destinations and `place` need it.
    ctx: ModularPlacementContext | None = None

    def modular_ctx() -> ModularPlacementContext:
        nonlocal ctx
        if ctx is None:
            ctx = ModularPlacementContext.build(cycle.brokers or {}, bundle_data, cycle.time_average)
        return ctx

    # The load manager's level: what is executed, and what is dropped with the reason.
    dropped: list[DroppedUnload] = []
    if scenario.extensible:
        executed = list(decision.unloads)  # UnloadScheduler executes every decision as given
    elif planner:
        # The planner's moves are placed in its own plan (destination chosen with every other move of
        # the cycle in view, never an excluded namespace): executed as planned, selectBroker is not run.
        executed = list(decision.unloads)
    elif decision.unloads:
        executed, dropped, state = _executed_unloads(scenario, decision, available, modular_ctx, state, rng)
    else:
        executed = []
    if BASE_NAME.get(scenario.shedding, scenario.shedding) == "AvgShedder":
        state = state.evolve(avg_bundle_broker={})  # onUnloadAttemptCompleted: the plans end with the attempt

    # Record what was unloaded (ModularLoadManagerImpl / UnloadScheduler do it after each unload).
    if executed and now is not None:
        rb = dict(state.recently_unloaded_bundles)
        rk = dict(state.recently_unloaded_brokers)
        for u in executed:
            rb[u.bundle] = now
            if scenario.extensible:
                rk[u.broker] = now
        state = state.evolve(recently_unloaded_bundles=rb, recently_unloaded_brokers=rk)

    unloads = list(decision.unloads)
    if scenario.assign_destinations and unloads:
        assigned: list[Unload] = []
        if scenario.extensible:
            for u in unloads:
                if u.destination is not None:
                    assigned.append(u)
                    continue
                assert load_data is not None
                p = EXTENSIBLE_PLACEMENTS[scenario.placement].select_broker(
                    bundle=u.bundle, candidates=[b for b in available if b != u.broker], load_data=load_data,
                    config=config, rng=rng,
                )
                assigned.append(Unload(u.broker, u.bundle, p.broker, u.reason, p.tied, p.reason))
            executed = assigned
        else:
            # the strategy level shows the executed destination where the load manager unloads the bundle
            done = {(u.broker, u.bundle): u for u in executed}
            for u in unloads:
                e = done.get((u.broker, u.bundle))
                assigned.append(e if e is not None else u)
        unloads = assigned

    placements: list[Placement] = []
    for bundle in cycle.place:
        if scenario.extensible:
            assert load_data is not None
            placements.append(
                EXTENSIBLE_PLACEMENTS[scenario.placement].select_broker(
                    bundle=bundle, candidates=list(available), load_data=load_data, config=config, rng=rng
                )
            )
        else:
            p, state = select_broker_for_assignment(
                bundle, strategy=scenario.placement, candidates=list(available), ctx=modular_ctx(),
                config=config, state=state, rng=rng,
            )
            placements.append(p)

    if not cycle.bundle_data_given and cycle.brokers is not None:
        state = state.evolve(bundle_data={b: d.to_json() for b, d in bundle_data.items()})
    else:
        state = state.evolve(bundle_data={})

    stats = dict(decision.stats)
    stats.update(extra)
    # The label/reason describe the unload decision (Pulsar's UnloadDecision); splits ride alongside.
    final = Decision(
        label=decision.label,
        reason=decision.reason,
        detail=decision.detail,
        unloads=tuple(unloads),
        splits=tuple(splits),
        placements=tuple(placements),
        stats=stats,
    )
    out = final.to_json()
    out["executed"] = {"unloads": [u.to_json() for u in executed], "dropped": [d.to_json() for d in dropped]}
    return out, state


def _with_counts(counts: Mapping[str, int], derived: Mapping[str, int], stats: Mapping[str, Any]) -> Mapping[str, int]:
    """The given counts, completed from the cycle's own bundles for namespaces they do not mention."""
    missing = {namespace_of(b) for b in stats} - set(counts)
    if not missing:
        return counts
    merged = dict(counts)
    for ns in missing:
        merged[ns] = derived[ns]
    return merged


def _all_last_stats(cycle: Cycle) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for data in (cycle.brokers or {}).values():
        out.update(data.last_stats)
    return out


def run_scenario(scenario: Scenario) -> dict[str, Any]:
    """Run a validated scenario (see :func:`decide_scenario`)."""
    rng = random.Random(scenario.seed)
    state = scenario.state
    if state.random_state is not None:
        rng.setstate((3, state.random_state, None))  # continue the stream where the last call stopped
    cycles_out: list[dict[str, Any]] = []
    for cycle in scenario.cycles:
        out, state = _run_cycle(scenario, cycle, state, rng)
        cycles_out.append(out)
    state = state.evolve(random_state=rng.getstate()[1])
    return {
        "shedding": scenario.shedding,
        "placement": scenario.placement,
        "seed": scenario.seed,
        "cycles": cycles_out,
        "state": state.to_json(),
    }


def decide_scenario(doc: dict[str, Any]) -> dict[str, Any]:
    """Validate ``doc`` completely, then run its cycles; returns the ``decide`` output document.

    Raises:
        ScenarioError: the input is invalid; ``field`` is the JSON path of the offending value.
    """
    return run_scenario(parse_scenario(doc))


__all__ = ["Cycle", "Scenario", "decide_scenario", "parse_scenario", "run_scenario"]
