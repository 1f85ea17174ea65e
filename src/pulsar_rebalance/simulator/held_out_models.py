"""Held-out load models: two ways real brokers turn traffic into load that nobody tuned the planner on.

The five models of :mod:`pulsar_rebalance.simulator.load_models` (:data:`LOAD_MODELS`) are the ones the
balance benchmark runs by default and the planner was tuned on. These two are kept out of that set
(:data:`HELD_OUT_MODELS`; ``benchmarks/bench_balance.py --held-out`` runs exactly them) so that the
benchmark can say how the planner does on models it has not seen. :func:`get_load_model` finds them by
name like the others. Both are deterministic (noise is the cluster model's) and affine in the traffic,
with parts the rates do not scale (counts of topics, subscriptions, connections): :meth:`HeldOutModel.fit`
solves the scenarios' rate scaling exactly for them (and refuses a target the counts alone exceed).

================ ==========================================================================================
memory-bound     memory binds, as Pulsar reports it (``memory`` = JVM heap, ``directMemory``, MiB):
                 ``directMemory = 256 + 12 s * bytes/s out / MiB + 0.125 * consumers`` (Netty's dispatch
                 buffers: read batches and outbound buffers held while consumers and TCP drain them, about
                 twelve seconds of dispatched bytes, plus 128 KiB per consumer), limit 256 MiB per core
                 (``-XX:MaxDirectMemorySize=2g`` on a standard 8-core broker); ``memory = 512 +
                 0.375 * topics + 0.125 * subscriptions`` (per-topic objects: managed ledger, stats,
                 producers; per-subscription cursor state), limit 512 MiB per core (``-Xmx4g``). Usage is
                 the live set (after GC), not the saw-tooth Pulsar samples. CPU is the linear model's;
                 NICs at 10 Gbit/s. On the scenarios' brokers (400-500 topics, ~640-800 subscriptions)
                 direct memory binds where they calibrate (CPU ~0.6x of it, heap ~0.35x, NIC < 0.1x);
                 on large-zipf (2,000 topics a broker) heap reaches ~0.8x of it
per-topic-cost   CPU binds and is mostly per-topic and per-connection work, not per message:
                 ``cpu = 10 + a * topics + b * (producers + consumers) + 100*msg/s/160000 +
                 100*bytes/s/800MiB`` (a quarter of the linear per-message and per-byte costs), NICs at
                 10 Gbit/s. ``a = 2b`` (a topic's own work - ledger, cursors, stats, scheduled tasks - as
                 much as two connections'); ``a`` and ``b`` are set per cluster (``fit_costs``) so that
                 its topics and connections take 30 % of its CPU capacity: 60 % of the CPU of a broker at
                 50 % usage (about 0.25 % and 0.12 % of a core on the 4,000-topic scenarios; a fifth of
                 that on large-zipf, whose brokers hold five times the topics: constant costs would
                 otherwise put those brokers above the target on topic counts alone). A bundle's CPU share
                 then follows its topic and client counts more than its message rate.
================ ==========================================================================================

Which strategies see memory at all: Pulsar's weighted usage (``getMaxResourceUsageWithWeight``, used by
ThresholdShedder, OverloadShedder, AvgShedder, the placement strategies and the do-no-harm guard) weighs
``memory`` and ``directMemory`` with ``loadBalancerMemoryResourceWeight`` /
``loadBalancerDirectMemoryResourceWeight``: 0 by default since Pulsar 3.x (``core/config.py``, Pulsar
4.x), so with the defaults they ignore both; only the unweighted ``getMaxResourceUsage()`` (the
pre-PIP-358 ``OverloadShedderUnweighted``) counts them. The cluster model's lookup follows the weights
(:meth:`pulsar_rebalance.simulator.dynamics.ClusterModel.overload_usage`); the benchmark's metrics (true
usage, ideal, floor) count every resource the model reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from pulsar_rebalance.simulator.load_models import (
    CPU_BASE_PCT,
    CPU_PCT_PER_BYTE,
    CPU_PCT_PER_MSG,
    MIB,
    Load,
    LoadModel,
)

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel


class HeldOutModel(LoadModel):
    """What both held-out models share: 10 Gbit/s NICs and an exact calibration of the rates."""

    NIC_FACTOR = 10.0

    def fit_costs(self, cluster: ClusterModel, target: float) -> None:
        """Per-cluster costs, set before the rates are scaled (default: none)."""

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """Set the per-cluster costs, then scale every topic's base rate so that the cluster's ideal usage
        is ``target``, exactly: per resource the ideal is ``c + v * f`` for a rate factor ``f`` (``c``
        from the counts and the brokers' base, ``v`` from the rates), and the smallest ``f`` at which one
        reaches ``target`` is the one. ``ValueError`` when the counts alone reach it (no rate can)."""
        self.fit_costs(cluster, target)
        live = [cluster.brokers[b] for b in cluster.live_brokers()]
        load = Load.of(cluster.bundle_stats().values())
        counts = Load(topics=load.topics, producers=load.producers, consumers=load.consumers)
        fixed = self.ideal_parts(counts, live)
        full = self.ideal_parts(load, live)
        over = {k: v for k, v in fixed.items() if v >= target}
        if over:
            raise ValueError(
                f"load model {self.name}: the topic and client counts alone put the cluster at "
                + ", ".join(f"{k} {v:.3f}" for k, v in over.items())
                + f", at or above the target {target}: no traffic calibrates it"
            )
        factors = [(target - fixed[k]) / (full[k] - fixed[k]) for k in full if full[k] > fixed[k]]
        if not factors:
            return
        f = min(factors)
        for t in cluster.topics:
            t.base_rate *= f
        cluster._update_rates()


class MemoryBoundModel(HeldOutModel):
    name = "memory-bound"
    description = (
        "direct memory = 256 MiB + 12 s of bytes/s out + 128 KiB/consumer (limit 256 MiB/core), heap = 512 MiB + "
        "384 KiB/topic + 128 KiB/subscription (limit 512 MiB/core); linear CPU, 10 Gbit/s NICs: memory binds"
    )
    HEAP_MB_PER_CORE = 512.0
    """``-Xmx4g`` on a standard 8-core broker (scaled with the cores)."""
    DIRECT_MB_PER_CORE = 256.0
    """``-XX:MaxDirectMemorySize=2g`` on a standard 8-core broker (scaled with the cores)."""
    HEAP_BASE_MB = 512.0
    HEAP_MB_PER_TOPIC = 0.375
    HEAP_MB_PER_SUBSCRIPTION = 0.125
    DIRECT_BASE_MB = 256.0
    DIRECT_SECONDS_OUT = 12.0
    """Seconds of dispatched bytes held in direct memory (read batches, outbound buffers)."""
    DIRECT_MB_PER_CONSUMER = 0.125

    def heap_limit(self, broker: Broker) -> float:
        return broker.cores * self.HEAP_MB_PER_CORE

    def direct_limit(self, broker: Broker) -> float:
        return broker.cores * self.DIRECT_MB_PER_CORE

    def heap(self, load: Load, base: float = HEAP_BASE_MB) -> float:
        """Heap MiB (``base`` = the idle broker's part; 0 for a bundle's share). A subscription is a
        consumer here: the model's consumers are its topics' fan-out, one subscription each."""
        return base + self.HEAP_MB_PER_TOPIC * load.topics + self.HEAP_MB_PER_SUBSCRIPTION * load.consumers

    def direct(self, load: Load, base: float = DIRECT_BASE_MB) -> float:
        """Direct memory MiB (``base`` = the idle broker's part; 0 for a bundle's share)."""
        return base + self.DIRECT_SECONDS_OUT * load.thr_out / MIB + self.DIRECT_MB_PER_CONSUMER * load.consumers

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        out = super().usage(broker, load)
        out["memory"] = {"usage": self.heap(load), "limit": self.heap_limit(broker)}
        out["directMemory"] = {"usage": self.direct(load), "limit": self.direct_limit(broker)}
        return out

    def share(self, load: Load, ref: Broker) -> float:
        return max(
            super().share(load, ref),
            self.heap(load, 0.0) / self.heap_limit(ref),
            self.direct(load, 0.0) / self.direct_limit(ref),
        )

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        n = len(live)
        return {
            **super().ideal_parts(load, live),
            "memory": (self.heap(load) + self.HEAP_BASE_MB * (n - 1)) / sum(self.heap_limit(b) for b in live),
            "directMemory": (self.direct(load) + self.DIRECT_BASE_MB * (n - 1))
            / sum(self.direct_limit(b) for b in live),
        }


class PerTopicCostModel(HeldOutModel):
    name = "per-topic-cost"
    description = (
        "cpu = 10 + a*topics + b*(producers+consumers) + a quarter of linear's per-message and per-byte costs, "
        "a = 2b set per cluster to 30 % of its CPU capacity; 10 Gbit/s NICs (CPU binds)"
    )
    FIXED_CAPACITY_SHARE = 0.3
    """Per-topic and per-connection work: this share of the cluster's CPU capacity (60 % of the CPU of a
    broker at 50 % usage, where most scenarios calibrate)."""
    TOPIC_OVER_CONNECTION = 2.0
    PER_MSG = CPU_PCT_PER_MSG / 4
    PER_BYTE = CPU_PCT_PER_BYTE / 4

    def __init__(self, per_topic: float = 0.25, per_connection: float = 0.125) -> None:
        """``per_topic`` / ``per_connection``: CPU % (of one core) per topic / per producer or consumer;
        the defaults are about what :meth:`fit_costs` sets on the 4,000-topic scenarios."""
        self.per_topic = per_topic
        self.per_connection = per_connection

    def cpu(self, load: Load, base: float = CPU_BASE_PCT) -> float:
        return (
            base
            + self.per_topic * load.topics
            + self.per_connection * (load.producers + load.consumers)
            + self.PER_MSG * load.msg
            + self.PER_BYTE * (load.thr_in + load.thr_out)
        )

    def fit_costs(self, cluster: ClusterModel, target: float) -> None:
        """``a`` and ``b`` so that the cluster's topics and connections cost :attr:`FIXED_CAPACITY_SHARE` of
        its CPU capacity (``a = 2b``), whatever the target: the traffic makes up the rest."""
        load = Load.of(cluster.bundle_stats().values())
        units = self.TOPIC_OVER_CONNECTION * load.topics + load.producers + load.consumers
        if units <= 0:
            return
        cap = sum(cluster.brokers[b].cpu_limit for b in cluster.live_brokers())
        self.per_connection = self.FIXED_CAPACITY_SHARE * cap / units
        self.per_topic = self.TOPIC_OVER_CONNECTION * self.per_connection


HELD_OUT_LOAD_MODELS: Mapping[str, Callable[[], LoadModel]] = {
    "memory-bound": MemoryBoundModel,
    "per-topic-cost": PerTopicCostModel,
}
HELD_OUT_MODELS = ("memory-bound", "per-topic-cost")
"""``("memory-bound", "per-topic-cost")``: not in :data:`LOAD_MODELS`, so not in the benchmark's default set."""

__all__ = ["HELD_OUT_LOAD_MODELS", "HELD_OUT_MODELS", "HeldOutModel", "MemoryBoundModel", "PerTopicCostModel"]
