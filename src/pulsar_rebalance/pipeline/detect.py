"""detect_overload: run the configured Pulsar shedder and split trigger on this run's snapshot.

The scenario is built in the ``decide`` contract's JSON shapes and validated by its parser; the cycle
runs through :func:`core.cycle.run_cycle`, the function ``pulsar-rebalance decide`` runs too, so what
the DAG decides can be replayed offline from the stored scenario.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pulsar_rebalance.core.strategies import specs
from pulsar_rebalance.pipeline.params import RunParams

MODULAR_SHEDDERS_WITH_PLACEMENT = tuple(
    s.name
    for s in specs("shedding", "modular", selectable=True)
    if s.pulsar_classes and s.capabilities.bound_placement is None
)
"""Pulsar's modular shedders that take the run's placement strategy (not AvgShedder, which is its own
placement, nor the planner, which places its own moves)."""
PLANNERS = tuple(s.name for s in specs("shedding") if s.capabilities.reads_topic_rates)
"""Strategies that plan splits themselves and read the topics of their split candidates."""


def state_name(params: RunParams) -> str:
    return f"decide:{params.shedding_strategy}:{params.placement_strategy}"


def build_scenario(
    *,
    params: RunParams,
    reports: Mapping[str, Mapping[str, Any]],
    bundle_data: Mapping[str, Mapping[str, Any]],
    namespace_boundaries: Mapping[str, list[int]],
    recently_unloaded: Mapping[str, int],
    state: Mapping[str, Any] | None,
    now_ms: int,
    bundle_topics: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
    placement_policies: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The decide scenario for one cycle, in Pulsar's JSON shapes (``bundle_topics``: GlobalPlanner only).

    ``placement_policies``: the run's stored placement constraints, the contract's three fields
    (``namespaceIsolationPolicies``, ``failureDomains``, ``antiAffinityGroups``) as collect_load read
    them; each non-empty one goes to the scenario's top level, where ``decide`` applies it."""
    config = dict(params.config)
    if params.split_algorithm:
        config["defaultNamespaceBundleSplitAlgorithm"] = params.split_algorithm
    scenario: dict[str, Any] = {
        "shedding": params.shedding_strategy,
        "config": config,
        "seed": params.seed,
        "assignDestinations": True,
        "cycles": [
            {
                "brokers": {b: dict(r) for b, r in reports.items()},
                "bundleData": {b: dict(d) for b, d in bundle_data.items()},
                "recentlyUnloadedBundles": dict(recently_unloaded),
                "nowMs": now_ms,
                "namespaceBundleCounts": {ns: len(bs) - 1 for ns, bs in namespace_boundaries.items()},
            }
        ],
    }
    if bundle_topics and params.shedding_strategy in PLANNERS:
        scenario["cycles"][0]["bundleTopics"] = {
            b: {t: dict(r) for t, r in ts.items()} for b, ts in bundle_topics.items()
        }
    if params.shedding_strategy in MODULAR_SHEDDERS_WITH_PLACEMENT and params.placement_strategy != "AvgShedder":
        scenario["placement"] = params.placement_strategy
    # AvgShedder places with its own pairing and TransferShedder with the extensible
    # LeastResourceUsageWithWeight, as in Pulsar; decide() picks those itself. The AvgShedder
    # placement (the default since PR #26609) pairs only with the AvgShedder shedder (Pulsar refuses
    # the mixed pair at start): with another shedder, decide() falls back to LeastLongTermMessageRate.
    for key, value in (placement_policies or {}).items():
        if value:
            scenario[key] = json.loads(json.dumps(value))  # a copy: the scenario is stored as it was decided
    if state:
        scenario["state"] = dict(state)
        # Pulsar records an unload in recentlyUnloadedBundles once it happened; the carried state recorded
        # the decision's unloads when the plan was decided, before the guard, the approval and the executor.
        # The unloads that completed come from the database (``recently_unloaded``, above); a move that was
        # cut, rejected, dry-run or dropped does not hold its bundle for the grace period.
        if "recentlyUnloadedBundles" in scenario["state"]:
            scenario["state"]["recentlyUnloadedBundles"] = {}
    return scenario


def decide(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Run the decision core on the one-cycle scenario: validated as ``decide`` validates it
    (``parse_scenario``), then the same typed cycle analyzer the contract runs
    (:func:`core.cycle.run_cycle`). Returns ``{"cycle": <cycle output>, "state": <strategy state after>}``
    in the contract's JSON shapes (stored with the run, replayable with ``pulsar-rebalance decide``)."""
    from pulsar_rebalance.core.contract.decide import parse_scenario
    from pulsar_rebalance.core.cycle import run_cycle, seeded_random, with_random_position

    parsed = parse_scenario(dict(scenario))
    (cycle,) = parsed.cycles
    rng = seeded_random(parsed.seed, parsed.state)
    result = run_cycle(cycle, parsed.state, parsed.settings, rng)
    return {"cycle": result.to_json(), "state": with_random_position(result.state, rng).to_json()}
