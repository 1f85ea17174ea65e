"""A deterministic, in-process model of a Pulsar cluster whose load changes over time.

The HTTP simulator (:mod:`pulsar_rebalance.simulator.cluster` / ``server``) serves steady load over
Pulsar's admin REST API; this module is the *closed-loop* model the balance benchmark drives: a
clock, traffic that moves, brokers that come and go, and unloads/splits applied the way Pulsar
applies them. It is fast (plain Python, no I/O) and fully determined by its seed. It produces, per
cycle, exactly the input of the decision core's ``decide`` contract (``LocalBrokerData`` per broker,
``nowMs``), so every strategy runs on it unchanged. Both simulators share the load models
(:mod:`pulsar_rebalance.simulator.load_models`), the core's bundles, hashing and split algorithms,
and the HTTP one serves any scenario here at its first cycle (``ClusterState.from_model``); what it
does not serve is this module's clock: over HTTP the traffic stays as it was at that cycle.

Model (units as Pulsar reports them):

* **Clock**: ``now_ms``; :meth:`ClusterModel.advance` moves it by one cycle (Pulsar's
  ``loadBalancerSheddingIntervalMinutes``, 1 min by default) and updates traffic.
* **Topics**: each has a base publish rate (msg/s, Zipf-distributed by the scenario), a message
  size, a fan-out (consumers reading every message) and a daily phase. The current rate is
  ``base * daily(t) * drift * burst``: ``daily`` is ``1 + A sin(2 pi (t/24h + phase))``, ``drift`` a
  mean-reverting multiplicative random walk per topic, ``burst`` a factor from scheduled events. A
  topic with a *toggling* consumer (on/off every ``period`` cycles) models periodic jitter.
  ``msgRateOut = msgRateIn * fanout``; throughput = rate * message size.
* **Bundles**: per namespace, Pulsar's boundaries (:class:`pulsar_rebalance.core.pulsar.bundles.NamespaceBundles`);
  a topic belongs to the bundle containing ``crc32(full name)`` (the core's ``topic_hash``).
* **Brokers**: ``cores`` and ``nic_mbps`` give the limits Pulsar reports (``cpu.limit = cores*100``,
  ``bandwidthIn/Out.limit = Mbit/s * 1024``). Usage: ``cpu = 10 + 100*msg/s/40000 + 100*bytes/s/200MiB``
  (the ``linear`` load model, both simulators' default; the others in :mod:`pulsar_rebalance.simulator.load_models`)
  times ``1 + N(0, noise)``; bandwidth in/out = bytes/s * 8 / 1024 (Kbit/s). The load model also sets
  the brokers' limits (at construction and when one joins) and the metrics (true usage, ideal, floor).
* **Measurement noise**: ``noise`` on the reported CPU; ``rate_noise`` on the reported bundle (and
  topic) rates and throughputs (each multiplied by ``1 + N(0, rate_noise)``, from their own random
  stream); usage and the metrics always come from the noise-free rates.
  ``memory``/``directMemory`` are reported only by a load model that models them (the held-out
  ``memory-bound``); otherwise not at all (Pulsar's parser defaults them to 0 %).
* **Membership**: brokers join (empty), leave (their bundles are re-placed by lookup), restart
  (leave, come back empty after a delay) or fail (like leave, counted as failed).
* **Unloads** land on the given destination if it is alive, else where lookup puts them; lookup
  follows Pulsar's default ``LeastLongTermMessageRate``: least message rate among live brokers that
  are not overloaded (``loadBalancerBrokerOverloadedThresholdPercentage``, on the weighted max usage
  with the config's resource weights, PIP-358: memory and direct memory weigh 0 by default), first in
  broker order on ties (Pulsar picks at random among ties; the model stays deterministic).
* **Placement constraints** (``placement``: :class:`pulsar_rebalance.core.pulsar.policies.PlacementPolicies`,
  plus ``failure_domains_enabled``): namespace isolation policies, anti-affinity groups, failure
  domains. Lookup honours them as ``ModularLoadManagerImpl.selectBroker`` does, through the core's
  functions: candidates are ``applyNamespacePolicies``' brokers, then ``filterAntiAffinityGroupOwnedBrokers``
  (namespaces of the group per broker, counted on the ownership with the bundle off its source and the
  bundles already placed in the batch); an overloaded pick is retried on the isolation candidates only.
  No allowed live broker: Pulsar's lookup fails; the model places the bundle as without constraints (it
  must be somewhere) and says so in ``StepResult.rejected`` (:meth:`ClusterModel.violations` reports it).
  The constraints may change mid-run (:meth:`ClusterModel.set_placement`, or an ``Event`` of kind
  ``policies``): nothing moves then - Pulsar applies a changed policy at the next assignment
  (apache/pulsar#14429) - so the existing ownership may break it (:meth:`ClusterModel.violations`).
* **Splits**: with explicit boundaries as given (``split_range``); without, the configured
  ``defaultNamespaceBundleSplitAlgorithm`` on the bundle's topics (the core's algorithms, Pulsar's
  arithmetic). A split's ``unloadChildren`` (Pulsar's ``loadBalancerAutoUnloadSplitBundlesEnabled``,
  default true, on Pulsar's auto splits) unloads the children, placed by lookup; children of a
  planned split (``unloadChildren: false``) stay on the owner unless the same cycle unloads them.
* **Unloads**: a cycle's ``executed.unloads`` (the load manager's level: what Pulsar's leader does
  with the strategy's selection), or its ``unloads`` when the output has no such level.

Metrics: every unload counts its clients (producers + consumers of its topics) as disconnected.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.guard import resource_weights
from pulsar_rebalance.core.pulsar.bundles import (
    BundleRange,
    NamespaceBundles,
    bundle_full_name,
    split_full_name,
    split_range,
)
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.policies import (
    NO_POLICIES,
    PlacementPolicies,
    Violation,
    anti_affinity_namespace_counts,
    apply_namespace_policies,
    filter_anti_affinity_group_owned_brokers,
    violations,
)
from pulsar_rebalance.core.pulsar.split_algorithms import TopicRates, get_split_boundaries
from pulsar_rebalance.simulator.load_models import (
    CPU_BASE_PCT,
    CPU_PCT_PER_BYTE,
    CPU_PCT_PER_MSG,
    MIB,
    Load,
    LoadModel,
    get_load_model,
)

RESOURCE_KEYS = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
"""The order of :func:`pulsar_rebalance.core.guard.resource_weights`."""

DAY_MS = 24 * 3600 * 1000


@dataclass(slots=True)
class Broker:
    broker_id: str
    cores: float = 8.0
    nic_mbps: float = 1000.0
    alive: bool = True

    @property
    def cpu_limit(self) -> float:
        return self.cores * 100.0

    @property
    def nic_limit_kbps(self) -> float:
        return self.nic_mbps * 1024.0


@dataclass(slots=True)
class Topic:
    name: str
    namespace: str
    hash: int
    base_rate: float
    msg_size: float = 1024.0
    fanout: float = 1.0
    phase: float = 0.0
    producers: int = 1
    drift: float = 1.0
    burst: float = 1.0
    toggle_period: int = 0
    """>0: one consumer group (``toggle_fanout`` extra fan-out) switches on/off every that many cycles."""
    toggle_fanout: float = 0.0
    rate_in: float = 0.0
    rate_out: float = 0.0

    @property
    def clients(self) -> int:
        return self.producers + max(1, int(round(self.fanout + self.toggle_fanout)))


@dataclass(slots=True)
class Event:
    """A scheduled change: ``kind`` one of :data:`EVENT_KINDS`, applied at ``cycle`` (a restarted broker
    returns ``delay`` cycles later).

    ``policies``: the placement constraints from then on (kind ``policies``; ``failure_domains_enabled``
    None keeps the model's flag)."""

    cycle: int
    kind: str
    broker: str | None = None
    topic: str | None = None
    factor: float = 1.0
    cores: float = 8.0
    nic_mbps: float = 1000.0
    delay: int = 2
    policies: PlacementPolicies | None = None
    failure_domains_enabled: bool | None = None


EVENT_KINDS = ("join", "leave", "fail", "restart", "burst", "policies")


@dataclass(slots=True)
class StepResult:
    """What applying one cycle's decisions did."""

    unloads: int = 0
    splits: int = 0
    clients_disconnected: int = 0
    moved: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


class ClusterModel:
    """The cluster at one instant plus its dynamics. Everything random comes from ``seed``."""

    def __init__(
        self,
        *,
        brokers: Sequence[Broker],
        namespaces: Mapping[str, NamespaceBundles],
        topics: Iterable[Topic],
        owners: Mapping[str, str],
        seed: int = 0,
        interval_ms: int = 60_000,
        start_ms: int = 1_700_000_000_000,
        noise: float = 0.0,
        drift_sigma: float = 0.0,
        daily_amplitude: float = 0.0,
        events: Sequence[Event] = (),
        config: LoadBalancerConfig | None = None,
        load_model: str | LoadModel | None = None,
        rate_noise: float = 0.0,
        placement: PlacementPolicies = NO_POLICIES,
        failure_domains_enabled: bool = False,
    ) -> None:
        self.seed = seed
        self.placement = placement
        """The cluster's placement constraints now (see :meth:`set_placement`)."""
        self.failure_domains_enabled = failure_domains_enabled
        """Pulsar's ``failureDomainsEnabled`` (kept apart from ``config``, which a strategy's config replaces)."""
        self.load_model = get_load_model(load_model)
        for spec in brokers:
            self.load_model.configure(spec, seed)
        self.brokers: dict[str, Broker] = {b.broker_id: b for b in brokers}
        self.namespaces: dict[str, NamespaceBundles] = dict(namespaces)
        self.topics: list[Topic] = list(topics)
        self._by_name = {t.name: t for t in self.topics}
        self.owners: dict[str, str] = dict(owners)
        self.rng = random.Random(seed)
        self.interval_ms = interval_ms
        self.now_ms = start_ms
        self.cycle = 0
        self.noise = noise
        self.rate_noise = rate_noise
        self.rate_rng = random.Random(f"{seed}:rate-noise")
        self.drift_sigma = drift_sigma
        self.daily_amplitude = daily_amplitude
        for e in events:
            if e.kind not in EVENT_KINDS:
                raise ValueError(f"unknown event kind {e.kind!r}; known: {', '.join(EVENT_KINDS)}")
            if e.kind == "policies" and e.policies is None:
                raise ValueError(f"event 'policies' at cycle {e.cycle} has no policies")
            if e.kind != "policies" and e.kind != "burst" and e.broker is None:
                raise ValueError(f"event {e.kind!r} at cycle {e.cycle} has no broker")
            if e.kind == "burst" and e.topic is None:
                raise ValueError(f"event 'burst' at cycle {e.cycle} has no topic")
        self.events = sorted(events, key=lambda e: e.cycle)
        self.config = config or LoadBalancerConfig()
        self._ns_topics: dict[str, list[Topic]] = {}
        for t in self.topics:
            self._ns_topics.setdefault(t.namespace, []).append(t)
        for ns in self._ns_topics:
            self._ns_topics[ns].sort(key=lambda t: t.hash)
        self._ns_hashes = {ns: [t.hash for t in ts] for ns, ts in self._ns_topics.items()}
        self._returning: dict[int, list[str]] = {}
        for b in self.bundles():
            if b not in self.owners:
                raise ValueError(f"bundle {b} has no owner")
        for b, o in self.owners.items():
            if o not in self.brokers:
                raise ValueError(f"bundle {b} is owned by unknown broker {o!r}")
        self._update_rates()
        self._apply_events()
        self._update_rates()

    # ------------------------------------------------------------------ structure
    def bundles(self) -> list[str]:
        return [bundle_full_name(ns, r.name) for ns, nb in self.namespaces.items() for r in nb.ranges]

    def live_brokers(self) -> list[str]:
        return [b for b, spec in self.brokers.items() if spec.alive]

    def topics_of(self, bundle: str) -> list[Topic]:
        ns, range_name = split_full_name(bundle)
        r = BundleRange.parse(range_name, "bundle")
        hashes = self._ns_hashes.get(ns, [])
        lo = bisect.bisect_left(hashes, r.lower)
        hi = bisect.bisect_right(hashes, r.upper) if r.closed_upper else bisect.bisect_left(hashes, r.upper)
        return self._ns_topics.get(ns, [])[lo:hi]

    def bundle_of_topic(self, topic: str) -> str:
        t = self._by_name[topic]
        return bundle_full_name(t.namespace, self.namespaces[t.namespace].find(t.hash).name)

    # ------------------------------------------------------------------ traffic
    def _step_drift(self, steps: int = 1) -> None:
        """``steps`` steps of every topic's mean-reverting log random walk (``x' = 0.9 x + N(0, sigma)``),
        in one draw: ``x_n = 0.9^n x + N(0, sigma * sqrt((1 - 0.81^n) / 0.19))``."""
        sigma = self.drift_sigma
        if not sigma:
            return
        gauss = self.rng.gauss
        keep = 0.9**steps
        if steps != 1:
            sigma *= math.sqrt((1 - 0.81**steps) / (1 - 0.81))
        for t in self.topics:
            t.drift = math.exp(keep * math.log(t.drift) + gauss(0.0, sigma))

    def _update_rates(self) -> None:
        """Current rates from base, daily cycle, drift, burst and the on/off consumers (no randomness)."""
        amp = self.daily_amplitude
        day_pos = (self.now_ms % DAY_MS) / DAY_MS
        for t in self.topics:
            daily = 1.0 + amp * math.sin(2 * math.pi * (day_pos + t.phase)) if amp else 1.0
            t.rate_in = t.base_rate * daily * t.drift * t.burst
            fan = t.fanout
            if t.toggle_period and (self.cycle // t.toggle_period) % 2 == 0:
                fan += t.toggle_fanout
            t.rate_out = t.rate_in * fan

    def bundle_stats(self) -> dict[str, dict[str, Any]]:
        """``NamespaceBundleStats`` JSON of every bundle with topics (Pulsar omits empty ones)."""
        out: dict[str, dict[str, Any]] = {}
        for ns, nb in self.namespaces.items():
            topics = self._ns_topics.get(ns, [])
            hashes = self._ns_hashes.get(ns, [])
            for r in nb.ranges:
                lo = bisect.bisect_left(hashes, r.lower)
                hi = bisect.bisect_right(hashes, r.upper) if r.closed_upper else bisect.bisect_left(hashes, r.upper)
                if hi <= lo:
                    continue
                rin = rout = tin = tout = 0.0
                prod = cons = 0
                for t in topics[lo:hi]:
                    rin += t.rate_in
                    rout += t.rate_out
                    tin += t.rate_in * t.msg_size
                    tout += t.rate_out * t.msg_size
                    prod += t.producers
                    cons += max(1, int(round(t.fanout + t.toggle_fanout)))  # t.clients - t.producers, inlined
                out[bundle_full_name(ns, r.name)] = {
                    "msgRateIn": rin,
                    "msgRateOut": rout,
                    "msgThroughputIn": tin,
                    "msgThroughputOut": tout,
                    "consumerCount": cons,
                    "producerCount": prod,
                    "topics": hi - lo,
                    "cacheSize": 0,
                }
        return out

    def topic_rates(self, bundle: str, *, reported: bool = True) -> dict[str, dict[str, float]]:
        """Per-topic rates of ``bundle`` (what ``broker-stats/topics`` reports), keyed by full topic name;
        with ``rate_noise`` as measured (``reported``, the default) or noise-free."""
        out = {
            t.name: {
                "msgRateIn": t.rate_in,
                "msgRateOut": t.rate_out,
                "msgThroughputIn": t.rate_in * t.msg_size,
                "msgThroughputOut": t.rate_out * t.msg_size,
            }
            for t in self.topics_of(bundle)
        }
        return self._noisy(out) if reported and self.rate_noise else out

    _RATE_FIELDS = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")

    def _noisy(self, stats: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        gauss, sigma = self.rate_rng.gauss, self.rate_noise
        out: dict[str, dict[str, Any]] = {}
        for key, s in stats.items():
            copy = dict(s)
            for f in self._RATE_FIELDS:
                copy[f] = s[f] * max(0.0, 1.0 + gauss(0.0, sigma))
            out[key] = copy
        return out

    def reported_stats(self, stats: Mapping[str, Mapping[str, Any]] | None = None) -> Mapping[str, Mapping[str, Any]]:
        """The bundle stats as brokers report them: each bundle's rates and throughputs times
        ``1 + N(0, rate_noise)`` (a fresh draw per call); ``stats`` itself without rate noise."""
        stats = self.bundle_stats() if stats is None else stats
        return self._noisy(stats) if self.rate_noise else stats

    # ------------------------------------------------------------------ reports
    def _usage(self, broker: Broker, stats: Iterable[Mapping[str, Any]], noisy: bool) -> dict[str, dict[str, float]]:
        usage = self.load_model.usage(broker, Load.of(stats))
        if noisy and self.noise:
            usage["cpu"]["usage"] *= max(0.0, 1.0 + self.rng.gauss(0.0, self.noise))
        return usage

    def load_reports(
        self,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
        reported: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """``LocalBrokerData`` JSON of every live broker (the ``decide`` cycle's ``brokers``).

        Usage (CPU, NIC) comes from the true ``stats``; ``lastStats`` are the ``reported`` ones
        (:meth:`reported_stats` of ``stats`` when not given: with rate noise, a fresh draw)."""
        stats = self.bundle_stats() if stats is None else stats
        reported = self.reported_stats(stats) if reported is None else reported
        per: dict[str, dict[str, Any]] = {b: {} for b in self.live_brokers()}
        for bundle, s in stats.items():
            owner = self.owners[bundle]
            if owner in per:
                per[owner][bundle] = s
        reports: dict[str, dict[str, Any]] = {}
        for b, owned in per.items():
            shown = owned if reported is stats else {bundle: reported[bundle] for bundle in owned}
            reports[b] = {
                **self._usage(self.brokers[b], owned.values(), noisy=True),
                "lastUpdate": self.now_ms,
                "lastStats": shown,
                "bundles": list(owned),
            }
        return reports

    def true_usage(self, stats: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, float]:
        """Noise-free, capacity-normalised usage per live broker: max over every resource the load model
        reports (cpu, NIC in, NIC out; memory and direct memory under ``memory-bound``) of usage/limit."""
        return self._max_usage(stats, None)

    def ideal_usage(self, stats: Mapping[str, Mapping[str, Any]] | None = None) -> float:
        """Total load / total capacity on the binding resource: the best any placement could reach
        (:meth:`LoadModel.ideal <pulsar_rebalance.simulator.load_models.LoadModel.ideal>`).

        Under a convex load model, the CPU part is every broker carrying the same (linear) share of
        the total, passed through the model's curve."""
        stats = self.bundle_stats() if stats is None else stats
        live = [self.brokers[b] for b in self.live_brokers()]
        return self.load_model.ideal(Load.of(stats.values()), live)

    def floor_usage(self, stats: Mapping[str, Mapping[str, Any]] | None = None) -> float:
        """The best worst-broker usage any plan could reach: the ideal; the hottest topic alone on the
        broker where it weighs least (a topic cannot be split); the hottest bundle of a namespace at
        ``loadBalancerNamespaceMaximumBundles`` alone (it cannot be split either) - whichever is highest."""
        stats = self.bundle_stats() if stats is None else stats
        ideal = self.ideal_usage(stats)
        live = [self.brokers[b] for b in self.live_brokers()]
        hottest = max(
            self.topics,
            key=lambda t: t.rate_in * t.msg_size * (1 + t.rate_out / t.rate_in if t.rate_in else 1),
            default=None,
        )
        if hottest is None or not live:
            return ideal
        items: list[Mapping[str, Any]] = [
            {
                "msgRateIn": hottest.rate_in,
                "msgRateOut": hottest.rate_out,
                "msgThroughputIn": hottest.rate_in * hottest.msg_size,
                "msgThroughputOut": hottest.rate_out * hottest.msg_size,
                "topics": 1,  # its counts: what a model with per-topic or per-client costs charges it
                "producerCount": hottest.producers,
                "consumerCount": hottest.clients - hottest.producers,
            }
        ]
        cap = self.config.load_balancer_namespace_maximum_bundles
        full = {ns for ns, nb in self.namespaces.items() if len(nb.ranges) >= cap}
        items += [s for b, s in stats.items() if split_full_name(b)[0] in full]

        specs = list({self.load_model.capacity_key(b): b for b in live}.values())  # one broker per capacity

        def alone(item: Mapping[str, Any]) -> float:
            return min(
                max(r["usage"] / r["limit"] for r in self._usage(b, [item], noisy=False).values()) for b in specs
            )

        return max(ideal, max(alone(item) for item in items))

    def overload_usage(self, stats: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, float]:
        """What lookup compares with ``loadBalancerBrokerOverloadedThresholdPercentage``, per live broker:
        Pulsar's ``getMaxResourceUsageWithWeight`` (5-argument form, PIP-358) with the config's resource
        weights, on the noise-free usage. Memory and direct memory weigh 0 by default (Pulsar 4.x), so a
        broker whose memory is full is not overloaded to lookup; with the default weights (1.0 for cpu
        and the NICs) and no memory reported, this is :meth:`true_usage` number for number."""
        return self._max_usage(stats, dict(zip(RESOURCE_KEYS, resource_weights(self.config), strict=True)))

    def _max_usage(
        self, stats: Mapping[str, Mapping[str, Any]] | None, weights: Mapping[str, float] | None
    ) -> dict[str, float]:
        """Per live broker, the max over the resources its load model reports of usage/limit (times the
        resource's weight, when ``weights`` are given), noise-free."""
        stats = self.bundle_stats() if stats is None else stats
        per: dict[str, list[Mapping[str, Any]]] = {b: [] for b in self.live_brokers()}
        for bundle, s in stats.items():
            if self.owners[bundle] in per:
                per[self.owners[bundle]].append(s)
        out = {}
        for b, owned in per.items():
            u = self._usage(self.brokers[b], owned, noisy=False)
            out[b] = max(r["usage"] / r["limit"] * (weights[k] if weights is not None else 1.0) for k, r in u.items())
        return out

    # ------------------------------------------------------------------ placement constraints
    def set_placement(self, policies: PlacementPolicies, failure_domains_enabled: bool | None = None) -> None:
        """Change the placement constraints from now on. No bundle moves (Pulsar applies a changed policy at
        the next assignment, apache/pulsar#14429): the ownership may now break them (:meth:`violations`)."""
        self.placement = policies
        if failure_domains_enabled is not None:
            self.failure_domains_enabled = failure_domains_enabled

    def violations(self) -> list[Violation]:
        """The bundles whose owner breaks the constraints now (:func:`pulsar_rebalance.core.pulsar.policies.violations`)."""
        return violations(self.owners, self.placement, self.live_brokers(), self.failure_domains_enabled)

    def placement_candidates(
        self, bundle: str, owners: Mapping[str, str] | None = None, live: Sequence[str] | None = None
    ) -> tuple[list[str], list[str]]:
        """(isolation candidates, after the anti-affinity filter) for ``bundle`` among ``live`` (default: the
        live brokers), with ``owners`` (default: the model's) as the ownership, ``bundle`` itself taken off.

        ``applyNamespacePolicies``, then ``filterAntiAffinityGroupOwnedBrokers`` with the modular count
        (namespaces of the group per broker); both the core's functions."""
        live = self.live_brokers() if live is None else live
        policies = self.placement
        if policies.empty:
            return list(live), list(live)
        base = apply_namespace_policies(bundle, policies, live)
        ns = split_full_name(bundle)[0]
        if policies.anti_affinity_group(ns) is None:
            return base, base
        owners = self.owners if owners is None else owners
        members = set(policies.group_namespaces(policies.anti_affinity_group(ns) or ""))
        index: dict[str, dict[str, set[str]]] = {}
        for other, broker in owners.items():
            other_ns = split_full_name(other)[0]
            if other != bundle and other_ns in members:
                index.setdefault(other_ns, {}).setdefault(broker, set()).add(other)
        counts = anti_affinity_namespace_counts(ns, policies, lambda n: index.get(n, {}))
        kept = filter_anti_affinity_group_owned_brokers(
            base, counts, policies.broker_to_domain, self.failure_domains_enabled
        )
        return base, kept

    # ------------------------------------------------------------------ placement (lookup)
    def lookup(
        self,
        bundle: str,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
        notes: list[str] | None = None,
    ) -> str:
        """Where a bundle lands with no destination, as Pulsar's default placement puts it.

        ``LeastLongTermMessageRate``: the live broker with the least message rate (in + out) of the
        bundles it owns, counting bundles already placed in this batch (Pulsar's preallocation);
        brokers above ``loadBalancerBrokerOverloadedThresholdPercentage`` are skipped unless all are.
        Like Pulsar's, it ignores throughput and broker size. Ties: first in broker order.

        Among the brokers the placement constraints allow (:meth:`placement_candidates`); when every
        candidate is overloaded, retried on the isolation candidates (``selectBroker``'s overload
        retry, which skips the anti-affinity filter). None allowed: all live brokers, and a note in
        ``notes`` (Pulsar's lookup would fail).
        """
        live = self.live_brokers()
        if not live:
            raise RuntimeError(f"no live broker to own {bundle}")
        stats = self.bundle_stats() if stats is None else stats
        usage = self.overload_usage(stats)
        rate = {b: 0.0 for b in live}
        for other, s in stats.items():
            owner = self.owners.get(other)
            if owner in rate and other != bundle:
                rate[owner] += s["msgRateIn"] + s["msgRateOut"]
        limit = self.config.load_balancer_broker_overloaded_threshold_percentage / 100.0
        base, candidates = self.placement_candidates(bundle, live=live)
        if not base:
            if notes is not None:
                notes.append(
                    f"lookup {bundle}: no live broker satisfies its namespace's isolation policy "
                    "(Pulsar's lookup fails); placed without the constraints"
                )
            base = candidates = live
        fit = [b for b in candidates if usage[b] < limit] or [b for b in base if usage[b] < limit] or base
        return min(fit, key=lambda b: rate[b])

    # ------------------------------------------------------------------ applying decisions
    def apply(self, cycle_out: Mapping[str, Any]) -> StepResult:
        """Apply a ``decide`` cycle output: splits first, then unloads (an unload may name a split child)."""
        res = StepResult()
        stats: dict[str, dict[str, Any]] | None = None
        lookups: list[str] = []
        for s in cycle_out.get("splits", []):
            bundle = s["bundle"]
            ns, range_name = split_full_name(bundle)
            nb = self.namespaces.get(ns)
            r = BundleRange.parse(range_name, "split")
            if nb is None or r not in nb.ranges or bundle not in self.owners:
                res.rejected.append(f"split {bundle}: no such bundle")
                continue
            given = s.get("boundaries")
            if given:
                points = [int(b, 16) if isinstance(b, str) else int(b) for b in given]
            else:
                rates = {  # the broker splits on its topics' stats as it measures them
                    n: TopicRates(v["msgRateIn"], v["msgRateOut"], v["msgThroughputIn"], v["msgThroughputOut"])
                    for n, v in self.topic_rates(bundle).items()
                }
                points = (
                    get_split_boundaries(
                        self.config.default_namespace_bundle_split_algorithm, r, topics=rates, config=self.config
                    )
                    or []
                )
            if not points:
                res.rejected.append(f"split {bundle}: the algorithm found no boundary")
                continue
            try:
                children = split_range(r, boundaries=points)
            except ValueError as exc:
                res.rejected.append(f"split {bundle}: {exc}")
                continue
            owner = self.owners.pop(bundle)
            self.namespaces[ns] = nb.with_split(r, children)
            unload_children = s.get("unloadChildren")
            if unload_children is None:
                unload_children = not given and self.config.load_balancer_auto_unload_split_bundles_enabled
            for c in children:
                child = bundle_full_name(ns, c.name)
                self.owners[child] = owner
                if unload_children:
                    lookups.append(child)
            res.splits += 1
        if lookups:
            stats = self.bundle_stats()
            for child in lookups:
                self._move(child, None, res, stats)
        # the load manager's level (what Pulsar's leader executes) when the output has it
        executed = cycle_out.get("executed")
        for u in executed["unloads"] if executed is not None else cycle_out.get("unloads", []):
            bundle = u["bundle"]
            if self.owners.get(bundle) != u["broker"]:
                res.rejected.append(f"unload {bundle}: not owned by {u['broker']}")
                continue
            if stats is None:
                stats = self.bundle_stats()
            self._move(bundle, u.get("destination"), res, stats)
        return res

    def _move(self, bundle: str, destination: str | None, res: StepResult, stats: Mapping[str, Any]) -> None:
        source = self.owners[bundle]
        if destination is None or destination not in self.brokers or not self.brokers[destination].alive:
            destination = self.lookup(bundle, stats, res.rejected)
        res.clients_disconnected += sum(t.clients for t in self.topics_of(bundle))
        if destination != source:
            self.owners[bundle] = destination
            res.unloads += 1
            res.moved.append(bundle)

    # ------------------------------------------------------------------ clock and events
    def advance(self, cycles: int = 1) -> StepResult:
        """Move the clock ``cycles`` cycles at once: traffic changes, scheduled events happen.

        One step per call, however many cycles: the drift takes its ``cycles``-step distribution in
        one draw per topic (exact for the mean-reverting walk), the events due in between happen in
        their order (brokers leaving are placed with the load seen at the start of the step) and
        rates are computed for the new time. ``advance(1)`` is one cycle as before."""
        if cycles < 1:
            raise ValueError(f"cycles must be >= 1, got {cycles}")
        self.now_ms += self.interval_ms * cycles
        self.cycle += cycles
        self._step_drift(cycles)
        res = self._apply_events()  # brokers leaving are placed with the load seen so far
        self._update_rates()
        return res

    def _apply_events(self) -> StepResult:
        res = StepResult()
        while True:
            due_return = min((c for c in self._returning if c <= self.cycle), default=None)
            due_event = self.events[0].cycle if self.events and self.events[0].cycle <= self.cycle else None
            if due_return is None and due_event is None:
                break
            if due_return is not None and (due_event is None or due_return <= due_event):
                for b in self._returning.pop(due_return):
                    self.brokers[b].alive = True
                continue
            e = self.events.pop(0)
            if e.kind == "join":
                assert e.broker is not None
                joined = Broker(e.broker, e.cores, e.nic_mbps)
                self.load_model.configure(joined, self.seed)
                self.brokers[e.broker] = joined
            elif e.kind in ("leave", "fail", "restart"):
                assert e.broker is not None
                self.brokers[e.broker].alive = False
                stats = self.bundle_stats()
                for bundle in [b for b, o in self.owners.items() if o == e.broker]:
                    self._move(bundle, None, res, stats)
                if e.kind == "restart":
                    self._returning.setdefault(e.cycle + e.delay, []).append(e.broker)
                elif e.kind == "leave":
                    del self.brokers[e.broker]
            elif e.kind == "burst":
                assert e.topic is not None
                self._by_name[e.topic].burst = e.factor
            elif e.kind == "policies":
                assert e.policies is not None
                self.set_placement(e.policies, e.failure_domains_enabled)
            else:  # pragma: no cover - checked at construction
                raise ValueError(f"unknown event kind {e.kind!r}")
        return res


__all__ = [
    "CPU_BASE_PCT",
    "CPU_PCT_PER_BYTE",
    "CPU_PCT_PER_MSG",
    "MIB",
    "EVENT_KINDS",
    "Broker",
    "ClusterModel",
    "Event",
    "StepResult",
    "Topic",
]
