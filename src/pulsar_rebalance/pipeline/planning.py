"""plan_split: turn a decision into one immutable plan with actions, reasons and predictions.

Actions are ordered: splits first (each with its boundaries fixed now - the decision's when it has
them, else computed by the configured split algorithm on the topics - so execution applies exactly
what was approved), then unloads with a destination. A planner's split (GlobalPlanner) comes with its
boundaries and children, and its unloads may name the children (their predicted load comes from the
parent's topics). For Pulsar's strategies, a bundle
chosen for both split and unload is split, and its heaviest child (by the topics' current
throughput) is unloaded to the planned destination instead: Pulsar would split it and unload all
children (``loadBalancerAutoUnloadSplitBundlesEnabled``) to wherever lookups land, whereas this plan
moves exactly one named child to a named broker, so the human approves a concrete move.

Before it is stored, every plan passes the do-no-harm guard (:mod:`pulsar_rebalance.core.guard`),
whatever strategy made it: the actions that fail it are cut (greedily, in plan order), each listed
with its reason in the summary's ``guard`` section and in a warning. A rollback is only checked and
warned about, not cut: the operator asked for exactly those moves back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.core.contract.plan_json import action_from_mapping
from pulsar_rebalance.core.contract.policies_json import parse_policies
from pulsar_rebalance.core.guard import GuardAction, GuardLimits, GuardResult, GuardSplit, guard_plan
from pulsar_rebalance.core.plan import Action, Prediction, UnloadAction
from pulsar_rebalance.core.prediction import Move, predict
from pulsar_rebalance.core.pulsar.bundles import BundleRange, parse_boundary, split_full_name, topic_hash
from pulsar_rebalance.core.pulsar.load import NamespaceBundleStats
from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.pipeline.params import RunParams, resource_weights


@dataclass
class PlanDraft:
    actions: list[Action]
    summary: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.actions


def build_plan(
    *,
    decision: Mapping[str, Any],
    params: RunParams,
    reports: Mapping[str, Mapping[str, Any]],
    topics_by_bundle: Mapping[str, Mapping[str, Mapping[str, float]]],
    ownership: Mapping[str, str],
    snapshot_check: Mapping[str, Any] | None = None,
    placement_policies: Mapping[str, Any] | None = None,
    cordoned: Sequence[str] = (),
    leaving: Sequence[str] = (),
) -> PlanDraft:
    """Build the plan draft. ``topics_by_bundle``: full bundle name -> topic -> Pulsar topic rates.

    ``placement_policies``: the run's placement constraints (the ``decide`` contract's three fields, as
    collect_load stored them): the do-no-harm guard refuses a destination Pulsar's placement would not
    choose for the bundle (``failureDomainsEnabled`` from the run's config).

    ``snapshot_check``: collect's verdict (core.snapshot): its ``warnings`` go into the summary for the
    reviewer, and no action touches a bundle in ``excludedBundles`` (Pulsar was mid-transition there).
    """
    from pulsar_rebalance.core.contract.split import split_scenario

    cfg = params.lb_config()
    algorithm = cfg.default_namespace_bundle_split_algorithm
    cycle = decision["cycle"]
    actions: list[dict[str, Any]] = []
    notes: list[str] = []
    split_children: dict[str, list[str]] = {}
    warnings = list((snapshot_check or {}).get("warnings", []))
    # what the strategy itself warns of (the planner: a constraint no move can meet, a bundle it cannot split)
    warnings += [{"kind": "strategy", "message": str(w)} for w in (cycle.get("stats") or {}).get("warnings", [])]
    excluded = set((snapshot_check or {}).get("excludedBundles", []))

    planned_children: dict[str, str] = {}  # child full name -> parent full name (planner splits)
    guarded: list[GuardAction] = []  # what the guard checks, one per action (splits' standalone set below)
    for s in cycle.get("splits", []):
        bundle = s["bundle"]
        if bundle in excluded:
            notes.append(f"split of {bundle} left out: the snapshot showed it mid-transition (see warnings)")
            continue
        ns, rng = split_full_name(bundle)
        topics = topics_by_bundle.get(bundle, {})
        if s.get("boundaries"):
            # boundaries decided with the split: Pulsar's range_equally_divide on the range, or a planner's
            # split (GlobalPlanner, specified_positions_divide) whose unloads may name the children
            boundaries, children = list(s["boundaries"]), [split_full_name(c)[1] for c in s.get("children") or []]
            split_algorithm = s.get("algorithm") or "specified_positions_divide"
        else:
            result = split_scenario(
                {
                    "algorithm": algorithm,
                    "bundle": rng,
                    "topics": {t: dict(r) for t, r in topics.items()},
                    "config": dict(params.config),
                }
            )
            if not result.get("split"):
                notes.append(
                    f"split of {bundle} skipped: {algorithm} found no valid boundary ({result.get('reason', 'no split')})"
                )
                continue
            boundaries, children, split_algorithm = list(result["boundaries"]), list(result["children"]), algorithm
        split_children[bundle] = children
        for c in children:
            planned_children[f"{ns}/{c}"] = bundle
        actions.append(
            {
                "kind": "split",
                "namespace": ns,
                "bundle_range": rng,
                "source_broker": s.get("broker") or ownership.get(bundle),
                "destination_broker": None,
                "boundaries": [parse_boundary(b, f"split.boundaries[{i}]") for i, b in enumerate(boundaries)],
                "split_algorithm": split_algorithm,
                "reason": s["reason"],
                "predicted": {
                    "children": children,
                    "loadChange": "none: the children stay on the owner until moved",
                    "bundleLoad": _bundle_load(
                        reports.get(s.get("broker") or ownership.get(bundle) or "", {}), bundle, {}
                    ),
                },
            }
        )
        guarded.append(
            GuardSplit(
                bundle=bundle,
                broker=s.get("broker") or ownership.get(bundle) or "",
                children=tuple(f"{ns}/{c}" for c in children),
            )
        )

    child_stats: dict[str, NamespaceBundleStats] = {}
    for_moves: set[str] = set()  # splits planned so that an unload of the decision could name their child
    # Plan from the load manager's level: what Pulsar's leader would execute (destinations chosen as
    # doLoadShedding chooses them), not every bundle the strategy selected.
    executed = cycle.get("executed")
    for d in (executed or {}).get("dropped", []):
        notes.append(f"unload of {d['bundle']} from {d['broker']} not executed ({d['dropped']}): {d['detail']}")
    for u in executed["unloads"] if executed is not None else cycle.get("unloads", []):
        bundle = u["bundle"]
        ns, rng = split_full_name(bundle)
        if bundle in excluded:
            notes.append(
                f"unload of {bundle} from {u['broker']} left out: the snapshot showed it mid-transition (see warnings)"
            )
            continue
        dest = u.get("destination")
        if not dest:
            notes.append(f"unload of {bundle} from {u['broker']} dropped: placement found no destination")
            continue
        reason = u["reason"]
        if bundle in split_children:
            loads = _child_loads(ns, split_children[bundle], topics_by_bundle.get(bundle, {}))
            rng = max(split_children[bundle], key=lambda c: loads[c].total_msg_throughput)
            child_stats[f"{ns}/{rng}"] = loads[rng]
            parent_thr = sum(v.total_msg_throughput for v in loads.values())
            reason = (
                f"{reason}; {bundle} is split in this plan, so its heaviest child {rng} "
                f"({loads[rng].total_msg_throughput / 2**20:.2f} of {parent_thr / 2**20:.2f} MiB/s) moves instead"
            )
            notes.append(f"unload of {bundle} replaced by its child {ns}/{rng} (the bundle is split first)")
        if bundle in planned_children:  # a child of a split of this plan: its load from the parent's topics
            parent = planned_children[bundle]
            loads = _child_loads(ns, split_children[parent], topics_by_bundle.get(parent, {}))
            child_stats[bundle] = loads[rng]
            for_moves.add(parent)
        full = f"{ns}/{rng}"
        idle = u["broker"] in leaving and full not in child_stats and full not in _last_stats(reports, u["broker"])
        if idle:
            # a drained broker's bundle its report has no sample of: Pulsar samples every bundle with a
            # loaded topic, so this one carries nothing; it must still move for the broker to end empty
            child_stats[full] = NamespaceBundleStats()
            notes.append(f"unload of {full} from {u['broker']}: no load sample (no topic loaded), predicted as idle")
        if u.get("destinationReason"):
            reason = f"{reason}; destination: {u['destinationReason']}"
        actions.append(
            {
                "kind": "unload",
                "namespace": ns,
                "bundle_range": rng,
                "source_broker": u["broker"],
                "destination_broker": dest,
                "boundaries": None,
                "split_algorithm": None,
                "reason": reason,
                "predicted": {
                    "tied": u.get("tied"),
                    "bundleLoad": dict.fromkeys(_LOAD_KEYS, 0)
                    if idle
                    else _bundle_load(reports.get(u["broker"], {}), f"{ns}/{rng}", child_stats),
                },
            }
        )
        guarded.append(Move(bundle=f"{ns}/{rng}", source=u["broker"], destination=dest))

    # do no harm: cut the actions that fail the guard (a split only for moves stands alone no more)
    guarded = [
        GuardSplit(g.bundle, g.broker, g.children, standalone=g.bundle not in for_moves)
        if isinstance(g, GuardSplit)
        else g
        for g in guarded
    ]
    guard = _guard(
        reports, guarded, cfg, placement_policies, extra_stats=child_stats, cut=True, cordoned=cordoned, leaving=leaving
    )
    for v in guard.replaced:  # kept on another destination: the action says where and why
        i, dest = v.index, v.destination or ""
        actions[i] = {
            **actions[i],
            "destination_broker": dest,
            "reason": f"{actions[i]['reason']}; do-no-harm guard: destination changed from {v.planned_destination} "
            f"to {dest} ({v.reason})",
        }
        g = guarded[i]
        assert isinstance(g, Move)
        guarded[i] = Move(bundle=g.bundle, source=g.source, destination=dest)
    for v in guard.relieved:  # kept above the band to relieve an overloaded broker: the action says so
        actions[v.index] = {**actions[v.index], "reason": f"{actions[v.index]['reason']}; do-no-harm guard: {v.relief}"}
    kept = set(guard.kept)
    actions = [a for i, a in enumerate(actions) if i in kept]
    kept_moves = [(i, g) for i, g in enumerate(guarded) if i in kept and isinstance(g, Move)]
    moves = [g for _, g in kept_moves]
    warnings += _guard_warnings(guard)
    # a relief move predicted at its destination's own cost is stored with the guard's numbers
    arriving_at = {v.index: v.arriving for v in guard.verdicts if v.arriving is not None}
    arriving = {j: arriving_at[i] for j, (i, _) in enumerate(kept_moves) if i in arriving_at}

    prediction = predict(reports, moves, resource_weights(cfg), extra_stats=child_stats, arriving=arriving)
    # each unload's own effect (in plan order) on its source and destination; the plan's end state per
    # broker is in the summary's brokers
    unload_rows = [a for a in actions if a["kind"] == "unload"]
    for a, step in zip(unload_rows, prediction["steps"], strict=True):
        if step is not None:
            a["predicted"].update(
                {
                    "source": {"broker": a["source_broker"], **step["source"]},
                    "destination": {"broker": a["destination_broker"], **step["destination"]},
                }
            )
    # drafted as rows until the prediction filled in each unload's before/after; typed from here on
    planned = [action_from_mapping(a, default_seq=i) for i, a in enumerate(actions)]
    warnings += _raises_worst_broker(prediction)
    summary = {
        "decision": {"label": cycle.get("label"), "reason": cycle.get("reason"), "detail": cycle.get("detail")},
        "numBundleSplits": sum(a.kind == "split" for a in planned),
        "numBundleUnloads": sum(a.kind == "unload" for a in planned),
        **_predicted(prediction),
        "notes": notes,
        "warnings": warnings,
        "guard": guard.to_json(),
        "dataQuality": _data_quality(reports, ownership),
        "strategies": {
            "shedding": params.shedding_strategy,
            "placement": params.effective_placement,
            "splitAlgorithm": algorithm,
        },
        "dryRun": params.dry_run,
        "placement": placement_section(planned, reports, ownership, placement_policies, cfg),
    }
    return PlanDraft(actions=planned, summary=summary, notes=notes)


def placement_section(
    actions: Sequence[Action],
    reports: Mapping[str, Mapping[str, Any]],
    ownership: Mapping[str, str],
    placement_policies: Mapping[str, Any] | None,
    cfg: Any,
) -> dict[str, Any] | None:
    """The summary's ``placement``: per unload (by ``seq``) the constraints the guard checked it against
    (core.compliance), and the **compliance** view - the bundles of the run's ownership that break their
    namespace's current policies, among the brokers that reported (core.pulsar.policies.violations). None when
    the run stored no placement constraints (a run from before they were collected)."""
    from pulsar_rebalance.core.compliance import describe_constraints, violation_to_json
    from pulsar_rebalance.core.pulsar.policies import violations

    if placement_policies is None:
        return None
    policies = parse_policies(placement_policies, "placementPolicies")
    fde = cfg.failure_domains_enabled
    return {
        "empty": policies.empty,
        "failureDomainsEnabled": fde,
        "actions": {
            str(a.seq): [c.to_json() for c in describe_constraints(a.bundle, policies, failure_domains_enabled=fde)]
            for a in actions
            if a.kind == "unload"
        },
        "violations": [
            violation_to_json(v)
            for v in violations(ownership, policies, list(reports), fde, _persistent_enabled(reports))
        ],
    }


def _persistent_enabled(reports: Mapping[str, Mapping[str, Any]]):
    """Whether a broker enables persistent topics, from its load report (as the guard reads it)."""

    parsed = {b: local_broker_data_from_json(r, f"load-report[{b}]") for b, r in reports.items()}
    return lambda broker: broker not in parsed or parsed[broker].persistent_topics_enabled


def build_fix_plan(
    *,
    params: RunParams,
    reports: Mapping[str, Mapping[str, Any]],
    ownership: Mapping[str, str],
    placement_policies: Mapping[str, Any] | None,
    snapshot_check: Mapping[str, Any] | None = None,
    cordoned: Sequence[str] = (),
) -> tuple[PlanDraft, dict[str, Any]]:
    """The ``fix_policy_violations`` plan: each bundle that breaks its namespace's current policies moves
    once, to the least used broker the policies allow (core.compliance.fix_plan), and nothing else.

    The moves are an ordinary decision's unloads: :func:`build_plan` guards them (the do-no-harm guard
    may re-place or cut a move, and says so), predicts them and records the summary; the plan needs
    approval like any plan. A bundle no allowed broker can take is a warning; an empty plan says why.
    Returns the draft and the decision (cycle) it was made from."""
    from pulsar_rebalance.core.compliance import fix_plan, violation_to_json
    from pulsar_rebalance.core.prediction import LoadState
    from pulsar_rebalance.core.pulsar.policies import NO_POLICIES

    cfg = params.lb_config()
    policies = parse_policies(placement_policies, "placementPolicies") if placement_policies else NO_POLICIES
    excluded = set((snapshot_check or {}).get("excludedBundles", []))
    owners = {b: o for b, o in ownership.items() if b not in excluded}
    fix = fix_plan(
        owners,
        policies,
        list(reports),
        load=LoadState(reports, resource_weights(cfg)),
        failure_domains_enabled=cfg.failure_domains_enabled,
        persistent_enabled=_persistent_enabled(reports),
    )
    detail = (
        f"{len({v.bundle for v in fix.violations})} bundle(s) break their namespace's policies: "
        f"{len(fix.moves)} move(s), {len(fix.resolved)} resolved by those moves, {len(fix.unfixable)} cannot move"
        if fix.violations
        else None
    )
    cycle = _moves_cycle(
        "FixPolicyViolations", fix.why_empty() if fix.empty else "fix_policy_violations", detail, fix.moves
    )
    draft = build_plan(
        decision={"cycle": cycle},
        params=params,
        reports=reports,
        topics_by_bundle={},
        ownership=ownership,
        snapshot_check=snapshot_check,
        placement_policies=placement_policies,
        cordoned=cordoned,
    )
    draft.summary["warnings"] += [u.message for u in fix.unfixable]
    draft.summary["notes"] += [
        f"{v.bundle} on {v.broker} ({v.rule}) is not moved: an earlier move of this plan took the other "
        "namespace of its anti-affinity group away"
        for v in fix.resolved
    ]
    draft.summary["strategies"] = {
        "shedding": "fix_policy_violations",
        "placement": "least used broker the policies allow",
        "splitAlgorithm": None,
    }
    draft.summary["fixPolicyViolations"] = {
        "violations": [violation_to_json(v) for v in fix.violations],
        "moves": len(fix.moves),
        "resolved": [violation_to_json(v) for v in fix.resolved],
        "unfixable": [{**violation_to_json(u.violation), "whyNotMoved": u.why} for u in fix.unfixable],
    }
    return draft, cycle


def build_mode_plan(
    *,
    params: RunParams,
    reports: Mapping[str, Mapping[str, Any]],
    ownership: Mapping[str, str],
    placement_policies: Mapping[str, Any] | None,
    cordoned: Sequence[str] = (),
    snapshot_check: Mapping[str, Any] | None = None,
) -> tuple[PlanDraft, dict[str, Any]]:
    """The ``drain`` or ``fill`` plan of ``params.brokers`` (core.modes): moves only off the drained
    brokers, or only onto the filled ones, then guarded, predicted and summarised by :func:`build_plan`
    like any decision (with ``cordoned`` as destinations no move may take). Returns the draft and the
    decision (cycle) it was made from."""
    from pulsar_rebalance.core.modes import drain_plan, fill_plan
    from pulsar_rebalance.core.prediction import LoadState
    from pulsar_rebalance.core.pulsar.policies import NO_POLICIES

    cfg = params.lb_config()
    owning = set(ownership.values())
    unknown = [b for b in params.brokers if b not in reports and b not in owning]
    if unknown:
        raise ConfigError(
            f"{params.mode}: broker(s) {', '.join(unknown)} are not in this cluster's snapshot "
            f"(known: {', '.join(sorted(reports))})",
            key="brokers",
        )
    policies = parse_policies(placement_policies, "placementPolicies") if placement_policies else NO_POLICIES
    excluded = set((snapshot_check or {}).get("excludedBundles", []))
    owners = {b: o for b, o in ownership.items() if b not in excluded}
    plan = (drain_plan if params.mode == "drain" else fill_plan)(
        owners,
        LoadState(reports, resource_weights(cfg)),
        list(params.brokers),
        cordoned=cordoned,
        policies=policies,
        failure_domains_enabled=cfg.failure_domains_enabled,
        persistent_enabled=_persistent_enabled(reports),
    )
    cycle = _moves_cycle(params.mode.capitalize(), params.mode, plan.detail, plan.moves)
    draft = build_plan(
        decision={"cycle": cycle},
        params=params,
        reports=reports,
        topics_by_bundle={},
        ownership=ownership,
        snapshot_check=snapshot_check,
        placement_policies=placement_policies,
        cordoned=cordoned,
        leaving=params.brokers if params.mode == "drain" else (),
    )
    draft.summary["warnings"] += list(plan.warnings)
    draft.summary["strategies"] = {
        "shedding": params.mode,
        "placement": "least used allowed broker after the move",
        "splitAlgorithm": None,
    }
    draft.summary["mode"] = {
        "mode": params.mode,
        "brokers": list(params.brokers),
        "moves": len(plan.moves),
        "left": [{"bundle": x.bundle, "broker": x.broker, "why": x.why} for x in plan.left],
        "cordoned": sorted(cordoned),
    }
    return draft, cycle


def _moves_cycle(label: str, reason: str, detail: str | None, moves: Sequence[Any]) -> dict[str, Any]:
    """A decision (cycle) made of ``moves`` (anything with bundle, source, destination, reason)."""
    return {
        "label": label,
        "reason": reason,
        "detail": detail,
        "splits": [],
        "unloads": [
            {"bundle": m.bundle, "broker": m.source, "destination": m.destination, "reason": m.reason} for m in moves
        ],
    }


def _guard(
    reports: Mapping[str, Mapping[str, Any]],
    actions: Sequence[GuardAction],
    cfg: Any,
    placement_policies: Mapping[str, Any] | None,
    **kwargs: Any,
) -> GuardResult:
    """The do-no-harm guard with the run's limits, weights and placement constraints (the stored fields,
    parsed as ``decide`` parses them; collect_load validated them already)."""
    policies = parse_policies(placement_policies, "placementPolicies") if placement_policies else None
    return guard_plan(
        reports,
        actions,
        resource_weights(cfg),
        GuardLimits.from_config(cfg),
        policies=policies,
        failure_domains_enabled=cfg.failure_domains_enabled,
        **kwargs,
    )


def _guard_warnings(guard: GuardResult) -> list[str]:
    """One warning naming the actions that failed the do-no-harm guard (the summary's ``guard`` has the reasons)."""
    failed = guard.failed
    out = (
        [
            f"do-no-harm guard: {len(guard.replaced)} move(s) kept on another destination than planned: "
            + "; ".join(
                f"{v.bundle} {v.planned_destination} -> {v.destination} ({', '.join(v.rules)})" for v in guard.replaced
            )
        ]
        if guard.replaced
        else []
    )
    if not failed:
        return out
    what = "; ".join(
        f"{v.kind} {v.bundle}"
        + (f" {v.source} -> {v.destination}" if v.destination else "")
        + f" ({', '.join(v.rules)})"
        for v in failed
    )
    if guard.cut:
        return out + [
            f"do-no-harm guard: {len(failed)} of {len(guard.verdicts)} planned action(s) removed before storing "
            f"the plan, which keeps {len(guard.kept)}: {what}"
        ]
    return out + [
        f"do-no-harm guard: {len(failed)} of {len(guard.verdicts)} action(s) fail it and are kept (not cut: "
        f"this plan is an operator's request), review them: {what}"
    ]


def _raises_worst_broker(prediction: Mapping[str, Any]) -> list[str]:
    """A warning for a plan predicted to leave its busiest broker busier than the busiest is now."""
    before, after = prediction["maxUsageBefore"], prediction["maxUsageAfter"]
    if after <= before + 1e-6:
        return []
    worst = max(prediction["brokers"].items(), key=lambda kv: kv[1]["after"]["usage"])[0]
    return [
        f"this plan is predicted to raise the busiest broker's usage from {before:.1%} to {after:.1%} "
        f"({worst}): review it against the current load before approving"
    ]


def _predicted(prediction: Mapping[str, Any]) -> dict[str, Any]:
    """The plan summary's predicted balance (core.prediction's result, under the summary's names)."""
    return {
        "maxUsageBefore": prediction["maxUsageBefore"],
        "maxUsageAfterPredicted": prediction["maxUsageAfter"],
        "usageStdBefore": prediction["usageStdBefore"],
        "usageStdAfterPredicted": prediction["usageStdAfter"],
        "brokers": prediction["brokers"],
    }


def _data_quality(reports: Mapping[str, Mapping[str, Any]], ownership: Mapping[str, str]) -> dict[str, int]:
    """How much of the cluster the plan saw: brokers and bundle samples reporting."""
    return {
        "brokersReporting": len(reports),
        "brokersOwningBundles": len(set(ownership.values())),
        "bundleSamples": sum(len(r.get("lastStats") or {}) for r in reports.values()),
        "bundlesOwned": len(ownership),
    }


_LOAD_KEYS = (
    "msgRateIn",
    "msgRateOut",
    "msgThroughputIn",
    "msgThroughputOut",
    "topics",
    "producerCount",
    "consumerCount",
)


def _last_stats(reports: Mapping[str, Mapping[str, Any]], broker: str) -> Mapping[str, Any]:
    stats = reports.get(broker, {}).get("lastStats")
    return stats if isinstance(stats, Mapping) else {}


def _bundle_load(report: Mapping[str, Any], bundle: str, child_stats: Mapping[str, NamespaceBundleStats]) -> dict:
    """The bundle's load at planning time: the executor's drift check compares against it, and the plan
    page sums it into traffic moved and clients that reconnect. A split child has no sample yet: its
    rates and topic count come from the parent's topics hashing into it, its client counts are absent."""
    if bundle in child_stats:
        c = child_stats[bundle]
        return {
            "msgRateIn": c.msg_rate_in,
            "msgRateOut": c.msg_rate_out,
            "msgThroughputIn": c.msg_throughput_in,
            "msgThroughputOut": c.msg_throughput_out,
            "topics": c.topics,
        }
    stats = (report.get("lastStats") or {}).get(bundle) or {}
    return {k: stats[k] for k in _LOAD_KEYS if k in stats}


def _child_loads(
    namespace: str, children: list[str], topics: Mapping[str, Mapping[str, float]]
) -> dict[str, NamespaceBundleStats]:
    """Each child range's load: the sum of the rates of the parent's topics whose hash falls in it."""
    ranges = [BundleRange.parse(c, f"children[{i}]") for i, c in enumerate(children)]
    acc = {c: [0.0, 0.0, 0.0, 0.0] for c in children}
    counts = dict.fromkeys(children, 0)
    for topic, r in topics.items():
        h = topic_hash(topic)
        for c, br in zip(children, ranges):
            if br.contains(h):
                a = acc[c]
                a[0] += r.get("msgRateIn", 0.0)
                a[1] += r.get("msgRateOut", 0.0)
                a[2] += r.get("msgThroughputIn", 0.0)
                a[3] += r.get("msgThroughputOut", 0.0)
                counts[c] += 1
                break
    return {
        c: NamespaceBundleStats(
            msg_rate_in=a[0],
            msg_throughput_in=a[2],
            msg_rate_out=a[1],
            msg_throughput_out=a[3],
            consumer_count=0,
            producer_count=0,
            topics=counts[c],
            cache_size=0,
        )
        for c, a in acc.items()
    }


def build_rollback_plan(
    *,
    original,
    params: RunParams,
    reports: Mapping[str, Mapping[str, Any]],
    ownership: Mapping[str, str],
    placement_policies: Mapping[str, Any] | None = None,
) -> PlanDraft:
    """A plan that returns the bundles moved by ``original`` (a stored plan view) to their owners before it.

    Only completed unloads are reversed, and only where the bundle still exists and is still owned by
    the broker the plan moved it to (anything else moved since: left alone, with a note). Splits are
    not reversed: Pulsar cannot merge bundles. The rollback is an ordinary plan: it needs approval.
    The do-no-harm guard checks it but cuts nothing (the operator asked for exactly these moves back):
    the moves that fail it (the placement constraints' destination rules included) are named in a
    warning and in the summary's ``guard`` section.
    """
    actions: list[Action] = []
    notes: list[str] = []
    moves: list[Move] = []
    who = f" (approved by {original.approval.decided_by})" if original.approval else ""
    for a in original.actions:
        if a.kind == "split" and a.state == "completed":
            notes.append(f"split of {a.bundle} is not reversed: Pulsar cannot merge bundles")
            continue
        if a.kind != "unload" or a.state != "completed":
            continue
        now_owner = ownership.get(a.bundle)
        if now_owner is None:
            notes.append(f"{a.bundle} no longer exists (split since): not moved back")
            continue
        if now_owner != a.destination_broker:
            notes.append(
                f"{a.bundle} is on {now_owner} now, not on {a.destination_broker} where plan "
                f"{original.plan_id} put it: left alone"
            )
            continue
        if a.source_broker not in reports:
            notes.append(f"{a.bundle}: its previous owner {a.source_broker} is not in the cluster any more: left alone")
            continue
        actions.append(
            UnloadAction(
                seq=len(actions),
                namespace=a.namespace,
                bundle_range=a.bundle_range,
                source_broker=now_owner,
                destination_broker=a.source_broker,
                reason=f"rollback of plan {original.plan_id}{who}: return {a.bundle} to {a.source_broker}, its owner "
                "before that plan executed",
                predicted=Prediction(
                    details={"rollbackOf": {"plan_id": original.plan_id, "action_seq": a.seq}},
                    bundle_load=_bundle_load(reports.get(now_owner, {}), a.bundle, {}),
                ),
            )
        )
        moves.append(Move(bundle=a.bundle, source=now_owner, destination=a.source_broker))
    cfg = params.lb_config()
    guard = _guard(reports, moves, cfg, placement_policies, cut=False)
    prediction = predict(reports, moves, resource_weights(cfg))
    summary = {
        "decision": {"label": "Rollback", "reason": f"rollback of plan {original.plan_id}"},
        "rollbackOf": original.plan_id,
        "numBundleSplits": 0,
        "numBundleUnloads": len(actions),
        **_predicted(prediction),
        "notes": notes,
        "warnings": _raises_worst_broker(prediction) + _guard_warnings(guard),
        "guard": guard.to_json(),
        "dataQuality": _data_quality(reports, ownership),
        "strategies": {"shedding": "rollback", "placement": "previous owner", "splitAlgorithm": None},
        "dryRun": params.dry_run,
        "placement": placement_section(actions, reports, ownership, placement_policies, cfg),
    }
    return PlanDraft(actions=actions, summary=summary, notes=notes)
