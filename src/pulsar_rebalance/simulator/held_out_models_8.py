"""Held-out load models, eighth set: ways real brokers turn traffic into load that nobody tuned the planner on.

An eighth set (:data:`HELD_OUT_MODELS_8`, ``bench_balance.py --held-out 8``, its own report), kept apart from the seven
before it: ``geo-replication`` and ``bookie-writes``. Both are about traffic the load report shows under a name that
does not say what it costs. Under ``geo-replication`` part of what a replicated namespace's bundles report as
``msgRateOut`` / ``msgThroughputOut`` is not dispatch to a consumer but the replicator re-sending every written message
to a remote cluster, which costs the broker several times a dispatch; which namespaces replicate is in no load report.
Under ``bookie-writes`` the NIC a broker reports as ``bandwidthOut`` carries, besides what its bundles dispatch, every
byte its producers write, once per bookie of the write quorum: the bytes in cost the NIC out, where no bundle's
``msgThroughputOut`` shows them. Both are affine in the rates (:meth:`HeldOutModel.fit`, exact). Every scenario of
:mod:`pulsar_rebalance.simulator.scenarios` builds under both at its target; under ``geo-replication`` CPU binds (NICs
at 10 Gbit/s, 0.12-0.13x of it), under ``bookie-writes`` NIC out binds (1 Gbit/s NICs, as ``linear``'s; CPU at
0.31-0.34x of it, 0.41x at most).

Written without reading the planner, from how Pulsar brokers behave. Kept in a module of its own so that every module a
stored benchmark run imported stays as it was: ``benchmarks/bench_balance.py`` resolves these names itself, and neither
the load-model registry (:func:`pulsar_rebalance.simulator.load_models.get_load_model`) nor the simulator's
:func:`pulsar_rebalance.simulator.cluster.resolve_load_model` knows them; they go in as instances (``build(...,
load_model=GeoReplicationModel())``), one per cluster.

Units below: CPU in % of one core, as Pulsar reports it (``cpu.limit = cores * 100``); ``linear``'s costs are
``100/40000`` % per message/s (in + out) and ``100/200 MiB`` % per byte/s (in + out), 10 % for the idle broker.

=============== ===========================================================================================
geo-replication CPU binds, and in a third of the namespaces (:attr:`GeoReplicationModel.SHARE`: ``ceil(0.3 n)`` of the
                cluster's ``n`` namespaces, drawn from the seed - 3 of 8 on the 4,000-topic scenarios, 12 of 40 on
                large-zipf) every topic is replicated to one remote cluster (``replication_clusters`` is a namespace
                policy: a whole namespace replicates or none of it). What the report shows: Pulsar's
                ``PersistentTopic.updateRates`` adds each replicator's ``msgRateOut`` and ``msgThroughputOut`` to the
                topic's, and the topic's to its bundle's ``NamespaceBundleStats`` - replication is in the bundle's rates
                out, indistinguishable there from dispatch to a subscription (the replicator is no consumer: it is not
                in ``consumerCount``; its rates are split out only in the topic's admin stats, under ``replication``).
                So the model reads the scenarios' rates as they are: a replicated topic's fan-out ``f`` is the
                replicator (one unit: each message written here is sent once to the remote) and ``f - 1`` local
                subscriptions (a topic with fan-out 1 is read only in the other region). One direction (active-standby:
                the producers are here; what a remote cluster replicates in would show as producers' ``msgRateIn``, at a
                publish's cost, and is not replicated back). What a replicated message costs beyond the dispatch
                ``linear`` already charges for it as an out message and out bytes: the ``PersistentReplicator`` reads
                the entry through its cursor, parses each message's metadata (the replication markers, the replicate-to
                list, the TTL), hands it to a client ``ProducerImpl`` that builds an ``OpSendMsg``, serialises a
                ``CommandSend``, keeps it in its pending queue until the remote's ``CommandSendReceipt``, processes the
                receipt and acknowledges the replicator's cursor per entry - about a publish and a consume with its ack
                on top of the dispatch: ``+2x`` linear's per-message CPU (:attr:`GeoReplicationModel.EXTRA_PER_MSG`);
                the producer computes the payload's CRC32C again and copies it into its send buffer (``+1x`` linear's
                per-byte CPU) and the link to the remote region is TLS (``+2x``, one core per 100 MiB/s as
                ``tls-crypto``'s newer generation): ``+3x`` linear's per-byte CPU
                (:attr:`GeoReplicationModel.EXTRA_PER_BYTE`) - all judgments. At the scenarios' ~1.5 KB messages a
                replicated message costs 3.2x a dispatched one; a replicated topic of fan-out 1 costs 2.1x its linear
                CPU, of fan-out 1.6 (the scenarios' mean) 1.9x, of fan-out 3 1.6x - its bundle's out rates say nothing
                of it. Where the scenarios calibrate the replication extra is 24-25 % of the CPU (seeds 1-3; 20-29 %
                with a hot bundle, a hot topic or the jitter); a bundle of a replicated namespace costs ~1.9x one of
                another namespace with the same rates, and a broker carrying more replicated bundles than average is
                hotter than its rates say. Static: the namespaces replicate from the start and keep replicating; the
                extra moves with its bundles (to the broker it is unloaded to, to the children it is split into). A
                bundle's share: its linear CPU plus its replication extra (additive; a balanced start is balanced).
                *Ideal*: every broker carrying the same share of the cluster's true CPU, replication included. How a
                load's topics are found: set 4's
                :class:`~pulsar_rebalance.simulator.held_out_models_4.HiddenTopicCostModel` (a load that is no bundle,
                broker or topic the cluster reports now is charged the cluster's average extra per message out and per
                byte out).
bookie-writes   NIC out binds, and it carries the bytes the broker writes to the bookies. Pulsar's ``bandwidthOut`` is
                the host's NIC (``LinuxBrokerHostUsageImpl`` reads ``/sys/class/net/<nic>/statistics/tx_bytes`` of the
                physical NICs), not the bundles' ``msgThroughputOut``: every entry a producer publishes the broker's
                BookKeeper client sends to each bookie of the ledger's write quorum, ``managedLedgerDefaultWriteQuorum =
                2`` in ``broker.conf`` (:attr:`BookieWritesModel.WRITE_QUORUM`; a namespace's persistence policy can
                change it, none does here). So ``bandwidthOut = bytes/s out + 2 * bytes/s in`` and ``bandwidthIn`` the
                bytes in (the bookies' add responses, some tens of bytes per entry, and the TCP acknowledgements are
                left out: under 1 % of it). A bundle's NIC out is its ``msgThroughputOut`` times ``1 + 2/f``, ``f`` its
                fan-out: 3x for a topic read once, 1.67x for one read three times - what the report calls the bundle's
                bytes out is a third to three fifths of what it costs the NIC. The CPU of the copies: the client hands
                the same buffer to both bookies' channels (no user-space copy, one digest per entry), the kernel copies
                and segments it into each socket (``+0.5x`` linear's per-byte CPU per bookie,
                :attr:`BookieWritesModel.COPY_PER_BYTE`, a judgment): ``linear + 1x`` its per-byte CPU of the bytes in.
                NICs at 1 Gbit/s as ``linear``'s (the other held-out models' 10 Gbit/s would leave the NIC at a tenth of
                the CPU): the model is ``linear`` plus what ``linear`` leaves out. Where the scenarios calibrate NIC out
                is 2.27x what the bundles' bytes out say (2.05-2.38x with a hot bundle, a hot topic or the jitter) and
                binds (``linear``'s own CPU at 0.6x of NIC out becomes 0.31-0.34x of it); reading the report's NIC out
                against the bundles' ``msgThroughputOut``, a broker carrying more fan-out-1 topics than average is
                hotter than its rates say, one carrying fan-out-3 topics cooler. Static, no draws. A bundle's share: the
                max of its CPU, its NIC in and its NIC out with the bookie copies (additive; a balanced start is
                balanced). *Ideal*: the cluster's NIC out, bookie copies included, over its NIC capacity (every broker
                at the same NIC out; CPU and NIC in well below).
=============== ===========================================================================================

Neither model follows time or ownership beyond what set 4's resolution of a load's topics does: ``bookie-writes`` is a
function of a broker's summed stats alone; ``geo-replication`` of the topics those stats are.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from pulsar_rebalance.simulator.held_out_models import HeldOutModel
from pulsar_rebalance.simulator.held_out_models_4 import HiddenTopicCostModel
from pulsar_rebalance.simulator.load_models import (
    CPU_BASE_PCT,
    CPU_PCT_PER_BYTE,
    CPU_PCT_PER_MSG,
    TYPICAL_FANOUT,
    Load,
    LoadModel,
)

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Topic


def _kbps(bytes_per_s: float) -> float:
    """Bytes/s as the NIC usage Pulsar reports (Kbit/s)."""
    return bytes_per_s * 8 / 1024


# ---------------------------------------------------------------------------------------------- geo-replication


class GeoReplicationModel(HiddenTopicCostModel):
    name = "geo-replication"
    description = (
        "linear CPU, plus in a third of the namespaces (drawn from the seed) one unit of every topic's fan-out is the "
        "replicator re-sending each written message to a remote cluster: +2x linear's per-message and +3x its "
        "per-byte CPU per replicated message, shown in the bundle's rates out as a dispatch; 10 Gbit/s NICs (CPU "
        "binds)"
    )
    UNITS = ("msg_out", "thr_out")
    SHARE = 0.3
    """The share of the cluster's namespaces that replicate (rounded up: at least one)."""
    REMOTES = 1
    """Remote clusters a replicated namespace sends to (a pair of regions)."""
    EXTRA_PER_MSG = 2.0
    """A replicated message's CPU beyond a dispatch, in units of linear's per-message CPU."""
    EXTRA_PER_BYTE = 3.0
    """A replicated byte's CPU beyond a dispatch, in units of linear's per-byte CPU (checksum and copy 1, TLS 2)."""

    def __init__(self) -> None:
        self.replicated: frozenset[str] = frozenset()
        """The namespaces that replicate (drawn when attached)."""
        super().__init__()

    def replicated_namespaces(self, namespaces: Iterable[str], seed: int) -> frozenset[str]:
        """``ceil(SHARE * n)`` of the ``n`` distinct ``namespaces``, drawn from ``seed``."""
        pool = sorted(set(namespaces))
        k = min(len(pool), math.ceil(self.SHARE * len(pool)))
        return frozenset(random.Random(f"{seed}:{self.name}").sample(pool, k))

    def attach(self, cluster: ClusterModel) -> None:
        """Draw the replicated namespaces from the cluster's seed, then charge its topics."""
        self.replicated = self.replicated_namespaces((t.namespace for t in cluster.topics), cluster.seed)
        super().attach(cluster)

    def draw(self, topic: Topic, seed: int) -> tuple[float, ...]:
        """The topic's replicas sent per message written: :attr:`REMOTES` in a replicated namespace, else 0."""
        return (float(self.REMOTES) if topic.namespace in self.replicated else 0.0,)

    def extra(self, rate_in: float, msg_size: float, remotes: float) -> tuple[float, float]:
        """The replication CPU % of a topic writing ``rate_in`` messages/s of ``msg_size`` bytes: per message, per
        byte."""
        sent = remotes * rate_in
        return (
            self.EXTRA_PER_MSG * CPU_PCT_PER_MSG * sent,
            self.EXTRA_PER_BYTE * CPU_PCT_PER_BYTE * sent * msg_size,
        )

    def parts_units(self, topics: Iterable[Topic]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        draws = self.draws
        per_msg = per_byte = rate_out = thr_out = 0.0
        for t in topics:
            (remotes,) = draws[t.name]
            if remotes:
                m, b = self.extra(t.rate_in, t.msg_size, remotes)
                per_msg += m
                per_byte += b
            rate_out += t.rate_out
            thr_out += t.rate_out * t.msg_size
        return (per_msg, per_byte), (rate_out, thr_out)

    def load_units(self, load: Load) -> tuple[float, ...]:
        return load.msg_out, load.thr_out

    def prior(self) -> tuple[float, ...]:
        """The population's expectation per message and byte out: a share of the out traffic is replication (one
        unit of a typical fan-out in :attr:`SHARE` of the namespaces)."""
        replicated_out = self.SHARE * self.REMOTES / TYPICAL_FANOUT
        return (
            self.EXTRA_PER_MSG * CPU_PCT_PER_MSG * replicated_out,
            self.EXTRA_PER_BYTE * CPU_PCT_PER_BYTE * replicated_out,
        )


# ---------------------------------------------------------------------------------------------- bookie-writes


class BookieWritesModel(HeldOutModel):
    name = "bookie-writes"
    description = (
        "NIC out carries the bundles' bytes out plus every byte written, once per bookie of the write quorum (2): "
        "bandwidthOut = bytes out + 2 * bytes in; CPU linear plus 0.5x its per-byte cost per bookie copy; 1 Gbit/s "
        "NICs as linear's (NIC out binds)"
    )
    NIC_FACTOR = 1.0
    WRITE_QUORUM = 2
    """Bookies each entry is written to (``managedLedgerDefaultWriteQuorum``' default)."""
    COPY_PER_BYTE = 0.5 * CPU_PCT_PER_BYTE
    """CPU % per byte/s sent to one bookie (the kernel's copy and segmentation into its socket)."""

    def nic_out(self, load: Load) -> float:
        """Bytes/s on NIC out: the bundles' dispatch plus a copy of every written byte per bookie."""
        return load.thr_out + self.WRITE_QUORUM * load.thr_in

    def cpu(self, load: Load, base: float = CPU_BASE_PCT) -> float:
        return super().cpu(load, base) + self.WRITE_QUORUM * self.COPY_PER_BYTE * load.thr_in

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        out = super().usage(broker, load)
        out["bandwidthOut"]["usage"] = _kbps(self.nic_out(load))
        return out

    def share(self, load: Load, ref: Broker) -> float:
        nic = ref.nic_limit_kbps
        return max(self.cpu(load, 0.0) / ref.cpu_limit, _kbps(load.thr_in) / nic, _kbps(self.nic_out(load)) / nic)

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        parts = dict(super().ideal_parts(load, live))
        cap_nic = sum(b.nic_limit_kbps for b in live)
        if cap_nic > 0:
            parts["bandwidthOut"] = _kbps(self.nic_out(load)) / cap_nic
        return parts


HELD_OUT_LOAD_MODELS_8: Mapping[str, Callable[[], LoadModel]] = {
    "geo-replication": GeoReplicationModel,
    "bookie-writes": BookieWritesModel,
}
HELD_OUT_MODELS_8 = tuple(HELD_OUT_LOAD_MODELS_8)
"""The eighth held-out set (``bench_balance.py --held-out 8``)."""

__all__ = [
    "HELD_OUT_LOAD_MODELS_8",
    "HELD_OUT_MODELS_8",
    "BookieWritesModel",
    "GeoReplicationModel",
]
