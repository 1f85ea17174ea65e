"""Plan modes beyond "rebalance": **drain** brokers and **fill** brokers (pure).

* :func:`drain_plan` - every bundle owned by the brokers to drain moves off them, once, heaviest first,
  each to the broker that is least used *after* the move (predicted with :class:`LoadState`, the moves
  so far applied) among the brokers its namespace's placement policies allow, never to another drained
  or a cordoned broker. A bundle with no allowed destination stays and is reported (it would have to
  move to a broker its isolation policy forbids). What Kafka operators call ``remove-brokers``.
* :func:`fill_plan` - load moves only *onto* the brokers to fill (new, empty or light ones), from the
  busiest other brokers, until each broker to fill reaches the cluster's average usage (within
  ``tolerance``) or no bundle fits: a move is taken only when the filled broker stays at or below the
  average plus ``tolerance`` and the source does not fall below the average minus ``tolerance``. No
  bundle moves between the other brokers. Cruise Control's ``add-brokers``.

Both return ordinary moves (``source -> destination`` with a reason); the pipeline puts them through the
do-no-harm guard like any plan's (a drain the guard cuts - a destination would pass the overload
threshold or take more than its share of free capacity - is finished by the next drain run) and the
approval gate. Deviation from Pulsar: Pulsar has no drain or fill; destinations here are chosen by
predicted usage (the least used allowed broker), not by the configured placement strategy, so that a
drain never piles bundles onto one broker between two load reports.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from pulsar_rebalance.core.prediction import LoadState, Move
from pulsar_rebalance.core.pulsar.policies import (
    NO_POLICIES,
    DestinationFilter,
    PlacementPolicies,
    apply_namespace_policies,
)

MODES = ("rebalance", "drain", "fill")
"""The DAG's ``mode`` param: ``rebalance`` is the configured strategy's plan."""

FILL_TOLERANCE = 0.05
"""A filled broker counts as filled within this many points (fraction) of the cluster's average."""


@dataclass(frozen=True, slots=True)
class ModeMove:
    bundle: str
    source: str
    destination: str
    reason: str

    def to_move(self) -> Move:
        return Move(bundle=self.bundle, source=self.source, destination=self.destination)


@dataclass(frozen=True, slots=True)
class LeftBundle:
    """A bundle the mode wanted to move but could not (and why)."""

    bundle: str
    broker: str
    why: str

    @property
    def message(self) -> str:
        return f"{self.bundle} stays on {self.broker}: {self.why}"


@dataclass(frozen=True)
class ModePlan:
    mode: str
    brokers: tuple[str, ...]
    """The brokers drained or filled."""
    moves: tuple[ModeMove, ...]
    left: tuple[LeftBundle, ...]
    """Bundles a drain cannot move."""
    detail: str
    """One line for the plan's decision: what was asked and what the plan does."""
    warnings: tuple[str, ...] = ()
    """What the reviewer must know: bundles left, brokers a fill could not bring to the average."""

    @property
    def empty(self) -> bool:
        return not self.moves


def _owned(owners: Mapping[str, str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for bundle, broker in owners.items():
        out.setdefault(broker, set()).add(bundle)
    return out


def _filter(
    policies: PlacementPolicies,
    owned: dict[str, set[str]],
    failure_domains_enabled: bool,
    persistent_enabled: Callable[[str], bool] | None,
) -> DestinationFilter:
    return DestinationFilter(
        policies, owned, failure_domains_enabled=failure_domains_enabled, persistent_enabled=persistent_enabled
    )


def _weight(load: LoadState, broker: str, bundle: str) -> float:
    """A bundle's traffic (msg/s in + out) in its broker's report; 0 without a sample."""
    data = load.parsed.get(broker)
    s = data.last_stats.get(bundle) if data is not None else None
    return (s.msg_rate_in + s.msg_rate_out) if s is not None else 0.0


def drain_plan(
    owners: Mapping[str, str],
    load: LoadState,
    drained: Sequence[str],
    *,
    cordoned: Collection[str] = (),
    policies: PlacementPolicies = NO_POLICIES,
    failure_domains_enabled: bool = False,
    persistent_enabled: Callable[[str], bool] | None = None,
) -> ModePlan:
    """Move every bundle of ``owners`` (bundle -> broker) owned by a ``drained`` broker to the least used
    allowed broker after the move (see the module docstring). Brokers without a load report are never
    destinations; a bundle without a sample moves no predicted load (it still moves)."""
    drained_set = set(drained)
    state = load.copy()
    targets = [b for b in state.state if b not in drained_set and b not in cordoned]
    order = {b: i for i, b in enumerate(targets)}
    owned = _owned(owners)
    check = _filter(policies, owned, failure_domains_enabled, persistent_enabled)
    bundles = sorted(
        ((b, o) for b, o in owners.items() if o in drained_set),
        key=lambda bo: (-_weight(load, bo[1], bo[0]), bo[0]),
    )
    moves: list[ModeMove] = []
    left: list[LeftBundle] = []
    for bundle, source in bundles:
        allowed = apply_namespace_policies(bundle, policies, targets, persistent_enabled)
        pool = [b for b in allowed if check.permits(bundle, source, b)] or allowed
        if not pool:
            why = (
                "no broker that is not drained or cordoned is allowed by its namespace's isolation policy"
                if targets
                else "every other broker is drained, cordoned or sent no load report"
            )
            left.append(LeftBundle(bundle, source, why))
            continue

        def after(d: str, bundle: str = bundle, source: str = source) -> tuple[float, int]:
            both = state.usage_after(Move(bundle=bundle, source=source, destination=d))
            return (both[1] if both is not None else state.usage(d)), order[d]

        dest = min(pool, key=after)
        predicted = after(dest)[0]
        state.apply(Move(bundle=bundle, source=source, destination=dest))
        check.moved(bundle, source, dest)
        moves.append(
            ModeMove(
                bundle,
                source,
                dest,
                f"drain {source}: to {dest}, the least used after the move ({predicted:.1%}) of {len(pool)} "
                "allowed broker(s) that are not drained or cordoned",
            )
        )
    asked = ", ".join(drained)
    detail = (
        f"drain {asked}: {len(bundles)} bundle(s) owned, {len(moves)} move(s), {len(left)} cannot move"
        if bundles
        else f"drain {asked}: they own no bundle"
    )
    return ModePlan("drain", tuple(drained), tuple(moves), tuple(left), detail, tuple(x.message for x in left))


def fill_plan(
    owners: Mapping[str, str],
    load: LoadState,
    filled: Sequence[str],
    *,
    cordoned: Collection[str] = (),
    policies: PlacementPolicies = NO_POLICIES,
    failure_domains_enabled: bool = False,
    persistent_enabled: Callable[[str], bool] | None = None,
    tolerance: float = FILL_TOLERANCE,
    max_moves: int = 1000,
) -> ModePlan:
    """Move load from the busiest other brokers onto the ``filled`` brokers until each reaches the
    cluster's average usage within ``tolerance`` (see the module docstring)."""
    state = load.copy()
    usages = state.usages()
    average = sum(usages.values()) / len(usages) if usages else 0.0
    filled_set = set(filled)
    fill = [b for b in filled if b in state.state and b not in cordoned]
    sources = [b for b in state.state if b not in filled_set and b not in cordoned]
    owned = _owned(owners)
    check = _filter(policies, owned, failure_domains_enabled, persistent_enabled)
    moved: set[str] = set()
    moves: list[ModeMove] = []
    while len(moves) < max_moves:
        hungry = [b for b in fill if state.usage(b) < average - tolerance]
        if not hungry:
            break
        dest = min(hungry, key=lambda b: (state.usage(b), fill.index(b)))
        best: tuple[str, str, float] | None = None  # (bundle, source, destination usage after)
        for source in sorted(sources, key=lambda b: -state.usage(b)):
            if state.usage(source) <= average:
                break
            # the biggest bundle of the busiest source that fits: the fewest moves to the average
            for bundle in sorted(owned.get(source, ()), key=lambda n: (-_weight(load, source, n), n)):
                if bundle in moved or _weight(load, source, bundle) <= 0:
                    continue
                if dest not in apply_namespace_policies(bundle, policies, [dest], persistent_enabled):
                    continue
                if not check.permits(bundle, source, dest):
                    continue
                both = state.usage_after(Move(bundle=bundle, source=source, destination=dest))
                if both is None:
                    continue
                src_after, dst_after = both
                if dst_after > average + tolerance or src_after < average - tolerance:
                    continue
                best = (bundle, source, dst_after)
                break
            if best is not None:
                break
        if best is None:
            break
        bundle, source, dst_after = best
        state.apply(Move(bundle=bundle, source=source, destination=dest))
        check.moved(bundle, source, dest)
        owned[source].discard(bundle)
        owned.setdefault(dest, set()).add(bundle)
        moved.add(bundle)
        moves.append(
            ModeMove(
                bundle,
                source,
                dest,
                f"fill {dest}: from {source}, the busiest broker with a bundle that fits; {dest} predicted at "
                f"{dst_after:.1%} (cluster average {average:.1%})",
            )
        )
    warnings = [
        f"{b} is predicted at {state.usage(b):.1%} after this plan, below the cluster average {average:.1%} "
        f"- {tolerance:.0%}: no bundle of a busier broker fits without passing the average"
        for b in fill
        if state.usage(b) < average - tolerance
    ]
    skipped = [b for b in filled if b not in fill]
    warnings += [f"{b} is not filled: it is cordoned or sent no load report" for b in skipped]
    detail = (
        f"fill {', '.join(filled)} to the cluster average {average:.1%} (within {tolerance:.0%}): {len(moves)} move(s)"
    )
    return ModePlan("fill", tuple(filled), tuple(moves), (), detail, tuple(warnings))


__all__ = ["FILL_TOLERANCE", "MODES", "LeftBundle", "ModeMove", "ModePlan", "drain_plan", "fill_plan"]
