"""Held-out load models: ways real brokers turn traffic into load that nobody tuned the planner on.

The five models of :mod:`pulsar_rebalance.simulator.load_models` (:data:`LOAD_MODELS`) are the ones the
balance benchmark runs by default and the planner was tuned on. These two are kept out of that set
(:data:`HELD_OUT_MODELS`; ``benchmarks/bench_balance.py --held-out`` runs exactly them) so that the
benchmark can say how the planner does on models it has not seen. :func:`get_load_model` finds them by
name like the others. Both are deterministic (noise is the cluster model's) and affine in the traffic,
with parts the rates do not scale (counts of topics, subscriptions, connections): :meth:`HeldOutModel.fit`
solves the scenarios' rate scaling exactly for them (and refuses a target the counts alone exceed).

A second set (:data:`HELD_OUT_MODELS_2`, ``bench_balance.py --held-out 2``, its own report) replaces the first
once the planner's author has seen it: ``tls-crypto`` and ``bookie-backpressure``, below the first two in the
table. They are not affine in the rates (per-broker speeds the reports do not show, a curve):
:meth:`BisectedFitModel.fit` solves the rate scaling by bisection on the ideal, which grows with the rates,
to machine precision (and refuses, with the same ``ValueError``, a target the counts alone reach). Every
scenario of :mod:`pulsar_rebalance.simulator.scenarios` builds under both (``tests/simulator``); CPU binds
where they calibrate (NICs at 10 Gbit/s, under 0.1x of it).

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
tls-crypto       CPU binds and much of it is TLS (``brokerServicePort`` off, ``brokerServicePortTls`` only):
                 ``cpu = 10 + 100*msg/s/80000 + 100*bytes/s/200MiB + g * (100*bytes/s/100MiB + 0.02 *
                 connections)``, bytes in + out. The JDK's SSLEngine (Pulsar's default ``tlsProvider``)
                 behind Netty's SslHandler decrypts and encrypts about 100 MiB/s per core with framing and
                 copies; each producer or consumer costs a full handshake (~10 ms of ECDHE + RSA-2048)
                 about every 50 s (reconnects, load-balancer idle timeouts) plus keep-alives: 0.02 % of a
                 core. Half the brokers (from the seed and the broker's id) are an older CPU generation:
                 ``g = 1.6`` (no VAES, lower clock) - the same cores and the same reported limit, so the
                 report shows it only as more CPU for the same traffic. Crypto is ~45 % of the traffic's
                 CPU on the newer generation where the scenarios calibrate; a start balanced by the
                 standard (newer) broker's measure leaves the older brokers ~20-30 % above the others.
                 *Ideal*: every broker at the same usage carrying the cluster's traffic mix.
bookie-          CPU binds, and a published message's cost depends on how hard its broker writes:
backpressure     ``cpu = 10 + c(w) * 100*msgIn/s/40000 + 100*msgOut/s/40000 + 100*bytes/s/200MiB``, ``w``
                 = the broker's published messages/s per core, ``c(w) = 0.6 + 1.6/(1 + w/1000) +
                 min(w/12000, 3)^2``. Concave, then convex: a lightly written broker pays for writes nobody
                 batches (one BookKeeper add request and Netty flush each, 2.2x at ``w = 0``), batching
                 and journal group commit bring it down (the minimum, ~1.03x, near 4,300 writes/s per
                 core), then the bookies back up (pending adds queue, ``maxPendingPublishRequestsPerConnection``
                 throttles and resumes, more wake-ups per message): 1.7x at 12,000/s per core (~100,000
                 entries/s for an 8-core broker), 2.9x at 18,000; the broker's write CPU ``w * c(w)`` turns from
                 concave to convex near 2,200 writes/s per core. Only writes follow the curve: a
                 dispatch-heavy bundle costs as under ``linear``. Where the scenarios calibrate (~5,300-7,000
                 writes/s per core) ``c`` is 1.05-1.15 and its slope is positive: a broker with twice the
                 average writes pays ~1.6x per write. *Ideal*: writes spread in proportion to the cores.
================ ==========================================================================================

Which strategies see memory at all: Pulsar's weighted usage (``getMaxResourceUsageWithWeight``, used by
ThresholdShedder, OverloadShedder, AvgShedder, the placement strategies and the do-no-harm guard) weighs
``memory`` and ``directMemory`` with ``loadBalancerMemoryResourceWeight`` /
``loadBalancerDirectMemoryResourceWeight``: 0 by default since Pulsar 3.x (``core/pulsar/config.py``, Pulsar
4.x), so with the defaults they ignore both; only the unweighted ``getMaxResourceUsage()`` (the
pre-PIP-358 ``OverloadShedderUnweighted``) counts them. The cluster model's lookup follows the weights
(:meth:`pulsar_rebalance.simulator.dynamics.ClusterModel.overload_usage`); the benchmark's metrics (true
usage, ideal, floor) count every resource the model reports.
"""

from __future__ import annotations

import random
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
        self._refuse_counts(fixed, target)
        factors = [(target - fixed[k]) / (full[k] - fixed[k]) for k in full if full[k] > fixed[k]]
        if factors:
            self._scale_rates(cluster, min(factors))

    def _refuse_counts(self, fixed: Mapping[str, float], target: float) -> None:
        """``ValueError`` naming the resources that the counts alone (``fixed``: the ideal per resource at rate
        0) put at or above ``target``."""
        over = {k: v for k, v in fixed.items() if v >= target}
        if over:
            raise ValueError(
                f"load model {self.name}: the topic and client counts alone put the cluster at "
                + ", ".join(f"{k} {v:.3f}" for k, v in over.items())
                + f", at or above the target {target}: no traffic calibrates it"
            )

    @staticmethod
    def _scale_rates(cluster: ClusterModel, f: float) -> None:
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


def scaled(load: Load, f: float) -> Load:
    """``load`` with every rate (messages and bytes, in and out) times ``f`` and the counts as they are: the
    cluster's load after its topics' base rates are scaled by ``f`` (the rates are linear in them)."""
    return Load(
        load.msg * f,
        load.msg_in * f,
        load.msg_out * f,
        load.thr_in * f,
        load.thr_out * f,
        load.topics,
        load.producers,
        load.consumers,
    )


class BisectedFitModel(HeldOutModel):
    """A held-out model whose ideal is not affine in the rates (per-broker speeds, a curve): :meth:`fit` finds
    the rate factor by bisection on the ideal, which grows with it."""

    @property
    def calibration_rounds(self) -> int:
        """One round after :meth:`fit` (which is exact): a no-op up to rounding."""
        return 1

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """Scale every topic's base rate so that the cluster's ideal usage is ``target`` (bisection to
        machine precision). ``ValueError`` when the counts alone reach it (no rate can)."""
        self.fit_costs(cluster, target)
        live = [cluster.brokers[b] for b in cluster.live_brokers()]
        load = Load.of(cluster.bundle_stats().values())

        def ideal(f: float) -> float:
            return self.ideal(scaled(load, f), live)

        self._refuse_counts(self.ideal_parts(scaled(load, 0.0), live), target)
        if load.msg <= 0 and load.thr_in + load.thr_out <= 0:
            return
        lo, hi = 0.0, 1.0
        for _ in range(200):
            if ideal(hi) >= target:
                break
            lo, hi = hi, hi * 2
        else:  # pragma: no cover - every model here grows without bound in the rates
            raise ValueError(f"load model {self.name}: no traffic reaches the target {target}")
        for _ in range(200):
            mid = (lo + hi) / 2
            if mid in (lo, hi):
                break
            lo, hi = (mid, hi) if ideal(mid) < target else (lo, mid)
        self._scale_rates(cluster, hi if ideal(hi) - target <= target - ideal(lo) else lo)


class TlsCryptoModel(BisectedFitModel):
    name = "tls-crypto"
    description = (
        "cpu = 10 + half linear's per-message cost + linear's per-byte cost + g * (1 core per 100 MiB/s of TLS "
        "bytes in+out + 0.02 %/connection of handshakes); g = 1.6 on the older CPU generation (half the brokers, "
        "same reported limits); 10 Gbit/s NICs (CPU binds)"
    )
    PLAIN_PER_MSG = CPU_PCT_PER_MSG / 2
    """The broker's per-message work that is not crypto (protocol, managed ledger, dispatch)."""
    PLAIN_PER_BYTE = CPU_PCT_PER_BYTE
    """Copies and checksums: one core per 200 MiB/s, as ``linear``."""
    TLS_PER_BYTE = 100.0 / (100.0 * MIB)
    """One core of the newer generation per 100 MiB/s decrypted (in) or encrypted (out): the JDK's SSLEngine
    (Pulsar's default ``tlsProvider``) with Netty's SslHandler, record framing and buffer copies."""
    HANDSHAKE_PER_CONNECTION = 0.02
    """CPU % of a core per producer or consumer connection: a full handshake (~10 ms of ECDHE + RSA-2048) every
    ~50 s on average (reconnecting clients, load-balancer idle timeouts) plus keep-alives through the cipher."""
    OLD_GENERATION = 1.6
    """The older generation's crypto cost over the newer one's (no VAES / wide carry-less multiply, lower clock)."""
    OLD_SHARE = 0.5
    """The chance that a broker is on the older generation (from the seed and its id)."""

    def __init__(self) -> None:
        self.generation: dict[str, float] = {}
        """Broker id -> its crypto cost factor (1 or :attr:`OLD_GENERATION`), set by :meth:`configure`."""

    def configure(self, broker: Broker, seed: int) -> None:
        super().configure(broker, seed)
        old = random.Random(f"{seed}:{self.name}:{broker.broker_id}").random() < self.OLD_SHARE
        self.generation[broker.broker_id] = self.OLD_GENERATION if old else 1.0

    def factor(self, broker: Broker) -> float:
        """The broker's crypto cost factor (1 for a broker :meth:`configure` has not seen, e.g. the reference)."""
        return self.generation.get(broker.broker_id, 1.0)

    def plain(self, load: Load) -> float:
        return self.PLAIN_PER_MSG * load.msg + self.PLAIN_PER_BYTE * (load.thr_in + load.thr_out)

    def crypto(self, load: Load) -> float:
        """CPU % of a newer-generation core for the TLS work."""
        return self.TLS_PER_BYTE * (load.thr_in + load.thr_out) + self.HANDSHAKE_PER_CONNECTION * (
            load.producers + load.consumers
        )

    def cpu(self, load: Load, base: float = CPU_BASE_PCT, factor: float = 1.0) -> float:
        """CPU % (``factor`` = the broker's generation; 1: the newer one, the reference broker's)."""
        return base + self.plain(load) + factor * self.crypto(load)

    def capacity_key(self, broker: Broker) -> tuple[float, ...]:
        return (broker.cores, broker.nic_mbps, self.factor(broker))

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        out = super().usage(broker, load)
        out["cpu"]["usage"] = self.cpu(load, factor=self.factor(broker))
        return out

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        """CPU: every broker at the same usage ``u``, each carrying a share of the cluster's traffic (same mix)
        that its generation allows: ``u = (1 + sum base/w_i) / sum(limit_i/w_i)`` with ``w_i = plain +
        g_i * crypto`` of the whole cluster's load. (A placement that sends the byte-heavy bundles to the newer
        generation can go a little below it.)"""
        parts = dict(super().ideal_parts(load, live))
        plain, crypto = self.plain(load), self.crypto(load)
        works = [plain + self.factor(b) * crypto for b in live]
        if live and all(w > 0 for w in works):
            parts["cpu"] = (1 + sum(CPU_BASE_PCT / w for w in works)) / sum(
                b.cpu_limit / w for b, w in zip(live, works, strict=True)
            )
        elif live:
            parts["cpu"] = max(CPU_BASE_PCT / b.cpu_limit for b in live)
        return parts


class BookieBackpressureModel(BisectedFitModel):
    name = "bookie-backpressure"
    description = (
        "a published message costs linear's per-message CPU times c(w), w = its broker's writes/s per core: "
        "c = 0.6 + 1.6/(1 + w/1000) + min(w/12000, 3)^2 (batching, then BookKeeper backpressure); dispatch and "
        "bytes as linear; 10 Gbit/s NICs (CPU binds)"
    )
    affine = False
    proportional_share = False
    PER_WRITE = CPU_PCT_PER_MSG
    PER_DISPATCH = CPU_PCT_PER_MSG
    FLOOR = 0.6
    """The per-write cost (times ``PER_WRITE``) with every batching gain and no backpressure."""
    UNBATCHED = 1.6
    """The extra cost of a write that nothing batches (a lone add per BookKeeper request and Netty flush)."""
    BATCH_RATE = 1000.0
    """Writes/s per core at which half the batching gain is reached."""
    SATURATION_RATE = 12_000.0
    """Writes/s per core at which backpressure alone costs a whole ``PER_WRITE`` (about 100,000 entries/s
    for a standard 8-core broker: its bookies' journals and the pending-add queue start to back up)."""
    CAP = 3.0
    """The backpressure term's input is capped at 3x :attr:`SATURATION_RATE` (at most 9x), so reports stay
    finite."""

    def write_cost(self, writes_per_core: float) -> float:
        """``c(w)``: a published message's CPU, in units of ``PER_WRITE``, at ``w`` writes/s per core."""
        w = max(writes_per_core, 0.0)
        pressure = min(w / self.SATURATION_RATE, self.CAP)
        return self.FLOOR + self.UNBATCHED / (1.0 + w / self.BATCH_RATE) + pressure * pressure

    def cpu(self, load: Load, base: float = CPU_BASE_PCT, cores: float = 8.0) -> float:
        """CPU % of ``load`` on a broker of ``cores`` (its writes per core set the curve's point)."""
        return (
            base
            + self.PER_WRITE * load.msg_in * self.write_cost(load.msg_in / cores)
            + self.PER_DISPATCH * load.msg_out
            + CPU_PCT_PER_BYTE * (load.thr_in + load.thr_out)
        )

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        out = super().usage(broker, load)
        out["cpu"]["usage"] = self.cpu(load, cores=broker.cores)
        return out

    def share(self, load: Load, ref: Broker) -> float:
        """A bundle alone on ``ref`` (its own writes set the curve's point), without the idle broker's base."""
        cpu = self.cpu(load, 0.0, ref.cores) / ref.cpu_limit
        nic = ref.nic_limit_kbps
        return max(cpu, load.thr_in * 8 / 1024 / nic, load.thr_out * 8 / 1024 / nic)

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        """CPU: the cluster's writes spread in proportion to the cores (every broker at the same point of the
        curve, the lowest total where the scenarios run: the curve is convex there), bases counted per broker."""
        parts = dict(super().ideal_parts(load, live))
        cores = sum(b.cores for b in live)
        if cores > 0:
            cpu = self.cpu(load, cores=cores) + CPU_BASE_PCT * (len(live) - 1)
            parts["cpu"] = cpu / sum(b.cpu_limit for b in live)
        return parts


HELD_OUT_LOAD_MODELS: Mapping[str, Callable[[], LoadModel]] = {
    "memory-bound": MemoryBoundModel,
    "per-topic-cost": PerTopicCostModel,
    "tls-crypto": TlsCryptoModel,
    "bookie-backpressure": BookieBackpressureModel,
}
HELD_OUT_MODELS = ("memory-bound", "per-topic-cost")
"""``("memory-bound", "per-topic-cost")``: not in :data:`LOAD_MODELS`, so not in the benchmark's default set."""
HELD_OUT_MODELS_2 = ("tls-crypto", "bookie-backpressure")
"""The second held-out set (``bench_balance.py --held-out 2``), kept apart from the first, which the planner's
author has seen."""
HELD_OUT_SETS: Mapping[str, tuple[str, ...]] = {"1": HELD_OUT_MODELS, "2": HELD_OUT_MODELS_2}
"""Held-out sets by name, as ``bench_balance.py --held-out [SET]`` takes them."""

__all__ = [
    "HELD_OUT_LOAD_MODELS",
    "HELD_OUT_MODELS",
    "HELD_OUT_MODELS_2",
    "HELD_OUT_SETS",
    "BisectedFitModel",
    "BookieBackpressureModel",
    "HeldOutModel",
    "MemoryBoundModel",
    "PerTopicCostModel",
    "TlsCryptoModel",
]
