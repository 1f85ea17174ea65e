"""Named, seedable scenarios for the closed-loop model (:mod:`pulsar_rebalance.simulator.dynamics`).

``build(name, seed, load_model=..., noise=..., rate_noise=...) -> ScenarioRun``: the same arguments
always give the same cluster, the same traffic and the same events. The load model
(:mod:`pulsar_rebalance.simulator.load_models`, ``linear`` by default) sets the brokers' limits before
placement, and placement and calibration measure load with it (a "balanced" start is balanced, and
the ideal usage is the target, under that model). Each scenario is one problem Pulsar operators report (see
``docs/benchmarks/balance.md``):

============================== ===============================================================
steady-with-noise              balanced cluster, drifting Zipf traffic, 3 % CPU noise: nothing to do
scale-up                       8 balanced brokers, two empty brokers join at cycle 2
scale-down                     10 balanced brokers, two leave at cycle 2 (bundles re-placed by lookup)
rolling-restart                8 brokers restarted one after another (each comes back empty)
one-hot-broker                 one broker holds about twice the average load
hot-bundle-needs-split         one bundle of many busy topics carries ~80 % of a broker
hot-single-topic-unsplittable  one topic alone carries ~60 % of a broker: no split can fix it
heterogeneous                  one broker has twice the cores and NIC; bundles spread by count
periodic-jitter                an on/off consumer adds 40 % of a NIC to one bundle's out-traffic, every other 2 cycles
large-zipf                     100 brokers, 5,120 bundles, 200,000 topics, Zipf rates, spread by count
============================== ===============================================================

Not in :data:`SCENARIOS` (the balance benchmark's set): :func:`placement_constraints` - 24 brokers with
namespace isolation policies (one failing over to its secondaries when a primary fails), an anti-affinity
group and, optionally, an isolation policy changed mid-run (``tests/simulator/test_closed_loop_policies.py``).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pulsar_rebalance.core.contract.policies_json import parse_policies
from pulsar_rebalance.core.pulsar.bundles import NamespaceBundles, bundle_full_name, topic_hash
from pulsar_rebalance.core.pulsar.policies import PlacementPolicies
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Event, Topic
from pulsar_rebalance.simulator.load_models import Load, LoadModel, get_load_model

DAG_DECISIONS = 48
"""Decisions at the DAG's hourly cadence: 2 simulated days."""


@dataclass(frozen=True, slots=True)
class ScenarioRun:
    name: str
    seed: int
    model: ClusterModel
    cycles: int
    description: str
    dag_decisions: int = DAG_DECISIONS
    """Decisions when the closed loop runs at the DAG's hourly cadence (``cycles`` is the per-minute count)."""


def _topics(rng: random.Random, n: int, namespaces: Sequence[str], zipf_s: float) -> list[Topic]:
    weights = [1.0 / (k**zipf_s) for k in range(1, n + 1)]
    rng.shuffle(weights)
    phases = [0.0, 0.1, 0.35, 0.6]
    out = []
    for i in range(n):
        ns = namespaces[i % len(namespaces)]
        name = f"persistent://{ns}/topic-{i}"
        out.append(
            Topic(
                name=name,
                namespace=ns,
                hash=topic_hash(name),
                base_rate=weights[i],
                msg_size=math.exp(rng.uniform(math.log(256), math.log(4096))),
                fanout=rng.choice((1.0, 1.0, 1.0, 2.0, 3.0)),
                phase=rng.choice(phases),
                producers=rng.choice((1, 1, 2)),
            )
        )
    return out


def _calibrate(model: ClusterModel, target: float) -> None:
    """Scale every topic's base rate so the cluster's ideal usage (under its load model) is ``target``.

    The load model first sets any per-cluster costs and, if it has parts the rates do not scale, solves
    the scaling exactly (``LoadModel.fit``); then three rounds (an affine load model is exact after one),
    20 for a convex one (``LoadModel.calibration_rounds``)."""
    target *= _OPTIONS.current.get("utilization", 1.0)
    model.load_model.fit(model, target)
    rounds = model.load_model.calibration_rounds
    for _ in range(rounds):
        ideal = model.ideal_usage()
        if ideal <= 0:
            return
        factor = target / ideal
        for t in model.topics:
            t.base_rate *= factor
        model._update_rates()


def _load(model: ClusterModel, stats: Mapping[str, Any]) -> float:
    """One bundle's (or topic's) load under the model's load model, as a fraction of its standard broker."""
    return model.load_model.share(Load.of([stats]), model.load_model.reference())


_RATES = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")


def _rate_factor(model: ClusterModel, stats: Mapping[str, Any], goal: float) -> float:
    """The factor on a bundle's rates that makes its load (:func:`_load`) ``goal``.

    Every model of ``LOAD_MODELS`` charges a bundle in proportion to its rates: ``goal / load``, the original
    arithmetic. A held-out model also charges its counts (topics, clients), which the rates do not scale, or
    charges a curve of the rates (``LoadModel.proportional_share`` False): bisection on the load, which grows
    with the factor."""
    if model.load_model.proportional_share and _load(model, {**stats, **dict.fromkeys(_RATES, 0.0)}) == 0.0:
        return goal / max(_load(model, stats), 1e-9)

    def at(f: float) -> float:
        return _load(model, {**stats, **{k: stats[k] * f for k in _RATES}})

    if at(0.0) >= goal:
        raise ValueError(f"the bundle's counts alone load it to {at(0.0):.3f}, at or above {goal}")
    lo, hi = 0.0, 1.0
    for _ in range(200):
        if at(hi) >= goal:
            break
        lo, hi = hi, hi * 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at(mid) < goal else (lo, mid)
    return hi


def _topic_stats(t: Topic) -> dict[str, float]:
    return {
        "msgRateIn": t.rate_in,
        "msgRateOut": t.rate_out,
        "msgThroughputIn": t.rate_in * t.msg_size,
        "msgThroughputOut": t.rate_out * t.msg_size,
    }


def _bundle_loads(model: ClusterModel) -> dict[str, float]:
    """A bundle's load as a fraction of a standard (8-core, 1 Gbit/s unless the load model says otherwise)
    broker under the model's load model: max of its CPU/NIC parts (before any reporting curve)."""
    loads = {b: _load(model, s) for b, s in model.bundle_stats().items()}
    for b in model.bundles():
        loads.setdefault(b, 0.0)
    return loads


def _place_balanced(model: ClusterModel, brokers: Sequence[str]) -> None:
    """Longest-processing-time greedy, capacity-normalised: a well balanced start."""
    loads = _bundle_loads(model)
    used = {b: 0.0 for b in brokers}
    cap = {b: model.brokers[b].cores / 8.0 for b in brokers}
    for bundle in sorted(loads, key=lambda x: (-loads[x], x)):
        dest = min(brokers, key=lambda b: (used[b] + loads[bundle]) / cap[b])
        used[dest] += loads[bundle]
        model.owners[bundle] = dest


def _place_by_count(model: ClusterModel, brokers: Sequence[str], rng: random.Random) -> None:
    """Bundles dealt out evenly by count in random order (what count-based placement gives)."""
    bundles = sorted(model.bundles())
    rng.shuffle(bundles)
    for i, bundle in enumerate(bundles):
        model.owners[bundle] = brokers[i % len(brokers)]


def _new_model(
    seed: int,
    *,
    n_brokers: int,
    n_namespaces: int,
    bundles_per_ns: int,
    n_topics: int,
    zipf_s: float = 0.6,
    noise: float = 0.02,
    drift: float = 0.01,
    daily: float = 0.15,
    events: Sequence[Event] = (),
    big: Mapping[int, tuple[float, float]] | None = None,
    namespace_bundles: Mapping[str, int] | None = None,
    placement: PlacementPolicies | None = None,
) -> tuple[ClusterModel, random.Random]:
    """``namespace_bundles``: namespace -> its bundle count (then ``n_namespaces`` / ``bundles_per_ns``
    are not used); ``placement``: the model's placement constraints."""
    opts = _OPTIONS.current
    if opts.get("noise") is not None:
        noise = opts["noise"]
    if opts.get("brokers") is not None:
        n_brokers = opts["brokers"]
    rng = random.Random(seed)
    if namespace_bundles is None:
        namespace_bundles = {f"tenant-{i % 4}/ns-{i}": bundles_per_ns for i in range(n_namespaces)}
    namespaces = list(namespace_bundles)
    topics = _topics(rng, n_topics, namespaces, zipf_s)
    brokers = []
    for i in range(n_brokers):
        cores, nic = (big or {}).get(i, (8.0, 1000.0))
        brokers.append(Broker(f"broker-{i}:8080", cores, nic))
    nbs = {ns: NamespaceBundles.with_num_bundles(n) for ns, n in namespace_bundles.items()}
    first = brokers[0].broker_id
    owners = {bundle_full_name(ns, r.name): first for ns, nb in nbs.items() for r in nb.ranges}
    model = ClusterModel(
        brokers=brokers,
        namespaces=nbs,
        topics=topics,
        owners=owners,
        seed=seed,
        noise=noise,
        drift_sigma=drift,
        daily_amplitude=daily,
        events=events,
        load_model=get_load_model(opts.get("load_model")),
        rate_noise=opts.get("rate_noise") or 0.0,
    )
    if placement is not None:
        model.set_placement(placement)
    return model, rng


def _ids(model: ClusterModel) -> list[str]:
    return list(model.brokers)


def steady_with_noise(seed: int) -> ScenarioRun:
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000, noise=0.03)
    _calibrate(m, 0.5)
    _place_balanced(m, _ids(m))
    return ScenarioRun("steady-with-noise", seed, m, 60, "balanced, drifting traffic, CPU noise")


def scale_up(seed: int) -> ScenarioRun:
    ev = [Event(2, "join", broker="broker-8:8080"), Event(2, "join", broker="broker-9:8080")]
    m, _ = _new_model(seed, n_brokers=8, n_namespaces=8, bundles_per_ns=16, n_topics=4000, events=ev)
    _calibrate(m, 0.6)
    _place_balanced(m, _ids(m))
    return ScenarioRun("scale-up", seed, m, 60, "two empty brokers join a balanced 8-broker cluster")


def scale_down(seed: int) -> ScenarioRun:
    ev = [Event(2, "leave", broker="broker-8:8080"), Event(2, "leave", broker="broker-9:8080")]
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000, events=ev)
    _calibrate(m, 0.45)
    _place_balanced(m, _ids(m))
    return ScenarioRun("scale-down", seed, m, 60, "two of 10 brokers leave; lookup re-places their bundles")


def rolling_restart(seed: int) -> ScenarioRun:
    ev = [Event(2 + 6 * i, "restart", broker=f"broker-{i}:8080", delay=2) for i in range(4)]
    m, _ = _new_model(seed, n_brokers=8, n_namespaces=8, bundles_per_ns=16, n_topics=4000, events=ev)
    _calibrate(m, 0.5)
    _place_balanced(m, _ids(m))
    return ScenarioRun("rolling-restart", seed, m, 60, "brokers 0-3 restart one after another, each back empty")


def one_hot_broker(seed: int) -> ScenarioRun:
    m, rng = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    _calibrate(m, 0.45)
    ids = _ids(m)
    _place_balanced(m, ids[1:])
    loads = _bundle_loads(m)
    # move bundles from the others onto broker-0 until it carries about twice the average
    target = 2 * sum(loads.values()) / len(ids)
    have = 0.0
    for bundle in sorted(loads, key=lambda b: (loads[b], b)):
        if have + loads[bundle] > target:
            continue
        m.owners[bundle] = ids[0]
        have += loads[bundle]
        if have > 0.95 * target:
            break
    return ScenarioRun("one-hot-broker", seed, m, 60, "one broker holds about twice the average load")


def hot_bundle_needs_split(seed: int) -> ScenarioRun:
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    _calibrate(m, 0.45)
    loads = _bundle_loads(m)
    hot = sorted(loads, key=lambda b: (-len(m.topics_of(b)), b))[0]
    factor = _rate_factor(m, m.bundle_stats()[hot], 0.8)
    for t in m.topics_of(hot):
        t.burst = factor
    m._update_rates()
    _place_balanced(m, _ids(m))
    return ScenarioRun("hot-bundle-needs-split", seed, m, 60, f"bundle {hot} carries ~80 % of a broker")


def hot_single_topic(seed: int) -> ScenarioRun:
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    _calibrate(m, 0.4)
    t = m.topics[7]
    # make this one topic carry ~60 % of a broker on its own
    t.burst = 0.6 / max(_load(m, _topic_stats(t)), 1e-12)
    m._update_rates()
    _place_by_count(m, _ids(m), random.Random(seed))
    return ScenarioRun("hot-single-topic-unsplittable", seed, m, 60, f"topic {t.name} alone carries ~60 % of a broker")


def heterogeneous(seed: int) -> ScenarioRun:
    m, rng = _new_model(seed, n_brokers=8, n_namespaces=8, bundles_per_ns=16, n_topics=4000, big={0: (16.0, 2000.0)})
    _calibrate(m, 0.55)
    _place_by_count(m, _ids(m), rng)
    return ScenarioRun("heterogeneous", seed, m, 60, "broker-0 has twice the cores and NIC; bundles spread by count")


def periodic_jitter(seed: int) -> ScenarioRun:
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    _calibrate(m, 0.45)
    loads = _bundle_loads(m)
    # the biggest topic of a mid-sized bundle gets an on/off consumer group worth ~40 % of a NIC,
    # switching every 2 cycles
    bundle = sorted(loads, key=lambda b: (loads[b], b))[len(loads) // 2]
    t = max(m.topics_of(bundle), key=lambda x: x.base_rate)
    t.toggle_period = 2
    if m.load_model.name == "linear":  # 40 % of a 1 Gbit/s NIC (NIC out binds): the original arithmetic
        nic_bytes = 1000 * 1024 * 1024 / 8
        t.toggle_fanout = 0.4 * nic_bytes / max(t.rate_in * t.msg_size, 1e-9)
    else:  # 40 % of a standard broker's binding resource under the load model
        unit = {
            "msgRateIn": 0.0,
            "msgRateOut": t.rate_in,
            "msgThroughputIn": 0.0,
            "msgThroughputOut": t.rate_in * t.msg_size,
        }
        t.toggle_fanout = 0.4 / max(_load(m, unit), 1e-12)
    m._update_rates()
    _place_balanced(m, _ids(m))
    return ScenarioRun("periodic-jitter", seed, m, 60, f"an on/off consumer on {t.name} flips every cycle")


def large_zipf(seed: int) -> ScenarioRun:
    m, rng = _new_model(
        seed, n_brokers=100, n_namespaces=40, bundles_per_ns=128, n_topics=200_000, zipf_s=0.6, drift=0.005
    )
    _calibrate(m, 0.5)
    _place_by_count(m, _ids(m), rng)
    return ScenarioRun(
        "large-zipf", seed, m, 20, "100 brokers, 5,120 bundles, 200,000 Zipf topics, spread by count", dag_decisions=12
    )


def _place_constrained(model: ClusterModel, brokers: Sequence[str]) -> None:
    """:func:`_place_balanced` within the placement constraints: each bundle (heaviest first) on the least
    used of the brokers Pulsar's placement could choose for it (:meth:`ClusterModel.placement_candidates`
    over the bundles placed so far)."""
    loads = _bundle_loads(model)
    used = {b: 0.0 for b in brokers}
    cap = {b: model.brokers[b].cores / 8.0 for b in brokers}
    placed: dict[str, str] = {}
    for bundle in sorted(loads, key=lambda x: (-loads[x], x)):
        base, kept = model.placement_candidates(bundle, owners=placed, live=brokers)
        cands = kept or base
        if not cands:
            raise ValueError(f"no broker satisfies the placement constraints of {bundle}")
        dest = min(cands, key=lambda b: (used[b] + loads[bundle]) / cap[b])
        used[dest] += loads[bundle]
        placed[bundle] = dest
    model.owners.update(placed)


def isolation_policy(namespaces: str, primary: str, secondary: str, min_limit: int) -> dict[str, Any]:
    """One ``NamespaceIsolationData`` in the admin endpoint's JSON: one regex each, ``min_available``."""
    return {
        "namespaces": [namespaces],
        "primary": [primary],
        "secondary": [secondary],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": str(min_limit), "usage_threshold": "80"},
        },
    }


PLACEMENT_CONSTRAINTS: Mapping[str, Any] = {
    "namespaceIsolationPolicies": {
        # four primaries and min_limit 4: when one is gone, its bundles fail over to the secondaries
        "payments": isolation_policy("payments/.*", "broker-[0-3]", "broker-(4|5)", 4),
        "analytics": isolation_policy("analytics/.*", "broker-(6|7)", "broker-8", 1),
    },
    "antiAffinityGroups": {"orders/eu": "orders", "orders/us": "orders", "orders/apac": "orders"},
}
"""The constraints of :func:`placement_constraints` (the ``decide`` contract's JSON)."""

CHANGED_ANALYTICS = isolation_policy("analytics/.*", "broker-(9|10)", "broker-11", 1)
"""The analytics policy after the mid-run change of :func:`placement_constraints`: new primaries."""


def placement_constraints(seed: int, *, cycles: int = 20, change_at: int | None = None) -> ScenarioRun:
    """24 brokers; ``payments/*`` isolated on brokers 0-3 (secondaries 4-5, min_limit 4), ``analytics/batch``
    on 6-7 (secondary 8), three ``orders/*`` namespaces in one anti-affinity group, four shared namespaces;
    placed balanced within the constraints. Broker 3 fails at cycle 3 (payments fails over to 4-5).
    ``change_at``: at that cycle the analytics policy moves to primaries 9-10 (secondary 11) - nothing moves
    (the existing ownership then breaks it, as in Pulsar until the next assignment)."""
    policies = parse_policies(PLACEMENT_CONSTRAINTS, "placement-constraints")
    events = [Event(3, "fail", broker="broker-3:8080")]
    if change_at is not None:
        changed = {
            **PLACEMENT_CONSTRAINTS,
            "namespaceIsolationPolicies": {
                **PLACEMENT_CONSTRAINTS["namespaceIsolationPolicies"],
                "analytics": CHANGED_ANALYTICS,
            },
        }
        events.append(Event(change_at, "policies", policies=parse_policies(changed, "changed")))
    bundles = {"payments/ledger": 16, "payments/cards": 16, "analytics/batch": 16}
    bundles |= {f"orders/{r}": 4 for r in ("eu", "us", "apac")}
    bundles |= {f"shared/ns-{i}": 16 for i in range(4)}
    m, _ = _new_model(
        seed,
        n_brokers=24,
        n_namespaces=0,
        bundles_per_ns=0,
        n_topics=3000,
        events=events,
        namespace_bundles=bundles,
        placement=policies,
    )
    for t in m.topics:  # lighter orders traffic: the group's bundles stay fewer than the brokers they may use
        if t.namespace.startswith("orders/"):
            t.base_rate *= 0.25
    _calibrate(m, 0.45)
    _place_constrained(m, _ids(m))
    return ScenarioRun(
        "placement-constraints", seed, m, cycles, "24 brokers, isolation policies with failover, an anti-affinity group"
    )


SCENARIOS: Mapping[str, Callable[[int], ScenarioRun]] = {
    "steady-with-noise": steady_with_noise,
    "scale-up": scale_up,
    "scale-down": scale_down,
    "rolling-restart": rolling_restart,
    "one-hot-broker": one_hot_broker,
    "hot-bundle-needs-split": hot_bundle_needs_split,
    "hot-single-topic-unsplittable": hot_single_topic,
    "heterogeneous": heterogeneous,
    "periodic-jitter": periodic_jitter,
    "large-zipf": large_zipf,
}


class _Options(threading.local):
    current: dict[str, Any]

    def __init__(self) -> None:
        self.current = {}


_OPTIONS = _Options()


@contextmanager
def _options(**opts: Any) -> Iterator[None]:
    saved = _OPTIONS.current
    _OPTIONS.current = opts
    try:
        yield
    finally:
        _OPTIONS.current = saved


FIXED_SIZE = frozenset({"scale-up", "scale-down", "rolling-restart"})
"""Scenarios whose events name brokers (``broker-8`` joins, ``broker-0`` restarts): their broker count is fixed."""

MAX_UTILIZATION = 1.8
"""The largest ``utilization`` factor :func:`build` takes (the scenarios' own loads are 40-60 % of the cluster)."""


def build(
    name: str,
    seed: int = 0,
    *,
    load_model: str | LoadModel | None = None,
    noise: float | None = None,
    rate_noise: float = 0.0,
    brokers: int | None = None,
    utilization: float = 1.0,
) -> ScenarioRun:
    """The named scenario for ``seed``; ``KeyError`` lists the known names.

    ``load_model``: a name of :data:`pulsar_rebalance.simulator.load_models.LOAD_MODELS` (default
    ``linear``); ``noise``: the CPU noise (default: the scenario's own, 2-3 %); ``rate_noise``: noise on
    the reported bundle and topic rates (default 0); ``brokers``: the cluster's broker count instead of
    the scenario's own (not for :data:`FIXED_SIZE`); ``utilization``: the cluster's load as a multiple of
    the scenario's own (its ideal usage, 40-60 %, times this). ``ValueError`` names a bad one."""
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    get_load_model(load_model)  # an unknown name fails here, before anything is built
    if brokers is not None and name in FIXED_SIZE:
        raise ValueError(f"scenario {name!r} names its brokers in its events: its broker count cannot be changed")
    if brokers is not None and brokers < 2:
        raise ValueError(f"brokers must be at least 2 (got {brokers})")
    if not 0 < utilization <= MAX_UTILIZATION:
        raise ValueError(f"utilization must be within (0, {MAX_UTILIZATION}] (got {utilization})")
    with _options(load_model=load_model, noise=noise, rate_noise=rate_noise, brokers=brokers, utilization=utilization):
        return SCENARIOS[name](seed)


__all__ = [
    "FIXED_SIZE",
    "MAX_UTILIZATION",
    "PLACEMENT_CONSTRAINTS",
    "SCENARIOS",
    "ScenarioRun",
    "build",
    "isolation_policy",
    "placement_constraints",
]
