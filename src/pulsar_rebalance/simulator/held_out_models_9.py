"""Held-out load models, ninth set: ways real brokers turn traffic into load that nobody tuned the planner on.

A ninth set (:data:`HELD_OUT_MODELS_9`, ``bench_balance.py --held-out 9``, its own report), kept apart from the eight
before it: ``key-shared`` and ``entry-filters``. Both are about how a subscription dispatches, which the load report
does not carry: a bundle's ``NamespaceBundleStats`` has ``msgRateIn`` / ``msgRateOut``, ``msgThroughputIn`` /
``msgThroughputOut``, ``consumerCount``, ``producerCount``, ``topics`` and ``cacheSize``, and nothing of a
subscription's type or of what its dispatcher did with the entries it read. Under ``key-shared`` a third of the
namespaces consume through Key_Shared subscriptions, whose dispatcher does per-entry work an Exclusive or Failover
one does not (the sticky key parsed and hashed, a consumer selected, entries grouped per consumer, some replayed):
each message out costs more than the same ``msgRateOut`` elsewhere. Under ``entry-filters`` a third of the namespaces
dispatch through broker-side entry filters: every subscription reads and filters every entry, and the entries a filter
rejects cost the broker a read, a filter call and an acknowledgement but never appear in ``msgRateOut``. Both are
linear in the rates (:meth:`HeldOutModel.fit`, exact). Every scenario of :mod:`pulsar_rebalance.simulator.scenarios`
builds under both at its target; CPU binds (NICs at 10 Gbit/s, as the other CPU-bound held-out models').

Written without reading the planner, from how Pulsar brokers behave. Kept in a module of its own so that every module a
stored benchmark run imported stays as it was: ``benchmarks/bench_balance.py`` resolves these names itself, and neither
the load-model registry (:func:`pulsar_rebalance.simulator.load_models.get_load_model`) nor the simulator's
:func:`pulsar_rebalance.simulator.cluster.resolve_load_model` knows them; they go in as instances (``build(...,
load_model=KeySharedModel())``), one per cluster.

Units below: CPU in % of one core, as Pulsar reports it (``cpu.limit = cores * 100``); ``linear``'s costs are
``100/40000`` % per message/s (in + out) and ``100/200 MiB`` % per byte/s (in + out), 10 % for the idle broker.

============= =============================================================================================
key-shared    CPU binds, and in a third of the namespaces (:attr:`NamespacePolicyModel.SHARE`: ``ceil(0.3 n)`` of the
              cluster's ``n`` namespaces, drawn from the seed - 3 of 8 on the 4,000-topic scenarios, 12 of 40 on
              large-zipf) every subscription is Key_Shared (an application that needs per-key order with several
              consumers subscribes so on all its topics; the others are Exclusive or Failover). What the report
              shows: the bundle's ``msgRateOut`` and ``consumerCount``, the same for either type. What a Key_Shared
              message out costs beyond the dispatch ``linear`` charges: Pulsar's
              ``PersistentStickyKeyDispatcherMultipleConsumers.trySendMessagesToConsumers`` hands each read batch to
              ``filterAndGroupEntriesForDispatching``, which per entry wraps it as an ``EntryAndMetadata`` (the
              ``MessageMetadata`` parsed), computes the sticky key hash (``getStickyKeyHash``: the key peeked and
              hashed by the selector's ``makeStickyKeyHash``), asks the ``StickyKeyConsumerSelector.select`` for the
              consumer (a lookup in the consistent-hashing ring or the hash ranges), checks the consumer's permits and
              ``canDispatchEntry`` (the replay set's hashes, the draining-hashes tracker), groups the entries in a
              per-consumer map, and on dispatch records the hash in the consumer's pending acks (``PendingAcksMap``,
              removed again at the ack); an entry whose hash is blocked or whose consumer has no permits goes to the
              replay set (``addMessageToReplay``) and is read and filtered again later. An Exclusive or Failover
              subscription's ``PersistentDispatcherSingleActiveConsumer`` sends the batch it read to its one consumer
              without any of it. ``+1x`` linear's per-message CPU for the per-entry work, and ``+0.5x`` for replays
              (about a quarter of the entries blocked once, each replay a read and the per-entry work again, 2x):
              ``+1.5x`` linear's per-message CPU per message out (:attr:`KeySharedModel.EXTRA_PER_MSG`; the
              scenarios' messages are one per entry; nothing per byte - the payload is not touched) - judgments. At
              the scenarios' ~1.5 KB messages a Key_Shared message out costs 2.2x an Exclusive one; a Key_Shared
              topic of fan-out 1.6 (the scenarios' mean) 1.7x its linear CPU, of fan-out 3 1.9x - its bundle's rates
              say nothing of it. Where the scenarios calibrate the extra is 21-22 % of the CPU (seeds 1-3; 18-24 %
              with a hot bundle, a hot topic or the jitter, 18 % on large-zipf). Static: the namespaces keep their
              subscription types; the extra moves with its
              bundles (to the broker it is unloaded to, to the children it is split into). A bundle's share: its
              linear CPU plus its extra (additive; a balanced start is balanced). *Ideal*: every broker carrying the
              same share of the cluster's true CPU.
entry-filters CPU binds, and in a third of the namespaces (drawn from the seed apart from ``key-shared``'s) the
              subscriptions dispatch through broker-side entry filters (``entryFilterNames`` on the broker, or with
              ``allowOverrideEntryFilters`` a topic's entry-filters policy: here an application's whole namespace,
              a judgment), each subscription taking one of ``k`` classes of the topic's messages by their
              properties: ``k`` in {2, 3, 4}, drawn per topic from the seed (:attr:`EntryFiltersModel.CLASSES`). What
              the report shows: ``AbstractBaseDispatcher.filterEntriesForConsumer`` runs every entry a subscription
              read through ``runFiltersForEntry`` (the metadata peeked with ``Commands.peekAndCopyMessageMetadata``,
              the filters called); an entry the filters ``REJECT`` is released, counted in ``filterRejectedMsgs`` and
              acknowledged (``individualAcknowledgeMessageIfNeeded``: ``subscription.acknowledgeMessage`` with
              ``AckType.Individual``, the cursor's deleted ranges updated); only the entries accepted are counted in
              ``sendMessageInfo``'s totals and sent (``Consumer.sendMessages``, whose ``msgOut`` is the bundle's
              ``msgRateOut``). The filter counters are in the subscription's admin stats only, not in
              ``NamespaceBundleStats``. So the scenarios' rates are read as they are: a topic's ``msgRateOut`` is what
              passed the filters, and its subscriptions read ``k`` times as many entries - ``k - 1`` rejected per
              message out. What a filtered message costs beyond ``linear``: every entry read is filtered (``+0.25x``
              linear's per-message CPU, :attr:`EntryFiltersModel.FILTER_PER_ENTRY`: the metadata parsed and the filter
              called), a rejected one also read from the cache and acknowledged individually (``+0.75x``,
              :attr:`EntryFiltersModel.REJECT_PER_ENTRY`: the read side of a dispatch and an ack; from the cache, so
              nothing per byte) - judgments. Per message out: ``0.25 k + 0.75 (k - 1) = k - 0.75`` times linear's
              per-message CPU: 1.25x for ``k = 2``, 3.25x for ``k = 4``. At ~1.5 KB a filtered message out costs 2.0x
              (``k = 2``) to 3.5x (``k = 4``) a plain dispatch; a filtered topic of fan-out 1.6 costs 1.6x to 2.6x its
              linear CPU, depending on its ``k``, which no report shows (unlike ``key-shared``, two filtered topics
              with the same rates differ). Where the scenarios calibrate the extra is 28-30 % of the CPU (seeds 1-3;
              25-29 % with a hot bundle, a hot topic or the jitter, 25 % on large-zipf). Static; the extra moves with
              its bundles. A bundle's share: its linear CPU plus its extra (additive; a balanced start is balanced).
              *Ideal*: every broker carrying the same share of the cluster's true CPU.
============= =============================================================================================

How a load's topics are found: set 4's :class:`~pulsar_rebalance.simulator.held_out_models_4.HiddenTopicCostModel` (a
load that is no bundle, broker or topic the cluster reports now is charged the cluster's average extra per message out).
Neither model follows time or ownership beyond that.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from pulsar_rebalance.simulator.held_out_models_4 import HiddenTopicCostModel
from pulsar_rebalance.simulator.load_models import CPU_PCT_PER_MSG, Load, LoadModel

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import ClusterModel, Topic


class NamespacePolicyModel(HiddenTopicCostModel):
    """A model whose extra CPU belongs to the topics of a share of the namespaces (a namespace-wide choice), per
    message out: a topic's hidden CPU is ``per_out(its draws) * linear's per-message CPU * its msgRateOut``."""

    UNITS = ("msg_out",)
    SHARE = 0.3
    """The share of the cluster's namespaces chosen (rounded up: at least one)."""

    def __init__(self) -> None:
        self.chosen: frozenset[str] = frozenset()
        """The namespaces chosen (drawn when attached)."""
        super().__init__()

    def chosen_namespaces(self, namespaces: Iterable[str], seed: int) -> frozenset[str]:
        """``ceil(SHARE * n)`` of the ``n`` distinct ``namespaces``, drawn from ``seed`` (and the model's name)."""
        pool = sorted(set(namespaces))
        k = min(len(pool), math.ceil(self.SHARE * len(pool)))
        return frozenset(random.Random(f"{seed}:{self.name}").sample(pool, k))

    def attach(self, cluster: ClusterModel) -> None:
        """Draw the chosen namespaces from the cluster's seed, then charge its topics."""
        self.chosen = self.chosen_namespaces((t.namespace for t in cluster.topics), cluster.seed)
        super().attach(cluster)

    def per_out(self, draws: tuple[float, ...]) -> float:
        """Extra CPU per message out, in units of linear's per-message CPU, of a topic with these draws."""
        raise NotImplementedError

    def parts_units(self, topics: Iterable[Topic]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        draws = self.draws
        extra = rate_out = 0.0
        for t in topics:
            d = draws[t.name]
            if d[0]:
                extra += self.per_out(d) * CPU_PCT_PER_MSG * t.rate_out
            rate_out += t.rate_out
        return (extra,), (rate_out,)

    def load_units(self, load: Load) -> tuple[float, ...]:
        return (load.msg_out,)


# ---------------------------------------------------------------------------------------------- key-shared


class KeySharedModel(NamespacePolicyModel):
    name = "key-shared"
    description = (
        "linear CPU, plus in a third of the namespaces (drawn from the seed) every subscription is Key_Shared: "
        "+1.5x linear's per-message CPU per message out (the sticky key hashed, a consumer selected, entries grouped "
        "per consumer, some replayed), in no report; 10 Gbit/s NICs (CPU binds)"
    )
    EXTRA_PER_MSG = 1.5
    """A Key_Shared message out's CPU beyond a dispatch, in units of linear's per-message CPU (1 per-entry work,
    0.5 replays)."""

    def draw(self, topic: Topic, seed: int) -> tuple[float, ...]:
        """1 when the topic's namespace subscribes Key_Shared, else 0."""
        return (1.0 if topic.namespace in self.chosen else 0.0,)

    def per_out(self, draws: tuple[float, ...]) -> float:
        return self.EXTRA_PER_MSG

    def prior(self) -> tuple[float, ...]:
        """The population's expectation per message out: :attr:`SHARE` of the traffic is Key_Shared."""
        return (self.SHARE * self.EXTRA_PER_MSG * CPU_PCT_PER_MSG,)


# ---------------------------------------------------------------------------------------------- entry-filters


class EntryFiltersModel(NamespacePolicyModel):
    name = "entry-filters"
    description = (
        "linear CPU, plus in a third of the namespaces (drawn from the seed) every subscription filters the topic's "
        "entries, taking one of k in {2, 3, 4} classes (per topic, from the seed): k - 1 entries rejected per "
        "message out, each read, filtered and acked but in no msgRateOut: +(k - 0.75)x linear's per-message CPU per "
        "message out; 10 Gbit/s NICs (CPU binds)"
    )
    CLASSES = (2, 3, 4)
    """The number of message classes a filtered topic's subscriptions split it into (one each), drawn per topic."""
    FILTER_PER_ENTRY = 0.25
    """CPU of filtering an entry (metadata parsed, filter called), in units of linear's per-message CPU."""
    REJECT_PER_ENTRY = 0.75
    """CPU of a rejected entry beyond its filtering (read from the cache, acknowledged individually), likewise."""

    def draw(self, topic: Topic, seed: int) -> tuple[float, ...]:
        """The topic's ``k`` (:attr:`CLASSES`, from the seed and the topic's name) in a filtered namespace, else 0."""
        if topic.namespace not in self.chosen:
            return (0.0,)
        return (float(random.Random(f"{seed}:{self.name}:{topic.name}").choice(self.CLASSES)),)

    def per_out(self, draws: tuple[float, ...]) -> float:
        (k,) = draws
        return self.FILTER_PER_ENTRY * k + self.REJECT_PER_ENTRY * (k - 1)

    def prior(self) -> tuple[float, ...]:
        """The population's expectation per message out: :attr:`SHARE` of the traffic filtered, at the mean ``k``."""
        k = sum(self.CLASSES) / len(self.CLASSES)
        return (self.SHARE * self.per_out((k,)) * CPU_PCT_PER_MSG,)


HELD_OUT_LOAD_MODELS_9: Mapping[str, Callable[[], LoadModel]] = {
    "key-shared": KeySharedModel,
    "entry-filters": EntryFiltersModel,
}
HELD_OUT_MODELS_9 = tuple(HELD_OUT_LOAD_MODELS_9)
"""The ninth set (``bench_balance.py --held-out 9``)."""

__all__ = [
    "HELD_OUT_LOAD_MODELS_9",
    "HELD_OUT_MODELS_9",
    "EntryFiltersModel",
    "KeySharedModel",
    "NamespacePolicyModel",
]
