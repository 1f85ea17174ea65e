"""The ``decide`` JSON contract: run Pulsar's shedding (+ split trigger, + placement) over cycles.

``decide_scenario(doc) -> dict`` validates the **whole** document first (every error is a
:class:`~pulsar_rebalance.errors.ScenarioError` naming the JSON path, e.g.
``cycles[0].brokers.broker-1.cpu.usage``), then runs the cycles in order, carrying the strategy
state (EMA history, hit counts, recently unloaded bundles/brokers) from one cycle to the next.

Input (see docs/core-decide.md for the full description and an example)::

    {"shedding": "ThresholdShedder" | "OverloadShedder" | "UniformLoadShedder" | "AvgShedder"
                 | "TransferShedder" (+ opt-in variants, see core.pulsar.shedders.SHEDDERS),
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
             "availableBrokers": [id],
             "namespaceIsolationPolicies": {...}, "failureDomains": {...}, "antiAffinityGroups": {...}}

    The three placement-constraint fields (core.pulsar.policies; the admin endpoints' JSON) may also be given
    at the top level: the default of every cycle that does not give the field itself.

Output: ``{"cycles": [{"label", "reason", "detail", "unloads", "executed", "splits", "placements", "stats"}],
"state": {...}, "shedding", "placement", "seed"}``. ``unloads`` is what the strategy selected;
``executed`` (``{"unloads", "dropped"}``) is what the leader's ``doLoadShedding`` would do with it
(destination from ``selectBroker`` over all brokers, the source included; drops with their reason).
The cycle order is: splits, then shedding, then ``place`` lookups (see :func:`core.cycle.run_cycle`). The core
follows apache/pulsar commit 009a9bf2 (docs/core-decide.md).

Keys starting with ``_`` and ``description`` are ignored everywhere (comments); any other unknown
key is an error, so a misspelt option is never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.contract.json_input import (
    check_int,
    field_path,
    json_type_name,
    require_object,
)
from pulsar_rebalance.core.contract.load_json import (
    broker_load_data_from_json,
    local_broker_data_from_json,
    namespace_bundle_stats_from_json,
    parse_bundle_data_map,
    time_average_broker_data_from_json,
    topic_rates_map,
)
from pulsar_rebalance.core.contract.policies_json import POLICY_KEYS, parse_policies
from pulsar_rebalance.core.contract.state_json import strategy_state_from_json
from pulsar_rebalance.core.cycle import CycleInput, CycleSettings, run_cycle, seeded_random, with_random_position
from pulsar_rebalance.core.pulsar.bundles import BundleRange, split_full_name
from pulsar_rebalance.core.pulsar.config import (
    PLACEMENT_STRATEGY_CLASSES,
    SHEDDING_STRATEGY_CLASSES,
    LoadBalancerConfig,
)
from pulsar_rebalance.core.pulsar.load import (
    BrokerLoadData,
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    TimeAverageBrokerData,
)
from pulsar_rebalance.core.pulsar.placement import EXTENSIBLE_PLACEMENTS, PLACEMENTS
from pulsar_rebalance.core.pulsar.policies import NO_POLICIES, PlacementPolicies
from pulsar_rebalance.core.pulsar.shedders import BASE_NAME, EXTENSIBLE_SHEDDERS, SHEDDERS
from pulsar_rebalance.core.pulsar.split_algorithms import TopicRates
from pulsar_rebalance.core.pulsar.state import StrategyState
from pulsar_rebalance.core.snapshot import check_load_report, check_no_overlap
from pulsar_rebalance.core.strategies import specs as strategy_specs
from pulsar_rebalance.errors import ConfigError, ScenarioError, SnapshotError

_TOP_KEYS = frozenset(
    {"shedding", "placement", "config", "seed", "state", "assignDestinations", "cycles", *POLICY_KEYS}
)
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
        *POLICY_KEYS,
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
Cycle = CycleInput
"""One validated cycle of input (the typed input of :func:`core.cycle.run_cycle`)."""


@dataclass(slots=True)
class Scenario:
    shedding: str
    placement: str
    config: LoadBalancerConfig
    seed: int
    state: StrategyState
    assign_destinations: bool
    cycles: list[Cycle] = field(default_factory=list)
    policies: PlacementPolicies = NO_POLICIES
    """The document's placement constraints: the default of every cycle that does not give its own."""

    @property
    def extensible(self) -> bool:
        return self.shedding in EXTENSIBLE_SHEDDERS

    @property
    def settings(self) -> CycleSettings:
        return CycleSettings(self.shedding, self.placement, self.config, self.assign_destinations)


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
            data = local_broker_data_from_json(value, p)
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
        time_average = {b: time_average_broker_data_from_json(v, field_path(tp, b)) for b, v in raw_ta.items()}

    broker_load_data: dict[str, BrokerLoadData] | None = None
    if "brokerLoadData" in obj:
        lp = field_path(path, "brokerLoadData")
        raw_ld = require_object(obj["brokerLoadData"], lp)
        broker_load_data = {b: broker_load_data_from_json(v, field_path(lp, b)) for b, v in raw_ld.items()}

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
                entries.append((bundle, namespace_bundle_stats_from_json(entry["stats"], field_path(ep, "stats"))))
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
        policies=parse_policies(obj, path, scenario.policies),
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
                raise SnapshotError(
                    f"bundle {bundle} is under two brokers: {other} and {broker}",
                    broker=broker,
                    bundle=bundle,
                    field=field_path(path, broker),
                )
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
            raise ScenarioError(
                field_path(path, "nowMs"), "TransferShedder needs nowMs (it ignores load data older than the TTL)"
            )
        if cycle.broker_load_data is None and cycle.top_bundles is not None:
            raise ScenarioError(
                field_path(path, "topBundlesLoadData"),
                "give topBundlesLoadData together with brokerLoadData (when derived from brokers, both are derived)",
            )
    elif cycle.brokers is None:
        raise ScenarioError(
            field_path(path, "brokers"), f"{scenario.shedding} needs brokers (LocalBrokerData load reports)"
        )
    known = set(cycle.brokers or ()) | set(cycle.broker_load_data or ())
    if cycle.time_average is not None:
        for broker in cycle.time_average:
            if broker not in known:
                raise ScenarioError(
                    field_path(field_path(path, "timeAverageBrokerData"), broker), "unknown broker (not in brokers)"
                )
    if cycle.top_bundles is not None:
        for broker in cycle.top_bundles:
            if broker not in known:
                raise ScenarioError(
                    field_path(field_path(path, "topBundlesLoadData"), broker), "unknown broker (not in brokerLoadData)"
                )
    # bundleTopics is accepted for every strategy (a benchmark gives every strategy the same information);
    # only those that declare reads_topic_rates in the registry read it (Pulsar's split boundaries are
    # computed by whoever applies the split, with defaultNamespaceBundleSplitAlgorithm on the same rates)
    if cycle.available_brokers is not None and not scenario.extensible:
        raise ScenarioError(
            field_path(path, "availableBrokers"), "only used by TransferShedder (modular: available brokers = brokers)"
        )


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
    cfg_shedding = (
        config.load_balancer_load_shedding_strategy if "load_balancer_load_shedding_strategy" in given else None
    )
    cfg_placement = (
        config.load_balancer_load_placement_strategy if "load_balancer_load_placement_strategy" in given else None
    )

    if "shedding" in doc:
        raw = doc["shedding"]
        if not isinstance(raw, str):
            raise ScenarioError("shedding", f"expected a strategy name string, got {json_type_name(raw)}")
        shedding = _short_name(raw, SHEDDING_STRATEGY_CLASSES)
        if shedding not in SHEDDERS:
            raise ScenarioError("shedding", f"unknown shedding strategy {raw!r}; known: {', '.join(SHEDDERS)}")
        if cfg_shedding is not None and cfg_shedding != BASE_NAME.get(shedding, shedding):
            raise ScenarioError(
                "config.loadBalancerLoadSheddingStrategy",
                f"{cfg_shedding!r} contradicts shedding {shedding!r}; give one of them",
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
            raise ScenarioError(
                "placement", f"unknown placement strategy {raw!r} for {what}; known: {', '.join(table)}"
            )
        if cfg_placement is not None and cfg_placement != _PLACEMENT_BASE.get(placement, placement):
            raise ScenarioError(
                "config.loadBalancerLoadPlacementStrategy",
                f"{cfg_placement!r} contradicts placement {placement!r}; give one of them",
            )
    elif cfg_placement is not None:
        placement = cfg_placement
        if placement not in table:
            raise ScenarioError(
                "config.loadBalancerLoadPlacementStrategy",
                f"{placement!r} is not available for {what}; known: {', '.join(table)}",
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
            "placement",
            f"the load shedding strategy {shedding} can't work with the placement strategy AvgShedder "
            "(Pulsar refuses this pair at start); use AvgShedder for both, or another placement",
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
            raise ScenarioError(
                "assignDestinations", f"expected a boolean, got {json_type_name(root['assignDestinations'])}"
            )
        assign = root["assignDestinations"]
    state = strategy_state_from_json(root["state"], "state") if "state" in root else StrategyState()

    if "cycles" not in root:
        raise ScenarioError("cycles", "required array is missing")
    raw_cycles = root["cycles"]
    if not isinstance(raw_cycles, list):
        raise ScenarioError("cycles", f"expected an array of cycles, got {json_type_name(raw_cycles)}")
    if not raw_cycles:
        raise ScenarioError("cycles", "at least one cycle is required")
    scenario = Scenario(shedding, placement, config, seed, state, assign, policies=parse_policies(root, ""))
    names = _BundleNames()
    scenario.cycles = [_parse_cycle(c, f"cycles[{i}]", scenario, names) for i, c in enumerate(raw_cycles)]
    return scenario


def run_scenario(scenario: Scenario) -> dict[str, Any]:
    """Run a validated scenario (see :func:`decide_scenario`): :func:`core.cycle.run_cycle` per cycle."""
    rng = seeded_random(scenario.seed, scenario.state)
    state = scenario.state
    settings = scenario.settings
    cycles_out: list[dict[str, Any]] = []
    for cycle in scenario.cycles:
        result = run_cycle(cycle, state, settings, rng)
        cycles_out.append(result.to_json())
        state = result.state
    state = with_random_position(state, rng)
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
