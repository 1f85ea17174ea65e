"""Held-out load models, fifth set: ways real brokers turn traffic into load that nobody tuned the planner on.

A fifth set (:data:`HELD_OUT_MODELS_5`, ``bench_balance.py --held-out 5``, its own report), kept apart from the four
before it: ``batching-concave`` and ``cold-arrival``. Every model so far charges a message the same wherever it is
and whenever it got there, or more on a busier broker (a convex curve, the random family's ``K >= 0``). These two
break that from the other side. Under ``batching-concave`` a message costs *less* on a busier broker (the broker
amortises its per-message overheads over more work), so a bundle's true marginal cost depends on where it is: moving
load off a hot broker relieves it less than the bundle's share of its rates suggests, and a light destination pays
more per message than the source did. Under ``cold-arrival`` a move itself costs CPU: the destination works for a
while to take the bundle in (clients reconnect, topics load, subscriptions catch up from the bookies), so a strategy
that moves a lot pays for it, and the destination's next report shows a spike the bundle's rates do not explain.
``batching-concave`` is a curve in the rates (:meth:`BisectedFitModel.fit`); ``cold-arrival`` is exactly linear in
steady state, so its ideal is affine (:meth:`HeldOutModel.fit`, exact). Every scenario of
:mod:`pulsar_rebalance.simulator.scenarios` builds under both at its target; CPU binds where they calibrate (NICs at
10 Gbit/s, 0.15-0.17x of it).

Written without reading the planner, from how Pulsar brokers behave. Kept in a module of its own so that every module a
stored benchmark run imported stays as it was: ``benchmarks/bench_balance.py`` resolves these names itself, and
neither the load-model registry (:func:`pulsar_rebalance.simulator.load_models.get_load_model`) nor the simulator's
:func:`pulsar_rebalance.simulator.cluster.resolve_load_model` knows them; they go in as instances
(``build(..., load_model=ColdArrivalModel())``), one per cluster.

Units below: CPU in % of one core, as Pulsar reports it (``cpu.limit = cores * 100``); ``linear``'s costs are
``100/40000`` % per message/s (in + out) and ``100/200 MiB`` % per byte/s (in + out), 10 % for the idle broker.

================ ==========================================================================================
batching-concave CPU binds, and a broker's per-message CPU falls as it gets busier: ``cpu = 10 + 100*msg/s/40000 *
                 g(x) + 100*bytes/s/200MiB`` (messages and bytes in + out, the broker's own sums), ``x`` = the
                 broker's messages/s (in + out) per core, ``g(x) = ((x + 500) / (15000 + 500))^-0.25``. Its traffic
                 CPU grows like ``msg^0.75`` well above 500 messages/s per core: concave everywhere (no queueing
                 turns it convex below 100 % - the reported CPU is the process's, whatever the latency). Why:
                 Pulsar's paths are asynchronous pipelines of thread pools (Netty I/O threads, the managed ledger's
                 ordered executors, the BookKeeper client's threads, the dispatchers); on a quiet broker nearly every
                 message finds the next thread parked and pays a wake-up (a futex and a context switch) at every
                 hand-off, each ``epoll_wait`` returns one ready channel, each dispatcher read fetches one entry;
                 on a busy one threads stay runnable and drain their queues in runs, ``epoll_wait`` returns many
                 channels, a dispatcher with entries waiting reads up to ``dispatcherMaxReadBatchSize`` (100) per
                 read and writes them to the consumer in one event-loop task with one flush
                 (``PulsarCommandSenderImpl.sendMessagesToConsumer``), the BookKeeper client's per-bookie channels
                 carry adds from every ledger of the broker, and the hot paths stay compiled and in the CPU's
                 caches. Those overheads are per message and per hand-off, not per byte: copies and checksums
                 (CRC32C) scale with the bytes, so the per-byte CPU stays linear. Per core, because the thread pools
                 scale with the cores (``numIOThreads`` and the executors default to the core count or twice it): a
                 16-core broker at twice an 8-core broker's rate amortises as well. Parameters: the exponent 0.25 (a
                 judgment: the middle of 0.2-0.3; doubling a broker's messages multiplies their CPU by ``2^0.75 =
                 1.68``, halving them by 0.59); 15,000 messages/s per core is where a message costs what
                 it costs under ``linear`` (where the scenarios calibrate: 11,600-19,500 per core, ``g`` =
                 0.94-1.06); below ~500 per core the amortisation stops growing (``g(0) = 2.36``: a message on an
                 idle broker costs 2.4x, about what ``bookie-backpressure``'s lone write does, 2.2x). No draws. Where
                 the scenarios calibrate: a broker with twice the average rate pays 0.85x per message what a broker
                 at the average pays, one with half of it 1.18x, a just-joined broker taking its first bundle (~1,200
                 messages/s per core) 1.75x; moving a tenth of a
                 hot broker's messages relieves it of 7.6 % of its per-message CPU, not 10 %. A bundle's share (what
                 the scenarios place and scale by): its CPU on a broker at the cluster's average rate per core
                 (:attr:`BatchingConcaveModel.operating_rate`, set when fitted) - additive, so a balanced start is
                 balanced. *Ideal*: every broker carrying the cluster's traffic in proportion to its cores (the
                 same ``x`` everywhere), bases counted per broker: the lowest worst broker on equal brokers (the
                 cost grows with the rate, so no broker can be below the average without another above it); with
                 brokers of different sizes a placement can go a hair below it (the idle base weighs less on the
                 bigger one).
cold-arrival     CPU binds; steady state is exactly ``linear``, and a bundle that arrives on a broker costs it extra
                 CPU for a while, which the load reports show but the bundle's rates do not. When Pulsar unloads a
                 bundle, the source closes its topics and releases it, its clients are disconnected, look the topics
                 up again (``CommandLookupTopic``, redirects; the client reconnects after 100 ms and backs off by
                 doubling) and reconnect to the new owner, which loads each topic: ``cpu = linear +`` per arrival
                 ``E_c * w(a, 5 s) + E_u * w(a, tau_u)`` on the destination and, per departure, ``E_r * w(a, 1 s)`` on
                 the source; ``a`` the seconds since the move and ``w(a, tau)`` what a decaying exponential
                 (``exp(-a/tau)/tau``, integral 1) puts in the report's window: Pulsar's CPU usage is the average over
                 the last ``loadBalancerHostUsageCheckIntervalMinutes`` (1 min: ``w = (e^(-max(a-60,0)/tau) -
                 e^(-a/tau)) / 60``). Priced from the bundle's topics at their current rates and counts (the
                 ``linear`` costs ``m_in, m_out`` % per message/s in and out with bytes, i.e. ``100/40000 +
                 100*size/200MiB``):
                 ``E_c`` (connect, over ~5 s) = per client (producer or consumer) 5 ms of CPU (connect, authenticate,
                 lookup and redirect, the PRODUCER/SUBSCRIBE command; about twice that with TLS) + per topic 20 ms
                 (the managed ledger opened: its metadata read and parsed, a new ledger created - ensemble placement,
                 a metadata write - policies, schema, stats) + per subscription (consumer) 5 ms (its cursor recovered:
                 the mark-delete position and individually deleted ranges read back, a dispatcher created) + the
                 producers republishing the ~5 s the topics were unowned (``GAP_S``: their pending queues): ``5 s *
                 m_in * msgIn``.
                 ``E_u`` (catch-up, ``tau_u`` = 33 s) = the subscriptions dispatching the gap's backlog and the
                 ~2 s of dispatched but unacknowledged messages they get again (the cursor rewinds to its mark-delete
                 position): ``B = 7 s`` of ``m_out * msgOut``, + reading it from the bookies: the new owner's
                 managed-ledger cache holds none of it (the backlog arrives before the cursors are active again,
                 and a cursor behind the tail reads from the bookies, ``managedLedgerCacheEvictionTimeThresholdMillis``
                 1 s), and a subscription catching up at ``(1 + h)`` times its steady rate reads everything from the
                 bookies for ``B / h`` seconds: with ``h``, the consumers' spare capacity, log-uniform from 5 % to
                 200 % over the subscriptions, ``B * E[(1+h)/h] = 44 s`` of the bundle's dispatch read cold, each
                 message 3x ``linear``'s per-message CPU and once more its bytes (a BookKeeper read request and
                 response per entry, its digest checked, buffers allocated - as ``catch-up-reads``); ``tau_u`` = the
                 mean age of that work, ``B * E[(1+h)/h^2] / (2 E[(1+h)/h])``.
                 ``E_r`` (release, at the source, over ~1 s) = the bundle's traffic for the second it takes to close
                 (the unload comes right after the decision; the cluster model moves the bundle at once) + per topic
                 10 ms (its managed ledger closed, each cursor's position persisted) + per client 1 ms (the close
                 commands). A split in place costs nothing (Pulsar's split, without ``unload``, re-maps the loaded
                 topics to the children - ``refreshTopicToStatsMaps`` - and writes the namespace's bundles once; no
                 client disconnects); a split child unloaded elsewhere is an arrival; a broker leaving or failing
                 makes arrivals wherever lookup puts its bundles. Where the scenarios calibrate (a bundle of ~31
                 topics and ~90 clients, fan-out ~1.6) an arrival costs 74-84 s of the bundle's own steady CPU (10th
                 to 90th percentile; the cold reads ~70 of it), ~85 % of it in the first report after the move: that
                 report shows the destination carrying the bundle about twice (+1.05x to +1.2x its CPU), the next
                 +0.17x, the third +0.03x, under 0.5 % from the fifth minute on (a move is forgotten after 30 min,
                 where less than 1e-22 of its cost is left: steady state is exactly linear); the source's first
                 report +0.04x. On large-zipf (~39 topics and ~115 clients a bundle, a seventh of the traffic) the
                 counts weigh more: ~100 s, +1.5x in the first report. So the cost lives in the first minute or two,
                 not 5-15: the numbers above do not stretch further (a catch-up lasts ``B/h``, 2.3 min at 5 % spare
                 capacity). A decision every minute sees the spike once; one every hour (the
                 DAG's) sees none of it, since the usage is sampled 45 minutes after its moves. *Ideal*: ``linear``'s
                 (every broker carrying the same share; no move is needed to keep a balanced cluster there).
================ ==========================================================================================

How ``cold-arrival`` knows when a bundle arrived: the :class:`LoadModel` interface hands a model a broker and its
summed stats, no time and no history. The model attaches to the cluster in :meth:`~ColdArrivalModel.fit` (which every
scenario's calibration calls; a hand-built cluster: :meth:`~ColdArrivalModel.attach`) and reads the cluster's clock
(``now_ms``) and ownership (``owners``) on every :meth:`~ColdArrivalModel.usage` call, comparing the ownership with
what it last saw, once per instant (the first call at each ``now_ms``; the floor alone asks ~5,000 times a decision on
large-zipf): a bundle with another owner arrived there; a bundle it has not seen is a split child, an arrival if its
owner is not its parent's. A change is dated to the last instant read before it: in the closed loop the usages are
sampled just before each decision and the decision is applied at that instant, so a move is dated exactly, and so are
the bundles of a broker that leaves, fails or restarts (lookup reads the usages before it places them); a plan the DAG
applies 15 minutes after its decision is dated at the decision unless a lookup read the usages in between (its cost
has decayed long before the next sample, 45 minutes later, either way). Until the clock moves, a broker whose bundles
changed is charged as ``linear`` (its move's cost starts at 0 anyway; an earlier arrival's rest is left out for that
instant: only lookups placing the same decision's bundles ask then). The first reading sees the scenario's placement as
it is (no arrival). A bundle moved away and back between two readings, or unloaded onto its own broker, is not seen
(the cluster model does not count either as a move). Only a broker's own load gets the extra:
:meth:`~ColdArrivalModel.usage` adds it when the load's topic, producer and consumer counts are the broker's as owned at
the last reading; anything else (the floor's hottest topic alone on a broker, a full namespace's bundle alone, a
hypothetical) is charged as ``linear``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pulsar_rebalance.core.pulsar.bundles import BundleRange, split_full_name
from pulsar_rebalance.simulator.held_out_models import BisectedFitModel, HeldOutModel
from pulsar_rebalance.simulator.load_models import CPU_BASE_PCT, CPU_PCT_PER_BYTE, CPU_PCT_PER_MSG, Load, LoadModel

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Topic


# ---------------------------------------------------------------------------------------------- batching-concave


class BatchingConcaveModel(BisectedFitModel):
    name = "batching-concave"
    description = (
        "per-message CPU falls as the broker gets busier: linear's per-message CPU times ((x + 500)/15500)^-0.25, "
        "x = the broker's messages/s (in + out) per core (thread hand-offs, reads and flushes amortised over more "
        "work); per-byte CPU linear; 10 Gbit/s NICs (CPU binds)"
    )
    affine = False
    proportional_share = True  # a bundle's share: linear in its rates at the cluster's operating point
    EXPONENT = 0.25
    """Per-message CPU times ``rate^-EXPONENT``: the traffic's per-message CPU grows like ``rate^0.75``."""
    REFERENCE_RATE = 15_000.0
    """Messages/s (in + out) per core at which a message costs ``linear``'s (where the scenarios calibrate)."""
    FLOOR_RATE = 500.0
    """Messages/s per core below which the amortisation stops growing: ``g(0) = (500/15500)^-0.25 = 2.36``."""
    PER_MSG = CPU_PCT_PER_MSG
    PER_BYTE = CPU_PCT_PER_BYTE

    def __init__(self) -> None:
        self.operating_rate = self.REFERENCE_RATE
        """Messages/s per core of the cluster this model was last fitted to (before: :attr:`REFERENCE_RATE`): where
        :meth:`share` prices a bundle."""

    def per_message_factor(self, rate_per_core: float) -> float:
        """``g(x)``: a message's CPU, in units of ``linear``'s, on a broker carrying ``x`` messages/s per core."""
        x = max(rate_per_core, 0.0)
        return ((x + self.FLOOR_RATE) / (self.REFERENCE_RATE + self.FLOOR_RATE)) ** -self.EXPONENT

    def traffic(self, load: Load, cores: float) -> float:
        """CPU % of ``load``'s traffic on a broker of ``cores`` carrying exactly that load (no idle base)."""
        rate = load.msg / cores if cores > 0 else 0.0
        return self.PER_MSG * load.msg * self.per_message_factor(rate) + self.PER_BYTE * (load.thr_in + load.thr_out)

    def cpu(self, load: Load, base: float = CPU_BASE_PCT, cores: float = 8.0) -> float:
        """CPU % of a broker of ``cores`` carrying ``load`` (its messages per core set the factor)."""
        return base + self.traffic(load, cores)

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        out = super().usage(broker, load)
        out["cpu"]["usage"] = self.cpu(load, cores=broker.cores)
        return out

    def share(self, load: Load, ref: Broker) -> float:
        """A bundle's load on ``ref`` sitting at the cluster's operating point (:attr:`operating_rate`): additive, what
        it adds to a broker at the average rate per core; the NICs as ``linear``."""
        g = self.per_message_factor(self.operating_rate)
        cpu = (self.PER_MSG * load.msg * g + self.PER_BYTE * (load.thr_in + load.thr_out)) / ref.cpu_limit
        nic = ref.nic_limit_kbps
        return max(cpu, load.thr_in * 8 / 1024 / nic, load.thr_out * 8 / 1024 / nic)

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        """Every broker carrying the cluster's traffic in proportion to its cores (the same rate per core, so the same
        factor everywhere), the idle base counted per broker."""
        parts = dict(super().ideal_parts(load, live))
        cores = sum(b.cores for b in live)
        if cores > 0:
            cpu = CPU_BASE_PCT * len(live) + self.traffic(load, cores)
            parts["cpu"] = cpu / sum(b.cpu_limit for b in live)
        return parts

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """:meth:`BisectedFitModel.fit`, then the operating point: the cluster's messages/s per live core."""
        super().fit(cluster, target)
        cores = sum(cluster.brokers[b].cores for b in cluster.live_brokers())
        if cores > 0:
            self.operating_rate = Load.of(cluster.bundle_stats().values()).msg / cores


# ---------------------------------------------------------------------------------------------- cold-arrival


@dataclass(frozen=True, slots=True)
class Transfer:
    """A bundle's move as the model saw it: ``broker`` received it (an arrival) or let it go (a departure) at
    ``at_ms`` (cluster time)."""

    bundle: str
    broker: str
    at_ms: int


_Counts = tuple[int, int, int]


def _counts(load: Load) -> _Counts:
    return (load.topics, load.producers, load.consumers)


class ColdArrivalModel(HeldOutModel):
    name = "cold-arrival"
    description = (
        "linear CPU in steady state; a bundle that arrives on a broker costs it extra for a while (clients reconnect, "
        "topics load, subscriptions catch up on the unowned seconds from the bookies: ~80 s of the bundle's CPU, "
        "most in the first minute), its source a little to let it go; 10 Gbit/s NICs (CPU binds)"
    )
    REPORT_WINDOW_S = 60.0
    """Pulsar's CPU usage is the average since the last sample (``loadBalancerHostUsageCheckIntervalMinutes``, 1)."""
    GAP_S = 5.0
    """Seconds a moved bundle's topics are unowned (closed at the source until the clients are back on the
    destination: lookups, redirects, the client's backoff from 100 ms)."""
    UNACKED_S = 2.0
    """Seconds of each subscription's dispatch that were unacknowledged when it moved: dispatched again."""
    HEADROOM = (0.05, 2.0)
    """The consumers' spare capacity (a subscription catches up at ``1 + h`` times its steady rate): log-uniform
    between these over the subscriptions, weighted by their rates."""
    CONNECT_TAU_S = 5.0
    """The reconnections, topic loads and republished messages come over about the gap."""
    PER_CLIENT_S = 0.005
    """CPU seconds per producer or consumer reconnecting (connect, authenticate, lookup, PRODUCER/SUBSCRIBE)."""
    PER_TOPIC_S = 0.020
    """CPU seconds per topic loaded (managed ledger opened, a ledger created, policies, schema, stats)."""
    PER_SUBSCRIPTION_S = 0.005
    """CPU seconds per subscription (a consumer here) recovered: its cursor read back, a dispatcher created."""
    COLD_PER_MSG = 3.0 * CPU_PCT_PER_MSG
    """A dispatched message read from the bookies costs this on top of its cached dispatch (as ``catch-up-reads``)."""
    COLD_PER_BYTE = CPU_PCT_PER_BYTE
    """... and its bytes once more."""
    RELEASE_S = 1.0
    """Seconds of the bundle's traffic the source still serves while it closes the topics."""
    RELEASE_PER_TOPIC_S = 0.010
    """CPU seconds per topic closed at the source (its managed ledger closed, each cursor's position persisted)."""
    RELEASE_PER_CLIENT_S = 0.001
    """CPU seconds per client disconnected at the source."""
    RELEASE_TAU_S = 1.0
    HORIZON_S = 1800.0
    """A move is forgotten this long after it (less than 1e-22 of its cost is left): steady state is exactly linear."""
    PER_MSG = CPU_PCT_PER_MSG
    PER_BYTE = CPU_PCT_PER_BYTE

    def __init__(self) -> None:
        self.cluster: ClusterModel | None = None
        """The cluster whose ownership and clock this model follows (:meth:`attach`)."""
        self.arrivals: dict[str, Transfer] = {}
        """Bundle -> its latest arrival still costing its owner (the owner at the time)."""
        self.departures: list[Transfer] = []
        """Moves still costing their source."""
        self._seen: dict[str, str] | None = None
        self._seen_ms = 0
        self._bundle_counts: dict[str, _Counts] = {}
        self._owned: dict[str, _Counts] = {}
        self._by_broker: dict[str, tuple[list[Transfer], list[Transfer]]] = {}

    # ------------------------------------------------------------------ the catch-up's arithmetic
    @classmethod
    def backlog_s(cls) -> float:
        """Seconds of a subscription's dispatch it reads again after the move: the gap plus the unacknowledged."""
        return cls.GAP_S + cls.UNACKED_S

    @classmethod
    def _headroom_moments(cls) -> tuple[float, float, float]:
        """``E[1/h]``, ``E[1/h^2]``, ``E[h]`` for ``h`` log-uniform on :attr:`HEADROOM`."""
        lo, hi = cls.HEADROOM
        span = math.log(hi / lo)
        return (1 / lo - 1 / hi) / span, (1 / lo**2 - 1 / hi**2) / (2 * span), (hi - lo) / span

    @classmethod
    def cold_s(cls) -> float:
        """Seconds of the bundle's dispatch read from the bookies: ``B * E[(1+h)/h]`` (a subscription reads
        ``(1+h)`` times its rate from the bookies for ``B/h`` seconds)."""
        inv, _, _ = cls._headroom_moments()
        return cls.backlog_s() * (inv + 1)

    @classmethod
    def catch_up_tau_s(cls) -> float:
        """The mean age of the catch-up's work: ``B * E[(1+h)/h^2] / (2 E[(1+h)/h])``."""
        inv, inv2, _ = cls._headroom_moments()
        return cls.backlog_s() * (inv2 + inv) / (2 * (inv + 1))

    # ------------------------------------------------------------------ costs of one move (CPU % x seconds)
    def _rates(self, bundle: str) -> tuple[Load, list[Topic]]:
        cluster = self.cluster
        assert cluster is not None
        topics = cluster.topics_of(bundle)
        rin = rout = tin = tout = 0.0
        prod = cons = 0
        for t in topics:
            rin += t.rate_in
            rout += t.rate_out
            tin += t.rate_in * t.msg_size
            tout += t.rate_out * t.msg_size
            prod += t.producers
            cons += t.clients - t.producers
        return Load(rin + rout, rin, rout, tin, tout, len(topics), prod, cons), topics

    def arrival_costs(self, load: Load) -> tuple[float, float]:
        """The connect and catch-up costs (CPU % x seconds) of a bundle carrying ``load`` arriving on a broker."""
        connect = 100.0 * (
            self.PER_CLIENT_S * (load.producers + load.consumers)
            + self.PER_TOPIC_S * load.topics
            + self.PER_SUBSCRIPTION_S * load.consumers
        ) + self.GAP_S * (self.PER_MSG * load.msg_in + self.PER_BYTE * load.thr_in)
        dispatch = self.PER_MSG * load.msg_out + self.PER_BYTE * load.thr_out
        cold = self.COLD_PER_MSG * load.msg_out + self.COLD_PER_BYTE * load.thr_out
        return connect, self.backlog_s() * dispatch + self.cold_s() * cold

    def release_cost(self, load: Load) -> float:
        """The cost (CPU % x seconds) at the source of letting a bundle carrying ``load`` go."""
        traffic = self.PER_MSG * load.msg + self.PER_BYTE * (load.thr_in + load.thr_out)
        return self.RELEASE_S * traffic + 100.0 * (
            self.RELEASE_PER_TOPIC_S * load.topics + self.RELEASE_PER_CLIENT_S * (load.producers + load.consumers)
        )

    def window(self, age_s: float, tau_s: float) -> float:
        """The share of a cost decaying as ``exp(-a/tau)/tau`` that falls in a report taken ``age_s`` after the move
        (its window: the last :attr:`REPORT_WINDOW_S`), per second of the window."""
        w = self.REPORT_WINDOW_S
        if age_s <= 0:
            return 0.0
        return (math.exp(-max(age_s - w, 0.0) / tau_s) - math.exp(-age_s / tau_s)) / w

    def arrival_extra(self, load: Load, age_s: float) -> float:
        """CPU % a bundle carrying ``load`` adds to the report of the broker it arrived on ``age_s`` ago."""
        connect, catch_up = self.arrival_costs(load)
        return connect * self.window(age_s, self.CONNECT_TAU_S) + catch_up * self.window(age_s, self.catch_up_tau_s())

    def release_extra(self, load: Load, age_s: float) -> float:
        """CPU % letting a bundle carrying ``load`` go adds to its source's report ``age_s`` after the move."""
        return self.release_cost(load) * self.window(age_s, self.RELEASE_TAU_S)

    # ------------------------------------------------------------------ following the cluster
    def attach(self, cluster: ClusterModel) -> None:
        """Follow ``cluster`` from now on; no move is known (the next reading takes the ownership as it is)."""
        self.cluster = cluster
        self.arrivals, self.departures = {}, []
        self._seen, self._bundle_counts, self._owned, self._by_broker = None, {}, {}, {}

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """Attach to ``cluster``, then :meth:`HeldOutModel.fit` (exact: steady state is linear)."""
        self.attach(cluster)
        super().fit(cluster, target)

    def _bundle_count(self, bundle: str) -> _Counts:
        counts = self._bundle_counts.get(bundle)
        if counts is None:
            load = self._rates(bundle)[0]
            counts = self._bundle_counts[bundle] = _counts(load)
        return counts

    @staticmethod
    def _parent(bundle: str, before: Mapping[str, Sequence[tuple[BundleRange, str]]]) -> str | None:
        """The bundle seen before whose range holds ``bundle``'s (a split's parent), or None."""
        ns, range_name = split_full_name(bundle)
        lower = BundleRange.parse(range_name, bundle).lower
        for r, name in before.get(ns, ()):
            if r.contains(lower):
                return name
        return None

    def observe(self) -> None:
        """Read the cluster's clock and, at a new instant, its ownership: record the moves since the last reading,
        dated at it, and forget the moves that no longer cost anything."""
        cluster = self.cluster
        if cluster is None:
            return
        now = cluster.now_ms
        owners = cluster.owners
        if self._seen is None:  # the first reading: the ownership as it is
            self._seen, self._seen_ms = dict(owners), now
            self._regroup()
            return
        if now == self._seen_ms:  # read once per instant (the floor alone asks ~5,000 times on large-zipf)
            return
        if owners != self._seen:
            self._record(self._seen, owners, self._seen_ms)
            self._seen = dict(owners)
            self._regroup()
        self._seen_ms = now
        horizon = self.HORIZON_S * 1000
        self.arrivals = {b: t for b, t in self.arrivals.items() if now - t.at_ms <= horizon}
        self.departures = [t for t in self.departures if now - t.at_ms <= horizon]
        by_broker: dict[str, tuple[list[Transfer], list[Transfer]]] = {}
        for t in self.arrivals.values():
            by_broker.setdefault(t.broker, ([], []))[0].append(t)
        for t in self.departures:
            by_broker.setdefault(t.broker, ([], []))[1].append(t)
        self._by_broker = by_broker

    def _record(self, before: Mapping[str, str], after: Mapping[str, str], at_ms: int) -> None:
        ranges: dict[str, list[tuple[BundleRange, str]]] = {}
        for name in before:
            if name not in after:  # a split's parent (the children are new names)
                ns, range_name = split_full_name(name)
                ranges.setdefault(ns, []).append((BundleRange.parse(range_name, name), name))
        for bundle, owner in after.items():
            was = before.get(bundle)
            inherited: Transfer | None = None
            if was is None:
                parent = self._parent(bundle, ranges)
                if parent is None:
                    continue
                was = before[parent]
                inherited = self.arrivals.get(parent)
            if owner != was:
                self.arrivals[bundle] = Transfer(bundle, owner, at_ms)
                self.departures.append(Transfer(bundle, was, at_ms))
            elif inherited is not None:  # split in place while its parent was still warming up: the same topics
                self.arrivals[bundle] = Transfer(bundle, owner, inherited.at_ms)
        for name in list(self.arrivals):
            if name not in after or self.arrivals[name].broker != after[name]:
                del self.arrivals[name]

    def _regroup(self) -> None:
        """Each broker's topic, producer and consumer counts as it owns its bundles now."""
        assert self._seen is not None
        live = {b for b in self._bundle_counts} & set(self._seen)
        self._bundle_counts = {b: self._bundle_counts[b] for b in live}
        owned: dict[str, list[int]] = {}
        for bundle, owner in self._seen.items():
            t, p, c = self._bundle_count(bundle)
            acc = owned.setdefault(owner, [0, 0, 0])
            acc[0] += t
            acc[1] += p
            acc[2] += c
        self._owned = {b: (v[0], v[1], v[2]) for b, v in owned.items()}

    def extra(self, broker: str) -> float:
        """CPU % the moves still costing ``broker`` add to its report now (after :meth:`observe`)."""
        cluster = self.cluster
        if cluster is None:
            return 0.0
        now = cluster.now_ms
        arrivals, departures = self._by_broker.get(broker, ((), ()))
        total = 0.0
        for t in arrivals:
            total += self.arrival_extra(self._rates(t.bundle)[0], (now - t.at_ms) / 1000)
        for t in departures:
            total += self.release_extra(self._rates(t.bundle)[0], (now - t.at_ms) / 1000)
        return total

    def is_own(self, broker: str, load: Load) -> bool:
        """Whether ``load`` is ``broker``'s as it owned its bundles at the last reading (its counts are)."""
        return self._owned.get(broker, (0, 0, 0)) == _counts(load)

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        """``linear``'s, plus, when ``load`` is the broker's own, what the moves still cost it (module docstring)."""
        out = super().usage(broker, load)
        if self.cluster is not None:
            self.observe()
            if self.is_own(broker.broker_id, load):
                out["cpu"]["usage"] += self.extra(broker.broker_id)
        return out


HELD_OUT_LOAD_MODELS_5: Mapping[str, Callable[[], LoadModel]] = {
    "batching-concave": BatchingConcaveModel,
    "cold-arrival": ColdArrivalModel,
}
HELD_OUT_MODELS_5 = tuple(HELD_OUT_LOAD_MODELS_5)
"""The fifth held-out set (``bench_balance.py --held-out 5``)."""

__all__ = [
    "HELD_OUT_LOAD_MODELS_5",
    "HELD_OUT_MODELS_5",
    "BatchingConcaveModel",
    "ColdArrivalModel",
    "Transfer",
]
