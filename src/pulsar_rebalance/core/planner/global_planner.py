"""GlobalPlanner: plan the whole cluster at once toward a target spread, with as few moves as possible.

Not a Pulsar class (Pulsar's shedders decide broker by broker, inside the leader, with no memory of
their own moves); this strategy uses what a planner outside the brokers has: every broker's report at
once, the move history, and splits and placement decided together. Same cycle input and output shape
as the shedders (``decide``'s ``shedding: "GlobalPlanner"``): unloads with their destination, reason and
predicted before/after; splits with their boundaries (applied before the unloads, so an unload may
name a child of a split of the same cycle); warnings for what no move can fix.

One cycle:

1. **Model** (:mod:`.load_model`): per broker the absolute usage and limit of Pulsar's five resources,
   per bundle its contribution (fitted from the reports), planned at the recent peak (max of the last
   sample, Pulsar's short-term average and the remembered peak of a swinging bundle). Usage is
   capacity-normalised (weighted max of usage/limit).
2. **Ideal** = total usage / total capacity (binding resource). **Trigger** = ideal + max(10 points,
   20 % of ideal, 3 x noise); **target** = ideal + max(5 points, 10 % of ideal, noise): ThresholdShedder's
   geometry. A broker counts as above a level only beyond ``min_gain`` (0.5 point) more, so no move is
   made to shave less than that. Nothing happens unless the busiest broker is above the trigger
   (hysteresis: a balanced cluster gets zero moves, noise and on/off traffic inside the band are
   ignored). The plan's **sources** are the brokers above the trigger by more than the reports' noise in
   ``confirm_reports`` consecutive reports - its (smoothed) reports above it, not only its planned usage,
   which holds remembered peaks - (or at once far above it, when the plan closes at least half its excess
   over the target: else it is planned again without it, and it waits for its reports to confirm it); each
   is planned down to the target. A broker between the target
   and the trigger is no source, as in ThresholdShedder, which sheds only brokers above its threshold.
3. **Membership settle**: when the set of brokers changed (a broker joined, left or came back from a
   restart) less than 10 min ago, the planner waits, unless a broker is above Pulsar's overload
   threshold: a rolling restart gets one corrective plan once every broker reports again, not one per
   broker (the practice Pulsar's rolling-restart guide and Cruise Control's grace periods describe).
4. **Greedy descent of the maximum, fewest moves first**: take the busiest source above the target;
   move the *smallest* bundle that alone brings it to the target with its destination staying within
   the target (one move closes the whole gap); else the *largest* bundle whose destination stays
   within the target (the most gap closed per move); else the move that lowers max(source,
   destination) the most. The destination is the tightest fit within the target among the
   least-used brokers with reported limits (the roomiest stay free for bigger bundles), never above
   Pulsar's overload threshold, never ending above the source. Each move strictly lowers the pair's
   maximum: the plan is never worse than before. Once the busiest broker is stuck, it sets the worst
   usage: only brokers above the trigger and above it (or above the overload threshold) still move.
5. **Split when no move can help**: if the busiest broker's biggest bundle fits nowhere below the
   target, split it - isolating a topic that carries more than half of it (boundaries at its hash
   and hash+1), otherwise into equal-load parts by topic hash - and place the children in the same
   plan. A bundle that is a single hot topic, or whose namespace is at
   ``loadBalancerNamespaceMaximumBundles``, gets a **warning**, not a split; so does a bundle planned at
   a peak its topics' current rates do not show (which topic carries the peak is not known yet).
6. **A broker pinned above the target** by a bundle nothing can split or move (one hot topic, or a
   namespace at its bundle limit) is the cluster's worst broker: its other bundles move off it (each
   to a broker that ends no higher than the target or the pinned bundle alone), so that bundle gets the
   broker to itself.
7. **History**: bundles this planner moved within the cool-down (30 min), or that anyone unloaded within
   Pulsar's grace period, stay put; a bundle is never moved back to the broker it left within 6 h.
8. **Fill** (ThresholdShedder's ``lowerBoundarySheddingEnabled``, mirrored): a broker below
   min(ideal - (trigger - ideal), ideal / 2) - noise in its planned usage and its reports, in ``confirm_reports`` consecutive
   reports, is filled up to ideal - (target - ideal) from the brokers above the target, busiest first, down
   to the target (moves only, the largest bundle that leaves its source at or above that lower level),
   after the plan's other moves, when it closes at least half the busiest broker's excess over the target.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulsar_rebalance.core.decision import Decision, Label, Reason, SplitDecision, Unload, skip
from pulsar_rebalance.core.guard import DestinationRoom, GuardLimits, resource_weights
from pulsar_rebalance.core.planner.load_model import BundleLoad, ClusterView, features_of
from pulsar_rebalance.core.planner.memory import PlannerMemory
from pulsar_rebalance.core.pulsar.bundles import (
    BundleRange,
    bundle_full_name,
    format_boundary,
    split_full_name,
    split_range,
    topic_hash,
)
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData
from pulsar_rebalance.core.pulsar.policies import NO_POLICIES, DestinationFilter, PlacementPolicies, unmet_constraints
from pulsar_rebalance.core.pulsar.state import StrategyState

PLANNER_NAME = "GlobalPlanner"

TopicLoad = tuple[int, list[float], tuple[float, float, float]]
"""A topic of a bundle being split: its hash, its load vector, and its planned (msg/s, bytes/s in, out)."""


@dataclass(frozen=True, slots=True)
class PlannerSettings:
    target_abs: float = 0.05
    target_rel: float = 0.10
    """A broker above the trigger is planned down to ideal + max(these, the noise): ThresholdShedder's
    geometry, which sheds an overloaded broker to the average + its threshold - 5 points
    (``ADDITIONAL_THRESHOLD_PERCENT_MARGIN``), i.e. + 5 points by default."""
    trigger_abs: float = 0.10
    trigger_rel: float = 0.20
    """The planner acts on brokers above ideal + max(these, ``noise_trigger`` x the noise):
    ThresholdShedder's ``loadBalancerBrokerThresholdShedderPercentage`` default, 10 points above the
    average (and 20 % of the ideal, the same at an ideal of 50 %)."""
    min_gain: float = 0.005
    """A move must lower the source by at least this (usage fraction): smaller ones are not worth a disconnect."""
    cooldown_ms: int = 30 * 60_000
    history_ms: int = 6 * 60 * 60_000
    peak_ms: int = 60 * 60_000
    """How long a swinging bundle's peak is remembered after it was last seen."""
    swing: float = 0.25
    """A bundle whose last sample differs from its short-term average by more than this (relative) swings."""
    settle_ms: int = 10 * 60_000
    """Wait this long after the set of brokers changed (join, leave, restart) before re-planning, unless
    a broker is above the overload threshold."""
    noise_trigger: float = 3.0
    """The trigger is at least this many times the reports' noise (how far a broker's report lands from its own
    last one's prediction; on a first cycle the robust spread around the fitted model) above the ideal; the
    target and the minimum gain at least once the noise."""
    cooldown_cycles: int = 2
    """A moved bundle also stays put for this many cycles (at the DAG's hourly cadence: two hours)."""
    peak_cycles: int = 3
    """A swinging bundle's peak is also remembered for this many cycles."""
    model_smoothing: float = 0.2
    """Weight of this cycle's fit in the load model's coefficients (EMA across cycles)."""
    usage_smoothing: float = 0.5
    """The weight a broker's new load report gets over the usage predicted from its last (smoothed) one and
    the change in its traffic: a report is one noisy sample (0 < x <= 1; 1 believes every sample)."""
    confirm_margin: float = 2.0
    """Above the trigger, the planner acts on one cycle's reading only beyond ideal + this x (trigger - ideal)
    (or the overload threshold); below that a broker must be above the trigger in ``confirm_reports``
    consecutive cycles."""
    confirm_reports: int = 3
    """Consecutive load reports a broker must be above the trigger in (and below ``confirm_margin``'s level)
    before the planner acts: one report is a sample, two can be the peak of a load that comes and goes
    (AvgShedder counts 2 hits for a large gap and 8 for a small one)."""
    max_actions: int = 1000
    candidate_destinations: int = 8
    max_split_parts: int = 8
    """A split has at most this many parts to move plus one (the parts that stay lie between them)."""
    fast_path_share: float = 0.5
    """A broker acted on from one report (far above the trigger, below the overload threshold) only when the
    plan closes at least this share of its excess over the target (or brings it below the trigger); else it
    waits for ``confirm_reports`` reports like any other."""
    fill_below: float = 0.5
    """A broker is filled (step 8) only below this share of the ideal (and as far below it as the trigger is above)."""
    fill_share: float = 0.5
    """A fill (step 8) is planned only when it lowers the busiest broker by at least this share of its excess over
    the target."""
    min_split_gain: float = 0.02
    """Isolating a hot topic must free at least this much of its broker (usage fraction) to be worth a split."""


@dataclass(frozen=True, slots=True)
class PlannedUnload(Unload):
    """An unload with the planner's predicted usage of source and destination before/after."""

    predicted: Mapping[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        out = Unload.to_json(self)
        if self.predicted is not None:
            out["predicted"] = dict(self.predicted)
        return out


def planned_split(
    bundle: str, broker: str, reason: str, points: Sequence[int], children: Sequence[str]
) -> SplitDecision:
    """A planner's split: Pulsar's ``specified_positions_divide`` at the planned boundaries, children
    named (so unloads of the same plan can name them) and not unloaded by the split itself."""
    return SplitDecision(
        bundle,
        broker,
        reason,
        "specified_positions_divide",
        [format_boundary(b) for b in points],
        list(children),
        False,
    )


@dataclass(slots=True)
class PlannerInput:
    brokers: Mapping[str, LocalBrokerData]
    bundle_data: Mapping[str, BundleData]
    recently_unloaded_bundles: Mapping[str, int]
    now_ms: int | None = None
    bundle_topics: Mapping[str, Mapping[str, Any]] | None = None
    """bundle -> {full topic name -> TopicRates}: lets splits isolate hot topics (optional)."""
    namespace_bundle_counts: Mapping[str, int] | None = None
    policies: PlacementPolicies = NO_POLICIES
    """Isolation policies, anti-affinity groups, failure domains: a move's destination must satisfy them."""


SPLIT_CANDIDATES_PER_BROKER = 3


SPLIT_CANDIDATE_MIN_SHARE = 0.05
"""A bundle under this share of its broker's traffic never needs a split to fit anywhere: no topic rates asked."""


def split_candidates(
    reports: Mapping[str, Mapping[str, Any]],
    per_broker: int = SPLIT_CANDIDATES_PER_BROKER,
    min_share: float = SPLIT_CANDIDATE_MIN_SHARE,
) -> list[str]:
    """Each broker's busiest bundles in LocalBrokerData JSON reports (by bytes/s + 1 KiB per msg/s), those
    carrying at least ``min_share`` of their broker's traffic: the ones a caller should send topic rates for
    (``bundleTopics``) so that splits can isolate hot topics. (At 1,000 brokers of 100 small bundles each,
    3 per broker meant 300,000 topic rows for bundles no plan would split.)"""
    out: list[str] = []
    for rep in reports.values():
        stats: Mapping[str, Mapping[str, float]] = rep.get("lastStats") or rep.get("bundleStats") or {}

        def weight(b: str) -> float:
            s = stats[b]
            return (
                s.get("msgThroughputIn", 0.0)
                + s.get("msgThroughputOut", 0.0)
                + 1024 * (s.get("msgRateIn", 0.0) + s.get("msgRateOut", 0.0))
            )

        total = sum(weight(b) for b in stats)
        top = sorted(stats, key=lambda b: (-weight(b), b))[:per_broker]
        out.extend(b for b in top if total > 0 and weight(b) >= min_share * total)
    return out


def _r(x: float) -> float:
    return round(x, 4)


class GlobalPlanner:
    name = PLANNER_NAME
    plans_splits = True
    """Splits come from the plan itself (with boundaries); Pulsar's split trigger is not run."""

    def __init__(self, settings: PlannerSettings | None = None) -> None:
        self.settings = settings or PlannerSettings()

    # The shedder interface (ModularInput): no clock, no topic rates.
    def find_bundles_for_unloading(
        self, inp: Any, config: LoadBalancerConfig, state: StrategyState
    ) -> tuple[Decision, StrategyState]:
        return self.plan(PlannerInput(inp.brokers, inp.bundle_data, inp.recently_unloaded_bundles), config, state)

    def plan(
        self, inp: PlannerInput, config: LoadBalancerConfig, state: StrategyState
    ) -> tuple[Decision, StrategyState]:
        # imported here: core.pulsar.shedders registers this planner, so a module-level import would be circular
        from pulsar_rebalance.core.pulsar.shedders.base import is_system_namespace, namespace_of

        st = self.settings
        now = inp.now_ms
        mem = PlannerMemory.of(state.planner)
        # time constants hold in cycles as well as minutes: at the DAG's hourly cadence a bundle moved in
        # the previous cycle is still cooling down, and a swing's peak outlives the gap between two cycles
        cycle_ms = now - mem.members_at if now is not None and mem.members_at is not None else 0
        cycle_ms = max(0, cycle_ms)
        cooldown_ms = max(st.cooldown_ms, st.cooldown_cycles * cycle_ms)
        if now is not None:
            self._update_peaks(mem, inp, now, max(st.peak_ms, st.peak_cycles * cycle_ms))
        view = ClusterView(
            inp.brokers,
            inp.bundle_data,
            config,
            {b: (p["msgRate"], p["msgThroughputIn"], p["msgThroughputOut"]) for b, p in mem.peaks.items()},
            mem.coefficients,
            st.model_smoothing,
            mem.reports,
            st.usage_smoothing,
        )
        mem.coefficients = view.coefficients()
        mem.reports = view.smoothed
        eligible = [b for b in view.brokers if any(lim > 0 and w > 0 for lim, w in zip(view.limit[b], view.weights))]
        history = mem.moves
        if now is not None:
            history = {b: m for b, m in history.items() if m["atMs"] >= now - st.history_ms}
            mem.moves = history
        # a move the reports show undone - its bundle still on the broker it was to leave: the do-no-harm guard
        # cut it, the operator rejected the plan, the executor dropped it - is forgotten: it neither cools its
        # bundle down (here or as the same decision's entry in recentlyUnloadedBundles) nor counts as received
        undone: dict[str, int] = {}
        if history:
            owner = {name: b for b, names in view.owned.items() for name in names}
            undone = {
                b: m["atMs"]
                for b, m in history.items()
                if owner.get(b) == m["from"] and (now is None or m["atMs"] < now)
            }
            history = {b: m for b, m in history.items() if b not in undone}
            mem.moves = history
            # a fill move whose bundle landed on neither end: the do-no-harm guard put it elsewhere (its
            # destination is cordoned, or refused by the guard's checks): that broker is not filled again for the
            # history window, or every run would plan the same fill and the guard re-place it on another broker
            for b, m in history.items():
                if m.get("fill") and owner.get(b) not in (None, m["from"], m["to"]):
                    mem.refused[m["to"]] = max(m["atMs"], mem.refused.get(m["to"], 0))
        if now is not None:
            mem.refused = {b: t for b, t in mem.refused.items() if t >= now - st.history_ms}
        corroborated = self._corroborate(mem, view, inp, now, max(st.peak_ms, st.peak_cycles * cycle_ms), history)
        before = {b: view.usage(b) for b in view.brokers}
        ideal = view.ideal(eligible)
        # the reports' noise widens the band: act only where a move gains more than the reports can tell apart
        # (sample to sample: a broker's steady excess over the fit, a slower CPU, is load, not noise)
        noise = view.noise
        target = ideal + max(st.target_abs, st.target_rel * ideal, noise)
        trigger = ideal + max(st.trigger_abs, st.trigger_rel * ideal, st.noise_trigger * noise)
        min_gain = max(st.min_gain, noise)
        overload = config.load_balancer_broker_overloaded_threshold_percentage / 100.0
        max_before = max((before[b] for b in eligible), default=0.0)
        stats: dict[str, Any] = {
            "ideal": _r(ideal),
            "target": _r(target),
            "trigger": _r(trigger),
            "noise": _r(noise),
            "modelError": _r(view.fit_noise),
            "maxUsageBefore": _r(max_before),
        }
        if corroborated:  # brokers the model put above what their own reports showed
            stats["clippedToReports"] = {b: [_r(m), _r(c)] for b, (m, c) in sorted(corroborated.items())}
        # a placement constraint no move can meet (too few primaries, a group larger than the brokers): a
        # warning on every plan, balanced or not; the destination filter below keeps moves within the rest
        unmet: list[str] = []
        if not inp.policies.empty:
            owners = {n: b for b, names in view.owned.items() for n in names}
            unmet = unmet_constraints(inp.policies, eligible, owners, config.failure_domains_enabled)
            stats["warnings"] = list(unmet)
        changed = self._track_membership(mem, sorted(inp.brokers), now)
        # a broker above the trigger acts only when the previous cycle saw it there too (Pulsar's
        # AvgShedder counts hits the same way), unless it is far above (twice the band) or overloaded
        # a report counts only when it is above the trigger by more than the reports' noise: a broker sitting just
        # below it is not confirmed by a run of noisy samples (ThresholdShedder averages 90 % history for that)
        clear = min(ideal + st.confirm_margin * (trigger - ideal), overload)
        # a hit is a load report: the broker's reports (as smoothed, without its bundles' remembered peaks) must
        # show it above the level as well as its planned usage - a remembered peak keeps the planned usage up
        # while the load is off, and an on/off consumer lasting two reports was confirmed by a third report
        # taken in its off phase
        hit_level = trigger + noise
        hot = sorted(b for b in eligible if before[b] > hit_level)
        seen = {b: mem.above.get(b, 0) + 1 for b in hot if view.smoothed_usage(b) > hit_level}
        mem.above = seen
        # the brokers a plan sheds (ThresholdShedder's geometry): above the trigger, confirmed or far above;
        # a broker between the target and the trigger, or above it for fewer reports, is left alone
        sources = {b for b in hot if seen.get(b, 0) >= st.confirm_reports or before[b] >= clear}
        # the mirror image (ThresholdShedder's lowerBoundarySheddingEnabled): a nearly empty broker - below
        # `fill_below` x the ideal and as far below it as the trigger is above, by more than the noise - in its
        # planned usage (which holds its bundles' remembered peaks: an on/off consumer's broker in its off phase is
        # not empty) and in its reports, for `confirm_reports` consecutive reports, is filled from the brokers
        # above the target (step 8, in `descend`): a broker that joined or came back from a restart does not stay
        # empty within the band. Not one of a mixed-capacity cluster that sits 10 points low: filling those cost
        # more moves than the closest Pulsar strategy's on four seen and held-out cells, for 2 to 4 points
        low_level = min(ideal - (trigger - ideal), st.fill_below * ideal) - noise
        mem.below = {
            b: mem.below.get(b, 0) + 1
            for b in eligible
            if before[b] < low_level and view.smoothed_usage(b) < low_level and not view.clipped(b)
        }
        refused = sorted(b for b in mem.refused if b in mem.below)
        if refused:  # far below, but a fill move to it landed elsewhere (see the history above)
            stats["fillRefused"] = refused
        under = {b for b, n in mem.below.items() if n >= st.confirm_reports and b not in mem.refused}
        fill = bool(under)  # also when the busiest broker is above the trigger but not confirmed there
        new_state = state.evolve(planner=mem.to_json())
        if len(eligible) < 2:
            return skip(
                Reason.NO_BROKERS, f"{len(eligible)} broker(s) with reported limits: nothing to balance", stats
            ), new_state
        if max_before <= trigger and not fill:
            stats["brokers"] = {b: {"usage": _r(before[b])} for b in view.brokers}
            return skip(
                Reason.BALANCED,
                f"busiest broker {max_before:.4f} <= trigger {trigger:.4f} (ideal {ideal:.4f}): within the band, no move",
                stats,
            ), new_state
        if not sources and not fill:  # above the trigger, but not yet in enough reports and not far above
            stats["brokers"] = {b: {"usage": _r(before[b])} for b in view.brokers}
            top = max(eligible, key=lambda b: (before[b], b))
            reported = (
                ""
                if top in seen or top not in hot
                else (
                    f"; its load reports show {view.smoothed_usage(top):.4f} (the planned usage holds its "
                    "bundles' remembered peaks): a report counts only above that level"
                )
            )
            return skip(
                Reason.HIT_COUNT,
                f"busiest broker {max_before:.4f} > trigger {trigger:.4f} (ideal {ideal:.4f}), above it by more than "
                f"the noise ({hit_level:.4f}) in {max(seen.values(), default=0)} consecutive load report(s): waiting "
                f"for {st.confirm_reports} to confirm it (a report is one sample; at once above {clear:.4f}){reported}",
                stats,
            ), new_state
        since = mem.membership_changed
        if now is not None and since is not None and now - since < st.settle_ms and max_before < overload:
            stats["brokers"] = {b: {"usage": _r(before[b])} for b in view.brokers}
            what = f" ({changed})" if changed else ""
            return skip(
                Reason.COOL_DOWN,
                f"the set of brokers changed {(now - since) / 60_000:.0f} min ago{what}: waiting until it has been stable for "
                f"{st.settle_ms // 60_000} min (a restart or scaling in progress gets one plan at its end); busiest broker "
                f"{max_before:.4f} < overload threshold {overload:.2f}",
                stats,
            ), new_state

        excluded_ns = set(config.load_balancer_shedding_excluded_namespaces)
        counts0 = dict(inp.namespace_bundle_counts or {})
        if not counts0:
            for name in view.bundles:
                counts0[namespace_of(name)] = counts0.get(namespace_of(name), 0) + 1

        def is_frozen(bundle: str) -> bool:
            m = history.get(bundle)
            if m is not None and (now is None or m["atMs"] >= now - cooldown_ms):
                return True
            if bundle in inp.recently_unloaded_bundles and inp.recently_unloaded_bundles[bundle] != undone.get(bundle):
                return True
            ns = namespace_of(bundle)
            return ns in excluded_ns or is_system_namespace(ns)

        frozen = {name for name in view.bundles if is_frozen(name)}

        fill_dropped: list[str] = []  # why the last descent's fill was not worth it (empty: it was, or none)
        # the mirror of the target: a broker far below the ideal is filled to as far below it as the target is above
        fill_to = ideal - (target - ideal)

        def descend(
            srcs: set[str],
        ) -> tuple[list[PlannedUnload], list[SplitDecision], list[str], dict[str, tuple[float, float, float]]]:
            """One greedy descent of the maximum from ``srcs`` (steps 4-6 of docs/planner.md), then the fill of
            the brokers far below the ideal (step 8), on ``view`` (moves and splits applied to it): the unloads,
            the splits, the warnings and the split children's features."""
            fill_dropped.clear()
            counts = dict(counts0)
            # what the do-no-harm guard will accept on each destination (it predicts a part of a bundle by its
            # share of the source's reported usage, not by this model): split parts are sized within it too
            room = DestinationRoom(inp.brokers, resource_weights(config), GuardLimits.from_config(config))
            # Pulsar's placement constraints (core.pulsar.policies): only destinations its own placement could choose
            allowed = DestinationFilter(
                inp.policies, view.owned, failure_domains_enabled=config.failure_domains_enabled
            )
            unloads: list[PlannedUnload] = []
            splits: list[SplitDecision] = []
            warnings: list[str] = list(unmet)
            stuck: set[str] = set()
            stuck_max = 0.0
            unsplittable: set[str] = set()
            moved_in_plan: set[str] = set()
            topic_cache: dict[str, list[TopicLoad]] = {}
            """Topic hashes and load vectors of bundles split in this plan (their children inherit them)."""
            child_features: dict[str, tuple[float, float, float]] = {}
            # lazy heaps of (usage, broker): the busiest first, the least used first
            busiest = [(-view.usage(b), b) for b in eligible]
            # a broker clipped to its reports is no destination: the model and its reports disagree on its room
            idlest = [(view.usage(b), b) for b in eligible if not view.clipped(b)]
            heapq.heapify(busiest)
            heapq.heapify(idlest)

            def changed_usage(*brokers: str) -> None:
                for b in brokers:
                    heapq.heappush(busiest, (-view.usage(b), b))
                    if not view.clipped(b):
                        heapq.heappush(idlest, (view.usage(b), b))

            def dest_candidates(exclude: str) -> list[str]:
                out: list[tuple[float, str]] = []
                while idlest and len(out) < st.candidate_destinations + 1:
                    u, b = heapq.heappop(idlest)
                    if u != view.usage(b) or any(b == o for _, o in out):
                        continue
                    out.append((u, b))
                for entry in out:
                    heapq.heappush(idlest, entry)
                return [b for _, b in out if b != exclude][: st.candidate_destinations]

            def movable(name: str) -> bool:
                return name not in moved_in_plan and name not in frozen

            def record(s: str, name: str, d: str, us: float, a: float, bd: float, why: str) -> None:
                ud = view.usage(d)
                bl = view.bundles[name]
                view.move(name, d)
                allowed.moved(name, s, d)
                room.take(s, d, (bl.msg_rate, bl.feat_in, bl.feat_out))
                changed_usage(s, d)
                moved_in_plan.add(name)
                cause = (
                    f"Overloaded: GlobalPlanner: {s} predicted usage {us:.4f} > target {target:.4f} (ideal {ideal:.4f})"
                    if phase["into"] is None
                    else f"Underloaded: GlobalPlanner: {d} predicted usage {before[d]:.4f} < {low_level:.4f} (ideal {ideal:.4f}: "
                    f"nearly empty) in {st.confirm_reports}+ consecutive load reports; {s} predicted "
                    f"usage {us:.4f} > {phase['target']:.4f}"
                )
                reason = (
                    f"{cause}{why}; "
                    f"moving {name} ({bl.msg_rate:.1f} msg/s, {bl.throughput / 1048576:.2f} MiB/s) takes {s} to {a:.4f} "
                    f"and {d} from {ud:.4f} to {bd:.4f}"
                )
                unloads.append(
                    PlannedUnload(
                        s,
                        name,
                        d,
                        reason,
                        (d,),
                        f"least predicted usage after the move among the "
                        f"{min(st.candidate_destinations, len(view.brokers) - 1)} least-used brokers",
                        {
                            "sourceBefore": _r(us),
                            "sourceAfter": _r(a),
                            "destinationBefore": _r(ud),
                            "destinationAfter": _r(bd),
                        },
                    )
                )

            actions = 0
            phase: dict[str, Any] = {"target": target, "into": None}  # what record() says a move is for

            def loop(srcs: set[str], target: float, into: set[str] | None, cap: float) -> None:
                """Lower the busiest of ``srcs`` toward ``target`` while it can be lowered, each destination within
                ``cap``; ``into``: only into these brokers (a fill, step 8: moves only)."""
                nonlocal actions, stuck_max
                phase.update(target=target, into=into)
                busiest[:] = [(-view.usage(b), b) for b in srcs if b in view.owned]  # the last phase drained it
                heapq.heapify(busiest)
                # Sources above the target are planned down to it while the busiest one can still be lowered;
                # once the busiest broker is stuck (its load cannot move) it sets the cluster's worst usage: only
                # brokers above the trigger and above that level (or above the overload threshold) are still worth
                # disrupting clients for. A broker counts as above a level only by more than min_gain.
                floor_at = target
                while actions < st.max_actions:
                    while busiest and (
                        busiest[0][1] in stuck
                        or busiest[0][1] not in srcs
                        or -busiest[0][0] != view.usage(busiest[0][1])
                    ):
                        heapq.heappop(busiest)
                    if not busiest:
                        break
                    s = busiest[0][1]
                    us = view.usage(s)
                    if stuck_max >= us and floor_at == target:
                        floor_at = max(trigger, min(stuck_max, overload))
                    if us <= floor_at + min_gain:
                        break
                    if into is not None and not any(view.usage(b) < fill_to for b in into):
                        break  # every broker filled to the lower target
                    dests = dest_candidates(s)
                    excess = us - target
                    cands: list[tuple[float, str, float]] = []  # (size, bundle, source usage after)
                    biggest: tuple[float, str] | None = None
                    for name in view.owned[s]:
                        if not movable(name):
                            continue
                        a = view.usage_after(s, view.bundles[name].vec, -1.0)
                        size = us - a
                        if biggest is None or size > biggest[0]:
                            biggest = (size, name)
                        if size >= min_gain:
                            cands.append((size, name, a))
                    cands.sort()

                    def best_dest(name: str) -> tuple[float, str] | None:
                        """Where ``name`` goes (allowed destinations only): the tightest fit within the target (the
                        destination ending closest below it, which keeps the roomiest brokers for bigger bundles:
                        fewer moves in all), else the one ending lowest. Below the overload threshold (where the guard
                        may not keep a move as overload relief) only a destination the do-no-harm guard's own prediction
                        accepts: else the guard puts the bundle on another broker itself, the least used by this one
                        report, which may be one whose load swings (this model plans it at its peak; the guard cannot)."""
                        bl = view.bundles[name]
                        back = history.get(name, {}).get("from")
                        best: tuple[float, str] | None = None
                        tight: tuple[float, str] | None = None
                        traffic = (bl.msg_rate, bl.feat_in, bl.feat_out)
                        guarded = room.load.usage(s) <= overload
                        for d in dests:
                            if d == back or view.usage(d) >= overload or not allowed.permits(name, s, d):
                                continue
                            if into is not None and (d not in into or view.usage(d) >= fill_to):
                                continue
                            if guarded and not room.fits(s, d, traffic):
                                continue
                            bd = view.usage_after(d, view.arrival(bl.vec, s, d), 1.0)
                            if bd >= us - min_gain or bd > max(overload, cap):
                                continue
                            if best is None or bd < best[0]:
                                best = (bd, d)
                            if bd <= cap and (tight is None or bd > tight[0]):
                                tight = (bd, d)
                        return tight if tight is not None else best

                    choice: tuple[str, str, float, float] | None = None  # (bundle, dest, source after, dest after)
                    # a fill: the largest bundle that leaves its source no lower than the lower target and its
                    # destination within the target (the fewest moves; no source becomes a broker to fill)
                    for _size, name, a in reversed(cands) if into is not None else ():
                        found = best_dest(name) if a >= fill_to else None
                        if found is not None and found[0] <= cap:
                            choice = (name, found[1], a, found[0])
                            break
                    # 1. the smallest bundle that alone brings the source to the target, its destination staying within it
                    first = bisect.bisect_left(cands, (excess,)) if into is None else len(cands)
                    for _size, name, a in cands[first:]:
                        found = best_dest(name)
                        if found is not None and found[0] <= cap:
                            choice = (name, found[1], a, found[0])
                            break
                    if choice is None and into is None and biggest is not None and biggest[1] not in unsplittable:
                        # 2. split, only when moves cannot do it: the biggest bundle fits on no broker below the
                        # target, and the other movable bundles together are smaller than the excess
                        bl = view.bundles[biggest[1]]
                        fits = any(view.usage_after(d, view.arrival(bl.vec, s, d), 1.0) <= target for d in dests)
                        others = sum(size for size, name, _ in cands if name != biggest[1])
                        if not fits and biggest[0] > excess and others < excess:
                            placed: dict[str, str] = {}
                            split = self._split(
                                view,
                                biggest[1],
                                inp,
                                config,
                                counts,
                                target,
                                warnings,
                                topic_cache,
                                child_features,
                                [d for d in dests if allowed.permits(biggest[1], s, d)],
                                excess - min_gain,
                                placed,
                                room,
                            )
                            if split is not None:
                                splits.append(split)
                                actions += 1
                                changed_usage(s)
                                for child, d in placed.items():  # the parts sized for a destination's room go there
                                    us_c = view.usage(s)
                                    a = view.usage_after(s, view.bundles[child].vec, -1.0)
                                    bd = view.usage_after(d, view.arrival(view.bundles[child].vec, s, d), 1.0)
                                    if a < us_c and bd <= target:
                                        record(s, child, d, us_c, a, bd, f", part of {biggest[1]} sized for {d}")
                                        actions += 1
                                continue
                            unsplittable.add(biggest[1])
                            continue
                    if choice is None and into is None:
                        # 3. the largest bundle whose destination stays within the target (the most gap closed per move)
                        for _size, name, a in reversed(cands):
                            found = best_dest(name)
                            if found is not None and found[0] <= cap:
                                choice = (name, found[1], a, found[0])
                                break
                    if choice is None and into is None:
                        # 4. the move that lowers max(source, destination) the most
                        best_pair: tuple[float, str, str, float, float] | None = None
                        for _size, name, a in cands:
                            found = best_dest(name)
                            if found is not None:
                                pair = max(a, found[0])
                                if pair < us - min_gain and (best_pair is None or pair < best_pair[0]):
                                    best_pair = (pair, name, found[1], a, found[0])
                        if best_pair is not None:
                            choice = best_pair[1:]
                    if choice is None:
                        stuck.add(s)
                        stuck_max = max(stuck_max, us)
                        if us > target and into is None:
                            pinned = [n for n in view.owned[s] if n in unsplittable]
                            if pinned and not any(us < o for o, _ in ((view.usage(b), b) for b in eligible if b != s)):
                                actions += self._isolate(
                                    view,
                                    s,
                                    pinned,
                                    movable,
                                    dest_candidates,
                                    history,
                                    target,
                                    overload,
                                    record,
                                    allowed,
                                )
                            warnings.append(
                                f"{s}: predicted usage {view.usage(s):.4f} stays above target {target:.4f}: no bundle can move without "
                                "overloading its destination (or all are in cool-down)"
                            )
                        continue
                    name, d, a, bd = choice
                    record(s, name, d, us, a, bd, "")
                    actions += 1

            loop(srcs, target, None, target)
            # 8. a broker confirmed far below the ideal (`under`) and still there once the plan is made: the brokers
            # above the target are lowered into it, busiest first, down to the target, while that lowers the busiest
            # (a broker that joined or came back from a restart does not stay empty inside the band)
            still = {b for b in under if view.usage(b) < low_level}
            if still:  # (a broker still above the trigger that nothing can lower leaves no gain: dropped below)
                top = max((view.usage(b) for b in eligible), default=0.0)
                snap, kept = view.snapshot(), len(unloads)
                loop({b for b in eligible if b not in still}, target, still, target)
                low = max((view.usage(b) for b in eligible), default=0.0)
                # worth it only when it closes a good part of the busiest broker's excess over the target: a
                # fill that shaves a point off one broker costs moves for nothing
                if len(unloads) > kept and top - low < st.fill_share * (top - target):
                    view.restore(snap)
                    fill_dropped.append(
                        f"filling {', '.join(sorted(still))} would take the busiest broker only from {top:.4f} to "
                        f"{low:.4f} with {len(unloads) - kept} move(s), less than {st.fill_share:.0%} of its excess over "
                        f"the target {target:.4f}"
                    )
                    del unloads[kept:]
            return unloads, splits, warnings, child_features

        # a broker acted on at once, on one report (far above the trigger, below the overload threshold), must be
        # worth it: the plan closes at least `fast_path_share` of its excess over the target, or brings it below
        # the trigger. Otherwise the plan is made again without it, and it waits for its reports to confirm it:
        # an on/off consumer's first report in its on phase was acted on with a split and two moves that took
        # its broker from 0.72 to 0.70 (one hot topic carries it)
        fast = {b for b in sources if seen.get(b, 0) < st.confirm_reports and before[b] < overload}
        snapshot = view.snapshot() if fast else None
        unloads, splits, warnings, child_features = descend(sources)
        weak = {
            b: view.usage(b)
            for b in sorted(fast)
            if view.usage(b) > trigger and 0 < before[b] - view.usage(b) < st.fast_path_share * (before[b] - target)
        }
        if weak and snapshot is not None:
            view.restore(snapshot)
            # what held those brokers up (a hot topic, a namespace at its bundle limit) stays on the plan
            why = warnings
            unloads, splits, warnings, child_features = descend(sources - set(weak))
            known = set(warnings)
            warnings += [w for w in why if w not in known]
            waits = [
                f"{b}: one load report at {before[b]:.4f} (at once above {clear:.4f}), but a plan would take it only to "
                f"{a:.4f}, less than {st.fast_path_share:.0%} of the way to the target {target:.4f}: not acted on until "
                f"{st.confirm_reports} consecutive load reports confirm it"
                for b, a in weak.items()
            ]
            if not unloads and not splits:
                stats["brokers"] = {b: {"usage": _r(before[b])} for b in view.brokers}
                stats["warnings"] = warnings + waits
                return skip(
                    Reason.HIT_COUNT,
                    f"busiest broker {max_before:.4f} > trigger {trigger:.4f} (ideal {ideal:.4f}); " + "; ".join(waits),
                    stats,
                ), new_state
            warnings += waits

        after = {b: view.usage(b) for b in view.brokers}
        stats["maxUsageAfter"] = _r(max((after[b] for b in eligible), default=0.0))
        stats["brokers"] = {b: {"usage": _r(before[b]), "predictedUsage": _r(after[b])} for b in view.brokers}
        stats["warnings"] = warnings
        fills = [u for u in unloads if u.reason.startswith("Underloaded")]  # step 8's moves (record() names them)
        if now is not None and (unloads or splits):
            for u in unloads:
                mem.moves[u.bundle] = {"from": u.broker, "to": u.destination, "atMs": now}
            for u in fills:
                mem.moves[u.bundle]["fill"] = True
            for sp in splits:  # children inherit their share of the parent's load as their peak
                mem.peaks.pop(sp.bundle, None)
                for child in sp.children or ():
                    feats = child_features.get(child)
                    if feats is not None:
                        mem.peaks[child] = {
                            "msgRate": feats[0],
                            "msgThroughputIn": feats[1],
                            "msgThroughputOut": feats[2],
                            "atMs": now,
                        }
            new_state = new_state.evolve(planner=mem.to_json())
        if fill_dropped:
            stats["fillNotWorthIt"] = fill_dropped[-1]
        if not unloads and not splits and fill and not sources:
            unfilled = (
                fill_dropped[-1]
                if fill_dropped
                else "no move fills them without taking them above the target or the busiest broker higher"
            )
            band = (
                f"<= trigger {trigger:.4f}"
                if max_before <= trigger
                else f"> trigger {trigger:.4f}, not confirmed there by {st.confirm_reports} load reports"
            )
            return skip(
                Reason.BALANCED if max_before <= trigger else Reason.HIT_COUNT,
                f"busiest broker {max_before:.4f} {band} (ideal {ideal:.4f}); "
                f"{', '.join(sorted(under))} below {low_level:.4f} in {st.confirm_reports}+ consecutive load reports, but {unfilled}",
                stats,
            ), new_state
        if not unloads and not splits:
            return skip(
                Reason.BALANCED if not warnings else Reason.UNKNOWN,
                f"busiest broker {max_before:.4f} > trigger {trigger:.4f} but no move or split helps"
                + (f"; {len(warnings)} warning(s)" if warnings else ""),
                stats,
            ), new_state
        detail = (
            f"{len(unloads)} move(s), {len(splits)} split(s): busiest broker {max_before:.4f} -> {stats['maxUsageAfter']:.4f} "
            f"(ideal {ideal:.4f}, target {target:.4f})"
        )
        filled = sorted({u.destination for u in fills if u.destination})
        if filled:
            detail += f"; filling {', '.join(filled)} (below {low_level:.4f})"
        reason = Reason.UNDERLOADED if unloads and not splits and len(fills) == len(unloads) else Reason.OVERLOADED
        return Decision(Label.SUCCESS, reason, detail, tuple(unloads), tuple(splits), (), stats), new_state

    @staticmethod
    def _isolate(
        view: ClusterView,
        s: str,
        pinned: Sequence[str],
        movable: Any,
        dest_candidates: Any,
        history: Mapping[str, Any],
        target: float,
        overload: float,
        record: Any,
        allowed: DestinationFilter,
    ) -> int:
        """``s`` is the worst broker and is held above the target by bundles that can be neither split nor
        moved (``pinned``): move its other bundles off, biggest first, each to a broker that ends no higher
        than the target or than ``s`` with only its pinned bundles, whichever is higher, so that the hot
        bundle gets the broker to itself. Unlike the other moves, one that lowers ``s`` by less than ``min_gain``
        is made too: ``s`` is the cluster's worst broker, and what the model puts at a fraction of a point may
        carry more (under a per-topic CPU cost, leaving such bundles kept the broker 3 to 8 points higher).
        Returns the number of moves."""
        moved = 0
        us0 = view.usage(s)
        others = [n for n in view.owned[s] if n not in pinned and movable(n)]
        gain = {n: us0 - view.usage_after(s, view.bundles[n].vec, -1.0) for n in others}
        # what s would carry with only what pins it: no destination may end above that (nor above the target
        # if that is lower), so every move lowers the cluster's worst broker and none makes a new one
        rest = [sum(view.bundles[n].vec[i] for n in others) for i in range(5)]
        level = max(target, view.usage_after(s, rest, -1.0))
        for name in sorted(gain, key=lambda n: (-gain[n], n)):
            us = view.usage(s)
            a = view.usage_after(s, view.bundles[name].vec, -1.0)
            if a >= us:
                continue
            back = history.get(name, {}).get("from")
            best: tuple[float, str] | None = None
            for d in dest_candidates(s):
                if d == back or view.usage(d) >= overload or not allowed.permits(name, s, d):
                    continue
                bd = view.usage_after(d, view.arrival(view.bundles[name].vec, s, d), 1.0)
                if bd <= level and bd < a and (best is None or bd < best[0]):
                    best = (bd, d)
            if best is not None:
                record(
                    s,
                    name,
                    best[1],
                    us,
                    a,
                    best[0],
                    f", held there by {', '.join(pinned)} (one hot topic: no split or move lowers it): giving it the broker to itself",
                )
                moved += 1
        return moved

    @staticmethod
    def _track_membership(mem: PlannerMemory, brokers: list[str], now: int | None) -> str:
        """Record this cycle's brokers; when the set differs from the last cycle's, the change is dated at
        the last cycle (the earliest it can have happened). Returns what changed, in words ('' if nothing)."""
        what = ""
        if mem.members and brokers != mem.members:
            joined = sorted(set(brokers) - set(mem.members))
            left = sorted(set(mem.members) - set(brokers))
            what = "; ".join(
                p
                for p in (f"joined: {', '.join(joined)}" if joined else "", f"left: {', '.join(left)}" if left else "")
                if p
            )
            mem.membership_changed = mem.members_at if mem.members_at is not None else now
        mem.members = brokers
        if now is not None:
            mem.members_at = now
        return what

    def _corroborate(
        self,
        mem: PlannerMemory,
        view: ClusterView,
        inp: PlannerInput,
        now: int | None,
        window_ms: int,
        history: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, tuple[float, float]]:
        """A broker is believed hot only as far as its own load reports showed it: its planned usage (the
        load model's, with its bundles' remembered peaks) is clipped to the highest usage its reports showed
        within ``window_ms`` plus the noise. The model can be wrong about what a message costs (a CPU spent
        on topics and connections rather than messages, a peak of messages that costs nothing); the report
        is Pulsar's own measurement. A broker that received a planner move within the window is left as
        modelled: its reports may predate the bundle's peak, and as a destination it must not look emptier
        than it is. Returns the clipped brokers: ``{broker: (modelled, clipped to)}``."""
        highs = {b: h for b, h in mem.highs.items() if now is not None and h["atMs"] >= now - window_ms}
        at = now if now is not None else 0
        for b, data in inp.brokers.items():
            r = view.reported_usage(data)
            old = highs.get(b)
            if old is None or r >= old["usage"]:
                highs[b] = {"usage": r, "atMs": at}
        mem.highs = {b: highs[b] for b in inp.brokers if b in highs}
        received = {m["to"] for m in history.values() if now is None or m["atMs"] >= now - window_ms}
        margin = max(self.settings.min_gain, view.noise)
        out: dict[str, tuple[float, float]] = {}
        for b in view.brokers:
            level = mem.highs[b]["usage"] + margin if b in mem.highs else None
            modelled = view.usage(b)
            if level is not None and modelled > level and b not in received:
                view.clip(b, level)
                out[b] = (modelled, view.usage(b))
        return out

    def _update_peaks(self, mem: PlannerMemory, inp: PlannerInput, now: int, peak_ms: int) -> None:
        """Remember the peak of bundles whose traffic swings; forget peaks not seen for ``peak_ms``."""
        st = self.settings
        peaks = {b: p for b, p in mem.peaks.items() if p["atMs"] >= now - peak_ms}
        swing = st.swing
        bundle_data = inp.bundle_data
        for data in inp.brokers.values():
            for name, s in data.last_stats.items():
                old = peaks.get(name)
                bd = bundle_data.get(name)
                swinging = False
                if bd is not None and bd.short_term_data.num_samples > 1:
                    t = bd.short_term_data
                    r1, r2 = s.msg_rate_in + s.msg_rate_out, t.msg_rate_in + t.msg_rate_out
                    i1, i2, o1, o2 = (
                        s.msg_throughput_in,
                        t.msg_throughput_in,
                        s.msg_throughput_out,
                        t.msg_throughput_out,
                    )
                    swinging = (
                        abs(r1 - r2) > swing * max(r1, r2)
                        or abs(i1 - i2) > swing * max(i1, i2)
                        or abs(o1 - o2) > swing * max(o1, o2)
                    )
                if old is None and not swinging:
                    continue
                cur = (s.msg_rate_in + s.msg_rate_out, s.msg_throughput_in, s.msg_throughput_out)
                prev = (old["msgRate"], old["msgThroughputIn"], old["msgThroughputOut"]) if old else (0.0, 0.0, 0.0)
                top = tuple(max(c, p) for c, p in zip(cur, prev))
                at = (
                    now
                    if (swinging or old is None or any(c >= 0.8 * p for c, p in zip(cur, prev) if p > 0))
                    else old["atMs"]
                )
                peaks[name] = {"msgRate": top[0], "msgThroughputIn": top[1], "msgThroughputOut": top[2], "atMs": at}
        mem.peaks = peaks

    # -------------------------------------------------------------------------------------------
    def _fitted_parts(
        self,
        view: ClusterView,
        bl: BundleLoad,
        topic_loads: Sequence[TopicLoad],
        rng: BundleRange,
        dests: Sequence[str],
        target: float,
        excess: float,
        room: DestinationRoom | None = None,
    ) -> tuple[list[int], list[str | None]]:
        """Cut the bundle (its topics in hash order) into parts to move, each sized to the room a
        destination has below the target, and parts that stay: the fewest parts to move whose load
        covers the source's ``excess``. Returns the split points and, per child, its destination
        (None: stays on the source). Each part then moves in one move and no destination goes above
        the target - fewer moves than equal parts that fit nowhere and push their destinations over
        (which then shed in turn).

        For m parts, each at most the m-th largest room R, the most load m disjoint runs of topics
        can carry is a dynamic programme over the topics (the best run ending at a topic is the longest
        one within R); m grows until that covers the excess (at most ``max_split_parts - 1`` parts).

        A destination's room is also what the do-no-harm guard (``room``) will let it take: the guard
        predicts a part by its share of the source's reported usage, which can be larger than this
        model's estimate (CPU the model puts on topics rather than messages); a part sized only for the
        model's room would then be cut with its split. The guard's points are converted to the model's
        by the ratio of the two estimates for the whole bundle on the least-used destination."""
        st = self.settings
        n = len(topic_loads)
        rooms = sorted((d for d in dests if view.usage(d) < target), key=lambda d: (view.usage(d), d))
        if n < 2 or not rooms:
            return [], []
        ref = rooms[0]
        size = [
            view.usage_after(ref, view.arrival(v, bl.broker, ref), 1.0) - view.usage(ref) for _, v, _f in topic_loads
        ]
        prefix = [0.0]
        for x in size:
            prefix.append(prefix[-1] + x)
        eff = {d: target - view.usage(d) for d in rooms}
        if room is not None and prefix[-1] > 0:
            whole = (
                sum(f[0] for *_, f in topic_loads),
                sum(f[1] for *_, f in topic_loads),
                sum(f[2] for *_, f in topic_loads),
            )
            ratio = room.added(bl.broker, ref, whole) / prefix[-1]
            if ratio > 0:
                eff = {d: min(r, room.room(d) / ratio) for d, r in eff.items()}
        rooms = sorted((d for d in rooms if eff[d] > 0), key=lambda d: (-eff[d], view.usage(d), d))
        if not rooms:
            return [], []
        best: tuple[float, list[tuple[int, int]]] | None = None
        for m in range(1, min(st.max_split_parts - 1, len(rooms)) + 1):
            cap = eff[rooms[m - 1]]
            # f[k][i]: most load k runs can carry among topics[:i]; run ends at i-1 and starts at lo[i]
            lo = [0] * (n + 1)
            j = 0
            for i in range(1, n + 1):
                while j < i and prefix[i] - prefix[j] > cap + 1e-12:
                    j += 1
                lo[i] = j
            prev = [0.0] * (n + 1)
            back: list[list[int]] = []
            for _ in range(m):
                cur = [0.0] * (n + 1)
                choice = [-1] * (n + 1)
                for i in range(1, n + 1):
                    cur[i], choice[i] = cur[i - 1], -1
                    if lo[i] < i:
                        v = prev[lo[i]] + prefix[i] - prefix[lo[i]]
                        if v > cur[i] + 1e-15:
                            cur[i], choice[i] = v, lo[i]
                back.append(choice)
                prev = cur
            runs: list[tuple[int, int]] = []
            i, k = n, m - 1
            while i > 0 and k >= 0:
                if back[k][i] < 0:
                    i -= 1
                    continue
                runs.append((back[k][i], i))
                i, k = back[k][i], k - 1
            runs.reverse()
            covered = sum(prefix[b] - prefix[a] for a, b in runs)
            if best is None or covered > best[0] + 1e-12:
                best = (covered, runs)
            if covered >= excess:
                break
        if best is None:
            return [], []
        runs = [r for r in best[1] if r[1] > r[0]]
        if not runs or (len(runs) == 1 and runs[0] == (0, n)):
            return [], []
        # the biggest part to the roomiest destination, each part checked against its destination
        order = sorted(range(len(runs)), key=lambda r: -(prefix[runs[r][1]] - prefix[runs[r][0]]))
        free = list(rooms)
        dest_of: dict[int, str | None] = {}
        for r in order:
            a, b = runs[r]
            vec = [sum(topic_loads[t][1][i] for t in range(a, b)) for i in range(5)]
            traffic = (
                sum(topic_loads[t][2][0] for t in range(a, b)),
                sum(topic_loads[t][2][1] for t in range(a, b)),
                sum(topic_loads[t][2][2] for t in range(a, b)),
            )
            d = next(
                (
                    x
                    for x in free
                    if view.usage_after(x, view.arrival(vec, bl.broker, x), 1.0) <= target
                    and (room is None or room.fits(bl.broker, x, traffic))
                ),
                None,
            )
            dest_of[r] = d
            if d is not None:
                free.remove(d)
        # children: moved runs and the stretches between them (which stay)
        cuts: list[tuple[int, str | None]] = []  # (start index, destination)
        pos = 0
        for r, (a, b) in enumerate(runs):
            if a > pos:
                cuts.append((pos, None))
            cuts.append((a, dest_of[r]))
            pos = b
        if pos < n:
            cuts.append((pos, None))
        # a cut must fall strictly between two topic hashes and inside the range; else the parts merge (and stay)
        merged: list[list[Any]] = []
        for start, d in cuts:
            h = topic_loads[start][0]
            if merged and not (topic_loads[start - 1][0] < h and rng.lower < h < rng.upper):
                merged[-1][1] = None
                continue
            merged.append([start, d])
        if len(merged) < 2:
            return [], []
        return [topic_loads[c[0]][0] for c in merged[1:]], [c[1] for c in merged]

    def _split(
        self,
        view: ClusterView,
        bundle: str,
        inp: PlannerInput,
        config: LoadBalancerConfig,
        counts: dict[str, int],
        target: float,
        warnings: list[str],
        topic_cache: dict[str, list[TopicLoad]],
        child_features: dict[str, tuple[float, float, float]],
        dests: Sequence[str] = (),
        excess: float = 0.0,
        placements: dict[str, str] | None = None,
        room: DestinationRoom | None = None,
    ) -> SplitDecision | None:
        """Split ``bundle`` (see the module docstring); ``placements`` receives the destination planned
        for each child that is to move (room-fitted parts)."""
        placements = {} if placements is None else placements
        st = self.settings
        bl = view.bundles[bundle]
        ns, range_name = split_full_name(bundle)  # ns is namespace_of(bundle)
        rng = BundleRange.parse(range_name, bundle)
        limit = config.load_balancer_namespace_maximum_bundles
        topic_loads: list[TopicLoad] | None = topic_cache.get(bundle)
        if topic_loads is None and (inp.bundle_topics or {}).get(bundle):
            raw = sorted(
                (topic_hash(topic), (r.msg_rate, r.msg_throughput_in, r.msg_throughput_out))
                for topic, r in inp.bundle_topics[bundle].items()  # type: ignore[index]
            )
            planned = (bl.msg_rate, bl.feat_in, bl.feat_out)
            tot = [sum(f[k] for _, f in raw) for k in range(3)]
            if any(planned[k] > (1 + st.swing) * tot[k] + 1e-9 for k in range(3)):
                # planned at a peak its topics do not show now (an on/off consumer in its off phase): which
                # topic carries the peak is not known, and a part sized by today's rates may take the whole
                # peak to its destination. Split when the peak shows in the topics' rates.
                warnings.append(
                    f"{bundle}: its traffic swings (planned at its recent peak of {planned[0]:.0f} msg/s, its topics now "
                    f"carry {tot[0]:.0f} msg/s): which topic carries the peak is not known now, not split in this plan"
                )
                return None
            # the topics' current rates, scaled to the rates the bundle is planned at (its recent peak)
            k3 = [planned[k] / tot[k] if tot[k] > 0 else 0.0 for k in range(3)]
            topic_loads = []
            for h, f in raw:
                scaled = (f[0] * k3[0], f[1] * k3[1], f[2] * k3[2])
                topic_loads.append((h, view.contribution(features_of(*scaled, 1), bl.broker), scaled))
        if topic_loads == [] and bundle in topic_cache:
            warnings.append(f"{bundle}: a child of a split made without topic rates; not split again in this plan")
            return None
        if bl.topics <= 1 or (topic_loads is not None and len(topic_loads) == 1):
            warnings.append(
                f"{bundle} on {bl.broker}: a single hot topic carries it; no split or move can lower {bl.broker} further"
            )
            return None
        if not rng.can_split():
            warnings.append(f"{bundle}: range cannot be split further")
            return None
        points: list[int]
        part_dests: list[str | None] = []
        how: str
        if topic_loads:
            size = [view.usage_of(v, view.limit[bl.broker]) for _, v, _f in topic_loads]
            total = sum(size) or 1.0
            top = max(range(len(size)), key=lambda i: size[i])
            if size[top] > 0.5 * total:
                if total - size[top] < st.min_split_gain:
                    warnings.append(
                        f"{bundle} on {bl.broker}: one topic carries {size[top] / total:.0%} of it; isolating it would free only "
                        f"{total - size[top]:.4f} of {bl.broker} (< {st.min_split_gain}): not split, no split or move can fix this topic"
                    )
                    return None
                h = topic_loads[top][0]
                points = [p for p in (h, h + 1) if rng.lower < p < rng.upper]
                how = f"isolate its hottest topic ({size[top] / total:.0%} of the bundle) at hash {format_boundary(h)}"
            else:
                points, part_dests = self._fitted_parts(view, bl, topic_loads, rng, dests, target, excess, room)
                how = (
                    f"{len(points) + 1} parts by topic hash, each part to move sized to the room one of the "
                    f"least-used brokers has below the target"
                )
        else:
            mid = rng.lower + (rng.upper - rng.lower) // 2
            points = [mid]
            how = "no topic rates given: range_equally_divide (load assumed even)"
        if not points:
            warnings.append(f"{bundle}: no split boundary separates its load; left as it is")
            return None
        if counts.get(ns, 0) + len(points) > limit:
            warnings.append(
                f"{bundle}: namespace {ns} has {counts.get(ns, 0)} bundles; splitting into {len(points) + 1} would exceed "
                f"loadBalancerNamespaceMaximumBundles={limit}"
            )
            return None
        children_ranges = split_range(rng, boundaries=points)
        children: list[BundleLoad] = []
        child_names = [bundle_full_name(ns, c.name) for c in children_ranges]
        if topic_loads:
            sums = []
            for c, child in zip(children_ranges, child_names):
                vec = [0.0] * 5
                mine = [t for t in topic_loads if c.contains(t[0])]
                topic_cache[child] = mine
                for _, v, _f in mine:
                    for i in range(5):
                        vec[i] += v[i]
                sums.append(vec)
            tot = [sum(v[i] for v in sums) for i in range(5)]
            scale = [bl.vec[i] / tot[i] if tot[i] > 0 else 0.0 for i in range(5)]
            vecs = [[v[i] * scale[i] for i in range(5)] for v in sums]
        else:
            vecs = [[x / len(children_ranges) for x in bl.vec] for _ in children_ranges]
        n = len(children_ranges)
        for child, vec in zip(child_names, vecs):
            if topic_loads:  # msg/s and bytes/s of the topics hashing into the child
                feats = [f for _, _, f in topic_cache[child]]
                child_features[child] = (sum(f[0] for f in feats), sum(f[1] for f in feats), sum(f[2] for f in feats))
            else:
                child_features[child] = (bl.msg_rate / n, bl.feat_in / n, bl.feat_out / n)
            k = len(topic_cache[child]) if child in topic_cache else max(1, bl.topics // n)
            rate, tin, tout = child_features[child]
            children.append(BundleLoad(child, bl.broker, vec, rate, tin + tout, bl.clients // n, k, tin, tout))
        for child, d in zip(child_names, part_dests):
            if d is not None:
                placements[child] = d
        if not topic_loads:
            for child in child_names:  # no topic rates: do not split a guessed half again in this plan
                topic_cache[child] = []
        view.replace_bundle(bundle, children)
        counts[ns] = counts.get(ns, 0) + len(points)
        reason = f"GlobalPlanner: {bundle} fits on no broker below target {target:.4f}; split to {how}; children placed in this plan"
        return planned_split(bundle, bl.broker, reason, points, [ch.name for ch in children])


__all__ = ["split_candidates", "PLANNER_NAME", "GlobalPlanner", "PlannedUnload", "PlannerInput", "PlannerSettings"]
