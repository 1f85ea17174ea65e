"""Held-out load models, seventh set: ways real brokers turn traffic into load that nobody tuned the planner on.

A seventh set (:data:`HELD_OUT_MODELS_7`, ``bench_balance.py --held-out 7``, its own report), kept apart from the six
before it: ``smt-knee`` and ``offload-bursts``. Both are about what a unit of traffic costs when the cost is not known
in advance. Under ``smt-knee`` the reported CPU is what the hardware makes of the work: a broker's logical CPUs are
hyperthreads, so the second half of its reported capacity delivers far less work than the first, and the same bundle
costs a broker below the knee its linear CPU and one above it several times that. Under ``offload-bursts`` a broker
spends CPU and NIC in bursts that no bundle's reported rates show - tiered-storage offload and compaction of the bytes
its topics wrote - and the bursts come and go whatever the balancer does. ``smt-knee`` is a curve in the rates
(:meth:`BisectedFitModel.fit`); ``offload-bursts`` is affine in the rates on average (:meth:`HeldOutModel.fit`, exact).
Every scenario of :mod:`pulsar_rebalance.simulator.scenarios` builds under both at its target; CPU binds where they
calibrate (NICs at 10 Gbit/s: 0.14x of it under ``smt-knee``, 0.19-0.24x with the bursts' average read-back and upload
under ``offload-bursts``).

Written without reading the planner, from how Pulsar brokers behave. Kept in a module of its own so that every module a
stored benchmark run imported stays as it was: ``benchmarks/bench_balance.py`` resolves these names itself, and neither
the load-model registry (:func:`pulsar_rebalance.simulator.load_models.get_load_model`) nor the simulator's
:func:`pulsar_rebalance.simulator.cluster.resolve_load_model` knows them; they go in as instances (``build(...,
load_model=SmtKneeModel())``), one per cluster.

Units below: CPU in % of one logical CPU, as Pulsar reports it (``cpu.limit = cores * 100``); ``linear``'s costs are
``100/40000`` % per message/s (in + out) and ``100/200 MiB`` % per byte/s (in + out), 10 % for the idle broker; ``w`` is
a broker's ``linear`` CPU (idle base included) over its limit - the *work* it has, measured as CPU it would take on
cores with no busy sibling.

============== ============================================================================================
smt-knee       CPU binds, and a broker's logical CPUs are hyperthreads: two per physical core, each counted as a whole
               CPU in the limit (Pulsar's ``LinuxBrokerHostUsageImpl`` reports 100 % per logical CPU, from
               ``/proc/stat`` or the cgroup's ``cpuacct.usage`` against its quota, and ``cpu.limit = cores * 100``
               with ``cores`` the logical count - ``Runtime.availableProcessors()``). The kernel's scheduler puts a
               thread that wakes on an idle *physical* core first (``select_idle_sibling`` looks for an idle core
               before an idle sibling), so while at most half the logical CPUs are busy each busy thread has its core
               to itself and the work costs what ``linear`` says. Beyond half, every further busy logical CPU is the
               sibling of a busy one: the two share the core's pipelines and caches, together delivering ``1 + y``
               times one thread's throughput, ``y = 0.3`` (:attr:`SmtKneeModel.SMT_YIELD`; SMT gains of 15-30 % are
               what server workloads measure, and a broker's work - copies, checksums, Netty and managed-ledger
               pointer chasing - stalls on memory, which SMT hides best: the top of that range). So above the knee each
               unit of further work costs ``1/y = 3.33`` units of reported CPU. The reported usage (over the limit) is
               ``r(w) = min(w + (1/y - 1) * h(w - 0.5), 1)``, ``h(z) = 0`` for ``z <= -d``, ``(z + d)^2 / (4 d)`` for
               ``|z| < d``, ``z`` for ``z >= d``: the hinge at half the logical CPUs (:attr:`SmtKneeModel.KNEE`),
               smoothed over ``d = 0.05`` either side (:attr:`SmtKneeModel.SMOOTH`: the scheduler's spreading is not
               perfect - wake-ups now and then land on a busy core's sibling below half, and above it some cores keep
               one thread for a while); the slope goes from 1 to 3.33 across ``0.45 <= w <= 0.55``. Capped by the
               limit and nothing else: every logical CPU busy is 100 %, reached at ``w = 0.65`` (half the CPUs doing a
               whole core's work each, the other half 0.3 of one), and a broker with more work than that reads 100 %
               however much more it has (its work queues: what the report can show ends there). The benchmark's true
               usage is what the broker reports. Where the scenarios calibrate (ideal 0.45-0.6) the brokers sit on the
               knee: at 0.45 a broker is just below it (``w = 0.45``), at 0.5 ``w = 0.485``, at 0.6 ``w = 0.528``.
               A bundle moved off a broker above the band relieves it of 3.33x the bundle's linear CPU; onto a broker
               below the band it costs exactly its linear CPU. *one-hot-broker*'s hot broker (about twice the average
               work, ``w`` ~0.85) reads 100 %, and keeps reading it until it is below ``w = 0.65``. A bundle's share
               (what the scenarios place and scale by): its linear CPU (the work: additive; a balanced start is
               balanced). *Ideal*: every broker at the same ``w`` - the curve is the same function of ``w`` on every
               broker and increasing, so no placement has a lower worst broker - i.e. ``r`` of ``linear``'s ideal.
offload-bursts CPU binds, and a broker spends CPU and NIC in bursts that no bundle's rates show: tiered-storage offload
               (``managedLedgerOffloadAutoTriggerSizeThresholdBytes``: once a topic's ledgers in BookKeeper pass the
               threshold, the broker reads the oldest back from the bookies and uploads them to the object store) and
               topic compaction (``brokerServiceCompactionThresholdInBytes``: once a topic's backlog past its compaction
               horizon passes the threshold, the broker reads it back and writes the compacted ledger) - the same shape,
               folded into one: each time a topic has written ``T = 20 GiB`` (:attr:`OffloadBurstsModel.CHUNK_BYTES`)
               since its last burst, the broker owning its bundle at that moment processes those ``T`` bytes on one of
               its 2 offloader threads (:attr:`OffloadBurstsModel.THREADS`: ``managedLedgerOffloadMaxThreads``'
               default; a trigger while both are busy waits for one, first come first served) at ``R = 96 MiB/s``
               (:attr:`OffloadBurstsModel.THREAD_RATE`: one stream, a multipart upload's parts in sequence - about what
               one object-store stream sustains in-region), i.e. for ``D = T/R = 213 s``, spending ``1.5x``
               ``linear``'s per-byte CPU on each byte (:attr:`OffloadBurstsModel.PER_BYTE`: 1x to read it back - the
               BookKeeper read path, its checksums and copies, as a dispatched byte costs - and 0.5x to upload it: the
               blocks assembled and streamed through TLS, no per-message work): ``1.5 * 100 * R / 200 MiB = 72 %`` of
               one CPU while the burst runs, 9 % of a standard 8-core broker (18 % with both threads busy), and ``R``
               bytes/s on NIC in (the read-back) and on NIC out (the upload), then nothing. Two bursts of one hot topic
               may run at once, on the two threads (different ledgers; the model does not serialise a topic's own
               bursts). A topic's first trigger: its phase - the share of ``T`` written since its last burst when the
               model first reads the cluster - uniform, drawn from the seed in topic order; a topic whose last trigger
               falls within ``D`` before that reading is bursting then (backdated, queued as above: the bursts are about
               stationary from the first report). The written bytes are each topic's ``msgThroughputIn`` integrated
               over time, the rate read at an instant held until the next (the trigger's time interpolated inside the
               step). A burst does *not* follow its bundle's move: when a bundle moves, the source closes its topics
               and the running offload or compaction is abandoned (its partial upload is garbage), and the new owner,
               loading the topic, finds it still over the threshold and starts the work over: the burst is cut at the
               move on the source (freeing its thread) and queued whole, triggered at the move, on the new owner; a
               burst that was queued and not started goes the same way. Not in any reported ``msgRate`` or
               throughput: only in the broker's ``cpu`` and ``bandwidthIn`` / ``bandwidthOut``. Pulsar's usage is the
               average since its last sample (``loadBalancerHostUsageCheckIntervalMinutes``, 1 min): a report holds
               each burst's overlap with its last minute. Where the scenarios calibrate a broker writes 58-81 MiB/s: a
               trigger every 4.2-5.8 minutes, 0.6-0.85 of a thread busy on average (on *steady-with-noise*, per
               minute: no burst in 53 % of the reports, one in 34 %, two in 13 %; the busiest of ten brokers has two
               most of the time), on average ``1.5x`` linear's per-byte CPU of its written bytes: 0.055-0.075 of its
               limit, about an eighth of its CPU. Over the written bytes, the chunks and the phases, the long-run
               average of a broker's burst CPU is exactly ``1.5 * 100 * bytes in/s / 200 MiB`` (every written byte
               processed once, while the threads keep up; restarted work comes on top). Set 4's ``bundle-housekeeping``
               charged a steady cost of the stored bytes; this is the bursty cost of the written ones. A bundle's
               share: its linear CPU plus its average burst CPU (additive; a balanced start is balanced on average).
               *Ideal*: ``linear``'s plus the bursts' long-run average spread evenly (the CPU of the cluster's written
               bytes at ``1.5x`` the per-byte cost; the NICs likewise with the average read-back and upload): an
               instant with fewer bursts running than average can go below it, one with more cannot reach it.
============== ============================================================================================

How ``offload-bursts`` follows the cluster: the :class:`LoadModel` interface hands a model a broker and its summed
stats, no time and no history. The model attaches to the cluster in :meth:`~OffloadBurstsModel.fit` (which every
scenario's calibration calls; a hand-built cluster: :meth:`~OffloadBurstsModel.attach`) and reads the cluster's clock,
topics and ownership at the first :meth:`~OffloadBurstsModel.usage` call of each instant: the bytes written since the
last reading, the triggers in between (on the bundle's owner now), the moves since the last reading (dated at it: in
the closed loop the usages are sampled just before each decision, applied at that instant). Ownership that moved within
an instant (a lookup reading the usages while a decision or a leaving broker's bundles are being placed) is read again
when a broker's load no longer matches its bundles as read, the moves dated at that instant. Only a broker's own load
gets the bursts: :meth:`~OffloadBurstsModel.usage` adds them when the load's topic, producer and consumer counts are
the broker's as owned at the last reading; anything else (the floor's hottest topic alone, a full namespace's bundle
alone, any hypothetical) is charged as ``linear`` - the floor stays a lower bound (a broker that happens to own exactly
one bundle, asked about that bundle alone, is charged its bursts: it is its own load).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pulsar_rebalance.simulator.held_out_models import BisectedFitModel, HeldOutModel
from pulsar_rebalance.simulator.load_models import CPU_PCT_PER_BYTE, MIB, Load, LoadModel

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel

GIB = 1024 * MIB
_Counts = tuple[int, int, int]
"""Topics, producers, consumers: what tells a broker's own load from any other (:meth:`OffloadBurstsModel.is_own`)."""

# ---------------------------------------------------------------------------------------------- smt-knee


class SmtKneeModel(BisectedFitModel):
    name = "smt-knee"
    description = (
        "logical CPUs are hyperthreads: up to half of them busy, linear; beyond, each unit of work costs 1/0.3 = "
        "3.33x (a busy sibling adds 0.3 of a core), the knee smoothed over +-0.05, capped at the limit (reached at "
        "0.65 of linear's); 10 Gbit/s NICs (CPU binds)"
    )
    affine = False
    proportional_share = True  # a bundle's share: its linear CPU (the work), as convex-cpu's
    SMT_YIELD = 0.3
    """The throughput a busy sibling hyperthread adds to its core, in units of one thread alone on it."""
    KNEE = 0.5
    """The share of the logical CPUs busy when every physical core has one busy thread."""
    SMOOTH = 0.05
    """Half-width of the band (in work over the limit) over which the slope goes from 1 to ``1/SMT_YIELD``."""

    def hinge(self, z: float) -> float:
        """``h(z)``: 0 below ``-d``, ``(z + d)^2 / (4 d)`` inside the band, ``z`` above ``d``."""
        d = self.SMOOTH
        if z <= -d:
            return 0.0
        if z >= d:
            return z
        return (z + d) * (z + d) / (4.0 * d)

    def cpu_curve(self, utilisation: float) -> float:
        """Reported CPU / limit for work ``w`` / limit: ``min(w + (1/y - 1) h(w - KNEE), 1)``."""
        w = max(utilisation, 0.0)
        return min(w + (1.0 / self.SMT_YIELD - 1.0) * self.hinge(w - self.KNEE), 1.0)

    def reported_cpu(self, cpu: float, limit: float) -> float:
        return self.cpu_curve(cpu / limit) * limit if limit > 0 else cpu

    def work(self, reported: float) -> float:
        """The work / limit at which a broker reports ``reported`` / limit (below 1): the curve's inverse."""
        lo, hi = 0.0, 1.0
        for _ in range(200):
            mid = (lo + hi) / 2
            if mid in (lo, hi):
                break
            lo, hi = (mid, hi) if self.cpu_curve(mid) < reported else (lo, mid)
        return hi


# ---------------------------------------------------------------------------------------------- offload-bursts


@dataclass(frozen=True, slots=True)
class Burst:
    """One offload or compaction of a topic's written chunk: triggered at ``trigger_ms``, run by one of ``broker``'s
    offloader threads from ``start_ms`` to ``end_ms`` (cluster time; a burst cut short by a move ends at the move)."""

    topic: int
    """The topic's index in the cluster's ``topics``."""
    broker: str
    trigger_ms: float
    start_ms: float
    end_ms: float


class OffloadBurstsModel(HeldOutModel):
    name = "offload-bursts"
    description = (
        "linear CPU, plus bursts: each time a topic has written 16 GiB since its last, its bundle's owner reads them "
        "back and uploads them (tiered-storage offload, compaction) on one of its two offloader threads at 64 MiB/s, "
        "256 s: 48 % of a CPU each (1.5x linear's per-byte cost) and 64 MiB/s on each NIC, in no bundle's reported "
        "rates; a moved bundle's burst restarts on its new owner; 10 Gbit/s NICs (CPU binds)"
    )
    REPORT_WINDOW_S = 60.0
    """Pulsar's CPU usage is the average since the last sample (``loadBalancerHostUsageCheckIntervalMinutes``, 1)."""
    CHUNK_BYTES = 20.0 * GIB
    """Bytes a topic writes between two bursts (the threshold's worth)."""
    THREADS = 2
    """Offloader threads per broker (``managedLedgerOffloadMaxThreads``' default): at most this many bursts at once."""
    THREAD_RATE = 96.0 * MIB
    """Bytes/s one thread reads back and uploads (a multipart upload's parts in sequence, one stream)."""
    READBACK_PER_BYTE = CPU_PCT_PER_BYTE
    """CPU % per byte/s read back from the bookies (as a dispatched byte: the read path, checksums, copies)."""
    UPLOAD_PER_BYTE = 0.5 * CPU_PCT_PER_BYTE
    """CPU % per byte/s uploaded (blocks assembled and streamed through TLS; no per-message work)."""
    PER_BYTE = READBACK_PER_BYTE + UPLOAD_PER_BYTE

    def __init__(self) -> None:
        self.cluster: ClusterModel | None = None
        """The cluster whose topics, ownership and clock this model follows (:meth:`attach`)."""
        self.bursts: list[Burst] = []
        """The bursts running, queued, or ended within the last report window."""
        self.left: list[float] = []
        """Per topic (by index): bytes it still writes before its next trigger, as of the last reading."""
        self._rates: list[float] = []
        self._free: dict[str, list[float]] = {}
        self._seen: dict[str, str] | None = None
        self._seen_ms = 0
        self._bundle_counts: dict[str, _Counts] = {}
        self._owned: dict[str, _Counts] = {}
        self._single: set[_Counts] = set()
        self._misses: set[tuple[str, _Counts]] = set()
        self._extra: dict[str, float] | None = None

    # ------------------------------------------------------------------ the arithmetic
    @property
    def duration_s(self) -> float:
        """``D = T / R``: how long a burst runs on its thread."""
        return self.CHUNK_BYTES / self.THREAD_RATE

    @property
    def burst_cpu(self) -> float:
        """CPU % a running burst (one thread) costs its broker."""
        return self.PER_BYTE * self.THREAD_RATE

    def average_cpu(self, load: Load) -> float:
        """The long-run average burst CPU % of ``load``'s written bytes (every byte processed once)."""
        return self.PER_BYTE * load.thr_in

    def share(self, load: Load, ref: Broker) -> float:
        """A bundle's load on ``ref``: its linear CPU plus its average burst CPU; the NICs with the average read-back
        (in) and upload (out)."""
        nic = ref.nic_limit_kbps
        cpu = (self.cpu(load, 0.0) + self.average_cpu(load)) / ref.cpu_limit
        return max(cpu, 2 * load.thr_in * 8 / 1024 / nic, (load.thr_out + load.thr_in) * 8 / 1024 / nic)

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        """``linear``'s plus the bursts' long-run average spread evenly (CPU, read-back on NIC in, upload on NIC out)."""
        parts = dict(super().ideal_parts(load, live))
        cap_cpu = sum(b.cpu_limit for b in live)
        cap_nic = sum(b.nic_limit_kbps for b in live)
        if cap_cpu > 0:
            parts["cpu"] += self.average_cpu(load) / cap_cpu
        if cap_nic > 0:
            parts["bandwidthIn"] += load.thr_in * 8 / 1024 / cap_nic
            parts["bandwidthOut"] += load.thr_in * 8 / 1024 / cap_nic
        return parts

    def window_share(self, burst: Burst, now_ms: float) -> float:
        """The share of the report window ending at ``now_ms`` that ``burst`` runs in."""
        window_ms = self.REPORT_WINDOW_S * 1000.0
        overlap = min(burst.end_ms, now_ms) - max(burst.start_ms, now_ms - window_ms)
        return max(overlap, 0.0) / window_ms

    # ------------------------------------------------------------------ following the cluster
    def attach(self, cluster: ClusterModel) -> None:
        """Follow ``cluster`` from now on; the next reading draws the phases and takes the ownership as it is."""
        self.cluster = cluster
        self.bursts, self.left, self._rates, self._free = [], [], [], {}
        self._seen, self._bundle_counts, self._owned, self._single = None, {}, {}, set()
        self._misses, self._extra = set(), None

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """Attach to ``cluster``, then :meth:`HeldOutModel.fit` (exact: the average is affine in the rates)."""
        self.attach(cluster)
        super().fit(cluster, target)

    def _owner(self, topic: int) -> str:
        cluster = self.cluster
        assert cluster is not None
        return cluster.owners[cluster.bundle_of_topic(cluster.topics[topic].name)]

    def _assign(self, triggers: list[tuple[float, int, str]]) -> None:
        """Queue ``triggers`` (time, topic, broker) on their brokers' offloader threads, in order: each starts at its
        trigger or when a thread of its broker is free, whichever is later."""
        duration_ms = self.duration_s * 1000.0
        for at, topic, broker in sorted(triggers):
            free = self._free.setdefault(broker, [-math.inf] * self.THREADS)
            k = min(range(len(free)), key=free.__getitem__)
            start = max(at, free[k])
            free[k] = start + duration_ms
            self.bursts.append(Burst(topic, broker, at, start, start + duration_ms))

    def _start(self) -> None:
        """The first reading: every topic's phase from the seed, the bursts triggered within ``D`` before now."""
        cluster = self.cluster
        assert cluster is not None
        now = float(cluster.now_ms)
        rng = random.Random(f"{cluster.seed}:{self.name}")
        chunk, duration_ms = self.CHUNK_BYTES, self.duration_s * 1000.0
        self._rates = [t.rate_in * t.msg_size for t in cluster.topics]
        self.left = [rng.random() * chunk for _ in cluster.topics]
        triggers = []
        for i, (rate, left) in enumerate(zip(self._rates, self.left, strict=True)):
            if rate > 0:
                at = now - (chunk - left) / rate * 1000.0
                if at + duration_ms > now:
                    triggers.append((at, i, self._owner(i)))
        self._assign(triggers)
        self._seen_ms = cluster.now_ms
        self._regroup()

    def _integrate(self, now_ms: int) -> None:
        """The bytes every topic wrote since the last reading (at the rates read then), and the triggers in between,
        queued on the topics' owners now."""
        cluster = self.cluster
        assert cluster is not None
        last = float(self._seen_ms)
        dt = (now_ms - last) / 1000.0
        chunk = self.CHUNK_BYTES
        left, rates = self.left, self._rates
        triggers = []
        for i, t in enumerate(cluster.topics):
            rate = rates[i]
            rem = left[i] - rate * dt
            if rem <= 0.0 and rate > 0.0:
                at = last + left[i] / rate * 1000.0
                owner = self._owner(i)
                while True:
                    triggers.append((at, i, owner))
                    rem += chunk
                    if rem > 0.0:
                        break
                    at += chunk / rate * 1000.0
            left[i] = rem
            rates[i] = t.rate_in * t.msg_size
        self._assign(triggers)

    def _follow(self, at_ms: float) -> None:
        """The bundles that moved since the last reading, at ``at_ms``: their topics' running bursts are cut there and,
        with their queued ones, start over on the new owner (triggered at ``at_ms``); the brokers they left and joined
        queue what waits on their threads again."""
        owners: dict[int, str] = {}
        restarts: list[tuple[float, int, str]] = []
        touched: set[str] = set()
        kept: list[Burst] = []
        for b in self.bursts:
            if b.end_ms > at_ms:
                owner = owners.get(b.topic)
                if owner is None:
                    owner = owners[b.topic] = self._owner(b.topic)
                if owner != b.broker:
                    restarts.append((at_ms, b.topic, owner))
                    touched |= {owner, b.broker}
                    if b.start_ms < at_ms:
                        kept.append(Burst(b.topic, b.broker, b.trigger_ms, b.start_ms, at_ms))
                    continue
            kept.append(b)
        if not restarts:
            return
        waiting = [(b.trigger_ms, b.topic, b.broker) for b in kept if b.broker in touched and b.start_ms >= at_ms]
        self.bursts = [b for b in kept if b.broker not in touched or b.start_ms < at_ms]
        for broker in touched:
            busy = sorted(b.end_ms for b in self.bursts if b.broker == broker and b.end_ms > at_ms)
            self._free[broker] = busy + [at_ms] * (self.THREADS - len(busy))
        self._assign(waiting + restarts)

    def _count(self, bundle: str) -> _Counts:
        """``bundle``'s topics, producers and consumers (as its stats count them)."""
        assert self.cluster is not None
        topics = self.cluster.topics_of(bundle)
        producers = sum(t.producers for t in topics)
        return (len(topics), producers, sum(t.clients for t in topics) - producers)

    def _regroup(self) -> None:
        """Each broker's topic, producer and consumer counts as it owns its bundles now (a bundle's counts kept while it
        exists: only a split makes new ones)."""
        cluster = self.cluster
        assert cluster is not None
        owners = cluster.owners
        self._seen = dict(owners)
        known = self._bundle_counts
        self._bundle_counts = {bundle: known.get(bundle) or self._count(bundle) for bundle in owners}
        owned: dict[str, _Counts] = {}
        for bundle, (topics, producers, consumers) in self._bundle_counts.items():
            t, p, c = owned.get(owners[bundle], (0, 0, 0))
            owned[owners[bundle]] = (t + topics, p + producers, c + consumers)
        self._owned = owned
        self._single = set(self._bundle_counts.values())
        self._misses = set()
        self._extra = None

    def observe(self) -> None:
        """At a new instant: the moves since the last reading (dated at it), the bytes written and the triggers since,
        the bursts no report window holds any more forgotten."""
        cluster = self.cluster
        if cluster is None:
            return
        if self._seen is None:
            self._start()
            return
        now = cluster.now_ms
        if now == self._seen_ms:
            return
        changed = cluster.owners != self._seen
        if changed:
            self._follow(float(self._seen_ms))
        self._integrate(now)
        self._seen_ms = now
        horizon = now - self.REPORT_WINDOW_S * 1000.0
        self.bursts = [b for b in self.bursts if b.end_ms > horizon]
        if changed:
            self._regroup()
        self._extra = None

    def is_own(self, broker_id: str, load: Load) -> bool:
        """Whether ``load`` is ``broker_id``'s own (its counts are its bundles' as last read; the ownership read again,
        the moves dated now, when it moved within the instant)."""
        counts = (load.topics, load.producers, load.consumers)
        if self._owned.get(broker_id, (0, 0, 0)) == counts:
            return True
        if counts in self._single or (broker_id, counts) in self._misses:
            return False  # one bundle's counts (the floor's items), or already found not to be its own
        cluster = self.cluster
        assert cluster is not None
        if cluster.owners != self._seen:
            self._follow(float(cluster.now_ms))
            self._regroup()
            if self._owned.get(broker_id, (0, 0, 0)) == counts:
                return True
        self._misses.add((broker_id, counts))
        return False

    def running(self, broker_id: str) -> float:
        """The bursts of ``broker_id`` in the report window ending now, each weighted by the share of the window it ran
        in, summed (after :meth:`observe`): its burst CPU is this times :attr:`burst_cpu`, its burst bytes/s on each
        NIC this times :attr:`THREAD_RATE`. At most :attr:`THREADS`."""
        if self._extra is None:
            cluster = self.cluster
            assert cluster is not None
            now = float(cluster.now_ms)
            extra: dict[str, float] = {}
            for b in self.bursts:
                share = self.window_share(b, now)
                if share > 0.0:
                    extra[b.broker] = extra.get(b.broker, 0.0) + share
            self._extra = extra
        return self._extra.get(broker_id, 0.0)

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        """``linear``'s, plus, when ``load`` is the broker's own, what its bursts cost in the report's window: CPU and the
        read-back and upload bytes on the NICs."""
        out = super().usage(broker, load)
        if self.cluster is None:
            return out
        self.observe()
        if self.is_own(broker.broker_id, load):
            running = self.running(broker.broker_id)
            if running:
                kbps = running * self.THREAD_RATE * 8 / 1024
                out["cpu"]["usage"] += running * self.burst_cpu
                out["bandwidthIn"]["usage"] += kbps
                out["bandwidthOut"]["usage"] += kbps
        return out


HELD_OUT_LOAD_MODELS_7: Mapping[str, Callable[[], LoadModel]] = {
    "smt-knee": SmtKneeModel,
    "offload-bursts": OffloadBurstsModel,
}
HELD_OUT_MODELS_7 = tuple(HELD_OUT_LOAD_MODELS_7)
"""The seventh held-out set (``bench_balance.py --held-out 7``)."""

__all__ = [
    "GIB",
    "HELD_OUT_LOAD_MODELS_7",
    "HELD_OUT_MODELS_7",
    "Burst",
    "OffloadBurstsModel",
    "SmtKneeModel",
]
