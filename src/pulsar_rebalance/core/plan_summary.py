"""A plan's review summary, in Pulsar's terms (pure: no I/O; what the plan page and its tests show).

Modelled on Strimzi's ``KafkaRebalance`` proposal summary (moves, data to move, before/after balance),
translated to what a Pulsar operator weighs before approving unloads and splits:

* **unloads** with their destination broker, **splits** with their boundaries and children;
* **traffic moved**: the unloaded bundles' message rate (msg/s) and throughput (bytes/s), in + out;
* **clients that reconnect**: the topics, producers and consumers of the unloaded bundles. An unload
  closes the bundle's topics on the source broker and every client reconnects through a lookup. A
  split is executed with ``unload=false`` (the children stay on the owner), so it disconnects no one;
* **balance**: max, min, max−min spread and (population) standard deviation of the brokers' weighted
  max resource usage, before, predicted after, and measured after execution;
* **data quality**: how many brokers reported a load report and how many bundles a sample;
* **warnings**: ``summary.warnings`` (snapshot problems, Pulsar's own shedding still enabled, ...)
  plus hot bundles the split algorithm could not split;
* **do-no-harm guard** (``summary.guard``, :mod:`pulsar_rebalance.core.guard`): how many planned
  actions it kept and dropped, each dropped one with its reason, and the limits it applied;
* **placement constraints** (``summary.placement``, :mod:`pulsar_rebalance.core.compliance`): per
  unload the constraints it was checked against, and the **compliance** view - the bundles that break
  their namespace's policies in the run's ownership, with rule and why (and, for a
  ``fix_policy_violations`` plan, the bundles it cannot move).

Inputs are the JSON that planning stores (``plans.summary``, each action's ``predicted``,
``plans.result``), so the summary of an old plan is computed the same way as a new one's. Values a
plan did not record (plans made before a field existed) come out as ``None`` and are shown as
unknown, never as zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

UNSPLITTABLE_PREFIX = "split of "
"""Planning's note for a hot bundle its split algorithm could not split starts with this."""


@dataclass(frozen=True)
class Balance:
    """Weighted max resource usage across brokers (fractions, 0-1, may exceed 1)."""

    max: float
    min: float
    spread: float
    std: float
    brokers: int

    @classmethod
    def of(cls, usages: Mapping[str, float | None]) -> Balance | None:
        values = [float(v) for v in usages.values() if v is not None]
        if not values:
            return None
        avg = sum(values) / len(values)
        return cls(
            max=max(values),
            min=min(values),
            spread=max(values) - min(values),
            std=(sum((v - avg) ** 2 for v in values) / len(values)) ** 0.5,
            brokers=len(values),
        )


@dataclass(frozen=True)
class BundleTraffic:
    """What one bundle carries (from the source broker's ``NamespaceBundleStats``); None = not recorded."""

    msg_rate_in: float | None = None
    msg_rate_out: float | None = None
    msg_throughput_in: float | None = None
    msg_throughput_out: float | None = None
    topics: int | None = None
    producers: int | None = None
    consumers: int | None = None

    @classmethod
    def from_predicted(cls, predicted: Mapping[str, Any] | None) -> BundleTraffic:
        b = (predicted or {}).get("bundleLoad") or {}
        return cls(
            msg_rate_in=_num(b.get("msgRateIn")),
            msg_rate_out=_num(b.get("msgRateOut")),
            msg_throughput_in=_num(b.get("msgThroughputIn")),
            msg_throughput_out=_num(b.get("msgThroughputOut")),
            topics=_int(b.get("topics")),
            producers=_int(b.get("producerCount")),
            consumers=_int(b.get("consumerCount")),
        )

    @property
    def msg_rate(self) -> float | None:
        return _add(self.msg_rate_in, self.msg_rate_out)

    @property
    def msg_throughput(self) -> float | None:
        return _add(self.msg_throughput_in, self.msg_throughput_out)


@dataclass(frozen=True)
class UnloadLine:
    seq: int
    bundle: str
    source: str
    destination: str | None
    traffic: BundleTraffic
    source_usage: tuple[float | None, float | None]  # predicted before, after
    destination_usage: tuple[float | None, float | None]
    state: str


@dataclass(frozen=True)
class SplitLine:
    seq: int
    bundle: str
    broker: str
    algorithm: str | None
    boundaries: tuple[str, ...]  # 0x%08x, as Pulsar prints them
    children: tuple[str, ...]
    state: str


@dataclass(frozen=True)
class Totals:
    """Sums over the unloads; ``unknown`` names the fields some unload did not record (the sum is a lower bound)."""

    msg_rate_in: float
    msg_rate_out: float
    msg_throughput_in: float
    msg_throughput_out: float
    topics: int
    producers: int
    consumers: int
    unknown: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.unknown

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out


@dataclass(frozen=True)
class DataQuality:
    brokers_reporting: int | None
    brokers_owning_bundles: int | None
    bundle_samples: int | None
    bundles_owned: int | None


@dataclass(frozen=True)
class PlanWarning:
    kind: str
    message: str


@dataclass(frozen=True)
class GuardLine:
    """An action that failed the do-no-harm guard (dropped, or only flagged for a rollback)."""

    kind: str
    bundle: str
    source: str
    destination: str | None
    rules: tuple[str, ...]
    reason: str
    planned_destination: str | None = None
    """For a re-placed move: the destination the strategy chose (``destination`` is the guard's)."""


def _guard_line(f: Mapping[str, Any]) -> GuardLine:
    return GuardLine(
        kind=str(f.get("kind")),
        bundle=str(f.get("bundle")),
        source=str(f.get("source")),
        destination=f.get("destination"),
        rules=tuple(str(r) for r in f.get("rules") or ()),
        reason=str(f.get("reason") or ""),
        planned_destination=f.get("plannedDestination"),
    )


@dataclass(frozen=True)
class GuardReport:
    """``summary.guard``: ``mode`` is ``cut`` (failing actions removed) or ``warn`` (kept, flagged)."""

    mode: str
    kept: int
    dropped: int
    failed: tuple[GuardLine, ...]
    replaced: tuple[GuardLine, ...]
    relieved: tuple[GuardLine, ...]
    """Moves kept as overload relief (``reason`` says which rules were waived)."""
    overload_threshold: float | None
    target_band: float | None
    average_usage_before: float | None
    free_capacity_share: float | None

    @classmethod
    def of(cls, g: Mapping[str, Any] | None) -> GuardReport | None:
        if not isinstance(g, Mapping):
            return None
        return cls(
            mode=str(g.get("mode", "cut")),
            kept=int(g.get("kept") or 0),
            dropped=int(g.get("dropped") or 0),
            failed=tuple(_guard_line(f) for f in g.get("failed") or () if isinstance(f, Mapping)),
            replaced=tuple(_guard_line(f) for f in g.get("replaced") or () if isinstance(f, Mapping)),
            relieved=tuple(
                _guard_line({**f, "reason": f.get("relief")}) for f in g.get("relieved") or () if isinstance(f, Mapping)
            ),
            overload_threshold=_num(g.get("overloadThreshold")),
            target_band=_num(g.get("targetBand")),
            average_usage_before=_num(g.get("averageUsageBefore")),
            free_capacity_share=_num(g.get("freeCapacityShare")),
        )

    @property
    def removed_everything(self) -> bool:
        return self.mode == "cut" and self.kept == 0 and self.dropped > 0


@dataclass(frozen=True)
class ViolationLine:
    """A bundle whose owner breaks its namespace's placement policy (``rule``: core.pulsar.policies.VIOLATION_RULES)."""

    bundle: str
    broker: str
    rule: str
    why: str
    why_not_moved: str | None = None
    """For a fix plan: why the bundle is not moved (no allowed broker can take it)."""


def _violation_line(v: Mapping[str, Any]) -> ViolationLine:
    return ViolationLine(
        bundle=str(v.get("bundle")),
        broker=str(v.get("broker")),
        rule=str(v.get("rule")),
        why=str(v.get("why") or ""),
        why_not_moved=v.get("whyNotMoved"),
    )


@dataclass(frozen=True)
class PlacementReport:
    """``summary.placement``: the run's placement constraints as the plan was checked against them.

    ``constraints``: unload ``seq`` -> the constraints its move was checked against (texts; empty: none
    applies to its namespace). ``violations``: the compliance view of the run's ownership.
    ``unfixable``: for a ``fix_policy_violations`` plan, the violating bundles it does not move
    (``fix`` is True for such a plan)."""

    empty: bool
    failure_domains_enabled: bool
    constraints: Mapping[int, tuple[str, ...]]
    violations: tuple[ViolationLine, ...]
    fix: bool = False
    unfixable: tuple[ViolationLine, ...] = ()

    @classmethod
    def of(cls, summary: Mapping[str, Any]) -> PlacementReport | None:
        p = summary.get("placement")
        if not isinstance(p, Mapping):
            return None
        fix = summary.get("fixPolicyViolations")
        constraints: dict[int, tuple[str, ...]] = {}
        for seq, cs in (p.get("actions") or {}).items():
            constraints[int(seq)] = tuple(str(c.get("text")) for c in cs or () if isinstance(c, Mapping))
        return cls(
            empty=bool(p.get("empty")),
            failure_domains_enabled=bool(p.get("failureDomainsEnabled")),
            constraints=constraints,
            violations=tuple(_violation_line(v) for v in p.get("violations") or () if isinstance(v, Mapping)),
            fix=isinstance(fix, Mapping),
            unfixable=tuple(
                _violation_line(v)
                for v in (fix.get("unfixable") or () if isinstance(fix, Mapping) else ())
                if isinstance(v, Mapping)
            ),
        )

    def constraints_of(self, seq: int) -> str:
        """One unload's constraints in one line (``; `` between them), or what applied when none did."""
        cs = self.constraints.get(seq)
        if cs is None:
            return "not checked (a split, or no move)"
        if cs:
            return "; ".join(cs)
        return "none (no placement constraint is set for this cluster)" if self.empty else "none for its namespace"


@dataclass(frozen=True)
class PlanSummary:
    unloads: tuple[UnloadLine, ...]
    splits: tuple[SplitLine, ...]
    moved: Totals
    before: Balance | None
    predicted: Balance | None
    measured: Balance | None
    data_quality: DataQuality
    warnings: tuple[PlanWarning, ...]
    action_states: dict[str, int] = field(default_factory=dict)
    why_nothing: tuple[str, ...] = ()  # for a plan without actions: why nothing was planned
    guard: GuardReport | None = None  # None: a plan made before the guard existed
    placement: PlacementReport | None = None  # None: a run that stored no placement constraints

    @property
    def actions(self) -> int:
        return len(self.unloads) + len(self.splits)


def summarize_plan(
    *, summary: Mapping[str, Any] | None, actions: Sequence[Mapping[str, Any]], result: Mapping[str, Any] | None = None
) -> PlanSummary:
    """The review summary of one stored plan.

    Args:
        summary: ``plans.summary`` as planning stored it (``brokers`` with predicted before/after
            usage per broker, ``warnings``, ``notes``, ``dataQuality``).
        actions: the plan's actions as mappings with ``seq``, ``kind``, ``bundle``,
            ``source_broker``, ``destination_broker``, ``boundaries`` (ints), ``split_algorithm``,
            ``predicted`` (JSON) and ``state``.
        result: ``plans.result`` after execution (``broker_usage_after``: measured usage per broker).
    """
    s = summary or {}
    brokers = s.get("brokers") or {}
    unloads: list[UnloadLine] = []
    splits: list[SplitLine] = []
    for a in sorted(actions, key=lambda a: a.get("seq", 0)):
        predicted = a.get("predicted") or {}
        if a.get("kind") == "split":
            splits.append(
                SplitLine(
                    seq=int(a.get("seq", 0)),
                    bundle=str(a.get("bundle")),
                    broker=str(a.get("source_broker")),
                    algorithm=a.get("split_algorithm"),
                    boundaries=tuple(f"0x{int(b):08x}" for b in a.get("boundaries") or ()),
                    children=tuple(str(c) for c in predicted.get("children") or ()),
                    state=str(a.get("state", "pending")),
                )
            )
        else:
            unloads.append(
                UnloadLine(
                    seq=int(a.get("seq", 0)),
                    bundle=str(a.get("bundle")),
                    source=str(a.get("source_broker")),
                    destination=a.get("destination_broker"),
                    traffic=BundleTraffic.from_predicted(predicted),
                    source_usage=_usage_pair(predicted.get("source")),
                    destination_usage=_usage_pair(predicted.get("destination")),
                    state=str(a.get("state", "pending")),
                )
            )
    measured = ((result or {}).get("broker_usage_after")) or {}
    states: dict[str, int] = {}
    for a in actions:
        states[str(a.get("state", "pending"))] = states.get(str(a.get("state", "pending")), 0) + 1
    return PlanSummary(
        unloads=tuple(unloads),
        splits=tuple(splits),
        moved=_totals([u.traffic for u in unloads]),
        before=Balance.of({b: _dig(v, "before", "usage") for b, v in brokers.items()}),
        predicted=Balance.of({b: _dig(v, "after", "usage") for b, v in brokers.items()}),
        measured=Balance.of(measured),
        data_quality=_data_quality(s),
        warnings=tuple(_warnings(s)),
        action_states=dict(sorted(states.items())),
        why_nothing=() if actions else why_nothing_planned(s),
        guard=GuardReport.of(s.get("guard")),
        placement=PlacementReport.of(s),
    )


def why_nothing_planned(summary: Mapping[str, Any]) -> tuple[str, ...]:
    """Why a plan has no action, in plain words: the strategy's verdict and detail (balanced, cooling
    down until when, no destination ...), then every planned move that was dropped and why. When the
    do-no-harm guard removed every planned action, that comes first, with each action's reason."""
    decision = summary.get("decision") or {}
    label, reason, detail = decision.get("label"), decision.get("reason"), decision.get("detail")
    verdict = f"{label} ({reason})" if label and reason else (label or reason or "no verdict recorded")
    lines = [f"{verdict}: {detail}" if detail else str(verdict)]
    guard = GuardReport.of(summary.get("guard"))
    if guard is not None and guard.removed_everything:
        lines = [
            f"the do-no-harm guard removed every planned action ({guard.dropped}): by the brokers' load reports "
            "none can run without harm",
            *(
                f"guard dropped {f.kind} {f.bundle}"
                + (f" {f.source} -> {f.destination}" if f.destination else "")
                + f": {f.reason}"
                for f in guard.failed
            ),
            f"the strategy proposed them: {lines[0]}",
        ]
    lines += [str(n) for n in summary.get("notes") or ()]
    return tuple(lines)


def _totals(traffic: Sequence[BundleTraffic]) -> Totals:
    fields = (
        "msg_rate_in",
        "msg_rate_out",
        "msg_throughput_in",
        "msg_throughput_out",
        "topics",
        "producers",
        "consumers",
    )
    sums = {f: sum(getattr(t, f) or 0 for t in traffic) for f in fields}
    unknown = tuple(f for f in fields if any(getattr(t, f) is None for t in traffic))
    return Totals(
        msg_rate_in=float(sums["msg_rate_in"]),
        msg_rate_out=float(sums["msg_rate_out"]),
        msg_throughput_in=float(sums["msg_throughput_in"]),
        msg_throughput_out=float(sums["msg_throughput_out"]),
        topics=int(sums["topics"]),
        producers=int(sums["producers"]),
        consumers=int(sums["consumers"]),
        unknown=unknown,
    )


def _data_quality(s: Mapping[str, Any]) -> DataQuality:
    dq = s.get("dataQuality") or {}
    return DataQuality(
        brokers_reporting=_int(dq.get("brokersReporting", len(s["brokers"]) if s.get("brokers") else None)),
        brokers_owning_bundles=_int(dq.get("brokersOwningBundles")),
        bundle_samples=_int(dq.get("bundleSamples")),
        bundles_owned=_int(dq.get("bundlesOwned")),
    )


def _warnings(s: Mapping[str, Any]) -> list[PlanWarning]:
    """``summary.warnings`` (strings or objects with kind/code and message), then unsplittable hot bundles."""
    out: list[PlanWarning] = []
    for w in s.get("warnings") or ():
        if isinstance(w, Mapping):
            kind = str(w.get("kind") or w.get("code") or w.get("type") or "warning")
            message = str(
                w.get("message")
                or w.get("text")
                or w.get("detail")
                or {k: v for k, v in w.items() if k not in ("kind", "code", "type")}
            )
        else:
            kind, message = "warning", str(w)
        out.append(PlanWarning(kind=kind, message=message))
    seen = {w.message for w in out}
    for note in s.get("notes") or ():
        if isinstance(note, str) and note.startswith(UNSPLITTABLE_PREFIX) and note not in seen:
            out.append(PlanWarning(kind="unsplittable-hot-bundle", message=note))
    return out


def _usage_pair(side: Mapping[str, Any] | None) -> tuple[float | None, float | None]:
    side = side or {}
    return _num(side.get("before")), _num(side.get("after"))


def _dig(obj: Any, *keys: str) -> float | None:
    for k in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(k)
    return _num(obj)


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _int(x: Any) -> int | None:
    return int(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
