"""Held-out load models, fourth set: ways real brokers turn traffic into load that nobody tuned the planner on.

A fourth set (:data:`HELD_OUT_MODELS_4`, ``bench_balance.py --held-out 4``, its own report), kept apart from the three
the planner's author has seen (:mod:`pulsar_rebalance.simulator.held_out_models`,
:mod:`pulsar_rebalance.simulator.held_out_models_3`): ``topic-features`` and ``bundle-housekeeping``. In both, part of
a topic's CPU belongs to the topic through something the load report does not carry - the broker features the topic
uses, the bytes it stores - so a bundle's true share of its broker's CPU is not its share of the message rate or
throughput the reports show, and that part moves with the bundle (to the broker it is unloaded to, to the children it
is split into). Unlike the third set, nothing depends on what a bundle shares its broker with, nor on the broker: the
extra is additive over topics; only which topics carry it is hidden. Both are affine in the rates (the extra is
linear in them, or does not depend on them), so :meth:`HeldOutModel.fit` solves the scenarios' rate scaling exactly.
Every scenario of :mod:`pulsar_rebalance.simulator.scenarios` builds under both at its target; CPU binds where they
calibrate (NICs at 10 Gbit/s, at 0.11-0.13x of it).

Written without reading the planner, from how Pulsar brokers behave. Kept in a module of its own so that every module a
stored benchmark run imported stays as it was: ``benchmarks/bench_balance.py`` resolves these names itself, and neither
the load-model registry (:func:`pulsar_rebalance.simulator.load_models.get_load_model`) nor the simulator's
:func:`pulsar_rebalance.simulator.cluster.resolve_load_model` knows them; they go in as instances
(``build(..., load_model=TopicFeaturesModel())``), one per cluster.

What a load model is handed is a broker's summed bundle stats (:class:`Load`), never its topics. These models resolve
the topics from the cluster they are attached to (:meth:`HiddenTopicCostModel.attach`; :meth:`~HeldOutModel.fit`, which
every scenario's calibration calls, attaches): a broker's own bundles as the cluster owns and reports them now, a
bundle, the whole cluster, one topic - every load the cluster model and the scenarios ask about. A load that is none of
them (a bundle's rates scaled while a scenario bisects, a hypothetical, one of two bundles reporting exactly the same
stats, a broker of the HTTP simulator once its ownership differs from the cluster's) is charged the cluster's average
hidden CPU per unit of what it shows (:meth:`HiddenTopicCostModel.estimate`): exact for the whole cluster, and what
someone who sees only the reports would guess. The scenarios place with each bundle's true cost, so a balanced start is
balanced under the model; a strategy sees each broker's CPU and its bundles' rates.

=================== =======================================================================================
topic-features      CPU binds, and a message's CPU depends on broker features its topic uses, which no load report
                    shows (``NamespaceBundleStats`` and ``broker-stats/topics`` carry rates, throughputs and counts,
                    not subscription types or topic policies): ``cpu = linear + 100/40000 * sum over the topics of
                    (x_in * msgRateIn + x_out * msgRateOut)``, a topic's ``x`` the sum of its features' extras, in
                    units of linear's per-message CPU, each feature drawn apart per topic from the seed and the
                    topic's name. Key_Shared subscriptions (15 % of topics, out +1): the dispatcher reads each
                    entry's key, hashes it onto the consumers' sticky ranges, splits entries across consumers and
                    holds back messages for a consumer that joined late (ordering) - twice a Shared or Exclusive
                    dispatch. Delayed delivery (5 %, in +0.25, out +1.5): each message is read once to index its
                    delivery time (the tracker's priority queue; the bucket tracker writes its snapshots to the
                    bookies) and again when it is due. Entry filters (5 %, out +4, PIP-105): the broker deserialises
                    each message's metadata and runs the filters; with one message in five passing, four are read,
                    evaluated and acknowledged by the broker for each one dispatched, and ``msgRateOut`` counts only
                    that one. Deduplication (15 %, in +0.3): the producer's sequence-id map per message and its
                    snapshot cursor. Batch-index acknowledgement (10 %, out +0.4,
                    ``acknowledgmentAtBatchIndexLevelEnabled``): per-message acks and a bitset per partly acknowledged
                    batch in the cursor. Unbatched producers (10 %, in +2, out +2): each message its own entry - a
                    BookKeeper add, a cache entry, a dispatch read and a Netty write per message, where linear's
                    per-message CPU assumes batches of several. (Schema validation is not among them: Pulsar checks a
                    schema when a producer or consumer connects, not per message.) Heavy-tailed: 62 % of topics
                    dispatch at 1x, 31 % at 2x or more, 15 % at 3x or more, 5 % at 5x or more (at most 9.9x); per
                    message in and out at fan-out 1.6, 53 % at 1x, 19 % at 2x or more (mean 1.5x, at most 7.5x).
                    Where the scenarios calibrate the features are 26-31 % of the CPU (seeds 1-3); a bundle of ~30
                    topics costs 1.2x to 1.7x its linear CPU (10th to 90th percentile), up to ~2.2x. *Ideal*: every
                    broker carrying the same share of the cluster's true CPU, features included (they move with
                    their bundles).
bundle-housekeeping CPU binds, and part of it is housekeeping that moves with a topic but not with its rates:
                    ``cpu = linear + c * sum over the topics of their stored GiB``. What a topic stores (retained
                    ledgers, backlog, compacted ledger) is not in the load report (``storageSize`` and
                    ``backlogSize`` are in a topic's admin stats, not in ``NamespaceBundleStats`` nor in
                    ``broker-stats/topics``), and the broker works on it apart from the traffic: compaction re-reads
                    the topic and rewrites its compacted ledger, offload reads closed ledgers into tiered storage,
                    the retention and backlog-quota checks walk each topic's ledger list and cursors every minute or
                    two, every ledger rollover rewrites the managed ledger's metadata (one entry per retained
                    ledger), cursors persist their positions. Stored GiB per topic, from the seed and the topic's
                    name: a quarter of the topics retain (a retention policy of days, a compacted topic, offload):
                    lognormal, median 20 GiB, sigma 1.5; the others keep only their backlog and the ledgers not yet
                    trimmed (Pulsar's default retention, none): median 0.5 GiB, sigma 1; times (base rate / the
                    cluster's mean)^0.3, weakly tied to the rate (log-correlation ~0.1): an old topic may store
                    terabytes and be quiet now. Static. Heavy-tailed: the retaining topics hold 96 % of the bytes,
                    the top 1 % of topics ~40 % (seed 1's 4,000-topic scenarios: ~56 TiB, up to ~3 TiB a topic). ``c``
                    is set per cluster (``fit_costs``) so that housekeeping is 12.5 % of the cluster's CPU capacity
                    (25 % of the CPU at 50 % usage): 0.014-0.017 % of a core per GiB on the 4,000-topic scenarios
                    (~3 TiB: half a core), about what reading each stored byte twice and writing it once a day costs
                    at linear's per-byte CPU (compaction's two passes and its compacted ledger); a fifth of that on
                    large-zipf, whose brokers hold five times the topics. A bundle of ~30 topics costs 1.1x to 1.8x its
                    linear CPU (10th to 90th percentile); a quiet one holding a large retaining topic up to ~10x.
                    *Ideal*: every broker carrying the same share of the cluster's true CPU, housekeeping included.
=================== =======================================================================================
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pulsar_rebalance.simulator.held_out_models import HeldOutModel
from pulsar_rebalance.simulator.load_models import CPU_BASE_PCT, CPU_PCT_PER_MSG, Load, LoadModel

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Topic

_Counts = tuple[int, int, int]
_RATES = ("msg", "msg_in", "msg_out", "thr_in", "thr_out")


def _counts(load: Load) -> _Counts:
    return (load.topics, load.producers, load.consumers)


def _same(a: Load, b: Load) -> bool:
    """The same counts and rates, up to the rounding of a sum taken in another order."""
    return _counts(a) == _counts(b) and all(
        math.isclose(getattr(a, f), getattr(b, f), rel_tol=1e-9, abs_tol=1e-12) for f in _RATES
    )


def _unique(hiddens: Sequence[float]) -> float | None:
    """The one hidden CPU ``hiddens`` agree on (None: none, or loads alike that carry different topics)."""
    if hiddens and all(math.isclose(h, hiddens[0], rel_tol=1e-9, abs_tol=1e-12) for h in hiddens):
        return hiddens[0]
    return None


class HiddenTopicCostModel(HeldOutModel):
    """A held-out model whose extra CPU belongs to topics through a per-topic quantity the load report does not
    carry: ``cpu = linear + the hidden CPU of the load's topics`` (module docstring: how a load's topics are found).

    A model defines :attr:`UNITS`, :meth:`draw` (a topic's hidden quantities), :meth:`parts_units` (topics' hidden
    CPU and visible units now), :meth:`load_units` and :meth:`prior`."""

    UNITS: tuple[str, ...] = ()
    """What the hidden CPU is averaged over in :meth:`estimate` (the :meth:`load_units`, in order)."""

    def __init__(self) -> None:
        self.cluster: ClusterModel | None = None
        """The cluster whose topics this model charges (:meth:`attach`)."""
        self._draws: dict[str, tuple[float, ...]] = {}
        self.per_unit: tuple[float, ...] = self.prior()
        """The cluster's hidden CPU per unit of each of :attr:`UNITS` (when not attached: :meth:`prior`)."""
        self._bundles: list[tuple[str, Mapping[str, Any], float]] = []
        self._base: dict[_Counts, list[tuple[Load, float]]] = {}
        self._index: dict[_Counts, list[tuple[Load, float]]] = {}
        self._owned: dict[str, tuple[Load, float]] = {}
        self._unknown: set[tuple[str | None, Load]] = set()

    @property
    def draws(self) -> dict[str, tuple[float, ...]]:
        """Topic name -> its hidden quantities (:meth:`draw`), drawn when attached (set by hand: every load is
        resolved anew)."""
        return self._draws

    @draws.setter
    def draws(self, draws: dict[str, tuple[float, ...]]) -> None:
        self._draws = draws
        self.forget()

    def forget(self) -> None:
        """Resolve every load anew (the hidden costs changed: drawn, or set per cluster)."""
        self._bundles, self._base, self._index, self._owned, self._unknown = [], {}, {}, {}, set()

    # ------------------------------------------------------------------ what a model defines
    def draw(self, topic: Topic, seed: int) -> tuple[float, ...]:
        """The topic's hidden quantities, deterministic from ``seed`` and the topic (drawn when attached)."""
        raise NotImplementedError

    def parts_units(self, topics: Iterable[Topic]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``topics``' hidden CPU % now, one part per unit of :attr:`UNITS`, and their visible units (attached)."""
        raise NotImplementedError

    def load_units(self, load: Load) -> tuple[float, ...]:
        """A load's visible units (all 0: no hidden CPU, whatever its topics)."""
        raise NotImplementedError

    def prior(self) -> tuple[float, ...]:
        """Hidden CPU per unit before the model is attached to a cluster (the population's expectation)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the cluster's topics
    def attach(self, cluster: ClusterModel) -> None:
        """Charge ``cluster``'s topics from now on: each topic's hidden quantities drawn from the cluster's seed."""
        self.cluster = cluster
        self.draws = {t.name: self.draw(t, cluster.seed) for t in cluster.topics}

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """Attach to ``cluster``, then :meth:`HeldOutModel.fit` (exact: the hidden CPU is linear in the rates or does
        not depend on them)."""
        self.attach(cluster)
        super().fit(cluster, target)

    def topic_hidden(self, topic: Topic) -> float:
        """The topic's hidden CPU % now (attached)."""
        return sum(self.parts_units([topic])[0])

    def _rebuild(self) -> None:
        """Index the bundles as the cluster reports them now, the whole cluster, and the averages per unit."""
        cluster = self.cluster
        assert cluster is not None
        stats = cluster.bundle_stats()
        parts = [0.0] * len(self.UNITS)
        units = [0.0] * len(self.UNITS)
        bundles: list[tuple[str, Mapping[str, Any], float]] = []
        for bundle, s in stats.items():
            bundle_parts, bundle_units = self.parts_units(cluster.topics_of(bundle))
            for k in range(len(self.UNITS)):
                parts[k] += bundle_parts[k]
                units[k] += bundle_units[k]
            bundles.append((bundle, s, sum(bundle_parts)))
        self.per_unit = tuple(p / u if u > 0 else 0.0 for p, u in zip(parts, units, strict=True))
        base: dict[_Counts, list[tuple[Load, float]]] = {}
        for load, hidden in [
            *((Load.of([s]), h) for _, s, h in bundles),
            (Load.of(stats.values()), sum(h for *_, h in bundles)),
        ]:
            base.setdefault(_counts(load), []).append((load, hidden))
        self._bundles, self._base = bundles, base
        self._regroup()

    def _regroup(self) -> None:
        """Index every broker's bundles as the cluster owns them now (the bundles as last indexed); a load found
        nowhere before may be one now."""
        cluster = self.cluster
        assert cluster is not None
        by_owner: dict[str, tuple[list[Mapping[str, Any]], list[float]]] = {}
        for bundle, s, hidden in self._bundles:
            stats, hiddens = by_owner.setdefault(cluster.owners.get(bundle, ""), ([], []))
            stats.append(s)
            hiddens.append(hidden)
        self._owned = {owner: (Load.of(stats), sum(hiddens)) for owner, (stats, hiddens) in by_owner.items()}
        self._index = {k: list(v) for k, v in self._base.items()}
        for load, hidden in self._owned.values():
            self._index.setdefault(_counts(load), []).append((load, hidden))
        self._unknown = set()

    def _single_topic(self, load: Load) -> float | None:
        """The hidden CPU of the topic whose rates ``load`` are (None: no topic's, or several topics' alike)."""
        assert self.cluster is not None
        return _unique(
            [
                self.topic_hidden(t)
                for t in self.cluster.topics
                if t.rate_in == load.msg_in
                and t.rate_out == load.msg_out
                and t.rate_in * t.msg_size == load.thr_in
                and t.rate_out * t.msg_size == load.thr_out
            ]
        )

    def _find(self, load: Load, owner: str | None) -> float | None:
        if owner is not None and owner in self._owned and _same(self._owned[owner][0], load):
            return self._owned[owner][1]
        found = _unique([h for known, h in self._index.get(_counts(load), ()) if _same(known, load)])
        if found is None and load.topics <= 1:  # one topic's rates: found among the topics as they are now
            found = self._single_topic(load)
            if found is not None:
                self._index.setdefault(_counts(load), []).append((load, found))
        return found

    def hidden(self, load: Load, owner: str | None = None) -> float:
        """The hidden CPU % of ``load`` (``owner``: the broker it is, whose own bundles are tried first): its topics'
        when it is a load the cluster reports now, else :meth:`estimate`."""
        if not any(self.load_units(load)):
            return 0.0
        if self.cluster is None:
            return self.estimate(load)
        found = self._find(load, owner)
        if found is None and (owner, load) not in self._unknown:
            if load.topics > 1 or owner is not None:  # the ownership moved since, then the rates or the bundles
                for refresh in (self._regroup, self._rebuild):
                    refresh()
                    found = self._find(load, owner)
                    if found is not None:
                        break
            if found is None:
                self._unknown.add((owner, load))
        return self.estimate(load) if found is None else found

    def estimate(self, load: Load) -> float:
        """The hidden CPU % someone who sees only the reports would put on ``load``: the cluster's average per unit
        of what the load shows (:attr:`UNITS`); exact for the whole cluster."""
        if self.cluster is not None and not self._bundles:  # not indexed since attached or since the costs changed
            self._rebuild()
        return sum(r * u for r, u in zip(self.per_unit, self.load_units(load), strict=True))

    def cpu(self, load: Load, base: float = CPU_BASE_PCT, owner: str | None = None) -> float:
        """Linear's CPU % plus the hidden CPU of ``load``'s topics (``owner``: as :meth:`hidden`)."""
        return super().cpu(load, base) + self.hidden(load, owner)

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        """Linear's CPU plus the hidden CPU of the broker's topics (two brokers whose bundles report the same stats
        may carry different topics: the broker's own bundles are tried first); the NICs carry the bytes."""
        nic = broker.nic_limit_kbps
        return {
            "cpu": {"usage": self.cpu(load, owner=broker.broker_id), "limit": broker.cpu_limit},
            "bandwidthIn": {"usage": load.thr_in * 8 / 1024, "limit": nic},
            "bandwidthOut": {"usage": load.thr_out * 8 / 1024, "limit": nic},
        }


class Feature(NamedTuple):
    """A broker feature a topic may use: the share of topics that use it and its extra CPU per published and per
    dispatched message, in units of linear's per-message CPU."""

    name: str
    share: float
    per_in: float
    per_out: float


class TopicFeaturesModel(HiddenTopicCostModel):
    name = "topic-features"
    description = (
        "linear CPU, plus per topic a hidden extra per published and per dispatched message from the broker features "
        "it uses (Key_Shared dispatch, delayed delivery, entry filters, deduplication, batch-index acks, unbatched "
        "producers), drawn per topic from the seed; 10 Gbit/s NICs (CPU binds)"
    )
    UNITS = ("msg_in", "msg_out")
    FEATURES = (
        Feature("key-shared", 0.15, 0.0, 1.0),
        Feature("delayed-delivery", 0.05, 0.25, 1.5),
        Feature("entry-filters", 0.05, 0.0, 4.0),
        Feature("deduplication", 0.15, 0.3, 0.0),
        Feature("batch-index-ack", 0.10, 0.0, 0.4),
        Feature("unbatched", 0.10, 2.0, 2.0),
    )
    """The features (module docstring: what each costs, and why)."""
    PER_MSG = CPU_PCT_PER_MSG

    def features(self, topic: str, seed: int) -> tuple[str, ...]:
        """The features ``topic`` uses under ``seed``: each drawn apart, with its share."""
        rng = random.Random(f"{seed}:{self.name}:{topic}")
        return tuple(f.name for f in self.FEATURES if rng.random() < f.share)

    def extras(self, features: Iterable[str]) -> tuple[float, float]:
        """The extra CPU per published and per dispatched message of ``features``, in linear's per-message CPU."""
        used = set(features)
        return (
            sum(f.per_in for f in self.FEATURES if f.name in used),
            sum(f.per_out for f in self.FEATURES if f.name in used),
        )

    def draw(self, topic: Topic, seed: int) -> tuple[float, ...]:
        return self.extras(self.features(topic.name, seed))

    def parts_units(self, topics: Iterable[Topic]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        draws = self.draws
        extra_in = extra_out = rate_in = rate_out = 0.0
        for t in topics:
            x_in, x_out = draws[t.name]
            extra_in += x_in * t.rate_in
            extra_out += x_out * t.rate_out
            rate_in += t.rate_in
            rate_out += t.rate_out
        return (self.PER_MSG * extra_in, self.PER_MSG * extra_out), (rate_in, rate_out)

    def load_units(self, load: Load) -> tuple[float, ...]:
        return load.msg_in, load.msg_out

    def prior(self) -> tuple[float, ...]:
        return (
            self.PER_MSG * sum(f.share * f.per_in for f in self.FEATURES),
            self.PER_MSG * sum(f.share * f.per_out for f in self.FEATURES),
        )


class BundleHousekeepingModel(HiddenTopicCostModel):
    name = "bundle-housekeeping"
    description = (
        "linear CPU, plus per topic housekeeping (compaction, offload, retention and backlog-quota checks, ledger "
        "rollover, cursors) in proportion to the bytes it stores, which the load report does not carry: heavy-tailed, "
        "drawn per topic from the seed, weakly tied to its rate; 12.5 % of the cluster's CPU capacity; 10 Gbit/s NICs "
        "(CPU binds)"
    )
    UNITS = ("topics",)
    RETAINING_SHARE = 0.25
    """The share of topics that retain their data (a retention policy of days, compaction, offload)."""
    RETAINING_GIB = 20.0
    RETAINING_SIGMA = 1.5
    TRIMMED_GIB = 0.5
    """The median GiB of a topic without retention: its backlog and the ledgers not yet trimmed."""
    TRIMMED_SIGMA = 1.0
    RATE_EXPONENT = 0.3
    """Stored bytes times (base rate / the cluster's mean) to this power: weakly tied to the rate."""
    CAPACITY_SHARE = 0.125
    """The cluster's housekeeping as a share of its CPU capacity (25 % of the CPU of a broker at 50 % usage)."""

    def __init__(self, per_gib: float = 0.0175) -> None:
        """``per_gib``: CPU % (of one core) per GiB stored; the default is about what :meth:`fit_costs` sets on the
        4,000-topic scenarios."""
        self.per_gib = per_gib
        self.mean_rate = 0.0
        """The cluster's mean base rate when attached (what a topic's stored bytes are weakly tied to)."""
        super().__init__()

    def stored_gib(self, topic: str, seed: int, rate_ratio: float = 1.0) -> float:
        """GiB ``topic`` stores under ``seed``, its base rate ``rate_ratio`` times the cluster's mean."""
        rng = random.Random(f"{seed}:{self.name}:{topic}")
        if rng.random() < self.RETAINING_SHARE:
            median, sigma = self.RETAINING_GIB, self.RETAINING_SIGMA
        else:
            median, sigma = self.TRIMMED_GIB, self.TRIMMED_SIGMA
        return median * math.exp(sigma * rng.gauss(0.0, 1.0)) * max(rate_ratio, 0.0) ** self.RATE_EXPONENT

    def attach(self, cluster: ClusterModel) -> None:
        rates = [t.base_rate for t in cluster.topics]
        self.mean_rate = sum(rates) / len(rates) if rates else 0.0
        super().attach(cluster)

    def draw(self, topic: Topic, seed: int) -> tuple[float, ...]:
        ratio = topic.base_rate / self.mean_rate if self.mean_rate > 0 else 1.0
        return (self.stored_gib(topic.name, seed, ratio),)

    def fit_costs(self, cluster: ClusterModel, target: float) -> None:
        """The CPU per GiB such that the cluster's housekeeping is :attr:`CAPACITY_SHARE` of its CPU capacity."""
        stored = sum(d[0] for d in self.draws.values())
        if stored > 0:
            cap = sum(cluster.brokers[b].cpu_limit for b in cluster.live_brokers())
            self.per_gib = self.CAPACITY_SHARE * cap / stored
            self.forget()

    def parts_units(self, topics: Iterable[Topic]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        draws = self.draws
        stored = 0.0
        n = 0
        for t in topics:
            stored += draws[t.name][0]
            n += 1
        return (self.per_gib * stored,), (float(n),)

    def load_units(self, load: Load) -> tuple[float, ...]:
        return (float(load.topics),)

    def mean_gib(self) -> float:
        """The expected GiB a topic stores at the cluster's mean rate."""
        retaining = self.RETAINING_GIB * math.exp(self.RETAINING_SIGMA**2 / 2)
        trimmed = self.TRIMMED_GIB * math.exp(self.TRIMMED_SIGMA**2 / 2)
        return self.RETAINING_SHARE * retaining + (1 - self.RETAINING_SHARE) * trimmed

    def prior(self) -> tuple[float, ...]:
        return (self.per_gib * self.mean_gib(),)


HELD_OUT_LOAD_MODELS_4: Mapping[str, Callable[[], LoadModel]] = {
    "topic-features": TopicFeaturesModel,
    "bundle-housekeeping": BundleHousekeepingModel,
}
HELD_OUT_MODELS_4 = tuple(HELD_OUT_LOAD_MODELS_4)
"""The fourth held-out set (``bench_balance.py --held-out 4``)."""

__all__ = [
    "HELD_OUT_LOAD_MODELS_4",
    "HELD_OUT_MODELS_4",
    "BundleHousekeepingModel",
    "Feature",
    "HiddenTopicCostModel",
    "TopicFeaturesModel",
]
