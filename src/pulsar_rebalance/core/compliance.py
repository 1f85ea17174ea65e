"""Compliance with Pulsar's placement constraints: what a move is checked against, and the fix plan (pure).

* :func:`describe_constraints` - the constraints a move of a bundle is checked against (its namespace's
  isolation policy or the shared-broker rule, its anti-affinity group), in words for the plan page and
  ``plans show``: the do-no-harm guard applies exactly these (:class:`~pulsar_rebalance.core.pulsar.policies.DestinationFilter`).
* :func:`fix_plan` - the moves that bring the bundles :func:`~pulsar_rebalance.core.pulsar.policies.violations`
  reports back under their namespace's policies, with as few moves as possible: a bundle that is fine
  is never moved, a violating bundle moves once, and an anti-affinity violation another move already
  resolved (the other namespace left the broker) is not moved. Each move goes to the least used broker
  the bundle's policies allow (its isolation rule, then Pulsar's anti-affinity filter counted over the
  ownership with the moves so far applied); a bundle with no such broker is reported, not moved.

Order: isolation violations first (they must move whatever the rest does), then anti-affinity
violations, the namespace with the fewest bundles on the shared broker (or failure domain) first - so
that when two namespaces of a group share a broker, the smaller one leaves and the other stays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulsar_rebalance.core.prediction import LoadState, Move
from pulsar_rebalance.core.pulsar.policies import (
    DEFAULT_DOMAIN,
    DestinationFilter,
    PlacementPolicies,
    Violation,
    apply_namespace_policies,
    violations,
)
from pulsar_rebalance.core.pulsar.shedders.base import namespace_of

FIX_REASON_PREFIX = "policy violation: "
"""A fix plan's moves' reasons start with this."""

NOTHING_TO_FIX = "no bundle breaks its namespace's policies"
"""Why a fix plan is empty when no bundle violates."""


@dataclass(frozen=True, slots=True)
class Constraint:
    """One constraint a move was checked against: ``rule`` (the guard's rule name) and ``text``."""

    rule: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule, "text": self.text}


def describe_constraints(
    bundle: str, policies: PlacementPolicies, *, failure_domains_enabled: bool = False
) -> list[Constraint]:
    """The constraints a move of ``bundle`` is checked against (empty: none applies to its namespace).

    * ``isolation-policy`` - the namespace's isolation policy (its primaries, and its secondaries when
      fewer than ``min_limit`` primaries are available), or, when other namespaces have policies and this
      one has none, the shared brokers only;
    * ``anti-affinity-group`` - the namespace's group and the group's other namespaces (spread over
      failure domains with ``failure_domains_enabled`` and domains defined).
    """
    if policies.empty:
        return []
    ns = namespace_of(bundle)
    out: list[Constraint] = []
    policy = policies.policy_for(ns) if policies.isolation else None
    if policy is not None:
        text = f"isolation policy {policy.name!r}: primary {', '.join(p.pattern for p in policy.primary)}"
        if policy.secondary:
            text += (
                f"; secondary {', '.join(p.pattern for p in policy.secondary)} when fewer than "
                f"min_limit={policy.auto_failover_policy.min_limit} primaries are available"
            )
        out.append(Constraint("isolation-policy", text))
    elif policies.isolation:
        names = ", ".join(repr(p.name) for p in policies.isolation)
        out.append(
            Constraint(
                "isolation-policy",
                f"no isolation policy for {ns}: shared brokers only (not a primary of {names})",
            )
        )
    group = policies.anti_affinity_group(ns)
    if group is not None:
        others = sorted(n for n in policies.group_namespaces(group) if n != ns)
        text = f"anti-affinity group {group!r}" + (f" (with {', '.join(others)})" if others else "")
        if failure_domains_enabled and policies.failure_domains:
            text += ", spread over failure domains"
        out.append(Constraint("anti-affinity-group", text))
    return out


@dataclass(frozen=True, slots=True)
class FixMove:
    """One move of the fix plan: ``bundle`` from ``source`` to ``destination``, fixing ``violation``."""

    bundle: str
    source: str
    destination: str
    violation: Violation
    chosen: str
    """How the destination was chosen (least used among how many allowed)."""

    @property
    def reason(self) -> str:
        v = self.violation
        return f"{FIX_REASON_PREFIX}{v.rule}: {v.why}; destination: {self.chosen}"

    def to_move(self) -> Move:
        return Move(bundle=self.bundle, source=self.source, destination=self.destination)


@dataclass(frozen=True, slots=True)
class Unfixable:
    """A violating bundle left where it is: no live broker its policies allow can take it."""

    violation: Violation
    why: str

    @property
    def message(self) -> str:
        v = self.violation
        return f"{v.bundle} on {v.broker} breaks {v.rule} and is not moved: {self.why}"


@dataclass(frozen=True)
class FixPlan:
    violations: tuple[Violation, ...]
    """Every violation found (a bundle may break two rules)."""
    moves: tuple[FixMove, ...]
    unfixable: tuple[Unfixable, ...]
    resolved: tuple[Violation, ...]
    """Anti-affinity violations an earlier move of the plan resolved: not moved."""

    @property
    def empty(self) -> bool:
        return not self.moves

    def why_empty(self) -> str:
        if not self.violations:
            return NOTHING_TO_FIX
        return (
            f"{len({v.bundle for v in self.violations})} bundle(s) break their namespace's policies, "
            "and none can move to a broker the policies allow"
        )


def fix_plan(
    owners: Mapping[str, str],
    policies: PlacementPolicies,
    brokers: Sequence[str],
    *,
    load: LoadState | None = None,
    failure_domains_enabled: bool = False,
    persistent_enabled: Callable[[str], bool] | None = None,
) -> FixPlan:
    """The fewest moves that put every violating bundle of ``owners`` (bundle -> broker) on a broker its
    namespace's policies allow, among the available ``brokers`` (see the module docstring).

    "Least used": with ``load`` (the brokers' load reports), the weighted max usage with the plan's
    moves so far applied (a bundle without a sample moves no load); without, the fewest bundles owned.
    Ties go to the first broker in ``brokers`` order.
    """
    found = violations(owners, policies, brokers, failure_domains_enabled, persistent_enabled)
    if not found:
        return FixPlan((), (), (), ())
    live = list(brokers)
    cur = {b: o for b, o in owners.items()}
    owned: dict[str, set[str]] = {b: set() for b in live}
    for b, o in cur.items():
        if o in owned:
            owned[o].add(b)
    state = load.copy() if load is not None else None
    domains = policies.broker_to_domain if failure_domains_enabled else {}

    def unit(broker: str) -> str:
        return domains.get(broker, DEFAULT_DOMAIN) if domains else broker

    def used(broker: str) -> float:
        if state is not None and broker in state.state:
            return state.usage(broker)
        if state is not None:
            return float("inf")  # no load report: never preferred
        return float(len(owned.get(broker, ())))

    first: dict[str, Violation] = {}
    for v in found:  # isolation before anti-affinity for one bundle (violations() reports in that order)
        first.setdefault(v.bundle, v)

    def on_unit(v: Violation) -> int:
        ns, u = namespace_of(v.bundle), unit(v.broker)
        return sum(1 for b, o in cur.items() if o in owned and namespace_of(b) == ns and unit(o) == u)

    isolation = [v for v in first.values() if v.rule != "anti-affinity-group"]
    affinity = sorted(
        (v for v in first.values() if v.rule == "anti-affinity-group"),
        key=lambda v: (on_unit(v), namespace_of(v.bundle)),
    )
    check = DestinationFilter(
        policies, owned, failure_domains_enabled=failure_domains_enabled, persistent_enabled=persistent_enabled
    )
    moves: list[FixMove] = []
    unfixable: list[Unfixable] = []
    resolved: list[Violation] = []
    for v in [*isolation, *affinity]:
        bundle, source, ns = v.bundle, v.broker, namespace_of(v.bundle)
        group = policies.anti_affinity_group(ns)
        members = set(policies.group_namespaces(group)) if group is not None else set()
        if v.rule == "anti-affinity-group" and not _still_violates(
            bundle, cur, members, policies, live, failure_domains_enabled, persistent_enabled
        ):
            resolved.append(v)
            continue
        allowed = [b for b in apply_namespace_policies(bundle, policies, live, persistent_enabled) if b != source]
        if not allowed:
            unfixable.append(Unfixable(v, "no other live broker is allowed by its namespace's isolation rule"))
            continue
        permitted = [b for b in allowed if check.permits(bundle, source, b)]
        if members:
            others = members - {ns}
            taken = {unit(o) for b, o in cur.items() if o in owned and namespace_of(b) in others}
            free = [b for b in permitted if unit(b) not in taken]
        else:
            free = permitted
        pool = free if (free or v.rule == "anti-affinity-group") else permitted
        if not pool:
            unfixable.append(
                Unfixable(
                    v,
                    f"each of the {len(allowed)} broker(s) its isolation rule allows already holds another "
                    f"namespace of anti-affinity group {group!r}"
                    + (" (in its failure domain)" if domains else "")
                    + " or is refused by Pulsar's anti-affinity filter",
                )
            )
            continue
        dest = min(pool, key=lambda b: (used(b), live.index(b)))
        basis = "usage" if state is not None else "bundles owned"
        chosen = f"{dest}, the least used ({basis}) of {len(pool)} broker(s) its namespace's policies allow"
        moves.append(FixMove(bundle, source, dest, v, chosen))
        cur[bundle] = dest
        owned[source].discard(bundle)
        owned[dest].add(bundle)
        check.moved(bundle, source, dest)
        if state is not None:
            state.apply(Move(bundle=bundle, source=source, destination=dest))
    return FixPlan(tuple(found), tuple(moves), tuple(unfixable), tuple(resolved))


def _still_violates(
    bundle: str,
    cur: Mapping[str, str],
    members: set[str],
    policies: PlacementPolicies,
    brokers: Sequence[str],
    failure_domains_enabled: bool,
    persistent_enabled: Callable[[str], bool] | None,
) -> bool:
    """Whether ``bundle`` still breaks its anti-affinity group in the ownership ``cur`` (only the group's
    bundles matter)."""
    sub = {b: o for b, o in cur.items() if namespace_of(b) in members}
    return any(
        v.bundle == bundle and v.rule == "anti-affinity-group"
        for v in violations(sub, policies, brokers, failure_domains_enabled, persistent_enabled)
    )


def violation_to_json(v: Violation) -> dict[str, Any]:
    return {"bundle": v.bundle, "broker": v.broker, "rule": v.rule, "why": v.why}


__all__ = [
    "FIX_REASON_PREFIX",
    "NOTHING_TO_FIX",
    "Constraint",
    "FixMove",
    "FixPlan",
    "Unfixable",
    "describe_constraints",
    "fix_plan",
    "violation_to_json",
]
