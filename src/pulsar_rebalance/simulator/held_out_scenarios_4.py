"""Held-out scenarios, fourth set: kept in reserve until its first run, on core `1db165b8af` (the change it measured).

Written as the second and third sets were (:mod:`~pulsar_rebalance.simulator.held_out_scenarios_3`): without reading
the planner (neither its code under ``core/planner/``, nor its design notes and history, nor its tests) nor any
benchmark report, from how Pulsar places and serves load and what operators report, and developed with doing nothing
and Pulsar's own strategies only; each scenario's criteria (:data:`EXPECTATIONS_4`) were declared with it, before any
strategy ran on it, and its magnitudes (the loads, the shares, the capacity lost) set on doing nothing alone.
``benchmarks/bench_held_out_scenarios.py --set 4`` runs it; its first full run is the measure of the planner change
that follows. It reuses the earlier sets' machinery (:func:`~pulsar_rebalance.simulator.held_out_scenarios_2.churning`'s
topics that exist only part of the run, :class:`~pulsar_rebalance.simulator.held_out_scenarios_2.DegradedLoadModel`'s
broker that does less than it reports, :func:`~pulsar_rebalance.simulator.held_out_scenarios_3._add_namespace_topics`
and the calibration to an exact load) and :mod:`~pulsar_rebalance.simulator.scenarios`' helpers, and changes none of
the simulator's modules: what the existing models cannot say is said by subclasses of them
(:class:`ResizedClusterModel`: one namespace's messages grow; :class:`RecoveringLoadModel`: a degradation that ends)
and by the cluster model's own scheduled ``burst`` events (the old partitions' share falling at the increase).

Time is simulated minutes since the start, as in the earlier sets: ``run.cycles`` one-minute decisions at the
``minute`` cadence, ``run.dag_decisions`` (48: two days) hourly ones at the ``dag`` cadence. No profile here spans the
run: every scenario is the same at both cadences (the dag cadence sees the first hour's events at its second decision).

===================== ===================================================================================================
partition-increase    a partitioned topic (``shop/orders/orders``: a quarter of the cluster's traffic, its namespace
                      split to 64 bundles) has its partitions raised from 4 to 16 at minute 20
                      (``pulsar-admin topics update-partitioned-topic``): its producers spread the same traffic over 16
                      partitions, the 12 new ones hashed into 12 other bundles, on whatever brokers own them; the 4 old
                      partitions' brokers are left light, others heavier; it stays. At 45 %
bigger-messages       at minute 20 one namespace's producers (a new release: a schema with a larger payload, or
                      compression turned off) send messages 2.5x as large, as many of them: its bytes in and out x2.5,
                      its message rates and clients unchanged; it stays. At 45 %
bookie-recovery       broker-4's host also runs a bookie; from minute 30 to 70 that bookie takes part in BookKeeper's
                      autorecovery of a lost bookie's ledgers, taking 30 % of the host's CPU and NIC: broker-4 serves
                      the same bundles at the same rates and reports 1/0.7 the usage (about 65 %); once. At 45 %
whale-topics          balanced at 55 %; a namespace holds 3 "whale" topics (a CDC stream, a clickstream, an application
                      log) each 6 % of the cluster's traffic - about a third of a broker - beside 4000 small topics:
                      each whale's bundle is a big part of its broker, and no split can divide a topic; nothing else
                      happens
===================== ===================================================================================================

Each scenario's criteria are the balance benchmark's, as in the earlier sets: *not_worse*, *no_hot* and *moves*
everywhere; *steady* where nothing a move can fix happens (whale-topics), *jitter* where the load comes and goes
(bookie-recovery).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from pulsar_rebalance.core.pulsar.bundles import topic_hash
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Event, Topic
from pulsar_rebalance.simulator.held_out_scenarios import (
    CADENCES,
    Expectation,
    build_from,
)
from pulsar_rebalance.simulator.held_out_scenarios import HELD_OUT_SCENARIOS as SET_1
from pulsar_rebalance.simulator.held_out_scenarios_2 import HELD_OUT_SCENARIOS_2 as SET_2
from pulsar_rebalance.simulator.held_out_scenarios_2 import DegradedLoadModel, _minutes, churning
from pulsar_rebalance.simulator.held_out_scenarios_3 import HELD_OUT_SCENARIOS_3 as SET_3
from pulsar_rebalance.simulator.held_out_scenarios_3 import NEVER, _add_namespace_topics, _balanced
from pulsar_rebalance.simulator.load_models import LoadModel
from pulsar_rebalance.simulator.scenarios import (
    SCENARIOS,
    ScenarioRun,
    _load,
    _new_model,
    _topic_stats,
)

NAMESPACES = {f"tenant-{i % 4}/ns-{i}": 16 for i in range(8)}
"""The other tenants' namespaces, as in the earlier sets (8 of 16 bundles)."""


def _cluster(seed: int, namespace: str, bundles: int, events: Sequence[Event] = ()) -> tuple[ClusterModel, float]:
    """10 brokers and 4000 topics over :data:`NAMESPACES` and ``namespace`` (``bundles`` bundles), and the daily phase
    the scenario's own topics share (drawn from the seed, among the scenario helpers' phases)."""
    m, rng = _new_model(
        seed,
        n_brokers=10,
        n_namespaces=0,
        bundles_per_ns=0,
        n_topics=4000,
        namespace_bundles={**NAMESPACES, namespace: bundles},
        events=events,
    )
    return m, rng.choice((0.0, 0.1, 0.35, 0.6))


def _topic(name: str, msg_size: float, fanout: float, phase: float, producers: int) -> Topic:
    """One of a scenario's own topics (full name ``name``), at rate 1 until scaled."""
    ns = name.removeprefix("persistent://").rsplit("/", 1)[0]
    return Topic(name, ns, topic_hash(name), 1.0, msg_size, fanout, phase, producers)


# ---------------------------------------------------------------- a partitioned topic's partitions raised

PART_NS = "shop/orders"
PART_TOPIC = f"persistent://{PART_NS}/orders"
PART_BEFORE = 4
PART_AFTER = 16
PART_MIN = 20
PART_BUNDLES = 64
"""The namespace's bundles: split as it grew (it holds the cluster's busiest topic). With 16 even bundles the 16
partitions would hash into the same 4 bundles as the first 4 (crc32 is linear: names that differ only in their last
digits differ in their hashes by a function of those digits alone, and its top bits take 4 values for ``-partition-0``
to ``-partition-15``), and the increase would change no bundle's load; with 64, the 16 land in 16 bundles."""
PART_SHARE = 1 / 3
"""The partitioned topic's traffic as a fraction of the rest of the cluster's: a quarter of the whole."""
PART_MSG_SIZE = 1024.0
PART_FANOUT = 2.0
"""Two subscriptions read every partition (the order service and the analytics sink)."""
PART_PRODUCERS = 4
"""Producer instances: each connects to every partition (round-robin routing)."""
PART_CYCLES = 90
PART_LOAD = 0.45


def partition_name(i: int) -> str:
    """Partition ``i`` of the partitioned topic: a topic of its own (``<topic>-partition-<i>``), in the bundle its name
    hashes into."""
    return f"{PART_TOPIC}-partition-{i}"


def partition_increase(seed: int) -> ScenarioRun:
    """A team raises its busiest topic's partition count to scale its consumers: its producers (round-robin routing,
    partitions re-read every minute) spread the same traffic over 16 partitions instead of 4. The 12 new partitions are
    topics like any other, hashed into the namespace's bundles on whatever brokers own them; the old 4 carry a quarter
    of what they did. The total is unchanged; where it is, is not."""
    resets = [Event(PART_MIN, "burst", topic=partition_name(i), factor=1.0) for i in range(PART_BEFORE)]
    m, phase = _cluster(seed, PART_NS, PART_BUNDLES, resets)
    parts = [_topic(partition_name(i), PART_MSG_SIZE, PART_FANOUT, phase, PART_PRODUCERS) for i in range(PART_AFTER)]
    _add_namespace_topics(m, parts, PART_SHARE)  # the 16 at one rate: the traffic once spread
    for t in parts[:PART_BEFORE]:
        t.burst = PART_AFTER / PART_BEFORE  # until minute PART_MIN the same traffic on 4 partitions
    new = {t.name: (float(PART_MIN), NEVER) for t in parts[PART_BEFORE:]}
    return _balanced(
        "partition-increase",
        seed,
        churning(m, new),
        PART_LOAD,
        PART_CYCLES,
        f"{PART_TOPIC} ({PART_SHARE:.0%} more than the rest's traffic) from {PART_BEFORE} to {PART_AFTER} partitions at "
        f"minute {PART_MIN}, the new ones hashed into {PART_NS}'s bundles; it stays",
    )


# ---------------------------------------------------------------- a producer's messages grow

SIZE_NS = "tenant-2/ns-6"
SIZE_MIN = 20
SIZE_FACTOR = 2.5
"""The namespace's message size from SIZE_MIN on, as a multiple of what it was (bytes in and out; messages flat)."""
SIZE_CYCLES = 90
SIZE_LOAD = 0.45


class ResizedClusterModel(ClusterModel):
    """A :class:`ClusterModel` where, from ``from_minute`` on, every topic of namespace ``resized`` sends messages
    ``factor`` times as large: its throughputs (bytes in and out) ``factor`` higher, its message rates and clients
    unchanged. Made by :func:`resized`."""

    resized: str
    from_minute: float
    factor: float
    base_size: dict[str, float]

    def _update_rates(self) -> None:
        base = getattr(self, "base_size", None)
        if base is not None:
            f = self.factor if _minutes(self) >= self.from_minute else 1.0
            for t in self.topics:
                if t.namespace == self.resized:
                    t.msg_size = base[t.name] * f
        super()._update_rates()


def resized(model: ClusterModel, namespace: str, from_minute: float, factor: float) -> ResizedClusterModel:
    """``model`` with ``namespace``'s messages ``factor`` times as large from ``from_minute`` on."""
    model.__class__ = ResizedClusterModel
    assert isinstance(model, ResizedClusterModel)
    model.resized, model.from_minute, model.factor = namespace, from_minute, factor
    model.base_size = {t.name: t.msg_size for t in model.topics if t.namespace == namespace}
    model._update_rates()
    return model


def bigger_messages(seed: int) -> ScenarioRun:
    """A producer application's new release sends larger messages (a schema that carries more, compression turned
    off): as many messages as before, three times the bytes, for good. The brokers serving the namespace's bundles
    carry the bytes; its message rates - what Pulsar's placement counts - say nothing changed."""
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=0, bundles_per_ns=0, n_topics=4000, namespace_bundles=NAMESPACES)
    return _balanced(
        "bigger-messages",
        seed,
        resized(m, SIZE_NS, SIZE_MIN, SIZE_FACTOR),
        SIZE_LOAD,
        SIZE_CYCLES,
        f"from minute {SIZE_MIN} {SIZE_NS}'s messages {SIZE_FACTOR:g}x as large, as many of them: its bytes in and out "
        f"x{SIZE_FACTOR:g}, its message rates unchanged; it stays",
    )


# ---------------------------------------------------------------- a co-located bookie's recovery

RECOVERING = "broker-4:8080"
RECOVERY_START_MIN = 30
RECOVERY_END_MIN = 70
RECOVERY_CAPACITY = 0.7
"""The broker's capacity (cores and NIC) left while its host's bookie re-replicates: 30 % goes to the recovery."""
RECOVERY_CYCLES = 120
RECOVERY_LOAD = 0.45


class RecoveringLoadModel(DegradedLoadModel):
    """:class:`~pulsar_rebalance.simulator.held_out_scenarios_2.DegradedLoadModel` whose degradation ends: ``broker``
    works at ``capacity`` of its cores and NIC from ``from_minute`` to ``to_minute`` (excluded), reporting its limits
    unchanged, and is itself again after."""

    def __init__(self, base: LoadModel, broker: str, capacity: float, from_minute: float, to_minute: float) -> None:
        super().__init__(base, broker, capacity, from_minute)
        self.to_minute = to_minute
        self.description = (
            f"{base.description}; {broker} at {capacity:g}x its capacity from minute {from_minute:g} to {to_minute:g}"
        )

    def degraded(self, broker: Broker) -> bool:
        return super().degraded(broker) and self.clock() < self.to_minute


def bookie_recovery(seed: int) -> ScenarioRun:
    """A bookie elsewhere in the cluster is lost and BookKeeper's autorecovery re-replicates its ledgers; the bookie
    running on broker-4's host takes a large part in it for 40 minutes - reading and writing ledger fragments over the
    host's NIC, spending its CPU - and then it is over. The broker's bundles and their rates never change: only what the
    host has left to serve them."""
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    model = RecoveringLoadModel(m.load_model, RECOVERING, RECOVERY_CAPACITY, RECOVERY_START_MIN, RECOVERY_END_MIN)
    model.clock = lambda: _minutes(m)
    m.load_model = model
    return _balanced(
        "bookie-recovery",
        seed,
        m,
        RECOVERY_LOAD,
        RECOVERY_CYCLES,
        f"{RECOVERING.split(':')[0]}'s host at {RECOVERY_CAPACITY:.0%} of its capacity from minute {RECOVERY_START_MIN} "
        f"to {RECOVERY_END_MIN} (its co-located bookie's autorecovery), the same bundles and rates; once",
    )


# ---------------------------------------------------------------- a few whale topics among many small ones

WHALE_NS = "data/firehose"
WHALES = (
    ("cdc-orders", 512.0, 2.0),
    ("clickstream", 1024.0, 1.0),
    ("app-logs", 2048.0, 1.0),
)
"""(name, message size, fan-out) of each whale topic: a CDC stream read by two sinks, a clickstream, an application
log."""
WHALE_SHARE = 0.06
"""Each whale's share of the cluster's traffic (load under the load model): about a third of a broker at 55 %."""
WHALE_CYCLES = 60
WHALE_LOAD = 0.55


def whale_topics(seed: int) -> ScenarioRun:
    """Most clusters' traffic is a few topics' - a change-data-capture stream, a clickstream, an application's logs -
    beside thousands of small ones. Each whale makes its bundle a big part of a broker; but a split cannot divide a
    topic, and the placement is already as even as any can be."""
    m, phase = _cluster(seed, WHALE_NS, 16)
    whales = [_topic(f"persistent://{WHALE_NS}/{name}", size, fanout, phase, 8) for name, size, fanout in WHALES]
    for t in whales:  # one load each, whatever its size and fan-out
        t.rate_in, t.rate_out = t.base_rate, t.base_rate * t.fanout
        t.base_rate /= _load(m, _topic_stats(t))
    _add_namespace_topics(m, whales, len(whales) * WHALE_SHARE / (1 - len(whales) * WHALE_SHARE))
    return _balanced(  # churning with no lifetimes: the whales indexed into their bundles, all live throughout
        "whale-topics",
        seed,
        churning(m, {}),
        WHALE_LOAD,
        WHALE_CYCLES,
        f"{len(whales)} whale topics in {WHALE_NS}, each {WHALE_SHARE:.0%} of the traffic, beside 4000 small ones; "
        "nothing happens",
    )


HELD_OUT_SCENARIOS_4: Mapping[str, Callable[[int], ScenarioRun]] = {
    "partition-increase": partition_increase,
    "bigger-messages": bigger_messages,
    "bookie-recovery": bookie_recovery,
    "whale-topics": whale_topics,
}

ALWAYS = ("not_worse", "no_hot", "moves")

EXPECTATIONS_4: Mapping[str, Expectation] = {
    "partition-increase": Expectation(
        "a partitioned topic carrying a quarter of the traffic goes from 4 to 16 partitions at minute 20: the same "
        "traffic spread over 16, the 12 new partitions hashed into its namespace's bundles; it stays",
        ALWAYS,
        "the load the 4 old partitions' brokers carried is now on whichever brokers own the bundles the new partitions "
        "hash into, for good: the old partitions' brokers are left light, others heavier; even it out (moving bundles "
        "onto the brokers that lost the partitions), without pushing a broker over 85 % and with moves in proportion",
    ),
    "bigger-messages": Expectation(
        "one namespace's producers send messages 3x as large from minute 20, as many of them: its bytes in and out "
        "triple, its message rates and clients unchanged; it stays",
        ALWAYS,
        "the brokers serving that namespace's bundles carry its tripled bytes for good, which its message rates do not "
        "show: bring them back in line with the rest, without pushing a broker over 85 % and with moves in proportion",
    ),
    "bookie-recovery": Expectation(
        "broker-4's host loses 30 % of its CPU and NIC to its co-located bookie's autorecovery from minute 30 to 70, "
        "its bundles and their rates unchanged; once",
        ("not_worse", "no_hot", "jitter", "moves"),
        "the recovery ends within the hour and leaves every broker below 85 %: moves made for it are wrong once the "
        "host has its capacity back (and the bundles' rates never said anything changed), so at most 2 moves a "
        "simulated day, ending no higher than doing nothing",
    ),
    "whale-topics": Expectation(
        "balanced at 55 %; 3 whale topics, each 6 % of the cluster's traffic (about a third of a broker), beside "
        "thousands of small topics; nothing happens",
        ("not_worse", "no_hot", "steady", "moves"),
        "the placement is as even as any can be: each whale's broker carries its share and no more, a whale's bundle "
        "split leaves the whale whole, and moving it only moves the imbalance; a whale's broker rises and falls a few "
        "points with the whale's daily cycle, which no placement removes (even at one hour is uneven at another); "
        "nothing a move or split can fix, so the right number of moves is 0",
    ),
}
"""Each scenario's description and declared criteria, written with the scenarios, before any strategy ran on them."""


build = functools.partial(build_from, HELD_OUT_SCENARIOS_4)
"""``build(name, seed=0, *, load_model=None, noise=None, rate_noise=0.0, cadence="minute")``: the named scenario of the
fourth held-out set for ``seed`` (``KeyError`` lists the known names), as the first set's
:func:`~pulsar_rebalance.simulator.held_out_scenarios.build`; ``cadence`` is checked and passed on as in the earlier
sets, and no scenario of this set depends on it."""


assert not set(HELD_OUT_SCENARIOS_4) & set(SCENARIOS), "a held-out scenario shares a name with a tuned-on one"
assert not set(HELD_OUT_SCENARIOS_4) & set(SET_1), "a scenario of the fourth set shares a name with the first's"
assert not set(HELD_OUT_SCENARIOS_4) & set(SET_2), "a scenario of the fourth set shares a name with the second's"
assert not set(HELD_OUT_SCENARIOS_4) & set(SET_3), "a scenario of the fourth set shares a name with the third's"
assert set(EXPECTATIONS_4) == set(HELD_OUT_SCENARIOS_4)

__all__ = [
    "CADENCES",
    "EXPECTATIONS_4",
    "HELD_OUT_SCENARIOS_4",
    "RecoveringLoadModel",
    "ResizedClusterModel",
    "build",
    "partition_name",
    "resized",
]
