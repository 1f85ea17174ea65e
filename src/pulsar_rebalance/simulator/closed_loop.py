"""Run a strategy in a closed loop on a scenario: decide -> apply -> advance the clock, and measure.

Each cycle the model's load reports go through the decision core's ``decide`` contract (exactly as
the DAG's ``detect_overload`` calls it: ``assignDestinations``, the strategy state carried from the
previous cycle, Pulsar's ``BundleData`` kept across cycles like the leader keeps it), the output is
applied to the model (splits first, then unloads) and the clock moves one cycle.

Metrics (all usages are noise-free and capacity-normalised: per broker, the max over CPU, NIC in and
NIC out of usage / limit; "ideal" is total load / total capacity on the binding resource):
``final_max`` (the worst broker's highest usage over the last 5 cycles, so that periodic swings count
at their peak), ``worst_max`` (after the first decision), ``final_spread`` (final max - the lowest broker
over the same window), ``ideal`` (highest over the window), ``gap`` (final max - ideal), ``floor``
(the ideal, or the hottest topic alone on a broker if higher: no plan can go below it), ``moves``, ``splits``, ``moves_to_steady`` (moves made until the worst-broker usage
stays within 0.02 of its final value), ``churn`` (moves in the last third), ``ping_pong`` (a bundle
moved again within 30 minutes of its previous move), ``clients_disconnected``, ``warnings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.contract_decide import decide_scenario
from pulsar_rebalance.core.load import BundleData, NamespaceBundleStats
from pulsar_rebalance.core.planner import split_candidates
from pulsar_rebalance.simulator.scenarios import ScenarioRun

PING_PONG_MS = 30 * 60_000
STEADY_BAND = 0.02
FINAL_WINDOW = 5

STRATEGIES: Mapping[str, dict[str, Any]] = {
    "OverloadShedder": {"shedding": "OverloadShedder"},
    "ThresholdShedder": {"shedding": "ThresholdShedder"},
    "ThresholdShedder+lowerBoundary": {
        "shedding": "ThresholdShedder",
        "config": {"lowerBoundarySheddingEnabled": True},
    },
    "UniformLoadShedder": {"shedding": "UniformLoadShedder"},
    "AvgShedder": {"shedding": "AvgShedder"},
    "TransferShedder": {"shedding": "TransferShedder"},
    "GlobalPlanner": {"shedding": "GlobalPlanner"},
}
"""Benchmark name -> the ``decide`` document's strategy part (shedding, config)."""


@dataclass(slots=True)
class LoopResult:
    scenario: str
    seed: int
    strategy: str
    max_usage: list[float] = field(default_factory=list)
    min_usage: list[float] = field(default_factory=list)
    ideal: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    moves_per_cycle: list[int] = field(default_factory=list)
    splits: int = 0
    clients_disconnected: int = 0
    ping_pong: int = 0
    warnings: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    @property
    def moves(self) -> int:
        return sum(self.moves_per_cycle)

    def summary(self) -> dict[str, Any]:
        n = len(self.max_usage)
        window = self.max_usage[-FINAL_WINDOW:]
        final = max(window)
        final_ideal = max(self.ideal[-FINAL_WINDOW:])
        final_min = min(self.min_usage[-FINAL_WINDOW:])
        steady_from = n - 1
        while steady_from > 0 and abs(self.max_usage[steady_from - 1] - self.max_usage[-1]) <= STEADY_BAND:
            steady_from -= 1
        return {
            "scenario": self.scenario,
            "seed": self.seed,
            "strategy": self.strategy,
            "final_max": final,
            "worst_max": max(self.max_usage[1:] or self.max_usage),
            "final_spread": final - final_min,
            "ideal": final_ideal,
            "gap": final - final_ideal,
            "floor": max(self.floor[-FINAL_WINDOW:]),
            "moves": self.moves,
            "splits": self.splits,
            "moves_to_steady": sum(self.moves_per_cycle[:steady_from]),
            "churn": sum(self.moves_per_cycle[n - n // 3 :]),
            "ping_pong": self.ping_pong,
            "clients_disconnected": self.clients_disconnected,
            "warnings": len(self.warnings),
            "rejected": len(self.rejected),
        }


def run_closed_loop(run: ScenarioRun, strategy: str, *, extra_cycle: Mapping[str, Any] | None = None) -> LoopResult:
    """Run ``strategy`` (a key of :data:`STRATEGIES`) on ``run.model`` for ``run.cycles`` cycles (mutates the model)."""
    spec = STRATEGIES[strategy]
    model = run.model
    result = LoopResult(run.scenario if hasattr(run, "scenario") else run.name, run.seed, strategy)
    bundle_data: dict[str, BundleData] = {}
    state: dict[str, Any] | None = None
    last_moved: dict[str, int] = {}
    for _ in range(run.cycles):
        stats = model.bundle_stats()
        usage = model.true_usage(stats)
        result.max_usage.append(max(usage.values()))
        result.min_usage.append(min(usage.values()))
        result.ideal.append(model.ideal_usage(stats))
        result.floor.append(model.floor_usage(stats))
        reports = model.load_reports(stats)
        for bundle, s in stats.items():
            bd = bundle_data.get(bundle) or BundleData.new_default()
            bd.update(NamespaceBundleStats.from_json(s, bundle))
            bundle_data[bundle] = bd
        for gone in set(bundle_data) - set(stats):
            del bundle_data[gone]
        cycle: dict[str, Any] = {
            "brokers": reports,
            "bundleData": {b: d.to_json() for b, d in bundle_data.items()},
            "nowMs": model.now_ms,
            "namespaceBundleCounts": {ns: len(nb) for ns, nb in model.namespaces.items()},
        }
        if strategy == "GlobalPlanner":
            cycle["bundleTopics"] = {b: model.topic_rates(b) for b in split_candidates(reports)}
        if extra_cycle:
            cycle.update(extra_cycle)
        doc: dict[str, Any] = {
            "shedding": spec["shedding"],
            "seed": run.seed,
            "assignDestinations": True,
            "cycles": [cycle],
        }
        if "config" in spec:
            doc["config"] = dict(spec["config"])
        if state is not None:
            doc["state"] = state
        out = decide_scenario(doc)
        state = out["state"]
        cyc = out["cycles"][0]
        result.warnings.extend(cyc["stats"].get("warnings", []))
        res = model.apply(cyc)
        result.rejected.extend(res.rejected)
        result.moves_per_cycle.append(res.unloads)
        result.splits += res.splits
        result.clients_disconnected += res.clients_disconnected
        for bundle in res.moved:
            prev = last_moved.get(bundle)
            if prev is not None and model.now_ms - prev < PING_PONG_MS:
                result.ping_pong += 1
            last_moved[bundle] = model.now_ms
        model.advance()
    return result


__all__ = ["STRATEGIES", "LoopResult", "run_closed_loop"]
