"""Do no harm: the guard every plan passes before it is stored, whatever strategy made it (pure).

A strategy decides from its own view of the cluster (Pulsar's shedders from their averages, the
GlobalPlanner from its fitted load model). The guard re-checks the ordered actions against what
Pulsar itself reports - each broker's load report, its per-resource usage and limits - with the same
numbers as every plan's prediction (:class:`pulsar_rebalance.core.prediction.LoadState`: a bundle
carries its rate/throughput share of its broker's usage). Moves are tried greedily in plan order,
each on top of the moves kept before it; a move is kept only if, after it:

* **worst broker** - no broker is predicted above the busiest broker's usage now (every prefix of
  the kept plan, so a plan stopped halfway is not worse either);
* **overload threshold** - its destination is not above Pulsar's
  ``loadBalancerBrokerOverloadedThresholdPercentage`` (85 % by default);
* **target band** - its destination is not above the brokers' current average usage plus
  ``loadBalancerBrokerThresholdShedderPercentage`` (10 points by default): where Pulsar's default
  shedder (ThresholdShedder) would call the destination overloaded and shed it again next cycle;
* **free capacity** - its destination has taken, over the plan so far, at most
  :data:`FREE_CAPACITY_SHARE` of its free capacity (overload threshold minus its usage now);
* **overload relief** (waives the two rules above) - a move off a broker above Pulsar's overload
  threshold may take its destination above the target band and past its share of free room, as long
  as the destination stays at or below the overload threshold, no broker ends above the busiest now,
  and, were the prediction off by 100 % (the destination taking twice what it is predicted to), the
  destination still stays below the source's usage now. A broker at 130 % whose hot bundle fits on no
  broker within the band is left there otherwise, while Pulsar's own shedders (OverloadShedder sheds
  exactly such a broker) relieve it; the margin kept for an error in the model is then measured
  against the broker it relieves, not against the band. These checks predict the destination at the
  lower of two estimates from the reports: the bundle's share of its source's usage, and its messages
  at the destination's own CPU cost per message (at least the median broker's): a source near
  saturation (a queue, a convex CPU curve) pays several times per message what an idle broker will, and
  its share alone would keep its hot bundle from every destination. A bundle that lands above the
  threshold on every broker it may go to (one hot topic no split can spread) may take its destination
  above the threshold too, on the broker where it lands lowest only (the other two checks still hold).
  Such a move's verdict says so
  (``relief``, with what the destination takes when the second estimate was used: the stored plan's
  prediction uses it too) and its action's reason names it;
* **isolation-policy** - its destination is a broker Pulsar's ``applyNamespacePolicies`` allows for the
  bundle's namespace (the namespace isolation policy's primaries, or its secondaries when fewer than
  ``min_limit`` primaries exist; without a policy, a shared broker);
* **anti-affinity-group** - for a namespace in an anti-affinity group, its destination is among the
  brokers owning the fewest namespaces of the group (with ``failureDomainsEnabled``, in the failure
  domains owning the fewest), counted after the kept moves with the bundle off its source - Pulsar's
  ``filterAntiAffinityGroupOwnedBrokers``, so a plan never puts two namespaces of a group on one
  broker while another broker has none (:class:`pulsar_rebalance.core.pulsar.policies.DestinationFilter`);
* **cordoned** - its destination is not a cordoned broker (one an operator drained: no plan of any
  mode targets it until it is uncordoned);
* **prediction** - the move can be predicted at all: both brokers report and the bundle has a sample
  (or is the child of a split of the same plan, whose load comes from the parent's topics).

Splits change no broker's load (the children stay on the owner). A split that is there only so its
children can move (a GlobalPlanner split: ``standalone=False``) is kept only if a kept move needs it;
a split wanted for its own sake (Pulsar's bundle-split trigger) is always kept. A move of a split's
child is predicted from the split's topics, so it stands or falls on its own numbers; one whose split
is not in the plan has no sample and is dropped (it cannot stand alone: its bundle does not exist).

**Re-placement.** A move that fails only because of where it lands (its destination would end above
the band, the threshold or its share of free room, would become the busiest broker, or breaks the
bundle's isolation policy or anti-affinity group) is tried on
other destinations before it is cut: the :data:`REPLACE_CANDIDATES` least-used reporting brokers, the
least used first; the first that passes every rule takes it. The verdict says
so (``replaced``: the planned destination and why it was refused), the plan page shows it, and the
action's reason names both. Pulsar's own placement picks one destination per lookup, and strategies
that name a destination (ThresholdShedder's, the planner's) can send two moves to one light broker;
re-placing keeps the move and drops only the pile-up.

``cut=False`` keeps every action and only flags the failing ones (every move applied, in order, on its
planned destination): for a rollback the operator asked for, which is reported rather than changed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pulsar_rebalance.core.prediction import LoadState, Move
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import LocalBrokerData, NamespaceBundleStats
from pulsar_rebalance.core.pulsar.policies import DestinationFilter, PlacementPolicies

FREE_CAPACITY_SHARE = 0.5
"""Per plan, a destination takes at most this share of its free capacity (overload threshold minus its
reported usage now). The prediction attributes a broker's usage to its bundles by traffic share, which
can be wrong (CPU that is not message handling, a bundle whose cost per byte differs from its
broker's average, a GlobalPlanner model fitted on stale samples): with half the room left unused, a
prediction that is off by up to 100 % still leaves the destination at or below the threshold."""

REPLACE_CANDIDATES = 8
"""How many other destinations (the least used first) a move refused for where it lands is tried on."""

TOLERANCE = 1e-9
"""Float slack for the comparisons (usages are fractions)."""

Rule = Literal[
    "prediction",
    "worst-broker",
    "overload-threshold",
    "target-band",
    "free-capacity",
    "isolation-policy",
    "anti-affinity-group",
    "cordoned",
    "split-unneeded",
]
RULES: tuple[Rule, ...] = get_args(Rule)

RELIEF_RULES: frozenset[Rule] = frozenset({"worst-broker", "overload-threshold", "target-band", "free-capacity"})
"""The rules overload relief re-checks on its own estimate (module docstring): it waives the target band and the
free-capacity share, and keeps the threshold and the worst broker on the lower of its two estimates."""


@dataclass(frozen=True, slots=True)
class Relief:
    """A move kept as overload relief: why, and what its destination takes (None: its share of the source)."""

    note: str
    arriving: dict[str, float] | None = None


DESTINATION_RULES = frozenset(RULES) - {"prediction", "split-unneeded"}
"""Rules another destination may satisfy (``prediction`` failures are the bundle's or source's, not the destination's)."""


@dataclass(frozen=True, slots=True)
class GuardSplit:
    """A split of the plan: ``bundle`` on ``broker`` into ``children`` (full names).

    ``standalone``: the split is wanted for its own sake (Pulsar's split trigger found the bundle too
    big); False when it is there only so that its children can move (a planner's split).
    """

    bundle: str
    broker: str
    children: tuple[str, ...]
    standalone: bool = True


GuardAction = Move | GuardSplit


def resource_weights(cfg: LoadBalancerConfig) -> tuple[float, float, float, float, float]:
    """(cpu, memory, directMemory, bandwidthIn, bandwidthOut) weights, Pulsar's getter rules applied."""
    return (
        cfg.load_balancer_cpu_resource_weight,
        cfg.load_balancer_memory_resource_weight,
        cfg.load_balancer_direct_memory_resource_weight,
        cfg.bandwidth_in_resource_weight,
        cfg.bandwidth_out_resource_weight,
    )


@dataclass(frozen=True, slots=True)
class GuardLimits:
    """The guard's thresholds, as usage fractions."""

    overload: float
    band: float
    free_share: float = FREE_CAPACITY_SHARE

    @classmethod
    def from_config(cls, cfg: LoadBalancerConfig) -> GuardLimits:
        return cls(overload=cfg.overload_threshold_fraction, band=cfg.threshold_shedder_fraction)


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """One action's verdict; ``index`` is its position in the guarded sequence (plan order)."""

    index: int
    kind: Literal["split", "unload"]
    bundle: str
    source: str
    destination: str | None
    passed: bool
    rules: tuple[Rule, ...] = ()
    reason: str = ""
    planned_destination: str | None = None
    """Set when the guard re-placed the move: the destination the strategy chose (``destination`` is the
    guard's); ``rules``/``reason`` then say why the planned one was refused."""
    relief: str = ""
    """Set when the move was kept as overload relief: which rules were waived and why (module docstring)."""
    arriving: Mapping[str, float] | None = None
    """For a relief move predicted at its destination's own cost: what the destination takes per resource."""

    @property
    def replaced(self) -> bool:
        return self.planned_destination is not None

    def to_json(self) -> dict[str, Any]:
        out = {
            "index": self.index,
            "kind": self.kind,
            "bundle": self.bundle,
            "source": self.source,
            "destination": self.destination,
            "rules": list(self.rules),
            "reason": self.reason,
        }
        if self.planned_destination is not None:
            out["plannedDestination"] = self.planned_destination
        if self.relief:
            out["relief"] = self.relief
        return out


@dataclass(frozen=True, slots=True)
class GuardResult:
    verdicts: tuple[GuardVerdict, ...]
    cut: bool
    limits: GuardLimits
    max_before: float
    average_before: float
    max_after: float
    """The busiest broker's predicted usage after the kept actions (after all of them when not ``cut``)."""

    @property
    def target(self) -> float:
        return self.average_before + self.limits.band

    @property
    def failed(self) -> tuple[GuardVerdict, ...]:
        return tuple(v for v in self.verdicts if not v.passed)

    @property
    def replaced(self) -> tuple[GuardVerdict, ...]:
        """Moves kept on another destination than planned."""
        return tuple(v for v in self.verdicts if v.replaced)

    @property
    def relieved(self) -> tuple[GuardVerdict, ...]:
        """Moves kept as overload relief (the target band or free-capacity rule waived)."""
        return tuple(v for v in self.verdicts if v.passed and v.relief)

    def destination_of(self, index: int) -> str | None:
        """The destination action ``index`` keeps (the guard's when it re-placed the move)."""
        for v in self.verdicts:
            if v.index == index:
                return v.destination
        return None

    @property
    def kept(self) -> tuple[int, ...]:
        """Indices of the actions the plan keeps (all of them when not ``cut``)."""
        return tuple(v.index for v in self.verdicts if v.passed or not self.cut)

    def to_json(self) -> dict[str, Any]:
        """The plan summary's ``guard`` section."""
        return {
            "mode": "cut" if self.cut else "warn",
            "kept": len(self.kept),
            "dropped": len(self.verdicts) - len(self.kept),
            "failed": [v.to_json() for v in self.failed],
            "replaced": [v.to_json() for v in self.replaced],
            "relieved": [v.to_json() for v in self.relieved],
            "maxUsageBefore": round(self.max_before, 6),
            "maxUsageAfter": round(self.max_after, 6),
            "averageUsageBefore": round(self.average_before, 6),
            "targetBand": round(self.target, 6),
            "overloadThreshold": self.limits.overload,
            "bandMargin": self.limits.band,
            "freeCapacityShare": self.limits.free_share,
        }


class DestinationRoom:
    """What the guard will let each destination take over one plan, for a strategy to plan within it.

    The guard predicts a move by the bundle's share of its source's reported usage
    (:class:`LoadState`); a strategy with its own load model (the GlobalPlanner's fitted one) can
    predict a part of a bundle as smaller and size it for a room the guard then refuses, and the
    guard cuts the move. Here the strategy asks before it plans: :meth:`fits` is the guard's
    destination rules (``overload-threshold``, ``target-band``, ``free-capacity``) for a move of that
    much traffic on top of the moves :meth:`take` recorded; :meth:`room` is how many points are left.
    """

    def __init__(
        self,
        brokers: Mapping[str, LocalBrokerData],
        weights: tuple[float, float, float, float, float],
        limits: GuardLimits,
    ) -> None:
        self.load = LoadState.from_parsed(brokers, weights)
        before = self.load.usages()
        average = sum(before.values()) / len(before) if before else 0.0
        self.cap = {
            b: min(limits.overload, average + limits.band, u + limits.free_share * max(0.0, limits.overload - u))
            for b, u in before.items()
        }

    def amounts(self, source: str, traffic: tuple[float, float, float]) -> dict[str, float] | None:
        """Per resource, what moving ``traffic`` (msg/s in + out, bytes/s in, bytes/s out) off ``source``
        takes along (None: ``source`` sent no report)."""
        if source not in self.load.parsed:
            return None
        return self.load.traffic_amounts(source, *traffic)

    def room(self, destination: str) -> float:
        """Points ``destination`` can still take (0 without a report)."""
        if destination not in self.cap:
            return 0.0
        return max(0.0, self.cap[destination] - self.load.usage(destination))

    def added(self, source: str, destination: str, traffic: tuple[float, float, float]) -> float:
        """Points ``destination`` would take with ``traffic`` from ``source`` (inf: no prediction)."""
        amounts = self.amounts(source, traffic)
        if amounts is None or destination not in self.cap:
            return float("inf")
        return self.load.destination_after(destination, amounts) - self.load.usage(destination)

    def fits(self, source: str, destination: str, traffic: tuple[float, float, float]) -> bool:
        amounts = self.amounts(source, traffic)
        if amounts is None or destination not in self.cap:
            return False
        return self.load.destination_after(destination, amounts) <= self.cap[destination] + TOLERANCE

    def take(self, source: str, destination: str, traffic: tuple[float, float, float]) -> None:
        """Record a planned move of ``traffic`` (later checks see it)."""
        amounts = self.amounts(source, traffic)
        if amounts is not None and destination in self.cap:
            self.load.add(source, destination, amounts)


def guard_plan(
    reports: Mapping[str, Mapping[str, Any]],
    actions: Sequence[GuardAction],
    weights: tuple[float, float, float, float, float],
    limits: GuardLimits,
    *,
    extra_stats: Mapping[str, NamespaceBundleStats] | None = None,
    cut: bool = True,
    replace: bool = True,
    policies: PlacementPolicies | None = None,
    failure_domains_enabled: bool = False,
    cordoned: Collection[str] = (),
    leaving: Collection[str] = (),
) -> GuardResult:
    """Check ``actions`` (plan order) against the load reports; see the module docstring for the rules.

    ``replace``: try a move refused for where it lands on other destinations before cutting it (only
    when ``cut``). ``policies``: the cluster's placement constraints (None or empty: no policy rule);
    ``failure_domains_enabled``: Pulsar's ``failureDomainsEnabled``; ``cordoned``: brokers no move may target;
    ``leaving``: brokers a drain empties - the average is the load shared by the brokers that stay, and
    the worst-broker rule allows up to that average plus the band (a drain must raise the others)."""
    load = LoadState(reports, weights, extra_stats)
    fenced = frozenset(cordoned)
    placement = _destination_filter(load, policies, failure_domains_enabled)
    before = load.usages()
    max_before = max(before.values(), default=0.0)
    gone = frozenset(leaving)
    staying = [b for b in before if b not in gone]
    average = sum(before.values()) / len(staying) if staying else 0.0
    target = average + limits.band
    ceiling = max(max_before, target) if leaving else max_before
    verdicts: dict[int, GuardVerdict] = {}
    kept_moves: list[Move] = []
    for i, a in enumerate(actions):
        if isinstance(a, GuardSplit):
            continue
        failures, relief = _check_move(load, a, before, ceiling, average, target, limits, placement, fenced)
        passed = not failures
        planned: str | None = None
        if not passed and cut and replace and all(r in DESTINATION_RULES for r, _ in failures):
            other = _replace(load, a, before, ceiling, average, target, limits, placement, fenced)
            if other is not None:
                planned, a, passed = a.destination, other[0], True
                relief = other[1]
        kept_relief = relief if passed else None
        if passed or not cut:  # kept (in warn mode every move is, and later moves see it)
            # changes nothing for a move that cannot be predicted
            load.apply(a, kept_relief.arriving if kept_relief is not None else None)
            kept_moves.append(a)
            if placement is not None:
                placement.record(a)
        verdicts[i] = GuardVerdict(
            index=i,
            kind="unload",
            bundle=a.bundle,
            source=a.source,
            destination=a.destination,
            passed=passed,
            rules=tuple(r for r, _ in failures),
            reason="; ".join(why for _, why in failures),
            planned_destination=planned,
            relief=kept_relief.note if kept_relief is not None else "",
            arriving=kept_relief.arriving if kept_relief is not None else None,
        )
    for i, a in enumerate(actions):
        if not isinstance(a, GuardSplit):
            continue
        needed = a.standalone or any(m.bundle in a.children for m in kept_moves)
        verdicts[i] = GuardVerdict(
            index=i,
            kind="split",
            bundle=a.bundle,
            source=a.broker,
            destination=None,
            passed=needed,
            rules=() if needed else ("split-unneeded",),
            reason=""
            if needed
            else "planned only so that its children could move, and the guard dropped every such move",
        )
    after = load.usages()
    return GuardResult(
        verdicts=tuple(verdicts[i] for i in sorted(verdicts)),
        cut=cut,
        limits=limits,
        max_before=max_before,
        average_before=average,
        max_after=max(after.values(), default=0.0),
    )


class _Placement:
    """The policy rules' view: a :class:`DestinationFilter` over the reports' ownership, kept moves applied."""

    def __init__(self, owned: dict[str, set[str]], check: DestinationFilter) -> None:
        self.owned = owned
        self.check = check

    def record(self, m: Move) -> None:
        self.owned.get(m.source, set()).discard(m.bundle)
        self.owned.setdefault(m.destination, set()).add(m.bundle)
        self.check.moved(m.bundle, m.source, m.destination)


def _destination_filter(
    load: LoadState, policies: PlacementPolicies | None, failure_domains_enabled: bool
) -> _Placement | None:
    if policies is None or policies.empty:
        return None
    parsed = load.parsed
    owned = {b: {*d.bundles, *d.last_stats} for b, d in parsed.items()}

    def persistent(broker: str) -> bool:
        data = parsed.get(broker)
        return data is None or data.persistent_topics_enabled

    check = DestinationFilter(
        policies, owned, failure_domains_enabled=failure_domains_enabled, persistent_enabled=persistent
    )
    return _Placement(owned, check)


def _replace(
    load: LoadState,
    m: Move,
    before: Mapping[str, float],
    max_before: float,
    average: float,
    target: float,
    limits: GuardLimits,
    placement: _Placement | None = None,
    cordoned: frozenset[str] = frozenset(),
) -> tuple[Move, Relief | None] | None:
    """The move on the least-used other destination (among those the policies allow, never a cordoned
    one) that passes every rule, and its overload relief note (None: none passes)."""
    usages = load.usages()
    others = sorted(
        (b for b in usages if b not in (m.source, m.destination) and b not in cordoned), key=lambda b: (usages[b], b)
    )
    if placement is not None:
        others = [b for b in others if placement.check.permits(m.bundle, m.source, b)]
    for d in others[:REPLACE_CANDIDATES]:
        trial = Move(bundle=m.bundle, source=m.source, destination=d)
        failures, relief = _check_move(load, trial, before, max_before, average, target, limits, placement, cordoned)
        if not failures:
            return trial, relief
    return None


def _check_move(
    load: LoadState,
    m: Move,
    before: Mapping[str, float],
    max_before: float,
    average: float,
    target: float,
    limits: GuardLimits,
    placement: _Placement | None = None,
    cordoned: frozenset[str] = frozenset(),
) -> tuple[list[tuple[Rule, str]], Relief | None]:
    """The rules ``m`` breaks when applied on top of ``load`` (the kept moves so far), (rule, why), and,
    when it was kept as overload relief, the note saying which rules were waived ("" otherwise)."""
    if m.source not in before or m.destination not in before:
        missing = m.source if m.source not in before else m.destination
        return [("prediction", f"{missing} sent no load report: the move's effect cannot be predicted")], None
    if load.bundle_stats(m) is None:
        return [
            (
                "prediction",
                f"{m.bundle} has no load sample in {m.source}'s report (and is not a child of a split of this "
                "plan): the move's effect cannot be predicted, and a child of a split that is not in the plan "
                "cannot move on its own",
            )
        ], None
    source_now = load.usage(m.source)
    trial = load.copy()
    trial.apply(m)
    usages = trial.usages()
    dst, dst_before, dst_after = m.destination, before[m.destination], usages[m.destination]
    out: list[tuple[Rule, str]] = []
    worst = max(usages, key=lambda b: usages[b])
    if usages[worst] > max_before + TOLERANCE:
        out.append(
            (
                "worst-broker",
                f"the busiest broker would be {worst} at {usages[worst]:.1%}, above the busiest now ({max_before:.1%})",
            )
        )
    if dst_after > limits.overload + TOLERANCE:
        out.append(
            (
                "overload-threshold",
                f"{dst} would end at {dst_after:.1%}, above Pulsar's overload threshold {limits.overload:.0%} "
                "(loadBalancerBrokerOverloadedThresholdPercentage)",
            )
        )
    if dst_after > target + TOLERANCE:
        out.append(
            (
                "target-band",
                f"{dst} would end at {dst_after:.1%}, above the target band {target:.1%} (the brokers' average "
                f"{average:.1%} + loadBalancerBrokerThresholdShedderPercentage {limits.band:.0%})",
            )
        )
    free = max(0.0, limits.overload - dst_before)
    taken = dst_after - dst_before
    if taken > limits.free_share * free + TOLERANCE:
        out.append(
            (
                "free-capacity",
                f"{dst} would take {100 * taken:.1f} points over this plan, more than {limits.free_share:.0%} of its "
                f"free capacity ({100 * free:.1f} points from {dst_before:.1%} to the overload threshold): the margin "
                "kept for an error in the load model",
            )
        )
    if dst in cordoned:
        out.append(
            (
                "cordoned",
                f"{dst} is cordoned (drained): no plan targets it until `pulsar-rebalance brokers uncordon {dst}`",
            )
        )
    if placement is not None:
        refused = placement.check.refusal(m.bundle, m.source, m.destination)
        if refused is not None:
            out.append((_POLICY_RULES[refused[0]], refused[1]))
    if out and all(r in RELIEF_RULES for r, _ in out) and source_now > limits.overload + TOLERANCE:
        relief = _relief(load, m, before, max_before, limits, source_now, [r for r, _ in out], placement, cordoned)
        if relief is not None:
            return [], relief
    return out, None


def _relief(
    load: LoadState,
    m: Move,
    before: Mapping[str, float],
    max_before: float,
    limits: GuardLimits,
    source_now: float,
    broken: list[Rule],
    placement: _Placement | None = None,
    cordoned: frozenset[str] = frozenset(),
) -> Relief | None:
    """The overload relief for ``m`` off a source above the threshold (module docstring), or None.

    The destination is predicted at the lower of two estimates from the reports: the bundle's share of its
    source's usage, and its messages at the destination's own CPU cost per message (at least the median
    broker's). A source near saturation pays more per message than an idle destination will (a queue, a
    convex CPU curve), and its share then puts a hot bundle far above what it costs elsewhere.

    A bundle that lands above the threshold on every broker (one hot topic no split can spread) may end its
    destination above it, on the broker where it lands lowest only: the other relief checks still hold
    (no broker above the busiest now, and twice the predicted arrival still below the source)."""
    amounts = load.arrival_amounts(m)
    if amounts is None:
        return None
    trial = load.copy()
    trial.apply(m, amounts)
    usages = trial.usages()
    dst = m.destination
    dst_after = usages[dst]
    pessimistic = before[dst] + 2 * (dst_after - before[dst])
    if max(usages.values()) > max_before + TOLERANCE or pessimistic >= source_now - TOLERANCE:
        return None
    above = ""
    if dst_after > limits.overload + TOLERANCE:
        lowest = _lowest_landing(load, m, placement, cordoned)
        if lowest is None or lowest[0] <= limits.overload + TOLERANCE or dst_after > lowest[0] + TOLERANCE:
            return None
        above = (
            f"; {m.bundle} lands above the threshold on every broker (at least {lowest[0]:.1%}), and {dst} is "
            "where it lands lowest"
        )
    share = load.copy()
    share.apply(m)
    at_share = share.usage(dst)
    cheaper = (
        f" (its share of {m.source}'s usage would put it at {at_share:.1%}; at {dst}'s own CPU cost per message it "
        f"takes less: {m.source} pays more per message near saturation)"
        if at_share > dst_after + TOLERANCE
        else ""
    )
    return Relief(
        f"overload relief: {m.source} is at {source_now:.1%}, above Pulsar's overload threshold "
        f"{limits.overload:.0%}; {dst} ends at {dst_after:.1%}{cheaper} (at most {pessimistic:.1%} were the "
        f"prediction off by 100 %, still below {m.source}){above}, so the {' and '.join(broken)} rule(s) were waived",
        amounts if at_share > dst_after + TOLERANCE else None,
    )


def _lowest_landing(
    load: LoadState, m: Move, placement: _Placement | None, cordoned: frozenset[str]
) -> tuple[float, str] | None:
    """Where ``m``'s bundle lands lowest (its usage there and the broker) among the brokers it may go to:
    every reporting broker but its source, a cordoned one, or one the placement constraints refuse; each
    predicted as :func:`_relief` predicts it (None: nowhere)."""
    best: tuple[float, str] | None = None
    for b in load.state:
        if (
            b == m.source
            or b in cordoned
            or (placement is not None and not placement.check.permits(m.bundle, m.source, b))
        ):
            continue
        trial = Move(bundle=m.bundle, source=m.source, destination=b)
        amounts = load.arrival_amounts(trial)
        if amounts is None:
            continue
        landed = load.destination_after(b, amounts)
        if best is None or (landed, b) < best:
            best = (landed, b)
    return best


_POLICY_RULES: dict[str, Rule] = {"isolation-policy": "isolation-policy", "anti-affinity-group": "anti-affinity-group"}
