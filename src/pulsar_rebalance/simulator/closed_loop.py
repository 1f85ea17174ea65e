"""Run a strategy in a closed loop on a scenario: decide -> apply -> advance the clock, and measure.

Each decision the model's load reports go through the decision core's ``decide`` contract (exactly as
the DAG's ``detect_overload`` calls it: ``assignDestinations``, the strategy state carried from the
previous decision, Pulsar's ``BundleData`` kept across decisions like the leader keeps it), the output
is applied to the model (splits first, then unloads) and the clock moves on. Two cadences:

* ``minute`` (:data:`CADENCES`): one decision per 1-minute cycle (Pulsar's
  ``loadBalancerSheddingIntervalMinutes``), applied at once; ``run.cycles`` decisions.
* ``dag``: the DAG's ``@hourly`` schedule: one decision per 60 simulated minutes
  (``run.dag_decisions`` of them, 48 = 2 days), the plan applied ``approval_delay_min`` minutes later
  (the approval gate: traffic and membership move on in between) the way the DAG's executor applies
  it: a split or unload is skipped when its broker no longer owns the bundle (or left), an unload
  when its destination is not live or when the bundle's reported ``msgRateIn + msgRateOut`` moved
  more than ``drift_tolerance`` (0.5: ``RunParams.drift_tolerance``) relative to what the plan saw
  (``|now - planned| / max(planned, 1)``), and at most ``max_unloads_per_run`` unloads (``None``: all).
  The model moves in two steps per decision (``delay``, then ``60 - delay`` minutes), events
  happen at their own minute inside a step.

Every strategy gets the same information: the reported stats (with the model's rate noise), Pulsar's
``BundleData``, and per-topic rates of the split candidates (``bundleTopics``) to every strategy whose
``decide`` contract takes them (the planner's; Pulsar's strategies split where Pulsar splits, on the
broker: the model computes the boundaries with the ``defaultNamespaceBundleSplitAlgorithm`` of the
strategy's config, from the same per-topic rates). ``no-action`` decides nothing (brokers leaving are
still re-placed by lookup, as the model always does): the baseline every strategy must beat.

Metrics (all usages are noise-free and capacity-normalised: per broker, the max over CPU, NIC in and
NIC out - and heap and direct memory under a model that reports them - of usage / limit; "ideal" is total
load / total capacity on the binding resource):
``final_max`` (the worst broker's highest usage over the last 5 cycles, so that periodic swings count
at their peak), ``worst_max`` (after the first decision), ``final_spread`` (final max - the lowest broker
over the same window), ``ideal`` (highest over the window), ``gap`` (final max - ideal), ``floor``
(the ideal, or the hottest topic alone on a broker if higher: no plan can go below it), ``moves``, ``splits``, ``moves_to_steady`` (moves made until the worst-broker usage
stays within 0.02 of its final value), ``churn`` (moves in the last third), ``ping_pong`` (a bundle
moved again within 30 minutes of its previous move), ``clients_disconnected``, ``warnings``,
``skipped`` (dag cadence: planned moves the executor skipped), ``sim_minutes`` and ``moves_per_day``.
Usages are sampled once per decision, just before it (at the dag cadence: hourly, so ``final_max``
spans the last 5 hours). All of it under the run's load model.

Placement constraints (the model's ``placement``: namespace isolation policies, anti-affinity groups,
failure domains, as they are at each decision) go to every strategy in the cycle's
``namespaceIsolationPolicies`` / ``failureDomains`` / ``antiAffinityGroups`` (and the model's
``failure_domains_enabled`` as the config's ``failureDomainsEnabled``), and to the do-no-harm guard
(``guard_plan(policies=...)``). ``violations`` counts, per decision, the bundles whose owner breaks them
(:func:`pulsar_rebalance.core.pulsar.policies.violations`, sampled with the usages); ``violations_added`` the
ones the applied decision created (after it, not before it, by namespace, broker and rule: a split's
children inherit their parent's); the summary's ``violations`` is the count at the end of the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.contract.decide import decide_scenario
from pulsar_rebalance.core.contract.load_json import namespace_bundle_stats_from_json
from pulsar_rebalance.core.guard import GuardAction, GuardLimits, GuardSplit, guard_plan, resource_weights
from pulsar_rebalance.core.planner import split_candidates
from pulsar_rebalance.core.prediction import Move
from pulsar_rebalance.core.pulsar.bundles import BundleRange, split_full_name
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import BundleData, NamespaceBundleStats
from pulsar_rebalance.core.pulsar.policies import Violation
from pulsar_rebalance.simulator.dynamics import ClusterModel, StepResult
from pulsar_rebalance.simulator.scenarios import ScenarioRun

PING_PONG_MS = 30 * 60_000
STEADY_BAND = 0.02
FINAL_WINDOW = 5
DAY_MIN = 24 * 60
NO_ACTION = "no-action"
CADENCES = ("minute", "dag")
DAG_PERIOD_MIN = 60
"""The DAG's ``@hourly`` schedule."""
APPROVAL_DELAY_MIN = 15
DRIFT_TOLERANCE = 0.5
"""The DAG's ``RunParams.drift_tolerance`` default."""
FLOW_OR_QPS = {"defaultNamespaceBundleSplitAlgorithm": "flow_or_qps_equally_divide"}

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
    "ThresholdShedder+flowOrQps": {"shedding": "ThresholdShedder", "config": dict(FLOW_OR_QPS)},
    "UniformLoadShedder+flowOrQps": {"shedding": "UniformLoadShedder", "config": dict(FLOW_OR_QPS)},
    "GlobalPlanner": {"shedding": "GlobalPlanner"},
    NO_ACTION: {"shedding": None},
}
"""Benchmark name -> the ``decide`` document's strategy part (shedding, config); ``no-action`` decides nothing.
The config is also the model's (``ClusterModel.config``): it splits with the algorithm the config names."""


@dataclass(slots=True)
class LoopResult:
    scenario: str
    seed: int
    strategy: str
    load_model: str = "linear"
    cadence: str = "minute"
    sim_minutes: int = 0
    skipped: int = 0
    guard_cut: int = 0
    """Actions the do-no-harm guard removed (see :func:`guard_cycle`)."""
    guard_replaced: int = 0
    """Moves the guard kept on another destination than the strategy chose."""
    applied_ms: list[int] = field(default_factory=list)
    """When each decision was applied (model time): the decision's time plus the approval delay at the dag cadence."""
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
    violations: list[int] = field(default_factory=list)
    """Per decision: bundles whose owner breaks the placement constraints (sampled with the usages)."""
    violations_added: list[list[Violation]] = field(default_factory=list)
    """Per decision: the violations the applied decision created (see :func:`added_violations`)."""
    final_violations: list[Violation] = field(default_factory=list)
    """The violations at the end of the run."""

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
            "load_model": self.load_model,
            "cadence": self.cadence,
            "sim_minutes": self.sim_minutes,
            "moves_per_day": self.moves * DAY_MIN / max(self.sim_minutes, 1),
            "skipped": self.skipped,
            "guard_cut": self.guard_cut,
            "guard_replaced": self.guard_replaced,
            "violations": len(self.final_violations),
            "violations_added": sum(len(v) for v in self.violations_added),
        }


def run_closed_loop(
    run: ScenarioRun,
    strategy: str,
    *,
    extra_cycle: Mapping[str, Any] | None = None,
    cadence: str = "minute",
    approval_delay_min: int = APPROVAL_DELAY_MIN,
    drift_tolerance: float | None = DRIFT_TOLERANCE,
    max_unloads_per_run: int | None = None,
    decisions: int | None = None,
    guard: bool = True,
) -> LoopResult:
    """Run ``strategy`` (a key of :data:`STRATEGIES`) on ``run.model`` (mutates the model).

    ``cadence`` ``minute``: ``run.cycles`` decisions, one per cycle, applied at once; ``dag``:
    ``run.dag_decisions`` hourly decisions, each applied ``approval_delay_min`` minutes later with the
    executor's checks (``drift_tolerance``, ``max_unloads_per_run``). ``decisions`` overrides the count."""
    if cadence not in CADENCES:
        raise ValueError(f"unknown cadence {cadence!r}; known: {', '.join(CADENCES)}")
    if cadence == "dag" and not 0 <= approval_delay_min < DAG_PERIOD_MIN:
        raise ValueError(f"approval_delay_min must be in [0, {DAG_PERIOD_MIN}), got {approval_delay_min}")
    spec = STRATEGIES[strategy]
    shedding = spec["shedding"]
    model = run.model
    if "config" in spec:  # the model (the brokers) runs with the strategy's config: its split algorithm, ...
        model.config = LoadBalancerConfig.from_mapping(spec["config"])
    cycle_min = model.interval_ms // 60_000 or 1
    result = LoopResult(
        run.scenario if hasattr(run, "scenario") else run.name,
        run.seed,
        strategy,
        load_model=model.load_model.name,
        cadence=cadence,
    )
    n = decisions if decisions is not None else (run.cycles if cadence == "minute" else run.dag_decisions)
    takes_topics = shedding is not None  # every strategy gets the same information (only the planner reads it)
    guard_cfg = LoadBalancerConfig.from_mapping(spec.get("config") or {})
    bundle_data: dict[str, BundleData] = {}
    state: dict[str, Any] | None = None
    last_moved: dict[str, int] = {}
    start_ms = model.now_ms
    for _ in range(n):
        stats = model.bundle_stats()
        usage = model.true_usage(stats)
        result.max_usage.append(max(usage.values()))
        result.min_usage.append(min(usage.values()))
        result.ideal.append(model.ideal_usage(stats))
        result.floor.append(model.floor_usage(stats))
        result.violations.append(len(model.violations()))
        reported = model.reported_stats(stats)
        reports = model.load_reports(stats, reported)
        for bundle, s in reported.items():
            bd = bundle_data.get(bundle) or BundleData.new_default()
            bd.update(namespace_bundle_stats_from_json(s, bundle))
            bundle_data[bundle] = bd
        for gone in set(bundle_data) - set(stats):
            del bundle_data[gone]
        cyc: dict[str, Any] = {"splits": [], "unloads": []}
        if shedding is not None:
            cycle: dict[str, Any] = {
                "brokers": reports,
                "bundleData": {b: d.to_json() for b, d in bundle_data.items()},
                "nowMs": model.now_ms,
                "namespaceBundleCounts": {ns: len(nb) for ns, nb in model.namespaces.items()},
            }
            if takes_topics:
                cycle["bundleTopics"] = {b: model.topic_rates(b) for b in split_candidates(reports)}
            if not model.placement.empty:  # the constraints as they are now (they may change mid-run)
                cycle.update(model.placement.to_json())
            if extra_cycle:
                cycle.update(extra_cycle)
            doc: dict[str, Any] = {
                "shedding": shedding,
                "seed": run.seed,
                "assignDestinations": True,
                "cycles": [cycle],
            }
            if "config" in spec:
                doc["config"] = dict(spec["config"])
            if model.failure_domains_enabled:
                doc["config"] = {**doc.get("config", {}), "failureDomainsEnabled": True}
            if state is not None:
                doc["state"] = state
            out = decide_scenario(doc)
            state = out["state"]
            cyc = out["cycles"][0]
            result.warnings.extend(cyc["stats"].get("warnings", []))
            if guard:  # what plan_split stores: the decision after the do-no-harm guard
                cyc = guard_cycle(model, reports, cyc, guard_cfg, result)
        if cadence == "minute":
            before = model.violations()
            res = model.apply(cyc)
        else:
            delay = approval_delay_min // cycle_min
            if delay:
                model.advance(delay)
            before = model.violations()
            res = execute_plan(model, cyc, reported, drift_tolerance, max_unloads_per_run, result)
        result.violations_added.append(added_violations(before, model.violations()))
        result.applied_ms.append(model.now_ms)
        result.rejected.extend(res.rejected)
        result.moves_per_cycle.append(res.unloads)
        result.splits += res.splits
        result.clients_disconnected += res.clients_disconnected
        for bundle in res.moved:
            prev = last_moved.get(bundle)
            if prev is not None and model.now_ms - prev < PING_PONG_MS:
                result.ping_pong += 1
            last_moved[bundle] = model.now_ms
        model.advance(1 if cadence == "minute" else (DAG_PERIOD_MIN - approval_delay_min) // cycle_min)
    result.sim_minutes = (model.now_ms - start_ms) // 60_000
    result.final_violations = model.violations()
    return result


def added_violations(before: list[Violation], after: list[Violation]) -> list[Violation]:
    """The violations of ``after`` whose (namespace, broker, rule) is not among ``before``'s: what a step
    created (a split's children, on their parent's broker, are not new)."""
    seen = {v.key for v in before}
    return [v for v in after if v.key not in seen]


def guard_cycle(
    model: ClusterModel,
    reports: Mapping[str, Mapping[str, Any]],
    cyc: Mapping[str, Any],
    cfg: LoadBalancerConfig,
    result: LoopResult,
) -> dict[str, Any]:
    """The cycle's decision as ``plan_split`` stores it: the do-no-harm guard (``core.guard``) run on its
    splits and executed unloads against the load reports the decision saw and the model's placement
    constraints (``policies=``, ``failure_domains_enabled=``); moves refused for where they
    land are re-placed, the rest cut (counted in ``result.guard_cut`` / ``guard_replaced``). A planner's
    split children are predicted from the parent's topics, as ``plan_split`` predicts them."""
    splits = list(cyc.get("splits", []))
    executed = cyc.get("executed")
    unloads = list(executed["unloads"] if executed is not None else cyc.get("unloads", []))
    if not unloads and not splits:
        return dict(cyc)
    actions: list[GuardAction] = []
    child_stats: dict[str, NamespaceBundleStats] = {}
    named_children = {c for sp in splits for c in sp.get("children") or ()}
    for sp in splits:
        children = tuple(sp.get("children") or ())
        moved_child = any(u["bundle"] in children for u in unloads)
        actions.append(GuardSplit(sp["bundle"], sp.get("broker") or "", children, standalone=not moved_child))
        if moved_child:
            topics = model.topics_of(sp["bundle"])
            for child in children:
                r = BundleRange.parse(split_full_name(child)[1], child)
                mine = [t for t in topics if r.contains(t.hash)]
                child_stats[child] = namespace_bundle_stats_from_json(
                    {
                        "msgRateIn": sum(t.rate_in for t in mine),
                        "msgRateOut": sum(t.rate_out for t in mine),
                        "msgThroughputIn": sum(t.rate_in * t.msg_size for t in mine),
                        "msgThroughputOut": sum(t.rate_out * t.msg_size for t in mine),
                        "topics": len(mine),
                    },
                    child,
                )
    moves = [u for u in unloads if u.get("destination")]
    actions += [Move(u["bundle"], u["broker"], u["destination"]) for u in moves]
    verdict = guard_plan(
        reports,
        actions,
        resource_weights(cfg),
        GuardLimits.from_config(cfg),
        extra_stats=child_stats or None,
        policies=model.placement,
        failure_domains_enabled=model.failure_domains_enabled,
    )
    kept = set(verdict.kept)
    result.guard_cut += len(verdict.failed)
    result.guard_replaced += len(verdict.replaced)
    n = len(splits)
    out_unloads = [{**u, "destination": verdict.destination_of(n + k)} for k, u in enumerate(moves) if n + k in kept]
    out_unloads += [u for u in unloads if not u.get("destination") and u["bundle"] not in named_children]
    out = dict(cyc)
    out["splits"] = [sp for k, sp in enumerate(splits) if k in kept]
    out["unloads"] = out_unloads
    out.pop("executed", None)
    return out


def execute_plan(
    model: ClusterModel,
    cyc: Mapping[str, Any],
    planned: Mapping[str, Mapping[str, Any]],
    drift_tolerance: float | None,
    max_unloads_per_run: int | None,
    result: LoopResult,
) -> StepResult:
    """Apply a plan decided some minutes ago as the DAG's executor does (``pipeline/execute.py``):
    splits, then unloads, each checked against the cluster as it is now. ``planned``: the reported bundle
    stats the plan was decided on (for the drift check); skipped actions are counted in ``result.skipped``."""
    live = set(model.live_brokers())
    splits = []
    for s in cyc.get("splits", []):
        broker = s.get("broker")
        if broker is not None and (broker not in live or model.owners.get(s["bundle"]) != broker):
            result.skipped += 1
            continue
        splits.append(s)
    total = model.apply({"splits": splits, "unloads": []})
    executed = cyc.get("executed")
    unloads = executed["unloads"] if executed is not None else cyc.get("unloads", [])
    now = model.reported_stats() if drift_tolerance is not None else {}
    kept: list[Mapping[str, Any]] = []
    for u in unloads:
        bundle, source, dest = u["bundle"], u["broker"], u.get("destination")
        if source not in live or model.owners.get(bundle) != source or (dest is not None and dest not in live):
            result.skipped += 1
            continue
        was, cur = planned.get(bundle), now.get(bundle)
        if drift_tolerance is not None and was is not None and cur is not None:
            before = was["msgRateIn"] + was["msgRateOut"]
            after = cur["msgRateIn"] + cur["msgRateOut"]
            if abs(after - before) / max(before, 1.0) > drift_tolerance:
                result.skipped += 1
                continue
        if max_unloads_per_run is not None and len(kept) >= max_unloads_per_run:
            result.skipped += 1
            continue
        kept.append(u)
    res = model.apply({"splits": [], "unloads": kept})
    total.unloads += res.unloads
    total.clients_disconnected += res.clients_disconnected
    total.moved += res.moved
    total.rejected += res.rejected
    return total


__all__ = [
    "CADENCES",
    "NO_ACTION",
    "STRATEGIES",
    "LoopResult",
    "added_violations",
    "execute_plan",
    "guard_cycle",
    "run_closed_loop",
]
