"""Held-out load models, sixth set: ways real brokers turn traffic into load that nobody tuned the planner on.

A sixth set (:data:`HELD_OUT_MODELS_6`, ``bench_balance.py --held-out 6``, its own report), kept apart from the five
before it: ``shared-hosts`` and ``cold-start``. Every model so far makes a broker's CPU a function of its own load (and,
under ``cold-arrival``, of the bundles that just moved to or from it). These two make it depend on what the load report
does not describe: under ``shared-hosts`` on other brokers - the ones sharing its host, whose load slows its own work -
and under ``cold-start`` on the broker's age - a broker that (re)started is slower for its first minutes of traffic.
``shared-hosts`` is a curve in the rates (:meth:`BisectedFitModel.fit`); ``cold-start`` is exactly linear in steady
state, so its ideal is affine (:meth:`HeldOutModel.fit`, exact). Every scenario of
:mod:`pulsar_rebalance.simulator.scenarios` builds under both at its target; CPU binds where they calibrate (NICs at 10
Gbit/s, 0.13-0.16x of it).

Written without reading the planner, from how Pulsar brokers behave. Kept in a module of its own so that every module a
stored benchmark run imported stays as it was: ``benchmarks/bench_balance.py`` resolves these names itself, and neither
the load-model registry (:func:`pulsar_rebalance.simulator.load_models.get_load_model`) nor the simulator's
:func:`pulsar_rebalance.simulator.cluster.resolve_load_model` knows them; they go in as instances (``build(...,
load_model=SharedHostsModel())``), one per cluster.

Units below: CPU in % of one core, as Pulsar reports it (``cpu.limit = cores * 100``); ``linear``'s costs are
``100/40000`` % per message/s (in + out) and ``100/200 MiB`` % per byte/s (in + out), 10 % for the idle broker; ``t`` is
a broker's traffic CPU under ``linear`` (no idle base).

============ ==============================================================================================
shared-hosts CPU binds, and a broker's work costs more CPU while the other brokers on its host are busy. Brokers are
             packed onto hosts - Kubernetes nodes, or a hypervisor's VMs - that no load report shows: in a container
             Pulsar's ``LinuxBrokerHostUsageImpl`` reports the cgroup's own CPU (``cpuacct.usage``) against its quota
             (``cpu.cfs_quota_us / cpu.cfs_period_us``), never the node's other tenants (only without cgroups does it
             read the whole host's ``/proc/stat``: this model is the containerised case). What the tenants share is the
             cores' SMT siblings (a cloud vCPU is a hyperthread; pods without the CPU manager's static policy run their
             threads on any of the node's vCPUs, so a broker's thread shares a physical core with a mate's as often as
             the mate keeps vCPUs busy), the last-level cache and the memory bandwidth (a broker copies payloads through
             Netty buffers and the managed-ledger cache and checksums them). ``cpu_i = 10 + t_i * (1 + 0.9 * sum over
             its live host-mates j of min(cpu_j, limit_j) / (100 * host vCPUs))``: the mates' busy time includes their
             own contention (solved jointly per host, :meth:`SharedHostsModel.host_cpu`) and is at most their quota; the
             idle base is left alone. 0.9 = 0.6 (two busy hyperthreads of a core give ~1.25x one thread's throughput:
             each runs at ~0.62 of its speed alone, 1.6x the CPU time per unit of work) + 0.3 (last-level cache and
             memory bandwidth: +15 % when a mate keeps its half of the host busy) - judgments, within what is commonly
             reported (SMT adds 15-30 % to a core's throughput on server workloads; cache and memory-bandwidth
             interference slows co-located services by 10-30 %). The node's NIC is shared too, but at 10 Gbit/s a broker
             uses about a fifteenth of it: two never come near filling it (not modelled). Hosts of 16 vCPUs (two
             standard brokers; a larger broker gets a host of its size). The pool: ``ceil(cores / 16) + 1`` hosts (one
             node's worth of room, kept for upgrades and a lost node); the brokers are scheduled in their order on the
             host with the most free vCPUs that fits (Kubernetes' default scoring, least allocated), ties drawn from the
             seed and the broker's id: the first ones spread one per host, the rest pair up with a random one of them.
             10 brokers: 4 pairs and 2 alone; 8: 3 and 2; 100: 49 and 2; *heterogeneous*: its 16-core broker alone on a
             host, 2 pairs, 3 alone. A broker that joins is scheduled the same way on the hosts as they are
             (*scale-up*'s two land next to the two brokers that were alone, each already busy), one that leaves frees
             its vCPUs, a restarted one keeps its host. Where the scenarios calibrate (usage 0.4-0.6) a paired broker's
             traffic costs 1.18-1.27x what it costs alone: a start balanced on each bundle's average cost (a bundle's
             share: its linear CPU times the cluster's traffic-weighted contention at its ideal, 1.10-1.19) leaves, on
             the scenarios that start balanced, the paired brokers 0.02-0.05 above the ideal and the lone ones 0.06-0.09
             below it (*steady-with-noise*: 0.53 and 0.43 around 0.5). On *one-hot-broker* with the hot broker paired
             (seeds 2, 4, 5; alone on 1 and 3, at 0.74) the hot broker reads 0.90-0.91, its mate 0.49 - raised by its
             neighbour, against 0.41 on the other paired brokers and 0.35 on the lone ones; moving a bundle from the hot
             broker to its mate relieves it of 0.81x the bundle's linear CPU and costs the mate 1.28x, to a broker on
             another host 1.28x and 1.22x, to a lone one 1.28x and 1.0x; a bundle moved onto the hot broker's mate from
             elsewhere raises the hot broker by 0.49x its linear CPU. Which brokers share a host is drawn once; nothing
             in the reports but the CPU shows it. *Ideal*: every live broker at the same usage ``u``, carrying ``(u *
             limit - 10) / (1 + 0.9 * min(u, 1) * its live mates' limits / (100 * host vCPUs))`` (the lowest worst
             broker: one below ``u`` on a host spares its mate less than it gives up - a numerical search over splits
             converges to it), the lone ones carrying more.
cold-start   CPU binds, and a broker that (re)started - joined, or came back from a restart - spends more CPU on its
             traffic for its first minutes of it: its JVM runs the broker's hot paths interpreted, then in C1-compiled
             code with profiling, until C2 compiles them, while the compiler threads themselves burn CPU; a long tail
             follows (less frequent paths compiled late, recompilation after deoptimisation as the type profiles widen
             with new topics and subscriptions, G1's adaptive sizing learning the allocation rate, Netty's pooled arenas
             and thread caches growing). The JIT compiles what runs, so the clock starts at the broker's first traffic,
             not at its start: an empty broker warms nothing. From then on, ``a`` seconds into it, ``cpu = linear + t *
             (0.6 e^(-a/60) + 0.15 e^(-a/300)) + 60 CPU-s * e^(-a/60)/60``, each term averaged over the report's window:
             Pulsar's CPU usage is the average since its last sample (``loadBalancerHostUsageCheckIntervalMinutes``, 1
             min), so the report at ``a`` holds ``A * tau * report_window(a, tau)`` of a factor ``A e^(-a/tau)``
             (:func:`report_window`; 0 at ``a = 0``). 0.6: about two thirds of a broker's CPU is Java in user space (the
             rest the kernel's sockets, ``epoll`` and copies, which no JIT changes), and that runs ~2x slower before C2;
             60 s: the hot paths reach C2 within seconds under load, the compile queue drains over a minute or two; 0.15
             and 300 s: the tail, 15 % halving every 3.5 minutes; 60 CPU-seconds: some thousands of C2 and ten thousand
             C1 compilations of the broker's hot code - all judgments. Not counted again: the managed-ledger cache and
             the subscriptions catching up (``catch-up-reads``, ``cold-arrival``), the topic loads (``cold-arrival``).
             Only brokers that start feel it: on *scale-up* and *rolling-restart*; the other scenarios are exactly
             ``linear`` (the set's control cells). Per report after the first traffic the traffic CPU is 1.52x, 1.25x,
             1.14x, 1.09x, 1.07x, 1.04x at 7 min, 1.02x at 10, plus the compiler's 63, 23, 9, 3 % of a core:
             *scale-up*'s joiner filled at once to the cluster's average (0.48 after the join) reports 0.80, then 0.63,
             0.56, 0.53, 0.52, 0.50 at 7 min. A decision every hour (the DAG's) samples 45 minutes after its moves:
             nothing is left. A warm-up is forgotten two hours after the first traffic (``e^-24`` of the tail left):
             exactly linear again. *Ideal*: ``linear``'s (steady state).
============ ==============================================================================================

How the models follow the cluster: the :class:`LoadModel` interface hands a model a broker and its summed stats, no
other broker, no time, no history. Both attach to the cluster in ``fit`` (which every scenario's calibration calls; a
hand-built cluster: ``attach``). ``shared-hosts`` places the brokers on hosts then (joins, in ``configure``) and reads
the cluster's bundle stats (:meth:`~pulsar_rebalance.simulator.dynamics.ClusterModel.bundle_stats`) at the first
:meth:`~SharedHostsModel.usage` call of each instant, again when the ownership moved (compared on each broker's own
load) or a rate moved within the instant (a fingerprint: the topics' rates summed), so that a broker's load is its own
when it is its bundles' stats summed, and its mates' loads are theirs as the cluster has them then (the closed loop's
usages are exactly a recomputation from scratch: tested through events, lookups and splits). ``cold-start`` reads the
cluster's joins and restarts from its events (at ``attach``) and its brokers' liveness, and, once per instant, its
ownership as ``cold-arrival`` does: a (re)started broker's first bundles are dated at the last instant read (exact in
the closed loop at the minute cadence: the usages are sampled just before each decision, applied at that instant;
lookups read before placing a leaving broker's bundles; at the DAG's cadence a plan applied 15 minutes after its
decision with no lookup in between is dated at the decision, long warm before the next sample either way); ownership
that moved within an instant is read again (a first traffic then dated at that instant). In both, only a broker's own
load gets the extra - contention, warm-up: the floor's single items and any hypothetical are charged as on a broker
whose host-mates are idle, or warm (the floor stays a lower bound).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from pulsar_rebalance.simulator.held_out_models import BisectedFitModel, HeldOutModel
from pulsar_rebalance.simulator.load_models import CPU_BASE_PCT, CPU_PCT_PER_BYTE, CPU_PCT_PER_MSG, Load, LoadModel

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel

_ZERO = Load()
_Counts = tuple[int, int, int]


def _counts(load: Load) -> _Counts:
    return (load.topics, load.producers, load.consumers)


def traffic_cpu(load: Load) -> float:
    """``linear``'s CPU % for ``load``'s traffic, without the idle base: messages and bytes, in + out."""
    return CPU_PCT_PER_MSG * load.msg + CPU_PCT_PER_BYTE * (load.thr_in + load.thr_out)


def report_window(age_s: float, tau_s: float, window_s: float = 60.0) -> float:
    """The share of a cost decaying as ``exp(-a/tau)/tau`` (integral 1) from ``a = 0`` that falls in a report taken
    ``age_s`` after its start, per second of the report's window (the last ``window_s``): ``(e^(-max(a - W, 0)/tau) -
    e^(-a/tau)) / W``. 0 at ``a <= 0``. A factor ``A e^(-a/tau)`` averages ``A * tau * report_window(a, tau)`` over the
    window."""
    if age_s <= 0:
        return 0.0
    return (math.exp(-max(age_s - window_s, 0.0) / tau_s) - math.exp(-age_s / tau_s)) / window_s


# ---------------------------------------------------------------------------------------------- shared-hosts


class SharedHostsModel(BisectedFitModel):
    name = "shared-hosts"
    description = (
        "brokers packed two to a 16-vCPU host the reports do not show (a Kubernetes node or a hypervisor): a broker's "
        "traffic CPU times 1 + 0.9 * its host-mates' CPU / the host's vCPUs (SMT siblings, last-level cache, memory "
        "bandwidth); linear otherwise; 10 Gbit/s NICs (CPU binds)"
    )
    affine = False
    proportional_share = True  # a bundle's share: linear's CPU times the cluster's average contention factor
    HOST_CORES = 16.0
    """vCPUs of a host: two standard 8-core brokers (a larger broker gets a host of its own size)."""
    SPARE_HOSTS = 1
    """Hosts the pool has beyond what its brokers fill: one node's worth of room (rolling upgrades, a node lost)."""
    SMT = 0.6
    """Extra CPU time per unit of work of a thread whose SMT sibling is busy (two busy hyperthreads of a core give
    ~1.25x one thread's throughput: each runs at ~0.62 of its speed alone, 1.6x the CPU time per unit of work)."""
    MEMORY = 0.3
    """Extra per unit of work when the rest of the host is busy, from the shared last-level cache and memory bandwidth
    (half of it - a mate using its whole limit - costs +15 %)."""
    SIGMA = 0.9
    """:attr:`SMT` + :attr:`MEMORY`: a broker's traffic CPU is times ``1 + SIGMA * busy / host`` (``busy``: its live
    host-mates' CPU, each at most its limit - the chance that a thread's sibling runs a mate's work; ``host``: the
    host's vCPUs x 100)."""

    def __init__(self) -> None:
        self.cluster: ClusterModel | None = None
        """The cluster whose brokers this model placed on hosts and whose ownership it follows (:meth:`attach`)."""
        self.host_of: dict[str, int] = {}
        """Broker id -> its host (an index of :attr:`host_cores`)."""
        self.host_cores: list[float] = []
        """vCPUs per host."""
        self.operating_factor = 1.0
        """The cluster's traffic-weighted contention factor at its ideal placement, set when fitted: what
        :meth:`share` charges a bundle (before: 1, linear's)."""
        self._seed = 0
        self._cores: dict[str, float] = {}
        self._stamp: int | None = None
        self._stats: dict[str, dict[str, Any]] = {}
        self._by_load: dict[Load, list[str]] = {}
        self._own: dict[str, Load] = {}
        self._seen: dict[str, str] = {}
        self._fingerprint_seen: tuple[float, float] = (0.0, 0.0)
        self._misses: set[tuple[str, Load]] = set()

    # ------------------------------------------------------------------ hosts
    def configure(self, broker: Broker, seed: int) -> None:
        """10 Gbit/s NICs; a broker that joins a cluster this model follows is scheduled on a host now."""
        super().configure(broker, seed)
        self._seed = seed
        cluster = self.cluster
        if cluster is not None and broker.broker_id not in cluster.brokers:  # a join (a restart keeps its host)
            present = [b for b in cluster.brokers if b in self.host_of]
            self.host_of[broker.broker_id] = self._schedule(broker.broker_id, broker.cores, present)
            self._cores[broker.broker_id] = broker.cores

    def _schedule(self, broker_id: str, cores: float, present: Sequence[str]) -> int:
        """The host a broker of ``cores`` lands on: Kubernetes' default scoring (least allocated) - the host with the
        most free vCPUs that fit it, ties drawn from the seed and the broker's id; none fits: a new host."""
        used = [0.0] * len(self.host_cores)
        for b in present:
            used[self.host_of[b]] += self._cores[b]
        free = [c - u for c, u in zip(self.host_cores, used, strict=True)]
        fits = [h for h, f in enumerate(free) if f >= cores - 1e-9]
        if not fits:
            self.host_cores.append(max(self.HOST_CORES, cores))
            return len(self.host_cores) - 1
        most = max(free[h] for h in fits)
        tied = [h for h in fits if free[h] == most]
        return random.Random(f"{self._seed}:{self.name}:{broker_id}").choice(tied)

    def attach(self, cluster: ClusterModel, hosts: Mapping[str, int] | None = None) -> None:
        """Follow ``cluster`` from now on, its brokers on hosts: ``hosts`` (broker id -> host index, hosts of
        :attr:`HOST_CORES`) or, by default, scheduled in the cluster's broker order on a pool of ``ceil(cores /
        HOST_CORES) + SPARE_HOSTS`` hosts (:meth:`_schedule`)."""
        self.cluster = cluster
        self._seed = cluster.seed
        self._cores = {b: spec.cores for b, spec in cluster.brokers.items()}
        if hosts is not None:
            self.host_of = dict(hosts)
            self.host_cores = [self.HOST_CORES] * (max(hosts.values(), default=-1) + 1)
        else:
            total = sum(self._cores.values())
            self.host_cores = [self.HOST_CORES] * (math.ceil(total / self.HOST_CORES - 1e-9) + self.SPARE_HOSTS)
            self.host_of = {}
            for b, cores in self._cores.items():
                self.host_of[b] = self._schedule(b, cores, list(self.host_of))
        self._stamp = None

    def mates(self, broker_id: str) -> list[str]:
        """The live brokers on ``broker_id``'s host, itself left out (none when not attached)."""
        cluster = self.cluster
        host = self.host_of.get(broker_id)
        if cluster is None or host is None:
            return []
        return [
            b
            for b, h in self.host_of.items()
            if h == host and b != broker_id and b in cluster.brokers and cluster.brokers[b].alive
        ]

    # ------------------------------------------------------------------ the arithmetic
    def contention(self, busy: float, host_cores: float) -> float:
        """The factor on a broker's traffic CPU when its host-mates use ``busy`` CPU % on a host of ``host_cores``."""
        return 1.0 + self.SIGMA * busy / (host_cores * 100.0)

    def host_cpu(self, traffic: Sequence[float], limits: Sequence[float], host_cores: float) -> list[float]:
        """CPU % of each broker on a host, given each one's traffic CPU (``linear``'s, no base) and CPU limit:
        ``cpu_i = 10 + t_i * (1 + SIGMA * sum_{j != i} min(cpu_j, limit_j) / (100 * host_cores))`` - the mates' busy
        time includes their own contention (solved jointly: the least fixed point, from the linear CPU up) and is at
        most their limit (the CFS quota)."""
        s = self.SIGMA / (host_cores * 100.0)
        cpu = [CPU_BASE_PCT + t for t in traffic]
        for _ in range(500):
            busy = [min(c, lim) for c, lim in zip(cpu, limits, strict=True)]
            total = sum(busy)
            new = [CPU_BASE_PCT + t * (1.0 + s * (total - b)) for t, b in zip(traffic, busy, strict=True)]
            done = all(abs(n - c) <= 1e-14 * n for n, c in zip(new, cpu, strict=True))
            cpu = new
            if done:
                break
        return cpu

    def _groups(self, live: Sequence[Broker]) -> dict[tuple[float, float, float], int]:
        """The live brokers by (limit, their live mates' limits summed, host vCPUs), counted: what the ideal needs."""
        by_host: dict[int, list[float]] = {}
        alone: list[float] = []
        for b in live:
            host = self.host_of.get(b.broker_id)
            if host is None:
                alone.append(b.cpu_limit)
            else:
                by_host.setdefault(host, []).append(b.cpu_limit)
        groups: dict[tuple[float, float, float], int] = {}
        for lim in alone:
            key = (lim, 0.0, self.HOST_CORES)
            groups[key] = groups.get(key, 0) + 1
        for host, limits in by_host.items():
            total = sum(limits)
            for lim in limits:
                key = (lim, total - lim, self.host_cores[host])
                groups[key] = groups.get(key, 0) + 1
        return groups

    def _capacity(self, u: float, groups: Mapping[tuple[float, float, float], int]) -> tuple[float, float]:
        """Traffic CPU the brokers carry with every one at usage ``u`` (and the same weighted by each one's contention
        factor): a broker of limit ``C`` whose live mates' limits sum to ``M`` carries ``(u C - 10) / (1 + SIGMA *
        min(u, 1) M / (100 host))``."""
        carried = weighted = 0.0
        busy = min(u, 1.0)
        for (lim, mates, host), n in groups.items():
            factor = self.contention(busy * mates, host)
            t = max(u * lim - CPU_BASE_PCT, 0.0) / factor
            carried += n * t
            weighted += n * t * factor
        return carried, weighted

    def _equal_usage(self, traffic: float, live: Sequence[Broker]) -> float:
        """The usage at which every live broker (each at the same usage) carries ``traffic`` between them."""
        groups = self._groups(live)
        lo, hi = 0.0, 1.0
        for _ in range(200):
            if self._capacity(hi, groups)[0] >= traffic:
                break
            lo, hi = hi, hi * 2
        for _ in range(200):
            mid = (lo + hi) / 2
            if mid in (lo, hi):
                break
            lo, hi = (mid, hi) if self._capacity(mid, groups)[0] < traffic else (lo, mid)
        return hi

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        """CPU: every live broker at the same usage (the lowest worst broker: a broker below it, on a host, would
        carry less than its mate is spared), with the cluster's traffic; NICs as ``linear``. Not attached: linear."""
        parts = dict(super().ideal_parts(load, live))
        traffic = traffic_cpu(load)
        if self.cluster is None or not live or traffic <= 0:
            return parts
        u = self._equal_usage(traffic, live)
        parts["cpu"] = max(u, max(CPU_BASE_PCT / b.cpu_limit for b in live))
        return parts

    def share(self, load: Load, ref: Broker) -> float:
        """A bundle's load on ``ref``: linear's CPU times :attr:`operating_factor` (additive: a balanced start is
        balanced on average), the NICs as ``linear``."""
        nic = ref.nic_limit_kbps
        cpu = traffic_cpu(load) * self.operating_factor / ref.cpu_limit
        return max(cpu, load.thr_in * 8 / 1024 / nic, load.thr_out * 8 / 1024 / nic)

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """Attach to ``cluster`` (placing its brokers on hosts) unless this model already follows it, then
        :meth:`BisectedFitModel.fit` on the ideal, then the operating factor."""
        if self.cluster is not cluster:
            self.attach(cluster)
        super().fit(cluster, target)
        live = [cluster.brokers[b] for b in cluster.live_brokers()]
        traffic = traffic_cpu(Load.of(cluster.bundle_stats().values()))
        if live and traffic > 0:
            carried, weighted = self._capacity(self._equal_usage(traffic, live), self._groups(live))
            self.operating_factor = weighted / carried
        self._stamp = None

    # ------------------------------------------------------------------ following the cluster
    def _fingerprint(self) -> tuple[float, float]:
        assert self.cluster is not None
        topics = self.cluster.topics
        return math.fsum(map(attrgetter("rate_in"), topics)), math.fsum(map(attrgetter("rate_out"), topics))

    def _rebuild(self) -> None:
        """Read the cluster's bundle stats (as :meth:`ClusterModel.bundle_stats` reports them now) and ownership."""
        cluster = self.cluster
        assert cluster is not None
        self._stats = cluster.bundle_stats()
        self._by_load = {}
        for name, s in self._stats.items():
            self._by_load.setdefault(Load.of([s]), []).append(name)
        self._fingerprint_seen = self._fingerprint()
        self._stamp = cluster.now_ms
        self._group()

    def _regroup(self) -> None:
        """Each broker's own load as the cluster owns its bundles now, from the stats as last read - read again when a
        bundle was split since, or a rate moved."""
        cluster = self.cluster
        assert cluster is not None
        if any(name not in cluster.owners for name in self._stats) or self._fingerprint() != self._fingerprint_seen:
            self._rebuild()
        else:
            self._group()

    def _group(self) -> None:
        cluster = self.cluster
        assert cluster is not None
        owners = cluster.owners
        per: dict[str, list[Mapping[str, Any]]] = {}
        for name, s in self._stats.items():
            per.setdefault(owners[name], []).append(s)
        self._own = {b: Load.of(stats) for b, stats in per.items()}
        self._seen = dict(owners)
        self._misses = set()

    def is_own(self, broker_id: str, load: Load) -> bool:
        """Whether ``load`` is the load ``broker_id`` carries now (its own bundles at the cluster's rates)."""
        cluster = self.cluster
        assert cluster is not None
        if self._stamp != cluster.now_ms:  # the clock moved: the rates with it
            self._rebuild()
        if (broker_id, load) in self._misses:
            return False
        if self._own.get(broker_id, _ZERO) == load:
            if cluster.owners == self._seen:
                return True
        else:
            names = self._by_load.get(load, ())
            if names and all(cluster.owners.get(n) != broker_id for n in names):  # one bundle's load, not its own
                return False
        if cluster.owners != self._seen:  # the ownership moved since the last reading (a decision, a lookup)
            self._regroup()
            if self._own.get(broker_id, _ZERO) == load:
                return True
        if _counts(self._own.get(broker_id, _ZERO)) == _counts(load) and self._fingerprint() != self._fingerprint_seen:
            self._rebuild()  # the rates moved within the instant (the clock's step after a leaving broker's lookups)
            if self._own.get(broker_id, _ZERO) == load:
                return True
        self._misses.add((broker_id, load))
        return False

    def cpu_of(self, broker: Broker, load: Load) -> float:
        """CPU % of ``broker`` carrying ``load``: with contention when ``load`` is its own and it has live host-mates
        (their loads as the cluster has them now), else ``linear``'s."""
        linear = CPU_BASE_PCT + traffic_cpu(load)
        cluster = self.cluster
        if cluster is None:
            return linear
        mates = self.mates(broker.broker_id)
        if not mates or not self.is_own(broker.broker_id, load):
            return linear
        traffic = [traffic_cpu(load), *(traffic_cpu(self._own.get(m, _ZERO)) for m in mates)]
        limits = [broker.cpu_limit, *(cluster.brokers[m].cpu_limit for m in mates)]
        return self.host_cpu(traffic, limits, self.host_cores[self.host_of[broker.broker_id]])[0]

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        """``linear``'s NICs; CPU as :meth:`cpu_of` (a hypothetical load - a topic or a bundle alone, as the floor asks
        - is charged as on a host whose mates are idle)."""
        out = super().usage(broker, load)
        out["cpu"]["usage"] = self.cpu_of(broker, load)
        return out


# ---------------------------------------------------------------------------------------------- cold-start


class ColdStartModel(HeldOutModel):
    name = "cold-start"
    description = (
        "linear CPU, except on a broker that (re)started: from its first traffic its traffic CPU is times 1 + "
        "0.6 e^(-a/60 s) + 0.15 e^(-a/300 s) (JIT warm-up, then the long tail), plus 60 CPU-seconds of JIT "
        "compilation over ~1 min; reports average the last minute; 10 Gbit/s NICs (CPU binds)"
    )
    REPORT_WINDOW_S = 60.0
    """Pulsar's CPU usage is the average since the last sample (``loadBalancerHostUsageCheckIntervalMinutes``, 1)."""
    JIT = 0.6
    """A message's extra CPU (times ``linear``'s traffic CPU) right after the first traffic: the hot paths still
    interpreted or in C1-compiled, profiling code."""
    JIT_TAU_S = 60.0
    """... decaying as the hot paths reach C2 (the compile queue drains over the first minute or two)."""
    TAIL = 0.15
    """The long tail's extra at the first traffic: less frequent paths compiled late, recompilation after
    deoptimisation as the type profiles widen, G1's adaptive sizing, the allocator's arenas and caches growing."""
    TAIL_TAU_S = 300.0
    COMPILE_CPU_S = 60.0
    """CPU seconds the JIT compiler threads spend on the broker's hot code once traffic exercises it."""
    COMPILE_TAU_S = 60.0
    HORIZON_S = 7200.0
    """A warm-up is forgotten this long after the first traffic (``e^-24`` of the tail left): exactly linear again."""

    def __init__(self) -> None:
        self.cluster: ClusterModel | None = None
        """The cluster whose brokers, ownership and clock this model follows (:meth:`attach`)."""
        self.pending: dict[str, int] = {}
        """Broker -> the last instant read before its (re)start was seen: (re)started, no traffic yet."""
        self.warm_from: dict[str, int] = {}
        """Broker -> the instant its first traffic after its (re)start arrived: warming up."""
        self._schedule: list[tuple[int, str]] = []
        self._alive: dict[str, bool] = {}
        self._seen: dict[str, str] | None = None
        self._seen_ms = 0
        self._seen_cycle = 0
        self._bundle_counts: dict[str, _Counts] = {}
        self._owned: dict[str, _Counts] = {}
        self._bundles_of: dict[str, list[str]] = {}
        self._misses: set[tuple[str, Load]] = set()

    # ------------------------------------------------------------------ the arithmetic
    def window(self, age_s: float, tau_s: float) -> float:
        return report_window(age_s, tau_s, self.REPORT_WINDOW_S)

    def factor(self, age_s: float) -> float:
        """The traffic CPU's factor in the report ``age_s`` after the first traffic (averaged over its window)."""
        return (
            1.0
            + self.JIT * self.JIT_TAU_S * self.window(age_s, self.JIT_TAU_S)
            + self.TAIL * self.TAIL_TAU_S * self.window(age_s, self.TAIL_TAU_S)
        )

    def compile_cpu(self, age_s: float) -> float:
        """CPU % the JIT compiler adds to the report ``age_s`` after the first traffic."""
        return 100.0 * self.COMPILE_CPU_S * self.window(age_s, self.COMPILE_TAU_S)

    def extra(self, load: Load, age_s: float) -> float:
        """CPU % a broker carrying ``load`` reports on top of ``linear``'s, ``age_s`` after its first traffic."""
        return traffic_cpu(load) * (self.factor(age_s) - 1.0) + self.compile_cpu(age_s)

    # ------------------------------------------------------------------ following the cluster
    def attach(self, cluster: ClusterModel) -> None:
        """Follow ``cluster`` from now on: the brokers the first reading finds are long running; the joins and
        restarts scheduled from now on are read from its events."""
        self.cluster = cluster
        self._schedule = [
            (e.cycle + (e.delay if e.kind == "restart" else 0), e.broker)
            for e in cluster.events
            if e.kind in ("join", "restart") and e.broker is not None
        ]
        self.pending, self.warm_from, self._alive = {}, {}, {}
        self._seen, self._seen_cycle, self._seen_ms = None, cluster.cycle, cluster.now_ms
        self._bundle_counts, self._owned, self._bundles_of, self._misses = {}, {}, {}, set()

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """Attach to ``cluster``, then :meth:`HeldOutModel.fit` (exact: steady state is linear)."""
        self.attach(cluster)
        super().fit(cluster, target)

    def _bundle_count(self, bundle: str) -> _Counts:
        counts = self._bundle_counts.get(bundle)
        if counts is None:
            assert self.cluster is not None
            topics = self.cluster.topics_of(bundle)
            counts = (len(topics), sum(t.producers for t in topics), sum(t.clients - t.producers for t in topics))
            self._bundle_counts[bundle] = counts
        return counts

    def _reread(self, at_ms: int) -> None:
        """Each broker's topic, producer and consumer counts as it owns its bundles now; a (re)started broker that
        owns topics now got its first traffic at ``at_ms``."""
        cluster = self.cluster
        assert cluster is not None
        owners = cluster.owners
        self._seen = dict(owners)
        self._bundle_counts = {b: c for b, c in self._bundle_counts.items() if b in owners}
        owned: dict[str, list[int]] = {}
        bundles_of: dict[str, list[str]] = {}
        for bundle, owner in owners.items():
            t, p, c = self._bundle_count(bundle)
            acc = owned.setdefault(owner, [0, 0, 0])
            acc[0] += t
            acc[1] += p
            acc[2] += c
            bundles_of.setdefault(owner, []).append(bundle)
        self._owned = {b: (v[0], v[1], v[2]) for b, v in owned.items()}
        self._bundles_of = bundles_of
        for b, seen_ms in list(self.pending.items()):
            if self._owned.get(b, (0, 0, 0))[0] > 0:
                self.warm_from[b] = max(at_ms, seen_ms)
                del self.pending[b]
        self._misses = set()

    def observe(self) -> None:
        """At a new instant: the brokers (re)started since the last reading (joined, or back alive, as seen or as
        scheduled), then the ownership, a (re)started broker's first bundles dated at the last instant read."""
        cluster = self.cluster
        if cluster is None:
            return
        now = cluster.now_ms
        first = self._seen is None
        if not first and now == self._seen_ms:
            return
        started = {b for cycle, b in self._schedule if self._seen_cycle < cycle <= cluster.cycle}
        if first:  # the first reading: every broker long running but those scheduled to start since attached
            self._alive = {b: spec.alive for b, spec in cluster.brokers.items()}
        started |= {b for b, spec in cluster.brokers.items() if spec.alive and not self._alive.get(b, False)}
        for b in started:
            if b in cluster.brokers and cluster.brokers[b].alive:
                self.pending[b] = self._seen_ms
                self.warm_from.pop(b, None)
        self.pending = {b: t for b, t in self.pending.items() if b in cluster.brokers}
        horizon = self.HORIZON_S * 1000
        self.warm_from = {b: t for b, t in self.warm_from.items() if b in cluster.brokers and now - t <= horizon}
        self._alive = {b: spec.alive for b, spec in cluster.brokers.items()}
        self._seen_cycle = cluster.cycle
        self._reread(self._seen_ms)
        self._seen_ms = now

    def _matches(self, broker_id: str, load: Load) -> bool:
        """Whether ``load`` has the counts of ``broker_id``'s bundles as last read and their traffic now."""
        cluster = self.cluster
        assert cluster is not None
        if self._owned.get(broker_id, (0, 0, 0)) != _counts(load):
            return False
        msg = thr = 0.0
        for bundle in self._bundles_of.get(broker_id, ()):
            for t in cluster.topics_of(bundle):
                msg += t.rate_in + t.rate_out
                thr += (t.rate_in + t.rate_out) * t.msg_size
        return math.isclose(msg, load.msg, rel_tol=1e-9, abs_tol=1e-9) and math.isclose(
            thr, load.thr_in + load.thr_out, rel_tol=1e-9, abs_tol=1e-9
        )

    def is_own(self, broker_id: str, load: Load) -> bool:
        """Whether ``load`` is the load ``broker_id`` owns now: its bundles' counts as last read and their traffic now
        (the ownership read again when it moved within the instant, a first traffic then dated now)."""
        cluster = self.cluster
        assert cluster is not None
        if self._matches(broker_id, load):
            return True
        if (broker_id, load) in self._misses:
            return False
        if cluster.owners != self._seen:
            self._reread(cluster.now_ms)
            if self._matches(broker_id, load):
                return True
        self._misses.add((broker_id, load))
        return False

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        """``linear``'s, plus, when the broker is warming up and ``load`` is its own, the warm-up's extra."""
        out = super().usage(broker, load)
        cluster = self.cluster
        if cluster is None:
            return out
        self.observe()
        start = self.warm_from.get(broker.broker_id)
        if start is not None and self.is_own(broker.broker_id, load):
            start = self.warm_from.get(broker.broker_id, start)
            out["cpu"]["usage"] += self.extra(load, (cluster.now_ms - start) / 1000)
        return out


HELD_OUT_LOAD_MODELS_6: Mapping[str, Callable[[], LoadModel]] = {
    "shared-hosts": SharedHostsModel,
    "cold-start": ColdStartModel,
}
HELD_OUT_MODELS_6 = tuple(HELD_OUT_LOAD_MODELS_6)
"""The sixth held-out set (``bench_balance.py --held-out 6``)."""

__all__ = [
    "HELD_OUT_LOAD_MODELS_6",
    "HELD_OUT_MODELS_6",
    "ColdStartModel",
    "SharedHostsModel",
    "report_window",
    "traffic_cpu",
]
