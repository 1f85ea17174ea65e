"""Everything Pulsar's load-balancing strategies keep in memory between cycles, made explicit.

Pulsar's strategies are long-lived objects on the leader broker with hidden fields (the
ThresholdShedder EMA map, AvgShedder's hit counts, TransferShedder's ``unloadConditionHitCount``,
the leader's ``recentlyUnloadedBundles``...). Our core is pure: a strategy takes a
:class:`StrategyState` and returns a *new* one; the caller persists it (the Airflow pipeline stores
the JSON between scheduled runs). A fresh state equals a freshly started Pulsar leader.

JSON shape (``to_json`` / ``from_json``; unknown members are rejected so a typo does not silently
reset history)::

    {"version": 1,
     "thresholdShedder": {"brokerAvgResourceUsage": {"<broker>": 0.42}},
     "leastResourceUsageWithWeight": {"brokerAvgResourceUsageWithWeight": {"<broker>": 0.40}},
     "avgShedder": {"brokerHitCountForHigh": {"<broker>": 1}, "brokerHitCountForLow": {"<broker>": 2},
                    "brokerScoreMap": {"<broker>": 55.0},
                    "bundleBrokerMap": [{"bundle": "<t/ns/range>", "broker": "<broker>"}]},
     "transferShedder": {"unloadConditionHitCount": 0, "brokerLoadData": {"<broker>": {BrokerLoadData}}},
     "splitConditionHitCounts": {"<broker>": {"<bundle>": 2}},
     "recentlyUnloadedBundles": {"<bundle>": epochMs}, "recentlyUnloadedBrokers": {"<broker>": epochMs},
     "bundleData": {"<bundle>": {BundleData}},   (only when the caller does not supply bundleData)
     "random": {"mt": [624 words, index]} | null,   (the seeded random stream's position)
     "globalPlanner": {...}}   (only when GlobalPlanner ran; see core/planner/memory.py)

Units: usages are fractions (1.0 = 100%), AvgShedder scores are points 0-100, times epoch ms.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from pulsar_rebalance.core.json_input import check_int, check_number, field_path, reject_unknown_keys, require_object
from pulsar_rebalance.errors import ScenarioError

STATE_VERSION = 1

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not mapping:
        return _EMPTY
    if isinstance(mapping, MappingProxyType):
        return mapping
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class AvgShedderBinding:
    """One entry of AvgShedder's planned destinations: bundle name -> destination broker.

    Keyed by bundle name and scoped to one shedding attempt (apache/pulsar PR #26246): the map is
    empty between cycles; it is carried in the state only for callers that split one cycle.
    """

    bundle: str
    broker: str


@dataclass(frozen=True, slots=True)
class StrategyState:
    """Immutable cross-cycle memory of every strategy (see the module docstring for meanings)."""

    threshold_avg_usage: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    lruww_avg_usage: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    avg_hit_high: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    avg_hit_low: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    avg_scores: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    avg_bundle_broker: Mapping[str, AvgShedderBinding] = field(default_factory=lambda: _EMPTY)
    """Keyed by bundle name."""
    transfer_hit_count: int = 0
    transfer_broker_load_data: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _EMPTY)
    """Per broker, the last derived extensible ``BrokerLoadData`` (JSON), carrying its EMAs."""
    split_hit_counts: Mapping[str, Mapping[str, int]] = field(default_factory=lambda: _EMPTY)
    """Per broker (each broker runs its own extensible split strategy), bundle -> consecutive hits."""
    recently_unloaded_bundles: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    recently_unloaded_brokers: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    bundle_data: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _EMPTY)
    """The leader's ``loadData.bundleData`` (BundleData JSON) when the caller does not supply ``bundleData``."""
    random_state: tuple[int, ...] | None = None
    """Position of the seeded random stream (Mersenne Twister: 624 words + index), None = fresh from the seed."""
    planner: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """GlobalPlanner's memory (move history, brokers seen, bundle peaks), the JSON of
    :class:`pulsar_rebalance.core.planner.memory.PlannerMemory`; empty for Pulsar's strategies."""

    def __post_init__(self) -> None:
        for name in (
            "threshold_avg_usage",
            "lruww_avg_usage",
            "avg_hit_high",
            "avg_hit_low",
            "avg_scores",
            "avg_bundle_broker",
            "transfer_broker_load_data",
            "split_hit_counts",
            "recently_unloaded_bundles",
            "recently_unloaded_brokers",
            "bundle_data",
            "planner",
        ):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        if not isinstance(self.transfer_hit_count, int) or self.transfer_hit_count < 0:
            raise ValueError(f"transfer_hit_count must be a non-negative int, got {self.transfer_hit_count!r}")
        if self.random_state is not None:
            object.__setattr__(self, "random_state", tuple(self.random_state))

    def evolve(self, **changes: Any) -> StrategyState:
        """A new state with some fields replaced (mappings are copied and frozen)."""
        return replace(self, **changes)

    # ---- JSON -------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out = self._to_json()
        if self.planner:  # only GlobalPlanner writes it: Pulsar strategies' state keeps its shape
            out["globalPlanner"] = json.loads(json.dumps(dict(self.planner)))
        return out

    def _to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "thresholdShedder": {"brokerAvgResourceUsage": dict(self.threshold_avg_usage)},
            "leastResourceUsageWithWeight": {"brokerAvgResourceUsageWithWeight": dict(self.lruww_avg_usage)},
            "avgShedder": {
                "brokerHitCountForHigh": dict(self.avg_hit_high),
                "brokerHitCountForLow": dict(self.avg_hit_low),
                "brokerScoreMap": dict(self.avg_scores),
                "bundleBrokerMap": [{"bundle": b.bundle, "broker": b.broker} for b in self.avg_bundle_broker.values()],
            },
            "transferShedder": {
                "unloadConditionHitCount": self.transfer_hit_count,
                "brokerLoadData": {k: dict(v) for k, v in self.transfer_broker_load_data.items()},
            },
            "splitConditionHitCounts": {b: dict(c) for b, c in self.split_hit_counts.items()},
            "recentlyUnloadedBundles": dict(self.recently_unloaded_bundles),
            "recentlyUnloadedBrokers": dict(self.recently_unloaded_brokers),
            "bundleData": {b: dict(d) for b, d in self.bundle_data.items()},
            "random": None if self.random_state is None else {"mt": list(self.random_state)},
        }

    @classmethod
    def from_json(cls, obj: object, path: str = "state") -> StrategyState:
        """Parse (and fully validate) a state produced by :meth:`to_json`; errors name the JSON path."""
        root = require_object(obj, path)
        reject_unknown_keys(
            root,
            {
                "version",
                "thresholdShedder",
                "leastResourceUsageWithWeight",
                "avgShedder",
                "transferShedder",
                "splitConditionHitCounts",
                "recentlyUnloadedBundles",
                "recentlyUnloadedBrokers",
                "bundleData",
                "random",
                "globalPlanner",
            },
            path,
        )
        version = root.get("version", STATE_VERSION)
        if version != STATE_VERSION or isinstance(version, bool):
            raise ScenarioError(
                field_path(path, "version"), f"unsupported state version {version!r} (expected {STATE_VERSION})"
            )

        ts = _section(root, "thresholdShedder", path, {"brokerAvgResourceUsage"})
        lr = _section(root, "leastResourceUsageWithWeight", path, {"brokerAvgResourceUsageWithWeight"})
        av = _section(
            root,
            "avgShedder",
            path,
            {"brokerHitCountForHigh", "brokerHitCountForLow", "brokerScoreMap", "bundleBrokerMap"},
        )
        tr = _section(root, "transferShedder", path, {"unloadConditionHitCount", "brokerLoadData"})
        p_ts, p_lr, p_av, p_tr = (
            field_path(path, k)
            for k in ("thresholdShedder", "leastResourceUsageWithWeight", "avgShedder", "transferShedder")
        )

        bindings: dict[str, AvgShedderBinding] = {}
        raw_bindings = av.get("bundleBrokerMap", [])
        p_bind = field_path(p_av, "bundleBrokerMap")
        if not isinstance(raw_bindings, list):
            raise ScenarioError(p_bind, "expected an array")
        for i, item in enumerate(raw_bindings):
            ip = field_path(p_bind, i)
            entry = require_object(item, ip)
            reject_unknown_keys(entry, {"bundle", "bundleDataKey", "broker"}, ip)
            strings = {}
            for key in ("bundle", "broker"):
                value = entry.get(key)
                if not isinstance(value, str) or not value:
                    raise ScenarioError(field_path(ip, key), "expected a non-empty string")
                strings[key] = value
            # bundleDataKey: accepted from states written before PR #26246 was followed, not used
            bindings[strings["bundle"]] = AvgShedderBinding(strings["bundle"], strings["broker"])

        hit = tr.get("unloadConditionHitCount", 0)
        hit_count = check_int(hit, field_path(p_tr, "unloadConditionHitCount"))

        load_data: dict[str, Mapping[str, Any]] = {}
        p_bld = field_path(p_tr, "brokerLoadData")
        raw_bld = tr.get("brokerLoadData", {})
        require_object(raw_bld, p_bld)
        if raw_bld:
            from pulsar_rebalance.core.load import BrokerLoadData  # validated with the model's own reader

            for broker, value in raw_bld.items():
                bp = field_path(p_bld, broker)
                load_data[broker] = BrokerLoadData.from_json(require_object(value, bp), bp).to_json()

        bundle_data: dict[str, Mapping[str, Any]] = {}
        p_bd = field_path(path, "bundleData")
        raw_bd = require_object(root.get("bundleData", {}), p_bd)
        if raw_bd:
            from pulsar_rebalance.core.load import BundleData

            for bundle, value in raw_bd.items():
                bundle_data[bundle] = BundleData.from_json(value, field_path(p_bd, bundle)).to_json()

        return cls(
            random_state=_random_state(root.get("random"), field_path(path, "random")),
            bundle_data=bundle_data,
            threshold_avg_usage=_number_map(ts, "brokerAvgResourceUsage", p_ts),
            lruww_avg_usage=_number_map(lr, "brokerAvgResourceUsageWithWeight", p_lr),
            avg_hit_high=_int_map(av, "brokerHitCountForHigh", p_av),
            avg_hit_low=_int_map(av, "brokerHitCountForLow", p_av),
            avg_scores=_number_map(av, "brokerScoreMap", p_av),
            avg_bundle_broker=bindings,
            transfer_hit_count=hit_count,
            transfer_broker_load_data=load_data,
            split_hit_counts=_nested_int_map(root, "splitConditionHitCounts", path),
            recently_unloaded_bundles=_int_map(root, "recentlyUnloadedBundles", path),
            recently_unloaded_brokers=_int_map(root, "recentlyUnloadedBrokers", path),
            planner=_planner_memory(root, path),
        )


_MT_WORDS = 624


def _random_state(value: object, path: str) -> tuple[int, ...] | None:
    """``{"mt": [624 words, index]}`` as written by :meth:`StrategyState.to_json` (or null)."""
    if value is None:
        return None
    obj = require_object(value, path)
    reject_unknown_keys(obj, {"mt"}, path)
    words = obj.get("mt")
    mp = field_path(path, "mt")
    if not isinstance(words, list) or len(words) != _MT_WORDS + 1:
        raise ScenarioError(mp, f"expected an array of {_MT_WORDS + 1} integers (a previous output's state.random.mt)")
    out = []
    for i, w in enumerate(words):
        n = check_int(w, field_path(mp, i))
        if n > 0xFFFFFFFF or (i == _MT_WORDS and n > _MT_WORDS):
            raise ScenarioError(field_path(mp, i), f"out of range: {n}")
        out.append(n)
    return tuple(out)


def _planner_memory(root: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    if "globalPlanner" not in root:
        return _EMPTY
    from pulsar_rebalance.core.planner.memory import PlannerMemory  # validated by its owner

    return PlannerMemory.from_json(root["globalPlanner"], field_path(path, "globalPlanner")).to_json()


def _section(root: Mapping[str, Any], key: str, path: str, allowed: set[str]) -> Mapping[str, Any]:
    value = root.get(key, {})
    sp = field_path(path, key)
    obj = require_object(value, sp)
    reject_unknown_keys(obj, allowed, sp)
    return obj


def _number_map(parent: Mapping[str, Any], key: str, path: str) -> dict[str, float]:
    mp = field_path(path, key)
    obj = require_object(parent.get(key, {}), mp)
    return {k: check_number(v, field_path(mp, k), allow_negative=True) for k, v in obj.items()}


def _int_map(parent: Mapping[str, Any], key: str, path: str) -> dict[str, int]:
    mp = field_path(path, key)
    obj = require_object(parent.get(key, {}), mp)
    return {k: check_int(v, field_path(mp, k)) for k, v in obj.items()}


def _nested_int_map(parent: Mapping[str, Any], key: str, path: str) -> dict[str, dict[str, int]]:
    mp = field_path(path, key)
    obj = require_object(parent.get(key, {}), mp)
    return {k: _int_map(obj, k, mp) for k in obj}
