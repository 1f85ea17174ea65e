"""plan_split: turn a decision into one immutable plan with actions, reasons and predictions.

Actions are ordered: splits first (each with the boundaries computed now by the configured split
algorithm, so execution applies exactly what was approved), then unloads with a destination.
A bundle chosen for both split and unload is split only (its name no longer exists after the
split); that is recorded in the plan's notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.bundles import parse_boundary, split_full_name
from pulsar_rebalance.core.prediction import Move, predict
from pulsar_rebalance.pipeline.params import RunParams, resource_weights


@dataclass
class PlanDraft:
    actions: list[dict[str, Any]]
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
) -> PlanDraft:
    """Build the plan draft. ``topics_by_bundle``: full bundle name -> topic -> Pulsar topic rates."""
    from pulsar_rebalance.core.contract_split import split_scenario

    cfg = params.lb_config()
    algorithm = cfg.default_namespace_bundle_split_algorithm
    cycle = decision["cycle"]
    actions: list[dict[str, Any]] = []
    notes: list[str] = []
    split_bundles: set[str] = set()

    for s in cycle.get("splits", []):
        bundle = s["bundle"]
        ns, rng = split_full_name(bundle)
        topics = topics_by_bundle.get(bundle, {})
        result = split_scenario({
            "algorithm": algorithm, "bundle": rng, "topics": {t: dict(r) for t, r in topics.items()},
            "config": dict(params.config),
        })
        if not result.get("split"):
            notes.append(f"split of {bundle} skipped: {algorithm} found no valid boundary ({result.get('reason', 'no split')})")
            continue
        split_bundles.add(bundle)
        actions.append({
            "kind": "split", "namespace": ns, "bundle_range": rng,
            "source_broker": s.get("broker") or ownership.get(bundle),
            "destination_broker": None,
            "boundaries": [parse_boundary(b, f"split.boundaries[{i}]") for i, b in enumerate(result["boundaries"])],
            "split_algorithm": algorithm,
            "reason": s["reason"],
            "predicted": {"children": result["children"], "loadChange": "none: the children stay on the owner"},
        })

    moves: list[Move] = []
    for u in cycle.get("unloads", []):
        bundle = u["bundle"]
        ns, rng = split_full_name(bundle)
        if bundle in split_bundles:
            notes.append(f"unload of {bundle} dropped: the bundle is split in this plan")
            continue
        dest = u.get("destination")
        if not dest:
            notes.append(f"unload of {bundle} from {u['broker']} dropped: placement found no destination")
            continue
        reason = u["reason"]
        if u.get("destinationReason"):
            reason = f"{reason}; destination: {u['destinationReason']}"
        actions.append({
            "kind": "unload", "namespace": ns, "bundle_range": rng,
            "source_broker": u["broker"], "destination_broker": dest,
            "boundaries": None, "split_algorithm": None, "reason": reason,
            "predicted": {"tied": u.get("tied")},
        })
        moves.append(Move(bundle=bundle, source=u["broker"], destination=dest))

    prediction = predict(reports, moves, resource_weights(cfg))
    for a in actions:
        if a["kind"] == "unload":
            src, dst = a["source_broker"], a["destination_broker"]
            b = prediction["brokers"]
            a["predicted"].update({
                "source": {"broker": src, "before": b[src]["before"]["usage"], "after": b[src]["after"]["usage"]},
                "destination": {"broker": dst, "before": b[dst]["before"]["usage"], "after": b[dst]["after"]["usage"]},
            })
    for i, a in enumerate(actions):
        a["seq"] = i
    summary = {
        "decision": {"label": cycle.get("label"), "reason": cycle.get("reason")},
        "numBundleSplits": sum(a["kind"] == "split" for a in actions),
        "numBundleUnloads": sum(a["kind"] == "unload" for a in actions),
        "maxUsageBefore": prediction["maxUsageBefore"],
        "maxUsageAfterPredicted": prediction["maxUsageAfter"],
        "usageStdBefore": prediction["usageStdBefore"],
        "usageStdAfterPredicted": prediction["usageStdAfter"],
        "brokers": prediction["brokers"],
        "notes": notes,
        "strategies": {
            "shedding": params.shedding_strategy, "placement": params.placement_strategy,
            "splitAlgorithm": algorithm,
        },
        "dryRun": params.dry_run,
    }
    return PlanDraft(actions=actions, summary=summary, notes=notes)
