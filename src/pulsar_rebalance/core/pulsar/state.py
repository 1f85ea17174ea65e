"""Everything Pulsar's load-balancing strategies keep in memory between cycles, made explicit.

Pulsar's strategies are long-lived objects on the leader broker with hidden fields (the
ThresholdShedder EMA map, AvgShedder's hit counts, TransferShedder's ``unloadConditionHitCount``,
the leader's ``recentlyUnloadedBundles``...). Our core is pure: a strategy takes a
:class:`StrategyState` and returns a *new* one; the caller persists it (the Airflow pipeline stores
the JSON between scheduled runs). A fresh state equals a freshly started Pulsar leader.

JSON shape (``to_json``; read and validated by ``core/contract/state_json.py``, where unknown members
are rejected so a typo does not silently reset history)::

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
