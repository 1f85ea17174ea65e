"""GlobalPlanner: plan the whole cluster at once toward a target spread, with as few moves as possible.

Not a Pulsar class (Pulsar's shedders decide broker by broker, inside the leader, with no memory of
their own moves); this strategy uses what a planner outside the brokers has: every broker's report at
once, the move history, and splits and placement decided together. Same cycle input and output shape
as the shedders (``decide``'s ``shedding: "GlobalPlanner"``): unloads with their destination, reason and
predicted before/after; splits with their boundaries (applied before the unloads, so an unload may
name a child of a split of the same cycle); warnings for what no move can fix.

One cycle, in Cruise Control's shape (:meth:`GlobalPlanner.plan`: model -> settle -> search -> decision):
the goals of :mod:`.goals` change a what-if model in priority order, and the unloads are the diff of its
assignment before and after (:mod:`.proposals`). The steps:

1. **Model** (:mod:`.load_model`): per broker the absolute usage and limit of Pulsar's five resources,
   per bundle its contribution (fitted from the reports), planned at the recent peak (max of the last
   sample, Pulsar's short-term average and the remembered peak of a swinging bundle; a swing is told from the
   short-term average only while its 10 samples span at most an hour, not at the DAG's hourly cadence). Usage is
   capacity-normalised (weighted max of usage/limit).
2. **Ideal** = total usage / total capacity (binding resource). **Trigger** = ideal + max(10 points,
   20 % of ideal, 3 x noise); **target** = ideal + max(5 points, 10 % of ideal, noise): ThresholdShedder's
   geometry. A broker counts as above a level only beyond ``min_gain`` (0.5 point) more, so no move is
   made to shave less than that. Nothing happens unless the busiest broker is above the trigger
   (hysteresis: a balanced cluster gets zero moves, noise and on/off traffic inside the band are
   ignored). The plan's **sources** are the brokers above the trigger by more than the reports' noise in
   ``confirm_reports`` consecutive reports spanning ``confirm_ms`` (90 minutes) - its (smoothed) reports above it, not only its planned usage,
   which holds remembered peaks - (or at once far above it, when the plan closes at least half its excess
   over the target: else it is planned again without it, and it waits for its reports to confirm it; never
   a broker whose run of reports above the trigger broke within the window, a load that comes and goes,
   unless it is above the overload threshold); each is planned down to the target. A broker between the target
   and the trigger is no source, as in ThresholdShedder, which sheds only brokers above its threshold.
3. **Membership settle**: when the set of brokers changed (a broker joined, left or came back from a
   restart) less than 10 min ago, the planner waits, unless a broker is above Pulsar's overload
   threshold: a rolling restart gets one corrective plan once every broker reports again, not one per
   broker (the practice Pulsar's rolling-restart guide and Cruise Control's grace periods describe).
4. **Greedy descent of the maximum, fewest moves first**: take the busiest source above the target;
   move the *smallest* bundle that alone brings it to the target with its destination staying within
   the target (one move closes the whole gap); else the *largest* bundle whose destination stays
   within the target (the most gap closed per move); else the move that lowers max(source,
   destination) the most. The destination is the tightest fit below the ideal among the least-used
   brokers with reported limits (the roomiest stay free for bigger bundles; none is filled up to the
   target, where its own next peak would make it the worst broker), else the one ending lowest; never
   above Pulsar's overload threshold, never ending above the source. Each move strictly lowers the pair's
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
   A fill once begun goes on up to that level in later plans (a broker a fill move reached within the
   history window); a broker this plan's relief reaches while its reports show it below the start level is
   filled in the same plan, before three reports confirm it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.decision import Decision, Label, Reason, skip
from pulsar_rebalance.core.planner.goals import Descent, Levels, descend
from pulsar_rebalance.core.planner.load_model import ClusterView
from pulsar_rebalance.core.planner.memory import PlannerMemory
from pulsar_rebalance.core.planner.proposals import PlannedUnload, rounded
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import NUM_SHORT_SAMPLES, BundleData, LocalBrokerData
from pulsar_rebalance.core.pulsar.policies import NO_POLICIES, PlacementPolicies, unmet_constraints
from pulsar_rebalance.core.pulsar.state import StrategyState

PLANNER_NAME = "GlobalPlanner"


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
    confirm_ms: int = 90 * 60_000
    """A broker above the trigger (below ``confirm_margin``'s level and the overload threshold) is confirmed only once
    its consecutive reports above it also span this long: one decision a minute, 91 reports; the DAG's hourly cadence,
    ``confirm_reports`` (two hours) as before. The time constant is in minutes as well as cycles, so a plan does not
    depend on how often the DAG is scheduled: a load that comes and goes within the hour (a crowd, a backlog drained,
    a load test, a host lending its CPU to a co-located bookie) is not moved for, whose moves stay once it is gone
    (Cruise Control likewise balances distribution on an hour of load windows, capacity at once)."""
    swing_span_ms: int = 60 * 60_000
    """A swing is told from Pulsar's short-term average (``NUM_SHORT_SAMPLES`` samples, one per cycle) only while its
    samples span at most this: one decision a minute, 10 minutes; the DAG's hourly cadence, 10 hours - a day's level
    changing, not a swing, so no peak is remembered there."""
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
    arrival_doubt: float = 1.5
    """What a move adds to its destination is known to within this factor (a broker's own speed the reports do
    not explain, a fit on few samples): a move is planned only where its destination would still end below its
    source's usage before the move (by ``min_gain``) if the bundle cost it this many times the predicted
    increase. A move that would swap the pair's order for a small gain is not made: on unseen random-185
    (scale-up, 10 % noise) a fill predicted to take a new broker from 0.42 to 0.61 for a source at 0.63 took it
    to 0.70, above anything doing nothing left, and nothing confirmed it back (it stayed below the trigger).
    A bundle that halves an overloaded broker onto an empty one still moves (0 + 1.5 x 0.5 < 0.8)."""
    arrival_reserve: float = 1.5
    """A plan leaves its destinations room for the moves' own cost: the bundles arriving on a broker cost it their
    topics' loads, their clients' reconnections and their subscriptions' reads from the bookies for a minute or two,
    here up to this many times their own load. After its first bundle of a plan (judged by the do-no-harm guard's
    room alone), a destination takes more only while all that arrives on it stays within ``1 / (1 + this)`` of its
    room below the overload threshold (the guard's free-capacity share, 0.5, is this at 1): a plan does not pile
    many bundles onto one broker, an empty one least, whose first minutes would pay for all of them at once."""


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

        def weight(b: str, stats: Mapping[str, Mapping[str, float]] = stats) -> float:
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


@dataclass(slots=True)
class _Cycle:
    """What one cycle's stages hand each other: the model, the band, the settle checks' findings."""

    inp: PlannerInput
    config: LoadBalancerConfig
    mem: PlannerMemory
    cooldown_ms: int
    view: ClusterView = field(init=False)
    levels: Levels = field(init=False)
    eligible: list[str] = field(default_factory=list)
    """Brokers with reported limits (the only ones a plan moves load between)."""
    history: dict[str, Any] = field(default_factory=dict)
    undone: dict[str, int] = field(default_factory=dict)
    before: dict[str, float] = field(default_factory=dict)
    max_before: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    unmet: list[str] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)
    sources: set[str] = field(default_factory=set)
    under: set[str] = field(default_factory=set)
    refill: set[str] = field(default_factory=set)
    """Brokers a fill reached within the history window, still below the level it fills to: filled on."""
    waits: list[str] = field(default_factory=list)
    """Brokers acted on from one report whose plan was not worth it: they wait for their reports to confirm them."""
    loaded: dict[str, int] = field(default_factory=dict)
    """Sources acted on before their reports confirmed them only because this planner loaded them (when, last)."""
    cycle_ms: int = 0
    confirm: int = 0
    """Consecutive load reports that confirm a broker above the trigger (``confirm_reports``, ``confirm_ms``)."""
    """Since the last cycle (0 on the first)."""
    window_ms: int = 0
    """How long a swing's peak, a report's high and a broken run of hits are remembered (``peak_ms`` or
    ``peak_cycles`` cycles, the longer)."""


class GlobalPlanner:
    """Splits come from the plan itself (with boundaries): the registry (``core.strategies``) declares it
    (``plans_splits``), and Pulsar's split trigger is not run."""

    name = PLANNER_NAME

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
        """One cycle: the model, the settle checks, the goals on the model, the proposals (module docstring)."""
        st = self.settings
        now = inp.now_ms
        mem = PlannerMemory.of(state.planner)
        # time constants hold in cycles as well as minutes: at the DAG's hourly cadence a bundle moved in
        # the previous cycle is still cooling down, and a swing's peak outlives the gap between two cycles
        cycle_ms = now - mem.members_at if now is not None and mem.members_at is not None else 0
        cycle_ms = max(0, cycle_ms)
        cyc = _Cycle(inp, config, mem, max(st.cooldown_ms, st.cooldown_cycles * cycle_ms))
        cyc.cycle_ms = cycle_ms
        cyc.window_ms = max(st.peak_ms, st.peak_cycles * cycle_ms)
        self._model(cyc, cyc.window_ms)
        waiting = self._settle(cyc)
        new_state = state.evolve(planner=mem.to_json())
        if waiting is not None:
            return waiting, new_state
        dx = self._search(cyc)
        return self._decision(cyc, dx, new_state)

    def _model(self, cyc: _Cycle, window_ms: int) -> None:
        """The what-if model of this cycle (:mod:`.load_model`), the move history the reports confirm, and the
        band (:class:`~.goals.Levels`)."""
        st, inp, mem, now = self.settings, cyc.inp, cyc.mem, cyc.inp.now_ms
        # Pulsar's short-term average is 10 samples, one a cycle here: 10 minutes of the leader's one-minute reports,
        # ten hours of the DAG's hourly runs. A last sample off a ten-hour average is the day's level changing, not
        # a swing: a swing is told from it (and its busy phase remembered from it) only while its samples span no
        # more than `swing_span_ms`. Follow-the-sun / dag (three regions' busy hours in turn): every bundle's last
        # sample was off its ten-hour average by more than a swing, every bundle "swung", its peak refreshed every
        # cycle, so every broker was planned at its bundles' separate busiest hours, as a destination 0.3 to 0.5
        # above its own reports: no move fitted anywhere while one broker sat at 0.62 for eight hours, doing
        # nothing's worst at 0.55. A bundle is still planned at the larger of its last sample and that average: a
        # plan made hourly must hold for hours (random-146, periodic jitter at the DAG's cadence: planned at their
        # last samples alone, the moved bundles' destinations ended 0.574 against doing nothing's 0.523; 0.542 with)
        swings = cyc.cycle_ms * NUM_SHORT_SAMPLES <= st.swing_span_ms
        if now is not None:
            self._update_peaks(mem, inp, inp.bundle_data if swings else {}, now, window_ms)
        view = cyc.view = ClusterView(
            inp.brokers,
            inp.bundle_data,
            cyc.config,
            {b: (p["msgRate"], p["msgThroughputIn"], p["msgThroughputOut"]) for b, p in mem.peaks.items()},
            mem.coefficients,
            st.model_smoothing,
            mem.reports,
            st.usage_smoothing,
        )
        mem.coefficients = view.coefficients()
        mem.reports = view.smoothed
        cyc.eligible = [
            b for b in view.brokers if any(lim > 0 and w > 0 for lim, w in zip(view.limit[b], view.weights))
        ]
        history = mem.moves
        if now is not None:
            history = {b: m for b, m in history.items() if m["atMs"] >= now - st.history_ms}
            mem.moves = history
        # a move the reports show undone - its bundle still on the broker it was to leave: the do-no-harm guard
        # cut it, the operator rejected the plan, the executor dropped it - is forgotten: it neither cools its
        # bundle down (here or as the same decision's entry in recentlyUnloadedBundles) nor counts as received
        if history:
            owner = {name: b for b, names in view.owned.items() for name in names}
            cyc.undone = {
                b: m["atMs"]
                for b, m in history.items()
                if owner.get(b) == m["from"] and (now is None or m["atMs"] < now)
            }
            history = {b: m for b, m in history.items() if b not in cyc.undone}
            mem.moves = history
            # a fill move whose bundle landed on neither end: the do-no-harm guard put it elsewhere (its
            # destination is cordoned, or refused by the guard's checks): that broker is not filled again for the
            # history window, or every run would plan the same fill and the guard re-place it on another broker
            for b, m in history.items():
                if m.get("fill") and owner.get(b) not in (None, m["from"], m["to"]):
                    mem.refused[m["to"]] = max(m["atMs"], mem.refused.get(m["to"], 0))
        cyc.history = history
        if now is not None:
            mem.refused = {b: t for b, t in mem.refused.items() if t >= now - st.history_ms}
        corroborated = self._corroborate(mem, view, inp, now, window_ms, history)
        lifted = self._lift_swinging(mem, view, now, window_ms, history)
        cyc.before = {b: view.usage(b) for b in view.brokers}
        lv = cyc.levels = Levels.of(st, view.ideal(cyc.eligible), view.noise, cyc.config)
        cyc.max_before = max((cyc.before[b] for b in cyc.eligible), default=0.0)
        cyc.stats = {
            "ideal": rounded(lv.ideal),
            "target": rounded(lv.target),
            "trigger": rounded(lv.trigger),
            "noise": rounded(lv.noise),
            "modelError": rounded(view.fit_noise),
            "maxUsageBefore": rounded(cyc.max_before),
        }
        if corroborated:  # brokers the model put above what their own reports showed
            cyc.stats["clippedToReports"] = {b: [rounded(m), rounded(c)] for b, (m, c) in sorted(corroborated.items())}
        if lifted:  # brokers whose load swings, planned emptier than their own reports showed them
            cyc.stats["liftedToReports"] = {b: [rounded(m), rounded(h)] for b, (m, h) in sorted(lifted.items())}
        # a placement constraint no move can meet (too few primaries, a group larger than the brokers): a
        # warning on every plan, balanced or not; the destination filter keeps moves within the rest
        if not inp.policies.empty:
            owners = {n: b for b, names in view.owned.items() for n in names}
            cyc.unmet = unmet_constraints(inp.policies, cyc.eligible, owners, cyc.config.failure_domains_enabled)
            cyc.stats["warnings"] = list(cyc.unmet)

    def _settle(self, cyc: _Cycle) -> Decision | None:
        """The settle goal: which brokers the plan sheds or fills, and whether it waits. Returns the decision
        that waits (and why), or None: the goals run."""
        st, mem, view, lv, before, now = self.settings, cyc.mem, cyc.view, cyc.levels, cyc.before, cyc.inp.now_ms
        stats, eligible, max_before = cyc.stats, cyc.eligible, cyc.max_before
        changed = self._track_membership(mem, sorted(cyc.inp.brokers), now)
        # a broker above the trigger acts only when the previous cycle saw it there too (Pulsar's
        # AvgShedder counts hits the same way), unless it is far above (twice the band) or overloaded
        # a report counts only when it is above the trigger by more than the reports' noise: a broker sitting just
        # below it is not confirmed by a run of noisy samples (ThresholdShedder averages 90 % history for that)
        # a hit is a load report: the broker's reports (as smoothed, without its bundles' remembered peaks) must
        # show it above the level as well as its planned usage - a remembered peak keeps the planned usage up
        # while the load is off, and an on/off consumer lasting two reports was confirmed by a third report
        # taken in its off phase
        confirm = cyc.confirm = max(
            st.confirm_reports, 1 + -(-st.confirm_ms // cyc.cycle_ms) if cyc.cycle_ms > 0 else st.confirm_reports
        )
        hot = sorted(b for b in eligible if before[b] > lv.hit_level)
        seen = cyc.seen = {b: mem.above.get(b, 0) + 1 for b in hot if view.smoothed_usage(b) > lv.hit_level}
        # a run of hits that broke (a report back below the level) within the window: a load that comes and
        # goes. Such a broker is not acted on from one report far above the trigger, only when its reports
        # confirm it (or above the overload threshold): an on/off consumer whose peak read 0.68 once, by noise,
        # was shed at once with 6 moves, every other pair of reports back at 0.10 (periodic-jitter, random-5)
        if now is not None:
            fell = {b: t for b, t in mem.fell.items() if t >= now - cyc.window_ms and b in cyc.inp.brokers}
            fell.update((b, now) for b in mem.above if b not in seen and b in cyc.inp.brokers)
            mem.fell = fell
        mem.above = seen
        # the brokers a plan sheds (ThresholdShedder's geometry): above the trigger, confirmed or far above;
        # a broker between the target and the trigger, or above it for fewer reports, is left alone - unless this
        # planner put bundles on it within the history window, each predicted to leave it within the target: a
        # report above the trigger there is that prediction proved wrong, not one noisy sample, and is acted on
        # (a destination chosen at its daily low rose with the day and touched 0.863 between the three hourly
        # reports that confirmed it, where doing nothing peaked at 0.815: robustness, periodic-jitter /
        # random-188 / load x1.3 / dag). Only where the reports that would confirm it are further apart than a
        # moved bundle's cool-down (the DAG's hourly cadence: two more hours; one decision a minute: two more
        # minutes, a wait that costs nothing and keeps one noisy report from moving anything). Not a broker
        # whose reports fell back within the window (a load that comes and goes), and the fast path's rule
        # still holds: the plan must close half its excess
        loaded: dict[str, int] = {}
        if now is not None and (st.confirm_reports - 1) * cyc.cycle_ms > st.cooldown_ms:
            for m in mem.moves.values():
                if m.get("to") in seen:  # mem.moves holds the history window only (pruned above)
                    loaded[m["to"]] = max(loaded.get(m["to"], m["atMs"]), m["atMs"])
        sources = cyc.sources = {
            b
            for b in hot
            if seen.get(b, 0) >= confirm
            or before[b] >= lv.overload
            or (before[b] >= lv.clear and b not in mem.fell)
            or (b in loaded and b not in mem.fell)
        }
        cyc.loaded = {b: t for b, t in loaded.items() if b in sources and seen[b] < confirm and before[b] < lv.clear}
        # the mirror image (ThresholdShedder's lowerBoundarySheddingEnabled): a nearly empty broker - below
        # `fill_below` x the ideal and as far below it as the trigger is above, by more than the noise - in its
        # planned usage (which holds its bundles' remembered peaks: an on/off consumer's broker in its off phase is
        # not empty) and in its reports, for `confirm_reports` consecutive reports, is filled from the brokers
        # above the target (step 8, in `descend`): a broker that joined or came back from a restart does not stay
        # empty within the band. Not one of a mixed-capacity cluster that sits 10 points low: filling those cost
        # more moves than the closest Pulsar strategy's on four seen and held-out cells, for 2 to 4 points
        mem.below = {
            b: mem.below.get(b, 0) + 1
            for b in eligible
            if before[b] < lv.low_level and view.smoothed_usage(b) < lv.low_level and not view.clipped(b)
        }
        refused = sorted(b for b in mem.refused if b in mem.below)
        if refused:  # far below, but a fill move to it landed elsewhere (see the history above)
            stats["fillRefused"] = refused
        cyc.under = {b for b, n in mem.below.items() if n >= st.confirm_reports and b not in mem.refused}
        # a fill, once started, goes on up to the level it fills to (hysteresis: it starts far below the ideal,
        # it ends at `fill_to`): a broker a fill move reached within the history window, still below that level
        # in its planned usage and its reports, is filled on. Relief lands on the tightest fit below the ideal,
        # an emptied broker among them, and can lift it above the start level while brokers between the target
        # and the trigger wait: on random-1 to random-8's rolling restarts they ended 2 to 5 points higher
        members = set(eligible)
        cyc.refill = {
            b
            for b in {m["to"] for m in cyc.history.values() if m.get("fill")}
            if b in members
            and b not in cyc.under
            and b not in mem.refused
            and before[b] < lv.fill_to
            and view.smoothed_usage(b) < lv.fill_to
            and not view.clipped(b)
        }
        fill = bool(cyc.under or cyc.refill)  # also when the busiest broker is above the trigger but not confirmed
        if len(eligible) < 2:
            return skip(Reason.NO_BROKERS, f"{len(eligible)} broker(s) with reported limits: nothing to balance", stats)
        if max_before <= lv.trigger and not fill:
            stats["brokers"] = {b: {"usage": rounded(before[b])} for b in view.brokers}
            return skip(
                Reason.BALANCED,
                f"busiest broker {max_before:.4f} <= trigger {lv.trigger:.4f} (ideal {lv.ideal:.4f}): within the band, no move",
                stats,
            )
        if not sources and not fill:  # above the trigger, but not yet in enough reports and not far above
            stats["brokers"] = {b: {"usage": rounded(before[b])} for b in view.brokers}
            top = max(eligible, key=lambda b: (before[b], b))
            reported = (
                ""
                if top in seen or top not in hot
                else (
                    f"; its load reports show {view.smoothed_usage(top):.4f} (the planned usage holds its "
                    "bundles' remembered peaks): a report counts only above that level"
                )
            )
            if top in mem.fell and before[top] >= lv.clear and now is not None:
                reported += (
                    f"; its reports fell back below that level {(now - mem.fell[top]) / 60_000:.0f} min ago (a load "
                    f"that comes and goes): not acted on from one report, only when {confirm} confirm it "
                    f"or above the overload threshold {lv.overload:.2f}"
                )
            return skip(
                Reason.HIT_COUNT,
                f"busiest broker {max_before:.4f} > trigger {lv.trigger:.4f} (ideal {lv.ideal:.4f}), above it by more than "
                f"the noise ({lv.hit_level:.4f}) in {max(seen.values(), default=0)} consecutive load report(s): waiting "
                f"for {confirm}, spanning at least {st.confirm_ms // 60_000} min, to confirm it (a report is one sample; a load that "
                f"comes and goes within the hour is not moved for; at once above {lv.clear:.4f}){reported}",
                stats,
            )
        since = mem.membership_changed
        if now is not None and since is not None and now - since < st.settle_ms and max_before < lv.overload:
            stats["brokers"] = {b: {"usage": rounded(before[b])} for b in view.brokers}
            what = f" ({changed})" if changed else ""
            return skip(
                Reason.COOL_DOWN,
                f"the set of brokers changed {(now - since) / 60_000:.0f} min ago{what}: waiting until it has been stable for "
                f"{st.settle_ms // 60_000} min (a restart or scaling in progress gets one plan at its end); busiest broker "
                f"{max_before:.4f} < overload threshold {lv.overload:.2f}",
                stats,
            )
        return None

    def _frozen(self, cyc: _Cycle) -> set[str]:
        """The bundles no goal may move: moved by this planner within the cool-down, unloaded by anyone within
        Pulsar's grace period, or in an excluded or system namespace."""
        # imported here: core.pulsar.shedders registers this planner, so a module-level import would be circular
        from pulsar_rebalance.core.pulsar.shedders.base import is_system_namespace, namespace_of

        now, history, recent = cyc.inp.now_ms, cyc.history, cyc.inp.recently_unloaded_bundles
        excluded_ns = set(cyc.config.load_balancer_shedding_excluded_namespaces)

        def is_frozen(bundle: str) -> bool:
            m = history.get(bundle)
            if m is not None and (now is None or m["atMs"] >= now - cyc.cooldown_ms):
                return True
            if bundle in recent and recent[bundle] != cyc.undone.get(bundle):
                return True
            ns = namespace_of(bundle)
            return ns in excluded_ns or is_system_namespace(ns)

        return {name for name in cyc.view.bundles if is_frozen(name)}

    def _search(self, cyc: _Cycle) -> Descent:
        """The goals on the model (:func:`~.goals.descend`). A broker acted on at once, on one report (far above
        the trigger, below the overload threshold), must be worth it: the plan closes at least
        ``fast_path_share`` of its excess over the target, or brings it below the trigger. Otherwise the plan
        is made again without it, and it waits for its reports to confirm it: an on/off consumer's first
        report in its on phase was acted on with a split and two moves that took its broker from 0.72 to 0.70
        (one hot topic carries it)."""
        # imported here: core.pulsar.shedders registers this planner, so a module-level import would be circular
        from pulsar_rebalance.core.pulsar.shedders.base import namespace_of

        st, view, lv, before = self.settings, cyc.view, cyc.levels, cyc.before
        counts = dict(cyc.inp.namespace_bundle_counts or {})
        if not counts:
            for name in view.bundles:
                counts[namespace_of(name)] = counts.get(namespace_of(name), 0) + 1
        frozen = self._frozen(cyc)

        def descent(sources: set[str]) -> Descent:
            dx = Descent(
                st, view, cyc.inp, cyc.config, lv, cyc.eligible, before, cyc.history, frozen, counts, cyc.unmet
            )
            descend(dx, sources, cyc.under, cyc.refill)
            return dx

        fast = {b for b in cyc.sources if cyc.seen.get(b, 0) < cyc.confirm and before[b] < lv.overload}
        snapshot = view.snapshot() if fast else None
        dx = descent(cyc.sources)
        weak = {
            b: view.usage(b)
            for b in sorted(fast)
            if view.usage(b) > lv.trigger
            and 0 < before[b] - view.usage(b) < st.fast_path_share * (before[b] - lv.target)
        }
        if weak and snapshot is not None:
            view.restore(snapshot)
            # what held those brokers up (a hot topic, a namespace at its bundle limit) stays on the plan
            why = dx.warnings
            dx = descent(cyc.sources - set(weak))
            known = set(dx.warnings)
            dx.warnings += [w for w in why if w not in known]
            cyc.waits = [
                f"{b}: one load report at {before[b]:.4f} (at once above {lv.clear:.4f}), but a plan would take it only to "
                f"{a:.4f}, less than {st.fast_path_share:.0%} of the way to the target {lv.target:.4f}: not acted on until "
                f"{cyc.confirm} consecutive load reports confirm it"
                for b, a in weak.items()
            ]
        return dx

    def _decision(self, cyc: _Cycle, dx: Descent, new_state: StrategyState) -> tuple[Decision, StrategyState]:
        """The proposals (the model's assignment after the goals against before), the memory of the moves, and
        the decision's words."""
        st, view, lv, before, stats, mem, now = (
            self.settings,
            cyc.view,
            cyc.levels,
            cyc.before,
            cyc.stats,
            cyc.mem,
            cyc.inp.now_ms,
        )
        max_before, trigger, ideal = cyc.max_before, lv.trigger, lv.ideal
        unloads, splits, warnings = dx.unloads(), dx.splits, dx.warnings
        if cyc.waits:
            if not unloads and not splits:
                stats["brokers"] = {b: {"usage": rounded(before[b])} for b in view.brokers}
                stats["warnings"] = warnings + cyc.waits
                return skip(
                    Reason.HIT_COUNT,
                    f"busiest broker {max_before:.4f} > trigger {trigger:.4f} (ideal {ideal:.4f}); "
                    + "; ".join(cyc.waits),
                    stats,
                ), new_state
            warnings += cyc.waits
        landed = {u.destination for u in unloads}
        after = {b: view.as_destination(b) if b in landed else view.usage(b) for b in view.brokers}
        stats["maxUsageAfter"] = rounded(max((after[b] for b in cyc.eligible), default=0.0))
        stats["brokers"] = {b: {"usage": rounded(before[b]), "predictedUsage": rounded(after[b])} for b in view.brokers}
        stats["warnings"] = warnings
        fills = set(dx.proposals.fills())
        if now is not None and (unloads or splits):
            for u in unloads:
                mem.moves[u.bundle] = {"from": u.broker, "to": u.destination, "atMs": now}
                if u.bundle in fills:
                    mem.moves[u.bundle]["fill"] = True
            for sp in splits:  # children inherit their share of the parent's load as their peak
                mem.peaks.pop(sp.bundle, None)
                for child in sp.children or ():
                    feats = dx.child_features.get(child)
                    if feats is not None:
                        mem.peaks[child] = {
                            "msgRate": feats[0],
                            "msgThroughputIn": feats[1],
                            "msgThroughputOut": feats[2],
                            "atMs": now,
                        }
            self._relieved_highs(mem, view, {u.broker for u in unloads} - landed, after, now)
            new_state = new_state.evolve(planner=mem.to_json())
        if dx.fill_dropped:
            stats["fillNotWorthIt"] = dx.fill_dropped[-1]
        if not unloads and not splits and (cyc.under or cyc.refill) and not cyc.sources:
            unfilled = (
                dx.fill_dropped[-1]
                if dx.fill_dropped
                else "no move fills them without taking them above the target or the busiest broker higher"
            )
            band = (
                f"<= trigger {trigger:.4f}"
                if max_before <= trigger
                else f"> trigger {trigger:.4f}, not confirmed there by {cyc.confirm} load reports"
            )
            which = []
            if cyc.under:
                which.append(
                    f"{', '.join(sorted(cyc.under))} below {lv.low_level:.4f} in {st.confirm_reports}+ consecutive load reports"
                )
            if cyc.refill:
                which.append(
                    f"{', '.join(sorted(cyc.refill))} below {lv.fill_to:.4f}, a fill begun within "
                    f"{st.history_ms / 3_600_000:g} h"
                )
            return skip(
                Reason.BALANCED if max_before <= trigger else Reason.HIT_COUNT,
                f"busiest broker {max_before:.4f} {band} (ideal {ideal:.4f}); {'; '.join(which)}, but {unfilled}",
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
            f"(ideal {ideal:.4f}, target {lv.target:.4f})"
        )
        filled = sorted({u.destination for u in unloads if u.bundle in fills and u.destination})
        if filled:
            detail += f"; filling {', '.join(filled)} (up to {lv.fill_to:.4f})"
        for b in sorted(set(cyc.loaded) & {u.broker for u in unloads}):
            ago = "" if now is None else f" {(now - cyc.loaded[b]) / 60_000:.0f} min ago"
            detail += (
                f"; {b} acted on from {cyc.seen[b]} load report(s) above the trigger, not {cyc.confirm}: this "
                f"planner moved bundles onto it{ago}, predicted within the target, and its reports now show that "
                "prediction wrong"
            )
        reason = (
            Reason.UNDERLOADED
            if unloads and not splits and all(u.bundle in fills for u in unloads)
            else Reason.OVERLOADED
        )
        return Decision(Label.SUCCESS, reason, detail, tuple(unloads), tuple(splits), (), stats), new_state

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
                view.lift_to(b, modelled)  # a destination as busy as modelled: both errors point the safe way
                out[b] = (modelled, view.usage(b))
        return out

    @staticmethod
    def _relieved_highs(
        mem: PlannerMemory, view: ClusterView, sources: set[str], after: Mapping[str, float], now: int
    ) -> None:
        """A broker this plan relieves (a source that receives nothing) and that keeps a bundle whose traffic
        swings (a remembered peak) is believed, until its own load reports show more, at what the plan
        predicts for it, not at the high its reports showed before the moves (``highs``, which
        :meth:`_corroborate` clips its planned usage to). In the swing's off phase the model plans such a
        broker with the bundle's remembered peak, and may put what stayed there far above the broker's level
        before the moves, which the clip then holds it at: on random-5 (seed 2,
        a day of periodic jitter) a plan isolated an on/off consumer's topic on its broker, predicting 0.75;
        one minute later, in the topic's off phase, the model put the topic's remembered peak at 1.92 there,
        clipped to the 0.85 the broker had reported before, and the planner moved the topic whole to another
        broker, then 11 bundles off that one (18 moves in 3 minutes where the first 6 were enough). A report
        at or above the prediction restores the high at once: a move that was not made, or a prediction
        that was low, is believed as soon as a report shows it."""
        for s in sources:
            high = mem.highs.get(s)
            swings = any(n in mem.peaks for n in view.owned[s])
            if swings and high is not None and after[s] < high["usage"]:
                mem.highs[s] = {"usage": after[s], "atMs": now}

    def _lift_swinging(
        self,
        mem: PlannerMemory,
        view: ClusterView,
        now: int | None,
        window_ms: int,
        history: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, tuple[float, float]]:
        """The mirror image of :meth:`_corroborate`: a broker hosting a bundle whose traffic swings (a remembered
        peak) is, as a destination, at least as busy as its own load reports showed it within ``window_ms``
        (``highs``): what arrives there lands on top of that (``ClusterView.lift_to``). The model plans such a
        broker with the peak of its bundle, at the model's cost per message; where that cost is under-stated (a
        slower broker, a CPU that grows faster near saturation), the broker looked emptier in its off phase than
        its busy phase had been, and received 3 bundles its next busy phase overloaded (periodic-jitter,
        random-68, seed 2: ending above doing nothing). Not a broker that sent or received a planner move within
        the window: its high predates that move. Returns ``{broker: (planned, lifted to)}``."""
        if not mem.peaks or now is None:
            return {}
        moved = {m[k] for m in history.values() if m["atMs"] >= now - window_ms for k in ("from", "to")}
        out: dict[str, tuple[float, float]] = {}
        for b in view.brokers:
            high = mem.highs.get(b)
            if high is None or b in moved or not any(n in mem.peaks for n in view.owned[b]):
                continue
            planned = view.usage(b)
            if view.lift_to(b, high["usage"]):
                out[b] = (planned, high["usage"])
        return out

    def _update_peaks(
        self, mem: PlannerMemory, inp: PlannerInput, bundle_data: Mapping[str, BundleData], now: int, peak_ms: int
    ) -> None:
        """Remember the peak of bundles whose traffic swings (their last sample against ``bundle_data``'s short-term
        average; none without it); forget peaks not seen for ``peak_ms``."""
        st = self.settings
        peaks = {b: p for b, p in mem.peaks.items() if p["atMs"] >= now - peak_ms}
        swing = st.swing
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
                if swinging and bd is not None:
                    # a swing first seen in its quiet phase: the recent average (Pulsar's short-term data) holds
                    # the busy phase the planner saw but did not keep; without it the bundle's broker looked
                    # nearly empty and received 3 bundles that its consumer's next busy phase overloaded
                    # (periodic-jitter, random-64, seed 2: ending above doing nothing)
                    t = bd.short_term_data
                    avg = (t.msg_rate_in + t.msg_rate_out, t.msg_throughput_in, t.msg_throughput_out)
                    top = tuple(max(x, a) for x, a in zip(top, avg))
                at = (
                    now
                    if (swinging or old is None or any(c >= 0.8 * p for c, p in zip(cur, prev) if p > 0))
                    else old["atMs"]
                )
                peaks[name] = {"msgRate": top[0], "msgThroughputIn": top[1], "msgThroughputOut": top[2], "atMs": at}
        mem.peaks = peaks


__all__ = ["split_candidates", "PLANNER_NAME", "GlobalPlanner", "PlannedUnload", "PlannerInput", "PlannerSettings"]
