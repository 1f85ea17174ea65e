"""Held-out load models, third set: ways real brokers turn traffic into load that nobody tuned the planner on.

A third set (:data:`HELD_OUT_MODELS_3`, ``bench_balance.py --held-out 3``, its own report), kept apart from the two
the planner's author has seen (:mod:`pulsar_rebalance.simulator.held_out_models`): ``catch-up-reads`` and ``gc-pressure``, at the end of the table. In both, what a
bundle costs depends on what it shares its broker with, through parts of the traffic the reports show apart: the
bytes every bundle writes against the dispatch of the subscriptions that read behind (the broker's cache), the
topics and clients every bundle brings against every message (the broker's heap). ``catch-up-reads`` is a curve in
the rates (:meth:`BisectedFitModel.fit`); ``gc-pressure``'s heap follows the counts alone, so its ideal is affine in
the rates (:meth:`HeldOutModel.fit`, exact, after sizing the heap per cluster). Every scenario builds under both at
its target; CPU binds where they calibrate (NICs at 10 Gbit/s, under 0.2x of it).

Written without reading the planner, from how Pulsar brokers behave. Kept in a module of their own so that the
first two sets' module, and the load-model registry it extends, stay as the stored benchmark runs used them:
``benchmarks/bench_balance.py`` resolves these names itself, and
:func:`pulsar_rebalance.simulator.cluster.resolve_load_model` (the simulator's HTTP server and ``pulsar-rebalance
standalone --load-model``) finds them by name like the others.

================ ==========================================================================================
catch-up-reads   CPU binds, and a dispatched message costs more once the broker's managed-ledger cache no longer
                 holds it: ``cpu = linear + m * (3 * 100*lagMsg/s/40000 + 100*lagBytes/s/200MiB)`` and NIC in =
                 bytes in + ``m * lagBytes/s``. ``lag`` = what a topic's subscriptions past its first are
                 dispatched (out minus in): the first tails the writes, the others (analytics, sinks, batch
                 readers) read behind, 10 s on average, exponentially distributed; ``m = exp(-h / 10 s)`` is the
                 share of them the cache misses, ``h = min(60 s, cache / bytes in/s)`` the seconds of the broker's
                 writes its cache holds (an entry goes in as it is written, the oldest go first when the cache is
                 full). The cache is ``managedLedgerCacheSizeMB`` unset: a fifth of the direct memory, 4 GiB per 8
                 cores (``pulsar_env.sh``'s ``-XX:MaxDirectMemorySize=4g``): 819 MiB, scaled with the cores;
                 ``managedLedgerCacheEvictionTimeThresholdMillis`` is raised to 60 s (at its 1 s default every
                 reader more than a second behind reads from the bookies wherever it is placed: a linear cost).
                 A read from the bookies - a BookKeeper read request and response per entry, its digest checked,
                 buffers allocated - costs 3x linear's per-message CPU on top of the cached dispatch and linear's
                 per-byte CPU again, and its bytes arrive on the NIC (Pulsar's ``bandwidthIn`` is the host's NIC;
                 the bundles' ``msgThroughputIn`` does not show them). A per-broker curve of the mix, not of the
                 sum: the bytes every bundle writes shorten ``h``, the bundles with fan-out above 1 pay for it, so
                 moving a write-heavy bundle off relieves its neighbours' reads. Where the scenarios calibrate
                 (52-68 MiB/s in per 8 cores) ``h`` is 12-16 s, ``m`` 0.21-0.30 and the misses 10-14 % of the CPU;
                 a broker with twice the bytes in misses ~0.5 of its lagging reads (~4x the miss CPU). *Ideal*:
                 every broker carrying the cluster's mix in proportion to its cores (its cache): the same ``h``
                 everywhere. (A placement that keeps the big writers away from the fan-out can go a little below.)
gc-pressure      CPU binds and includes the JVM's collector threads (Pulsar's ``cpu`` is the whole process's):
                 ``cpu = linear + 0.25 * 100*msg/s/40000 * (0.1 + o) / min(0.5, 1 - o)``, messages in + out, ``o``
                 the broker's live heap over its ``-Xmx`` (capped at 0.95). Each message allocates its command,
                 entry and callback objects on the heap (payloads are in pooled direct memory: no per-byte term);
                 G1 collects eden when it fills, each young collection copying survivors and scanning the old
                 generation's dirty cards (``0.1 + o`` of a heap's worth of work), and eden is half the heap
                 (Pulsar's default ``PULSAR_GC`` sets ``-XX:G1NewSizePercent=50``) until the live set leaves less
                 than that free. Live set = 256 MiB + 192 KiB/topic (topic, managed ledger and cursor state, stats)
                 + 64 KiB/consumer (pending acks, deleted ranges, redelivery tracker) + 32 KiB/producer. The heap
                 scales with the cores and is sized per cluster (``fit_costs``) so that an even share of its topics
                 and clients fills 45 % of it (G1's ``InitiatingHeapOccupancyPercent``): 830-940 MiB per 8 cores on
                 the 4,000-topic scenarios, ~2 GiB on large-zipf (Pulsar's default ``-Xmx2g``). No ``memory`` is
                 reported: Pulsar samples the heap with its garbage (a saw-tooth, apache/pulsar#3199) and weighs it
                 0 since 3.0. An interaction of counts and rates per broker: a message costs more on a broker
                 holding more topics and clients, so moving a quiet bundle of many topics off relieves every
                 message left behind. Where the scenarios calibrate ``o`` = 0.45 (1.1 per message) and the
                 collector is ~17 % of the CPU; at ``o`` = 0.6 it is 1.75, at 0.75 3.4. *Ideal*: every broker
                 carrying the traffic, topics and clients in proportion to its cores (its heap): the same ``o``
                 everywhere. (A placement that gathers the quiet bundles of many topics can go a little below.)
================ ==========================================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from pulsar_rebalance.simulator.held_out_models import BisectedFitModel, HeldOutModel
from pulsar_rebalance.simulator.load_models import CPU_BASE_PCT, CPU_PCT_PER_BYTE, CPU_PCT_PER_MSG, MIB, Load, LoadModel

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel


class CatchUpReadsModel(BisectedFitModel):
    name = "catch-up-reads"
    description = (
        "linear CPU, plus reads that miss the managed-ledger cache (1/5 of 512 MiB direct memory per core): the "
        "dispatches of a topic's subscriptions past its first lag 10 s on average, the cache holds the broker's last "
        "cache/bytes-in seconds of writes (at most 60), a miss costs 3x linear's per-message CPU more plus linear's "
        "per-byte CPU and comes in over the NIC from the bookies; 10 Gbit/s NICs (CPU binds)"
    )
    affine = False
    proportional_share = False
    CACHE_MB_PER_CORE = 512.0 / 5
    """``managedLedgerCacheSizeMB`` unset: a fifth of the direct memory, ``-XX:MaxDirectMemorySize=4g`` on a standard
    8-core broker (Pulsar's ``pulsar_env.sh`` default), scaled with the cores: 819 MiB."""
    CACHE_TTL_S = 60.0
    """``managedLedgerCacheEvictionTimeThresholdMillis`` raised to 60 s (the default, 1 s, evicts every entry a
    second after it is written: every reader further behind reads from the bookies wherever it is placed)."""
    LAG_S = 10.0
    """Mean lag behind the write position of a topic's subscriptions past its first (exponentially distributed)."""
    MISS_PER_MSG = 3.0 * CPU_PCT_PER_MSG
    """A dispatched message read from the bookies: a BookKeeper read request and its response per entry, the entry
    decoded and its digest checked, buffers allocated: three times linear's per-message CPU on top of it."""
    MISS_PER_BYTE = CPU_PCT_PER_BYTE
    """The bytes read from the bookies cost what received bytes cost (one core per 200 MiB/s, as ``linear``)."""

    def cache_mb(self, cores: float) -> float:
        return cores * self.CACHE_MB_PER_CORE

    def horizon(self, thr_in: float, cores: float) -> float:
        """Seconds of the broker's writes its cache holds: the cache over the bytes written per second (entries go
        in as they are written and the oldest go first when it is full), at most :attr:`CACHE_TTL_S`."""
        if thr_in <= 0:
            return self.CACHE_TTL_S
        return min(self.CACHE_TTL_S, self.cache_mb(cores) * MIB / thr_in)

    def miss_ratio(self, thr_in: float, cores: float) -> float:
        """The share of the lagging reads the cache misses: those lagging more than the horizon."""
        return math.exp(-self.horizon(thr_in, cores) / self.LAG_S)

    @staticmethod
    def lagging(load: Load) -> tuple[float, float]:
        """Messages/s and bytes/s dispatched to the subscriptions past each topic's first: out minus in (a topic's
        first subscription dispatches what it is published)."""
        return max(0.0, load.msg_out - load.msg_in), max(0.0, load.thr_out - load.thr_in)

    def misses(self, load: Load, cores: float) -> tuple[float, float]:
        """Messages/s and bytes/s read from the bookies on a broker of ``cores`` carrying ``load``."""
        m = self.miss_ratio(load.thr_in, cores)
        msgs, thr = self.lagging(load)
        return m * msgs, m * thr

    def cpu(self, load: Load, base: float = CPU_BASE_PCT, cores: float = 8.0) -> float:
        """CPU % of ``load`` on a broker of ``cores`` (its cache and its bytes in set the miss ratio)."""
        miss_msgs, miss_bytes = self.misses(load, cores)
        return super().cpu(load, base) + self.MISS_PER_MSG * miss_msgs + self.MISS_PER_BYTE * miss_bytes

    def _parts(self, load: Load, cores: float, nic_kbps: float, base: float) -> dict[str, dict[str, float]]:
        miss_bytes = self.misses(load, cores)[1]
        return {
            "cpu": {"usage": self.cpu(load, base, cores), "limit": cores * 100.0},
            "bandwidthIn": {"usage": (load.thr_in + miss_bytes) * 8 / 1024, "limit": nic_kbps},
            "bandwidthOut": {"usage": load.thr_out * 8 / 1024, "limit": nic_kbps},
        }

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        """CPU with the misses; NIC in with the bytes read from the bookies (Pulsar's ``bandwidthIn`` is the host's
        NIC, not the bundles' ``msgThroughputIn``)."""
        return self._parts(load, broker.cores, broker.nic_limit_kbps, CPU_BASE_PCT)

    def share(self, load: Load, ref: Broker) -> float:
        """A bundle alone on ``ref`` (its own bytes in set its miss ratio), without the idle broker's base."""
        return max(r["usage"] / r["limit"] for r in self._parts(load, ref.cores, ref.nic_limit_kbps, 0.0).values())

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        """Every broker carrying the cluster's traffic mix in proportion to its cores (its cache): the same horizon
        everywhere; the idle base counted per broker."""
        cores = sum(b.cores for b in live)
        parts = self._parts(load, cores, sum(b.nic_limit_kbps for b in live), CPU_BASE_PCT * len(live))
        return {k: r["usage"] / r["limit"] for k, r in parts.items()}


class GcPressureModel(HeldOutModel):
    name = "gc-pressure"
    description = (
        "linear CPU, plus G1's: per message (in+out) 0.25x linear's per-message CPU times (0.1 + o)/min(0.5, 1 - o), "
        "o = the broker's live heap (256 MiB + 192 KiB/topic + 64 KiB/consumer + 32 KiB/producer) over its -Xmx, "
        "sized per cluster so that an even share of the topics and clients fills 45 %; 10 Gbit/s NICs (CPU binds)"
    )
    HEAP_BASE_MB = 256.0
    """The broker's own live set, whatever it serves (metadata and policy caches, the BookKeeper and metadata-store
    clients, the load manager, the web service)."""
    HEAP_MB_PER_TOPIC = 0.1875
    """192 KiB a topic: the topic and its managed ledger (ledger list, cursors' state), stats and rate objects,
    policies, schema, metric attributes."""
    HEAP_MB_PER_CONSUMER = 0.0625
    """64 KiB a consumer (and its subscription): the pending-acks map, the cursor's individually deleted ranges,
    the dispatcher's redelivery tracker."""
    HEAP_MB_PER_PRODUCER = 0.03125
    """32 KiB a producer: its stats and the deduplication state."""
    SIZED_AT = 0.45
    """The operator's sizing: -Xmx such that a broker with an even share of the cluster's topics and clients keeps its
    live set at G1's default ``InitiatingHeapOccupancyPercent`` (45 %)."""
    YOUNG_SHARE = 0.5
    """``-XX:G1NewSizePercent=50`` (Pulsar's default ``PULSAR_GC``): eden is half the heap while the live set leaves
    room for it, then only what the live set leaves free."""
    SURVIVORS = 0.1
    """What a young collection copies and scans besides the old generation's cards (survivors, roots), as a share of
    the heap."""
    GC_PER_MSG = 0.25 * CPU_PCT_PER_MSG
    OCCUPANCY_CAP = 0.95
    """The live set's share of the heap is capped (at 95 %: 21x the collection work of an empty heap), so reports stay
    finite where a real broker would run out of heap."""

    def __init__(self, heap_mb_per_core: float = 256.0) -> None:
        """``heap_mb_per_core``: -Xmx per core (the default: Pulsar's ``-Xmx2g`` on an 8-core broker); :meth:`fit_costs`
        sizes it per cluster."""
        self.heap_mb_per_core = heap_mb_per_core

    def heap_limit(self, cores: float) -> float:
        return cores * self.heap_mb_per_core

    def live_set(self, load: Load, base: float = HEAP_BASE_MB) -> float:
        """Live heap MiB (``base``: the broker's own, times the brokers when ``load`` is a whole cluster's)."""
        return (
            base
            + self.HEAP_MB_PER_TOPIC * load.topics
            + self.HEAP_MB_PER_CONSUMER * load.consumers
            + self.HEAP_MB_PER_PRODUCER * load.producers
        )

    def occupancy(self, load: Load, cores: float, base: float = HEAP_BASE_MB) -> float:
        """The live set over the heap, capped at :attr:`OCCUPANCY_CAP`."""
        heap = self.heap_limit(cores)
        return min(self.OCCUPANCY_CAP, self.live_set(load, base) / heap) if heap > 0 else self.OCCUPANCY_CAP

    def gc_factor(self, occupancy: float) -> float:
        """A young collection's work (survivors, roots, the old generation's cards: ``SURVIVORS + o``) over eden
        (``min(YOUNG_SHARE, 1 - o)``): GC CPU per allocated byte at live-set share ``o``."""
        o = min(max(occupancy, 0.0), self.OCCUPANCY_CAP)
        return (self.SURVIVORS + o) / min(self.YOUNG_SHARE, 1.0 - o)

    def gc(self, load: Load, occupancy: float) -> float:
        """CPU % of the collector for ``load``'s messages (in + out: each allocates its command, entry and callback
        objects on the heap; payloads are in pooled direct memory) at live-set share ``occupancy``."""
        return self.GC_PER_MSG * load.msg * self.gc_factor(occupancy)

    def cpu(self, load: Load, base: float = CPU_BASE_PCT, cores: float = 8.0, heap_base: float = HEAP_BASE_MB) -> float:
        """CPU % of ``load`` on a broker of ``cores`` (its heap) whose own live set is ``heap_base``."""
        return super().cpu(load, base) + self.gc(load, self.occupancy(load, cores, heap_base))

    def fit_costs(self, cluster: ClusterModel, target: float) -> None:
        """-Xmx per core such that the live brokers, each with an even share (by cores) of the cluster's topics and
        clients, hold :attr:`SIZED_AT` of their heap live."""
        live = [cluster.brokers[b] for b in cluster.live_brokers()]
        cores = sum(b.cores for b in live)
        if cores <= 0:
            return
        load = Load.of(cluster.bundle_stats().values())
        self.heap_mb_per_core = self.live_set(load, self.HEAP_BASE_MB * len(live)) / (self.SIZED_AT * cores)

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        """CPU with the collector's threads (Pulsar reports the process's CPU); no ``memory``: Pulsar's sample of the
        heap is a saw-tooth of garbage, not the live set (its weight is 0 since Pulsar 3.0)."""
        out = super().usage(broker, load)
        out["cpu"]["usage"] = self.cpu(load, cores=broker.cores)
        return out

    def share(self, load: Load, ref: Broker) -> float:
        """A bundle alone on ``ref`` (beside the broker's own live set), without the idle broker's base."""
        cpu = self.cpu(load, 0.0, ref.cores) / ref.cpu_limit
        nic = ref.nic_limit_kbps
        return max(cpu, load.thr_in * 8 / 1024 / nic, load.thr_out * 8 / 1024 / nic)

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        """Every broker carrying the cluster's traffic, topics and clients in proportion to its cores (its heap): the
        same live-set share everywhere; bases counted per broker."""
        parts = dict(super().ideal_parts(load, live))
        cores = sum(b.cores for b in live)
        if cores > 0:
            n = len(live)
            cpu = self.cpu(load, CPU_BASE_PCT * n, cores, self.HEAP_BASE_MB * n)
            parts["cpu"] = cpu / sum(b.cpu_limit for b in live)
        return parts


HELD_OUT_LOAD_MODELS_3: Mapping[str, Callable[[], LoadModel]] = {
    "catch-up-reads": CatchUpReadsModel,
    "gc-pressure": GcPressureModel,
}
HELD_OUT_MODELS_3 = tuple(HELD_OUT_LOAD_MODELS_3)
"""The third held-out set (``bench_balance.py --held-out 3``)."""

__all__ = ["HELD_OUT_LOAD_MODELS_3", "HELD_OUT_MODELS_3", "CatchUpReadsModel", "GcPressureModel"]
