"""Pulsar's placement constraints: namespace isolation policies, anti-affinity groups, failure domains (pure).

The three inputs, in the JSON shapes of the admin endpoints that return them (so a caller passes the
responses through unchanged):

* ``namespaceIsolationPolicies`` - ``GET /admin/v2/clusters/{cluster}/namespaceIsolationPolicies``:
  ``{policyName: NamespaceIsolationData}`` with ``namespaces`` (regexes), ``primary`` and ``secondary``
  (broker host regexes), ``auto_failover_policy`` (``{"policy_type": "min_available", "parameters":
  {"min_limit": "1", "usage_threshold": "80"}}``) and the optional ``unload_scope``.
* ``failureDomains`` - ``GET /admin/v2/clusters/{cluster}/failureDomains``: ``{domainName: {"brokers":
  [brokerId]}}``.
* ``antiAffinityGroups`` - one ``GET /admin/v2/namespaces/{tenant}/{namespace}/antiAffinity`` per
  namespace (its response is the group name, a string): ``{"tenant/namespace": group}``. A blank group
  is no group (``StringUtils.isBlank``).

The functions reproduce Pulsar's (newest stored sources; names as in Pulsar):

* :func:`apply_namespace_policies` - ``LoadManagerShared.applyNamespacePolicies``: with an isolation
  policy for the namespace, the brokers whose host matches ``primary``, plus those matching
  ``secondary`` when ``shouldFailoverToSecondaries`` (``MinAvailablePolicy``: primaries found
  ``< min_limit``); without one, the *shared* brokers (primary in no policy) that enable persistent topics.
* :func:`filter_anti_affinity_group_owned_brokers` (+ ``filterDomainsNotHavingLeastNumberAntiAffinityNamespaces``
  when ``failureDomainsEnabled``) and :func:`should_anti_affinity_namespace_unload`.
* :func:`should_namespace_policies_unload` - ``ModularLoadManagerImpl.shouldNamespacePoliciesUnload``.
* :class:`DestinationFilter` - ours: the rule the do-no-harm guard and the GlobalPlanner apply to a move
  (a destination Pulsar's own placement would not choose for the bundle is refused).

Deviations (each deliberate): Pulsar iterates the policies map and the broker sets in ``HashMap``
order; we use the input order (the first policy whose ``namespaces`` match wins, as in
``getPolicyByNamespace``). A broker matches a ``primary``/``secondary`` regex by its host (Pulsar's
``brokerHost``) or by its whole id ``host:port`` (what the newest stored
``BrokerIsolationPoliciesFilterTest`` expects; the source of that change is not stored). Regexes are Python's ``re.fullmatch`` (Java's ``String.matches``); the
simple patterns Pulsar's docs use (``broker-.*``, ``tenant/ns.*``) mean the same in both. Pulsar's
``parseBrokerHost`` skips a broker id without ``:port`` (every real broker id has one); we take the whole
id as the host, so test data with port-less ids keeps working. ``usage_threshold`` is parsed and
validated but, as in ``applyNamespacePolicies`` (which calls ``shouldFailover(int)``), not used. A bundle
is treated as holding persistent topics (``NamespaceBundle.hasNonPersistentTopic`` is false for the
bundles ``doLoadShedding`` and the lookups by bundle name build).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_DOMAIN = "default"
"""``LoadManagerShared.DEFAULT_DOMAIN``: the failure domain of a broker listed in none."""

UNLOAD_SCOPES = ("all_matching", "changed", "none")
_INT_MAX = 2**31 - 1
"""``NamespaceIsolationPolicyUnloadScope`` values."""


def _namespace(bundle: str) -> str:
    """``getNamespaceNameFromBundleName``: everything before the last ``/``."""
    return bundle.rpartition("/")[0]


# ---------------------------------------------------------------------------------------------
# Types (read from the admin API's JSON by core.contract.policies_json)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MinAvailablePolicy:
    """``auto_failover_policy`` (``AutoFailoverPolicyData``): Pulsar knows one type, ``min_available``."""

    min_limit: int
    usage_threshold: int

    def should_failover_to_secondary(self, total_primary_candidates: int) -> bool:
        """``MinAvailablePolicy.shouldFailoverToSecondary(int)``: ``totalPrimaryCandidates < min_limit``."""
        return total_primary_candidates < self.min_limit

    def to_json(self) -> dict[str, Any]:
        return {
            "policy_type": "min_available",
            "parameters": {"min_limit": str(self.min_limit), "usage_threshold": str(self.usage_threshold)},
        }


def _matches(patterns: Iterable[re.Pattern[str]], value: str) -> bool:
    """``matchesBrokerRegex`` / ``matchNamespaces``: any pattern matching the whole string (``String.matches``)."""
    return any(p.fullmatch(value) is not None for p in patterns)


@dataclass(frozen=True, slots=True)
class NamespaceIsolationPolicy:
    """One ``NamespaceIsolationData`` (``NamespaceIsolationPolicyImpl``): compiled regexes."""

    name: str
    namespaces: tuple[re.Pattern[str], ...]
    primary: tuple[re.Pattern[str], ...]
    secondary: tuple[re.Pattern[str], ...]
    auto_failover_policy: MinAvailablePolicy
    unload_scope: str | None = None

    def matches_namespace(self, namespace: str) -> bool:
        return _matches(self.namespaces, namespace)

    def is_primary_broker(self, host: str) -> bool:
        return _matches(self.primary, host)

    def is_secondary_broker(self, host: str) -> bool:
        return _matches(self.secondary, host)

    def is_primary(self, broker_id: str) -> bool:
        """Primary by its host (``isPrimaryBroker(namespace, brokerHost)``) or by its id ``host:port``
        (the newest ``BrokerIsolationPoliciesFilterTest.testFilterWithNamespaceIsolationPoliciesUsingBrokerIds``:
        "policies reference brokers by broker id (host:port), as listed by `pulsar-admin brokers list`")."""
        return self.is_primary_broker(parse_broker_host(broker_id)) or self.is_primary_broker(broker_id)

    def is_secondary(self, broker_id: str) -> bool:
        """Secondary by its host or by its id (see :meth:`is_primary`)."""
        return self.is_secondary_broker(parse_broker_host(broker_id)) or self.is_secondary_broker(broker_id)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespaces": [p.pattern for p in self.namespaces],
            "primary": [p.pattern for p in self.primary],
            "secondary": [p.pattern for p in self.secondary],
            "auto_failover_policy": self.auto_failover_policy.to_json(),
        }
        if self.unload_scope is not None:
            out["unload_scope"] = self.unload_scope
        return out


@dataclass(frozen=True)
class PlacementPolicies:
    """The cluster's placement constraints (all three optional; empty = none, Pulsar's default)."""

    isolation: tuple[NamespaceIsolationPolicy, ...] = ()
    """In input order: ``getPolicyByNamespace`` returns the first match."""
    failure_domains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """domain name -> broker ids."""
    anti_affinity_groups: Mapping[str, str] = field(default_factory=dict)
    """namespace -> its (non-blank) anti-affinity group."""
    _by_namespace: dict[str, NamespaceIsolationPolicy | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def empty(self) -> bool:
        return not (self.isolation or self.failure_domains or self.anti_affinity_groups)

    @property
    def broker_to_domain(self) -> dict[str, str]:
        """``refreshBrokerToFailureDomainMap``: each domain's brokers, a later domain winning a broker listed twice."""
        out: dict[str, str] = {}
        for domain, brokers in self.failure_domains.items():
            for b in brokers:
                out[b] = domain
        return out

    def policy_for(self, namespace: str) -> NamespaceIsolationPolicy | None:
        """``NamespaceIsolationPolicies.getPolicyByNamespace`` (cached per namespace)."""
        if namespace in self._by_namespace:
            return self._by_namespace[namespace]
        found = next((p for p in self.isolation if p.matches_namespace(namespace)), None)
        self._by_namespace[namespace] = found
        return found

    def has_isolation_policy(self, namespace: str) -> bool:
        """``areIsolationPoliciesPresent``."""
        return bool(self.isolation) and self.policy_for(namespace) is not None

    def anti_affinity_group(self, namespace: str) -> str | None:
        """``getNamespaceAntiAffinityGroup``: the group, or None when absent or blank."""
        return self.anti_affinity_groups.get(namespace)

    def has_policies(self, namespace: str) -> bool:
        """``TopKBundles.hasPolicies`` / ``isLoadBalancerSheddingBundlesWithPoliciesEnabled``'s test."""
        return self.has_isolation_policy(namespace) or self.anti_affinity_group(namespace) is not None

    def is_shared_broker(self, broker_id: str) -> bool:
        """``NamespaceIsolationPolicies.isSharedBroker``: primary in no policy (true when there are none)."""
        return not any(p.is_primary(broker_id) for p in self.isolation)

    def group_namespaces(self, group: str) -> list[str]:
        """The namespaces whose group equals ``group`` ignoring case (``equalsIgnoreCase``)."""
        g = group.lower()
        return [ns for ns, other in self.anti_affinity_groups.items() if other.lower() == g]

    def with_fields(
        self,
        isolation: tuple[NamespaceIsolationPolicy, ...] | None = None,
        failure_domains: Mapping[str, tuple[str, ...]] | None = None,
        anti_affinity_groups: Mapping[str, str] | None = None,
    ) -> PlacementPolicies:
        """A copy with the given fields replaced (a cycle's fields over the document's)."""
        return PlacementPolicies(
            self.isolation if isolation is None else isolation,
            self.failure_domains if failure_domains is None else failure_domains,
            self.anti_affinity_groups if anti_affinity_groups is None else anti_affinity_groups,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "namespaceIsolationPolicies": {p.name: p.to_json() for p in self.isolation},
            "failureDomains": {d: {"brokers": list(b)} for d, b in self.failure_domains.items()},
            "antiAffinityGroups": dict(self.anti_affinity_groups),
        }


NO_POLICIES = PlacementPolicies()

"""The contract's field names (top level of a ``decide`` document, or per cycle)."""


# ---------------------------------------------------------------------------------------------
# LoadManagerShared
# ---------------------------------------------------------------------------------------------
def parse_broker_host(broker_id: str) -> str:
    """``LoadManagerShared.parseBrokerHost``: the id before its last ``:`` ("use last index to support
    ipv6 addresses"). Pulsar skips an id without ``:``; we take the whole id (module docstring)."""
    idx = broker_id.rfind(":")
    return broker_id[:idx] if idx > -1 else broker_id


def apply_namespace_policies(
    bundle: str,
    policies: PlacementPolicies,
    available: Iterable[str],
    persistent_enabled: Callable[[str], bool] | None = None,
) -> list[str]:
    """``LoadManagerShared.applyNamespacePolicies``: the brokers of ``available`` (their order kept) that
    may own ``bundle``.

    With an isolation policy for the bundle's namespace: the primaries (host matches ``primary``), plus
    the secondaries (host matches ``secondary``, checked only for a broker that is not primary) when
    ``shouldFailoverToSecondaries(namespace, primaries.size())``. Without one: the brokers that enable
    persistent topics (``isEnablePersistentTopics``, ``persistent_enabled``; all when None) and are
    shared (``isSharedBroker``: primary in no policy).
    """
    namespace = _namespace(bundle)
    policy = policies.policy_for(namespace) if policies.isolation else None
    if policy is None:
        return [
            b
            for b in available
            if (persistent_enabled is None or persistent_enabled(b)) and policies.is_shared_broker(b)
        ]
    primaries: list[str] = []
    order: list[str] = []
    for b in available:
        if policy.is_primary(b):
            primaries.append(b)
            order.append(b)
        elif policy.is_secondary(b):
            order.append(b)
    if policy.auto_failover_policy.should_failover_to_secondary(len(primaries)):
        return order
    return primaries


def anti_affinity_namespace_counts(
    namespace: str,
    policies: PlacementPolicies,
    broker_namespaces: Callable[[str], Mapping[str, Collection[str]]],
) -> dict[str, int] | None:
    """``getAntiAffinityNamespaceOwnedBrokers`` (modular, over ``brokerToNamespaceToBundleRange``): per
    broker, how many namespaces of ``namespace``'s anti-affinity group it owns bundles of (the namespace
    itself included); None when the namespace has no group (nothing is filtered then).

    ``broker_namespaces(ns)`` gives broker -> the bundles of ``ns`` it owns or has preallocated.
    """
    group = policies.anti_affinity_group(namespace)
    if group is None:
        return None
    counts: dict[str, int] = {}
    for ns in policies.group_namespaces(group):
        for broker, bundles in broker_namespaces(ns).items():
            if bundles:
                counts[broker] = counts.get(broker, 0) + 1
    return counts


def anti_affinity_bundle_counts(
    namespace: str, policies: PlacementPolicies, owned: Mapping[str, Collection[str]] | None
) -> dict[str, int] | None:
    """``getAntiAffinityNamespaceOwnedBrokers`` (extensible, over the channel's ownership entries): per
    broker, how many *bundles* in state Owned belong to a namespace of the group (each bundle counts,
    unlike the modular form, which counts namespaces). ``owned``: broker -> bundles (None: unknown, none)."""
    group = policies.anti_affinity_group(namespace)
    if group is None:
        return None
    members = set(policies.group_namespaces(group))
    counts: dict[str, int] = {}
    for broker, bundles in (owned or {}).items():
        n = sum(1 for b in bundles if _namespace(b) in members)
        if n:
            counts[broker] = n
    return counts


def filter_domains_not_having_least_number_anti_affinity_namespaces(
    counts: Mapping[str, int], candidates: Sequence[str], broker_to_domain: Mapping[str, str]
) -> list[str]:
    """``filterDomainsNotHavingLeastNumberAntiAffinityNamespaces``: sum the counts per failure domain
    (brokers in none are in ``default``) over the candidates; keep the brokers of the domains with the
    least. Nothing is filtered when no failure domain is defined."""
    if not broker_to_domain:
        return list(candidates)
    per_domain: dict[str, int] = {}
    for b in candidates:
        d = broker_to_domain.get(b, DEFAULT_DOMAIN)
        per_domain[d] = per_domain.get(d, 0) + counts.get(b, 0)
    least = min(per_domain.values(), default=_INT_MAX)
    return [b for b in candidates if per_domain.get(broker_to_domain.get(b, DEFAULT_DOMAIN), least) == least]


def filter_anti_affinity_group_owned_brokers(
    candidates: Sequence[str],
    counts: Mapping[str, int] | None,
    broker_to_domain: Mapping[str, str],
    failure_domains_enabled: bool,
) -> list[str]:
    """``LoadManagerShared.filterAntiAffinityGroupOwnedBrokers``: with ``failureDomainsEnabled`` first the
    domains with the fewest group namespaces; then, within them, the brokers owning the fewest (a broker
    absent from ``counts`` owns none). ``counts`` None (no group): nothing is filtered."""
    if not candidates or counts is None:
        return list(candidates)
    cands = list(candidates)
    if failure_domains_enabled:
        cands = filter_domains_not_having_least_number_anti_affinity_namespaces(counts, cands, broker_to_domain)
    least = _INT_MAX
    for b in cands:
        if b not in counts:
            least = 0
            break
        least = min(least, counts[b])
    if least == 0:
        return [b for b in cands if counts.get(b, 0) <= 0]
    return [b for b in cands if counts.get(b) == least]


def should_anti_affinity_namespace_unload(
    current_broker: str, candidates: Collection[str], counts: Mapping[str, int] | None
) -> bool:
    """``LoadManagerShared.shouldAntiAffinityNamespaceUnload``: unload only if the bundle can land on
    another broker - some candidate owns no group namespace, or fewer than the current broker; false
    when every candidate owns the same number."""
    if not counts:
        return True
    least = _INT_MAX
    current = 0
    for b in candidates:
        n = counts.get(b, 0)
        if b == current_broker:
            current = n
        least = min(least, n)
    if least == 0 or current > least:
        return True
    owners_of_least = sum(1 for b in candidates if counts.get(b, 0) == least)
    return len(candidates) != owners_of_least


def should_namespace_policies_unload(
    bundle: str,
    current_broker: str,
    policies: PlacementPolicies,
    available: Iterable[str],
    persistent_enabled: Callable[[str], bool] | None = None,
) -> bool:
    """``ModularLoadManagerImpl.shouldNamespacePoliciesUnload``: "if only current broker satisfy the
    NamespacePolicies should not unload"."""
    return any(b != current_broker for b in apply_namespace_policies(bundle, policies, available, persistent_enabled))


def extensible_filter(
    bundle: str,
    candidates: Sequence[str],
    policies: PlacementPolicies,
    owned: Mapping[str, Collection[str]] | None,
    failure_domains_enabled: bool,
) -> list[str]:
    """The extensible load manager's policy filters in its pipeline order (``ExtensibleLoadManagerImpl``
    adds ``AntiAffinityGroupPolicyFilter``, then ``BrokerIsolationPoliciesFilter``):
    ``AntiAffinityGroupPolicyHelper.filter`` (bundle counts over the ownership), then
    ``IsolationPoliciesHelper.applyIsolationPoliciesAsync`` (``retainAll``)."""
    if policies.empty:
        return list(candidates)
    ns = _namespace(bundle)
    counts = anti_affinity_bundle_counts(ns, policies, owned)
    cands = filter_anti_affinity_group_owned_brokers(
        candidates, counts, policies.broker_to_domain, failure_domains_enabled
    )
    allowed = set(apply_namespace_policies(bundle, policies, cands))
    return [b for b in cands if b in allowed]


# ---------------------------------------------------------------------------------------------
# Ours: the destination rule of the guard and the GlobalPlanner
# ---------------------------------------------------------------------------------------------
class DestinationFilter:
    """Whether a planned move's destination is one Pulsar's placement would pick from for the bundle.

    Two checks, in ``selectBroker``'s order: **isolation** - the destination is among
    :func:`apply_namespace_policies` over all brokers; **anti-affinity** - it survives
    :func:`filter_anti_affinity_group_owned_brokers` over those, counting group namespaces per broker
    (the modular form) in the ownership *with the bundle taken off its source* (as after its unload).
    ``owned`` is read live (broker -> bundles it owns); call :meth:`moved` after each move applied to it,
    so the per-broker caches of the brokers involved are rebuilt.
    """

    def __init__(
        self,
        policies: PlacementPolicies,
        owned: Mapping[str, Collection[str]],
        *,
        failure_domains_enabled: bool = False,
        persistent_enabled: Callable[[str], bool] | None = None,
    ) -> None:
        self.policies = policies
        self.owned = owned
        self.failure_domains_enabled = failure_domains_enabled
        self.persistent_enabled = persistent_enabled
        self._domains = policies.broker_to_domain
        self._grouped = frozenset(policies.anti_affinity_groups)
        self._present: dict[str, dict[str, int]] = {}
        """broker -> grouped namespace -> its bundles on the broker (cache)."""

    @property
    def active(self) -> bool:
        return not self.policies.empty

    def moved(self, bundle: str, source: str, destination: str) -> None:
        self._present.pop(source, None)
        self._present.pop(destination, None)

    def _grouped_on(self, broker: str) -> dict[str, int]:
        out = self._present.get(broker)
        if out is None:
            out = {}
            if self._grouped:
                for b in self.owned.get(broker, ()):
                    ns = _namespace(b)
                    if ns in self._grouped:
                        out[ns] = out.get(ns, 0) + 1
            self._present[broker] = out
        return out

    def refusal(self, bundle: str, source: str, destination: str) -> tuple[str, str] | None:
        """None when allowed, else (rule, why): ``isolation-policy`` or ``anti-affinity-group``."""
        if not self.active:
            return None
        ns = _namespace(bundle)
        brokers = list(self.owned)
        if destination not in self.owned:
            brokers.append(destination)
        allowed = apply_namespace_policies(bundle, self.policies, brokers, self.persistent_enabled)
        if destination not in allowed:
            policy = self.policies.policy_for(ns) if self.policies.isolation else None
            if policy is not None:
                why = (
                    f"{destination} is not a broker namespace isolation policy {policy.name!r} allows for {ns} "
                    f"(primary, or secondary when fewer than min_limit={policy.auto_failover_policy.min_limit} "
                    "primaries are available)"
                )
            else:
                why = (
                    f"{destination} is not a shared broker for {ns} (it is primary in a namespace isolation policy, "
                    "or does not enable persistent topics)"
                )
            return "isolation-policy", why
        group = self.policies.anti_affinity_group(ns)
        if group is None:
            return None
        members = set(self.policies.group_namespaces(group))
        counts: dict[str, int] = {}
        for b in allowed:
            present = self._grouped_on(b)
            n = 0
            for member in members:
                k = present.get(member, 0)
                if b == source and member == ns and bundle in self.owned.get(b, ()):
                    k -= 1  # the bundle leaves its source
                if k > 0:
                    n += 1
            if n:
                counts[b] = n
        kept = filter_anti_affinity_group_owned_brokers(allowed, counts, self._domains, self.failure_domains_enabled)
        if destination in kept:
            return None
        least = min((counts.get(b, 0) for b in kept), default=0)
        return (
            "anti-affinity-group",
            f"{destination} owns {counts.get(destination, 0)} namespace(s) of {ns}'s anti-affinity group {group!r}; "
            f"Pulsar places it only on brokers owning the fewest ({least})"
            + (
                ", in the failure domain(s) owning the fewest" if self.failure_domains_enabled and self._domains else ""
            ),
        )

    def permits(self, bundle: str, source: str, destination: str) -> bool:
        return self.refusal(bundle, source, destination) is None


# ---------------------------------------------------------------------------------------------
# Ours: what an ownership breaks (the closed-loop model's report)
# ---------------------------------------------------------------------------------------------
VIOLATION_RULES = ("isolation-policy", "isolation-secondary", "anti-affinity-group")
"""The rules :func:`violations` reports (see there)."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One bundle whose owner breaks a placement constraint: ``rule`` (one of :data:`VIOLATION_RULES`), ``why``."""

    bundle: str
    broker: str
    rule: str
    why: str

    @property
    def key(self) -> tuple[str, str, str]:
        """(namespace, broker, rule): stable across a split (the children stay on the owner)."""
        return _namespace(self.bundle), self.broker, self.rule


def violations(
    owners: Mapping[str, str],
    policies: PlacementPolicies,
    brokers: Sequence[str],
    failure_domains_enabled: bool = False,
    persistent_enabled: Callable[[str], bool] | None = None,
) -> list[Violation]:
    """The bundles of ``owners`` (bundle -> broker) whose owner a placement constraint forbids now,
    among the available ``brokers`` (order kept; a bundle on a broker not in ``brokers`` is skipped):

    * ``isolation-policy`` - the owner is not among :func:`apply_namespace_policies` and is not a
      secondary of the namespace's policy either (neither primary nor secondary; without a policy, a
      broker that is not shared);
    * ``isolation-secondary`` - the owner is a secondary of the policy while at least ``min_limit``
      primaries are available (no failover now; Pulsar places new bundles on primaries but moves
      nothing back: a bundle that failed over stays until it is unloaded);
    * ``anti-affinity-group`` - another namespace of the bundle's anti-affinity group owns bundles on
      the same broker (with ``failure_domains_enabled`` and failure domains defined: in the same failure
      domain) while a broker its isolation rule allows has no other namespace of the group (in a domain
      without one): Pulsar's ``filterAntiAffinityGroupOwnedBrokers`` would have put it there.

    A changed policy applies to the current ownership at once here; Pulsar applies it at the next
    assignment (apache/pulsar#14429), so such bundles are reported, not moved.
    """
    if policies.empty:
        return []
    live = set(brokers)
    domains = policies.broker_to_domain if failure_domains_enabled else {}

    def unit(broker: str) -> str:
        """Where anti-affinity counts: the broker, or with failure domains its domain."""
        return domains.get(broker, DEFAULT_DOMAIN) if domains else broker

    group_in: dict[str, dict[str, set[str]]] = {}
    """group (lower case) -> unit -> the group's namespaces owning bundles there."""
    for bundle, broker in owners.items():
        group = policies.anti_affinity_group(_namespace(bundle)) if broker in live else None
        if group is not None:
            group_in.setdefault(group.lower(), {}).setdefault(unit(broker), set()).add(_namespace(bundle))
    allowed_of: dict[str, list[str]] = {}
    out: list[Violation] = []
    for bundle, broker in owners.items():
        if broker not in live:
            continue
        ns = _namespace(bundle)
        allowed = allowed_of.get(ns)
        if allowed is None:
            allowed = allowed_of[ns] = apply_namespace_policies(bundle, policies, brokers, persistent_enabled)
        if broker not in allowed:
            out.append(_isolation_violation(bundle, broker, ns, policies))
        group = policies.anti_affinity_group(ns)
        if group is None:
            continue
        present = group_in[group.lower()]
        sharing = present.get(unit(broker), set()) - {ns}
        if not sharing:
            continue
        free = next((b for b in allowed if b != broker and not present.get(unit(b), set()) - {ns}), None)
        if free is None:
            continue
        where = f"failure domain {unit(broker)!r} ({broker})" if domains else f"broker {broker}"
        out.append(
            Violation(
                bundle,
                broker,
                "anti-affinity-group",
                f"{ns} shares {where} with {', '.join(sorted(sharing))} of anti-affinity group {group!r} "
                f"while {free}, which its isolation rule allows, holds no other namespace of the group",
            )
        )
    return out


def unmet_constraints(
    policies: PlacementPolicies,
    brokers: Sequence[str],
    owners: Mapping[str, str],
    failure_domains_enabled: bool = False,
) -> list[str]:
    """Constraints the available ``brokers`` cannot meet, in words (empty: all can be met). ``owners``
    (bundle -> broker) tells which namespaces exist. No move can fix these, so the planner warns
    instead of moving:

    * an isolation policy with fewer than ``min_limit`` primaries available: its namespaces fail over
      to its secondaries (Pulsar's ``min_available`` rule), or, with no secondary available either,
      have no broker at all (Pulsar cannot place them; they stay where they are);
    * an anti-affinity group with more namespaces (owning bundles) than brokers, or with failure domains
      enabled than failure domains: two of its namespaces must share one.
    """
    if policies.empty:
        return []
    out: list[str] = []
    namespaces = sorted({_namespace(b) for b in owners})
    for policy in policies.isolation:
        mine = [ns for ns in namespaces if policies.policy_for(ns) is policy]
        if not mine:
            continue
        primaries = [b for b in brokers if policy.is_primary(b)]
        min_limit = policy.auto_failover_policy.min_limit
        if not policy.auto_failover_policy.should_failover_to_secondary(len(primaries)):
            continue
        secondaries = [b for b in brokers if not policy.is_primary(b) and policy.is_secondary(b)]
        head = (
            f"isolation policy {policy.name!r} ({len(mine)} namespace(s), e.g. {mine[0]}): "
            f"{len(primaries)} primary broker(s) available, fewer than min_limit={min_limit}"
        )
        if primaries or secondaries:
            out.append(f"{head}: failing over to {len(secondaries)} secondary broker(s)")
        else:
            out.append(f"{head} and no secondary: its bundles have no allowed broker and are not moved")
    domains = policies.broker_to_domain if failure_domains_enabled and policies.failure_domains else {}
    units = {domains.get(b, DEFAULT_DOMAIN) for b in brokers} if domains else set(brokers)
    groups: dict[str, list[str]] = {}
    for ns in namespaces:
        group = policies.anti_affinity_group(ns)
        if group is not None:
            groups.setdefault(group.lower(), []).append(ns)
    for members in groups.values():
        if len(members) > len(units):
            group = policies.anti_affinity_group(members[0])
            where = "failure domains" if domains else "available brokers"
            out.append(
                f"anti-affinity group {group!r} has {len(members)} namespaces owning bundles but only "
                f"{len(units)} {where}: some of them must share one"
            )
    return out


def _isolation_violation(bundle: str, broker: str, ns: str, policies: PlacementPolicies) -> Violation:
    policy = policies.policy_for(ns) if policies.isolation else None
    if policy is None:
        why = (
            f"{ns} has no namespace isolation policy, and {broker} is not a shared broker "
            "(it is primary in a policy, or does not enable persistent topics)"
        )
        return Violation(bundle, broker, "isolation-policy", why)
    if policy.is_secondary(broker):
        why = (
            f"{broker} is a secondary of policy {policy.name!r} for {ns}, and at least "
            f"min_limit={policy.auto_failover_policy.min_limit} primaries are available (no failover)"
        )
        return Violation(bundle, broker, "isolation-secondary", why)
    why = f"{broker} is neither primary nor secondary in policy {policy.name!r} for {ns}"
    return Violation(bundle, broker, "isolation-policy", why)


__all__ = [
    "DEFAULT_DOMAIN",
    "NO_POLICIES",
    "VIOLATION_RULES",
    "DestinationFilter",
    "MinAvailablePolicy",
    "NamespaceIsolationPolicy",
    "PlacementPolicies",
    "Violation",
    "anti_affinity_bundle_counts",
    "anti_affinity_namespace_counts",
    "apply_namespace_policies",
    "extensible_filter",
    "filter_anti_affinity_group_owned_brokers",
    "filter_domains_not_having_least_number_anti_affinity_namespaces",
    "parse_broker_host",
    "should_anti_affinity_namespace_unload",
    "should_namespace_policies_unload",
    "unmet_constraints",
    "violations",
]
