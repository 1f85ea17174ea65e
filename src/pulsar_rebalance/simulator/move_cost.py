"""Load models with a move cost of their own: the "arrival cost" family (``bench_move_cost.py``).

Every load model of :data:`pulsar_rebalance.simulator.load_models.LOAD_MODELS` charges a bundle the same wherever it is
and whenever it got there. On a real broker a move is not free: when a bundle arrives, the new owner loads its topics,
its clients reconnect, the messages they had not acknowledged are dispatched again and the subscriptions read their
backlog from the bookies until they are back at the tail. This family charges that work to the destination for a few
minutes after the arrival, so that a benchmark can measure the transient a strategy's moves cause (and a change of the
planner's pacing can be chosen on it). It is the project's own: not held out (the held-out ``cold-arrival`` model of
:mod:`pulsar_rebalance.simulator.held_out_models_5` models the same mechanisms and nobody tunes on it; nothing here is
taken from it but the way of following the cluster, re-implemented), and not registered in
:data:`~pulsar_rebalance.simulator.load_models.LOAD_MODELS` (the balance benchmark's default set stays as it is):
``benchmarks/bench_move_cost.py`` builds the variants by name from :data:`MOVE_COST_MODELS`, one instance per cluster.

Steady state is ``linear`` exactly (``cpu = 10 + 100*msg/s/40000 + 100*bytes/s/200MiB``, messages and bytes in + out),
with 10 Gbit/s NICs so that CPU binds; the ideal, a bundle's share and the scenarios' calibration are ``linear``'s, so
every scenario starts as balanced as under ``linear`` and at its target. On top, per bundle that arrived on a broker,
the broker's CPU (% of one core, as Pulsar reports it) carries, ``s`` seconds after the arrival:

* **takeover**, spread evenly over the first ``T`` seconds (the clients come back over a few seconds: the client's
  reconnection back-off starts at 100 ms and doubles, each one looks its topic up again and is redirected):
  ``E = 100 * (topic_s * topics + cursor_s * subscriptions + client_s * clients) + redelivered_s * d`` (CPU % x s),
  i.e. a fixed CPU time per topic loaded (the managed ledger opened: its metadata read, a new ledger created - ensemble
  placement and a metadata write - policies and schema loaded, the dispatchers created), per subscription whose
  cursor is recovered (its metadata and the last entry of its cursor ledger read back, the acknowledged ranges parsed)
  and per client reconnecting (CONNECT, the lookup, PRODUCER or SUBSCRIBE), plus the messages the consumers had
  received but not acknowledged when the source closed the topics: Pulsar rewinds each cursor to its mark-delete
  position, so the new owner dispatches about ``redelivered_s`` seconds of the bundle's dispatch again (``d`` below);
* **cold reads**, ``(k - 1) * d * max(0, 1 - s / D)``: ``d = 100*msgRateOut/40000 + 100*bytesOut/200MiB``, the
  bundle's dispatch as ``linear`` charges it. The new owner's entry cache holds nothing of the backlog the
  subscriptions find on arrival (what was published while the topics were unowned, and the redelivered messages), so
  each subscription reads from the bookies until it is back at the tail: a BookKeeper read request and response per
  entry, the entry's checksum verified over its bytes, buffers allocated - and while it catches up it dispatches
  faster than its steady rate. ``k`` is what a message dispatched by a subscription still behind costs, as a
  multiple of its cached dispatch; the subscriptions' catch-up times are spread evenly over ``[0, D]`` (they
  differ by the consumers' spare capacity), so the share still reading from the bookies falls linearly to 0 at ``D``.

The source is not charged (closing a topic - its ledger closed, its cursors' positions persisted - is a few
milliseconds of CPU per topic, and it stops serving the bundle's traffic at once). A broker's report averages the
last minute (``REPORT_WINDOW_S``: Pulsar's ``loadBalancerHostUsageCheckIntervalMinutes`` = 1), so a report taken
``a`` seconds after an arrival carries ``(1/60) * integral of the above over [a - 60, a]`` (0 before the arrival):
closed-form (:meth:`ArrivalCostModel.arrival_extra`), and exactly 0 from ``a = 60 + max(T, D)`` on, after which the
arrival is forgotten and the broker reports exactly ``linear``.

=================== ====== ====== ====== ===== ===== ===== ===== ==============================================
variant             topic  cursor client T (s) redel k     D (s) what it stands for
=================== ====== ====== ====== ===== ===== ===== ===== ==============================================
arrival-cost        25 ms  10 ms  3 ms   10    4 s   2.5   120   a typical unload (plain TCP clients, the
                                                                 default 1,000-message receiver queues): the
                                                                 cost lives in the first minute or two
arrival-cost-long   25 ms  10 ms  3 ms   10    4 s   1.6   480   slow consumers (little spare capacity) take
                                                                 minutes to catch up: milder, for 8 minutes
arrival-cost-heavy  60 ms  30 ms  8 ms   20    10 s  3.5   180   TLS clients, cursors with many acknowledged
                                                                 ranges, big receiver queues, a slow metadata
                                                                 store: about twice the first report's cost
=================== ====== ====== ====== ===== ===== ===== ===== ==============================================

Why these numbers (judgments from how a broker works, none measured here): a topic load is a few metadata reads and
one write plus object set-up, tens of milliseconds of CPU with the store's round trips spent waiting; a cursor
recovery one BookKeeper read and a protobuf parse; a plain-TCP reconnection a few milliseconds (a TLS handshake
doubles it or more). Consumers hold up to 1,000 messages each in their receiver queue, a few seconds of a busy
subscription: ``redelivered_s`` = 4 (10 in the heavy variant). A cold read costs about a cached dispatch again (one
read request and response per entry, the checksum over the bytes), and a subscription catching up dispatches some
25 % faster than its steady rate: ``k = 2 * 1.25 = 2.5``. With a backlog of ~6 s (a few seconds unowned plus the
redelivered), consumers with 5 % to 100 % spare capacity catch up in 6 s to 2 minutes: ``D = 120``; ``-long``
stretches it to 8 minutes with the consumers' headroom at 1-2 % (milder: ``k = 1.6``), ``-heavy`` has bigger backlogs
(3 minutes) and costlier reads. Where the scenarios calibrate (scale-up's bundles: 15-50 topics and 41-142 clients,
10th to 90th percentile; ``tests/simulator/test_move_cost.py`` checks these ranges), an arrival adds to its
destination's reports, as multiples of the bundle's own steady CPU: ``arrival-cost`` +0.76-0.87x in the first
minute, +0.21-0.24x in the second, nothing after (58-67 s of the bundle's CPU in all); ``-long`` +0.43-0.51x, then
+0.28-0.32x, fading to +0.02x in the eighth minute (89-102 s); ``-heavy`` +1.49-1.72x, +0.71-0.81x, +0.24-0.27x
(146-168 s).

How the model knows when a bundle arrived: the :class:`~pulsar_rebalance.simulator.load_models.LoadModel` interface
hands a model a broker and its summed stats, no time and no history. :meth:`ArrivalCostModel.fit` (called by every
scenario's calibration; a hand-built cluster calls :meth:`~ArrivalCostModel.attach`) makes the model follow the
cluster: at the first :meth:`~ArrivalCostModel.usage` call of each new instant (``cluster.now_ms``) it compares the
ownership (``cluster.owners``) with the one it read at its previous instant, and dates every change at that previous
instant (:meth:`~ArrivalCostModel.observe`; callers that apply a plan some time after the last reading, like the DAG's
executor after its approval delay, call it just before applying, as ``bench_move_cost.py`` does). A bundle with a new
owner arrived there; a bundle not seen before is a split child: an arrival if its owner is not its parent's, otherwise
it keeps its parent's arrival, if any (the same topics, still warming up). A broker's start state is no arrival (the
first reading takes the ownership as it is), nor is a bundle moved away and back between two readings. Only a
broker's own load gets the extra: a load whose topic, producer and consumer counts are not those of the bundles the
broker owned at the last reading (the floor's hottest topic alone, a hypothetical) is charged as ``linear``; so is a
broker's own load at the instant its ownership changes (until the clock moves).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pulsar_rebalance.core.pulsar.bundles import BundleRange, split_full_name
from pulsar_rebalance.simulator.load_models import CPU_PCT_PER_BYTE, CPU_PCT_PER_MSG, Load, LoadModel

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel

REPORT_WINDOW_S = 60.0
"""A broker's CPU usage is its average over the last minute (``loadBalancerHostUsageCheckIntervalMinutes`` = 1)."""


@dataclass(frozen=True, slots=True)
class ArrivalCost:
    """One variant's parameters (module docstring: what each stands for, and why)."""

    name: str
    description: str
    topic_s: float
    """CPU seconds per topic loaded by the new owner."""
    cursor_s: float
    """CPU seconds per subscription whose cursor is recovered (a consumer is a subscription here)."""
    client_s: float
    """CPU seconds per producer or consumer reconnecting."""
    takeover_s: float
    """``T``: the takeover's work (loads, reconnections, redelivery) is spread evenly over this many seconds."""
    redelivered_s: float
    """Seconds of the bundle's dispatch delivered again (the unacknowledged messages)."""
    cold_factor: float
    """``k``: a message dispatched by a subscription still behind the tail costs this times its cached dispatch."""
    cold_s: float
    """``D``: the last subscription is back at the tail this many seconds after the arrival."""

    @property
    def horizon_s(self) -> float:
        """From this age on an arrival adds exactly nothing to a report."""
        return REPORT_WINDOW_S + max(self.takeover_s, self.cold_s)


# name, description, then topic_s, cursor_s, client_s, takeover_s (T), redelivered_s, cold_factor (k), cold_s (D)
ARRIVAL_COST = ArrivalCost(
    "arrival-cost",
    "linear in steady state; an arriving bundle costs its new owner its topic loads, reconnections, 4 s of "
    "redelivery and cold reads (2.5x its dispatch, fading over 2 min); 10 Gbit/s NICs (CPU binds)",
    *(0.025, 0.010, 0.003, 10.0, 4.0, 2.5, 120.0),
)
ARRIVAL_COST_LONG = ArrivalCost(
    "arrival-cost-long",
    "as arrival-cost, but the cold reads are milder and last longer (1.6x the bundle's dispatch, fading over 8 min)",
    *(0.025, 0.010, 0.003, 10.0, 4.0, 1.6, 480.0),
)
ARRIVAL_COST_HEAVY = ArrivalCost(
    "arrival-cost-heavy",
    "as arrival-cost, costlier: TLS reconnections, big cursors, 10 s of redelivery, cold reads 3.5x the bundle's "
    "dispatch fading over 3 min",
    *(0.060, 0.030, 0.008, 20.0, 10.0, 3.5, 180.0),
)
NO_ARRIVAL_COST = ArrivalCost(
    "arrival-free",
    "the family's control: linear CPU and 10 Gbit/s NICs, an arrival costs nothing",
    *(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0),
)
"""Every cost 0: what the same runs give without a move cost (``linear``'s CPU with 10 Gbit/s NICs)."""

_Counts = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Arrival:
    """``bundle`` arrived on ``broker`` at ``at_ms`` (cluster time)."""

    bundle: str
    broker: str
    at_ms: int


class ArrivalCostModel(LoadModel):
    """``linear`` plus the cost of each arrival on its destination (module docstring)."""

    NIC_FACTOR = 10.0

    def __init__(self, params: ArrivalCost = ARRIVAL_COST) -> None:
        self.params = params
        self.name = params.name
        self.description = params.description
        self.cluster: ClusterModel | None = None
        self.arrivals: dict[str, Arrival] = {}
        """Bundle -> its arrival still costing its owner."""
        self._read_ms: int | None = None
        self._read_owners: dict[str, str] = {}
        self._counts: dict[str, _Counts] = {}
        self._owned: dict[str, _Counts] = {}
        self._extra: dict[str, float] = {}
        self._stats: dict[str, dict[str, Any]] = {}
        self._stats_ms: int | None = None

    # ------------------------------------------------------------------ one arrival's arithmetic
    def bundle_load(self, bundle: str) -> Load:
        """``bundle``'s traffic and counts now, noise-free: its stats as the cluster reports them (read once per
        instant; a bundle without topics is reported by none, and costs nothing)."""
        cluster = self.cluster
        assert cluster is not None
        if self._stats_ms != cluster.now_ms:
            self._stats, self._stats_ms = cluster.bundle_stats(), cluster.now_ms
        stats = self._stats.get(bundle)
        return Load.of([stats]) if stats is not None else Load()

    @staticmethod
    def dispatch(load: Load) -> float:
        """``d``: the CPU % ``linear`` charges for the bundle's dispatch (messages and bytes out)."""
        return CPU_PCT_PER_MSG * load.msg_out + CPU_PCT_PER_BYTE * load.thr_out

    def takeover_cost(self, load: Load) -> float:
        """``E``: the takeover's CPU % x seconds (topic loads, cursor recoveries, reconnections, redelivery)."""
        p = self.params
        fixed = p.topic_s * load.topics + p.cursor_s * load.consumers + p.client_s * (load.producers + load.consumers)
        return 100.0 * fixed + p.redelivered_s * self.dispatch(load)

    def cold_cost(self, load: Load) -> float:
        """The cold reads' CPU % x seconds in all: ``(k - 1) * d * D / 2``."""
        p = self.params
        return (p.cold_factor - 1.0) * self.dispatch(load) * p.cold_s / 2

    def arrival_extra(self, load: Load, age_s: float) -> float:
        """CPU % a bundle carrying ``load`` adds to the report its destination takes ``age_s`` seconds after the
        arrival: the average over the report's window ``[age - 60, age]`` of the takeover and the cold reads."""
        p = self.params
        lo, hi = max(age_s - REPORT_WINDOW_S, 0.0), age_s
        if hi <= lo:
            return 0.0
        total = 0.0
        if p.takeover_s > 0:
            overlap = max(0.0, min(hi, p.takeover_s) - lo)
            total += self.takeover_cost(load) / p.takeover_s * overlap
        if p.cold_s > 0 and p.cold_factor != 1.0 and lo < p.cold_s:
            top = min(hi, p.cold_s)

            def fading(x: float) -> float:  # the integral of 1 - s/D from 0 to x
                return x - x * x / (2 * p.cold_s)

            total += (p.cold_factor - 1.0) * self.dispatch(load) * (fading(top) - fading(lo))
        return total / REPORT_WINDOW_S

    # ------------------------------------------------------------------ following the cluster
    def attach(self, cluster: ClusterModel) -> None:
        """Follow ``cluster`` from now on, no arrival known: its next reading takes the ownership as it is."""
        self.cluster = cluster
        self.arrivals = {}
        self._read_ms = None
        self._read_owners, self._counts, self._owned, self._extra = {}, {}, {}, {}
        self._stats, self._stats_ms = {}, None

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """Attach to ``cluster``, then scale every topic's base rate so that the ideal (``linear``'s: steady state) is
        ``target`` exactly. Each resource's ideal is affine in a factor ``f`` on the rates, ``idle + f * traffic`` (the
        idle brokers' CPU base, nothing on the NICs); the scenarios' rounds of ``target / ideal`` would only approach
        it, the CPU's idle base not scaling."""
        self.attach(cluster)
        live = [cluster.brokers[b] for b in cluster.live_brokers()]
        idle = self.ideal_parts(Load(), live)
        now = self.ideal_parts(Load.of(cluster.bundle_stats().values()), live)
        factors = [(target - idle[k]) / (now[k] - idle[k]) for k in now if now[k] > idle[k]]
        if factors:
            for t in cluster.topics:
                t.base_rate *= min(factors)
            cluster._update_rates()

    def observe(self) -> None:
        """Read the cluster's clock and, at a new instant, its ownership (once per instant): record the arrivals since
        the previous reading, dated at it, and forget those that cost nothing any more."""
        cluster = self.cluster
        if cluster is None or cluster.now_ms == self._read_ms:
            return
        owners = cluster.owners
        if self._read_ms is None or owners != self._read_owners:
            if self._read_ms is not None:
                self._record(owners, self._read_ms)
            self._read_owners = dict(owners)
            self._count_owned()
        self._read_ms = now = cluster.now_ms
        horizon_ms = self.params.horizon_s * 1000
        self.arrivals = {b: a for b, a in self.arrivals.items() if now - a.at_ms < horizon_ms}
        self._extra = {}

    def _record(self, owners: Mapping[str, str], at_ms: int) -> None:
        before = self._read_owners
        gone: dict[str, list[tuple[int, int, str]]] = {}  # namespace -> sorted (lower, upper, name) of split parents
        for name in before:
            if name not in owners:
                ns, range_name = split_full_name(name)
                r = BundleRange.parse(range_name, name)
                gone.setdefault(ns, []).append((r.lower, r.upper, name))
        for ranges in gone.values():
            ranges.sort()
        kept: dict[str, Arrival] = {}
        for bundle, owner in owners.items():
            was, parent = before.get(bundle), bundle
            if was is None:  # a split child: its parent is the bundle that held its lower bound
                ns, range_name = split_full_name(bundle)
                lower = BundleRange.parse(range_name, bundle).lower
                ranges = gone.get(ns, [])
                i = bisect.bisect_right(ranges, lower, key=lambda r: r[0]) - 1
                if i < 0 or not ranges[i][0] <= lower < ranges[i][1]:
                    continue  # nothing it came from (a bundle that was never read): no arrival known
                parent, was = ranges[i][2], before[ranges[i][2]]
            if owner != was:
                kept[bundle] = Arrival(bundle, owner, at_ms)
            elif parent in self.arrivals and self.arrivals[parent].broker == owner:
                kept[bundle] = Arrival(bundle, owner, self.arrivals[parent].at_ms)
        self.arrivals = kept

    def _bundle_counts(self, bundle: str) -> _Counts:
        counts = self._counts.get(bundle)
        if counts is None:
            load = self.bundle_load(bundle)
            counts = self._counts[bundle] = (load.topics, load.producers, load.consumers)
        return counts

    def _count_owned(self) -> None:
        self._counts = {b: c for b, c in self._counts.items() if b in self._read_owners}
        owned: dict[str, _Counts] = {}
        for bundle, broker in self._read_owners.items():
            t, p, c = self._bundle_counts(bundle)
            t0, p0, c0 = owned.get(broker, (0, 0, 0))
            owned[broker] = (t0 + t, p0 + p, c0 + c)
        self._owned = owned

    def extra(self, broker: str) -> float:
        """CPU % the arrivals still costing ``broker`` add to its report now (as of the last reading)."""
        cluster = self.cluster
        if cluster is None:
            return 0.0
        cached = self._extra.get(broker)
        if cached is None:
            now = cluster.now_ms
            cached = sum(
                self.arrival_extra(self.bundle_load(a.bundle), (now - a.at_ms) / 1000)
                for a in self.arrivals.values()
                if a.broker == broker
            )
            self._extra[broker] = cached
        return cached

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        """``linear``'s, plus, when ``load`` is the broker's own, what its arrivals still cost it."""
        out = super().usage(broker, load)
        if self.cluster is not None:
            self.observe()
            if self._owned.get(broker.broker_id) == (load.topics, load.producers, load.consumers):
                out["cpu"]["usage"] += self.extra(broker.broker_id)
        return out


def _variant(params: ArrivalCost) -> Callable[[], LoadModel]:
    return lambda: ArrivalCostModel(params)


MOVE_COST_VARIANTS: Mapping[str, ArrivalCost] = {
    p.name: p for p in (ARRIVAL_COST, ARRIVAL_COST_LONG, ARRIVAL_COST_HEAVY, NO_ARRIVAL_COST)
}
MOVE_COST_MODELS: Mapping[str, Callable[[], LoadModel]] = {name: _variant(p) for name, p in MOVE_COST_VARIANTS.items()}
"""The family's variants by name (a fresh model per cluster); in no registry: ``bench_move_cost.py`` resolves them."""

__all__ = [
    "ARRIVAL_COST",
    "ARRIVAL_COST_HEAVY",
    "ARRIVAL_COST_LONG",
    "MOVE_COST_MODELS",
    "MOVE_COST_VARIANTS",
    "NO_ARRIVAL_COST",
    "REPORT_WINDOW_S",
    "Arrival",
    "ArrivalCost",
    "ArrivalCostModel",
]
