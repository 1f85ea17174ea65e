"""How a broker's traffic turns into the usage it reports: pluggable load models for the closed-loop model.

The closed-loop model (:class:`pulsar_rebalance.simulator.dynamics.ClusterModel`) sums a broker's bundle
stats into a :class:`Load` and asks its :class:`LoadModel` what the broker reports (CPU, NIC in, NIC
out, each ``usage`` and ``limit``). Scenarios place and calibrate with the same model, so a "balanced"
start is balanced under it, and the metrics (true usage, ideal, floor) are computed under it.

Registered by name (:data:`LOAD_MODELS`, :func:`get_load_model`):

======================== =====================================================================
linear                   ``cpu = 10 + 100*msg/s/40000 + 100*bytes/s/200MiB`` (in+out): the default.
                         On the scenarios' traffic (1 Gbit/s NICs, ~1.5 KB messages, fan-out ~1.5)
                         NIC out is the binding resource (CPU at ~0.6x of it)
in-out-fanout            a dispatched message (out) costs 3x a published one (in), plus bytes;
                         per-message costs scaled so that a typical broker (fan-out 1.6) costs as
                         under ``linear``; NICs at 10 Gbit/s so that CPU binds
convex-cpu               queueing-like: the reported CPU is ``u * (1 + k*(u/limit)^2)`` of the
                         linear ``u`` (k = 1): 25 % more at half load, twice the linear at 100 %
                         (above 100 % when overloaded, like a real report; the curve's input is
                         capped at 3x the limit); NICs at 10 Gbit/s so that CPU binds
nic-bound                every NIC at 0.4x (400 Mbit/s for a 1 Gbit/s broker): bandwidth binds by
                         far, CPU is a small share (~0.25x of the NIC)
heterogeneous-capacity   each broker's cores and NIC scaled by 0.5, 1 or 2 (4/8/16 cores for a
                         standard broker), chosen from the seed and the broker's id
======================== =====================================================================

Held out (not in :data:`LOAD_MODELS`, so not in the balance benchmark's default set; nobody tuned the
planner on them): ``memory-bound`` and ``per-topic-cost``, then a second set, ``tls-crypto`` and
``bookie-backpressure``, in :mod:`pulsar_rebalance.simulator.held_out_models`, found by :func:`get_load_model`
all the same.

A model's NIC factor applies to every broker (and to the standard broker scenarios measure against);
without the 10 Gbit/s NICs a CPU-side model would change nothing on these scenarios (NIC out binds).

Every model is deterministic; noise is the cluster model's (CPU noise, rate noise), not the load model's.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel

MIB = 1024 * 1024
CPU_BASE_PCT = 10.0
CPU_PCT_PER_MSG = 100.0 / 40000.0
CPU_PCT_PER_BYTE = 100.0 / (200.0 * MIB)
TYPICAL_FANOUT = 1.6
"""Mean fan-out of the scenarios' topics (1, 1, 1, 2 or 3): where ``in-out-fanout`` costs as ``linear``."""


@dataclass(frozen=True, slots=True)
class Load:
    """A broker's (or one bundle's) traffic: sums of ``NamespaceBundleStats`` fields.

    ``msg`` is the sum of ``msgRateIn + msgRateOut`` per bundle (kept apart from ``msg_in + msg_out``
    so that the linear model's arithmetic is exactly the one it always had). ``topics``, ``producers``
    and ``consumers`` sum the stats' ``topics``, ``producerCount`` and ``consumerCount`` (0 where a stat
    has none, e.g. one topic's rates): only the held-out models
    (:mod:`pulsar_rebalance.simulator.held_out_models`) use them."""

    msg: float = 0.0
    msg_in: float = 0.0
    msg_out: float = 0.0
    thr_in: float = 0.0
    thr_out: float = 0.0
    topics: int = 0
    producers: int = 0
    consumers: int = 0

    @classmethod
    def of(cls, stats: Iterable[Mapping[str, Any]]) -> Load:
        msg = msg_in = msg_out = thr_in = thr_out = 0.0
        topics = producers = consumers = 0
        for s in stats:
            msg += s["msgRateIn"] + s["msgRateOut"]
            msg_in += s["msgRateIn"]
            msg_out += s["msgRateOut"]
            thr_in += s["msgThroughputIn"]
            thr_out += s["msgThroughputOut"]
            topics += s.get("topics", 0)
            producers += s.get("producerCount", 0)
            consumers += s.get("consumerCount", 0)
        return cls(msg, msg_in, msg_out, thr_in, thr_out, topics, producers, consumers)


class LoadModel:
    """The ``linear`` model; subclasses override what differs."""

    name = "linear"
    description = "cpu = 10 + 100*msg/s/40000 + 100*bytes/s/200MiB (in+out), NIC = bytes/s"
    NIC_FACTOR = 1.0
    """Every broker's NIC (and the reference broker's) times this."""
    affine = True
    """Usage is affine in the traffic (no curve)."""
    proportional_share = True
    """A bundle's :meth:`share` is proportional to its rates once its counts cost nothing (the scenarios scale a
    bundle to a load by ``goal / load``); False: it is a curve of them (the scenarios bisect)."""

    def cpu(self, load: Load, base: float = CPU_BASE_PCT) -> float:
        """CPU % before the reporting curve (``base`` = the idle broker's part; 0 for a bundle's share)."""
        return base + CPU_PCT_PER_MSG * load.msg + CPU_PCT_PER_BYTE * (load.thr_in + load.thr_out)

    def cpu_curve(self, utilisation: float) -> float:
        """Reported CPU / limit for a linear CPU / limit of ``utilisation`` (identity: linear)."""
        return utilisation

    def reported_cpu(self, cpu: float, limit: float) -> float:
        return cpu

    def configure(self, broker: Broker, seed: int) -> None:
        """Set a broker's limits as this model sees them (at construction and when a broker joins)."""
        if self.NIC_FACTOR != 1.0:
            broker.nic_mbps *= self.NIC_FACTOR

    def reference(self) -> Broker:
        """The standard broker scenarios measure a bundle's load against (8 cores, 1 Gbit/s x NIC_FACTOR)."""
        from pulsar_rebalance.simulator.dynamics import Broker

        ref = Broker("ref")
        if self.NIC_FACTOR != 1.0:
            ref.nic_mbps *= self.NIC_FACTOR
        return ref

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        """What ``broker`` reports carrying ``load`` (noise-free): cpu, bandwidthIn, bandwidthOut."""
        limit = broker.cpu_limit
        return {
            "cpu": {"usage": self.reported_cpu(self.cpu(load), limit), "limit": limit},
            "bandwidthIn": {"usage": load.thr_in * 8 / 1024, "limit": broker.nic_limit_kbps},
            "bandwidthOut": {"usage": load.thr_out * 8 / 1024, "limit": broker.nic_limit_kbps},
        }

    def capacity_key(self, broker: Broker) -> tuple[float, ...]:
        """What makes two brokers equal under this model (the floor tries one broker per key): cores and NIC."""
        return (broker.cores, broker.nic_mbps)

    def share(self, load: Load, ref: Broker) -> float:
        """A bundle's load as a fraction of ``ref`` before any curve: max of its CPU and NIC parts (additive)."""
        cpu = self.cpu(load, 0.0) / ref.cpu_limit
        return max(cpu, load.thr_in * 8 / 1024 / ref.nic_limit_kbps, load.thr_out * 8 / 1024 / ref.nic_limit_kbps)

    def ideal(self, load: Load, live: Sequence[Broker]) -> float:
        """The cluster's ideal usage: ``load`` (the whole cluster's) over the ``live`` brokers' capacity on
        the binding resource, every broker carrying the same share (the CPU part through the curve)."""
        return max(self.ideal_parts(load, live).values())

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        """:meth:`ideal` per resource (the keys of :meth:`usage`)."""
        cpu = self.cpu(load) + CPU_BASE_PCT * (len(live) - 1)
        cap_cpu = sum(b.cpu_limit for b in live)
        cap_nic = sum(b.nic_limit_kbps for b in live)
        return {
            "cpu": self.cpu_curve(cpu / cap_cpu),
            "bandwidthIn": load.thr_in * 8 / 1024 / cap_nic,
            "bandwidthOut": load.thr_out * 8 / 1024 / cap_nic,
        }

    @property
    def calibration_rounds(self) -> int:
        """Rounds of the scenarios' rate scaling (``scenarios._calibrate``): 3 for an affine model (exact
        after one; one with parts the rates do not scale solves the scaling in :meth:`fit`), 20 for a curve."""
        return 3 if self.affine else 20

    def fit(self, cluster: ClusterModel, target: float) -> None:
        """Called by the scenarios' calibration before it scales the rates to ``target``: a model whose
        costs are set per cluster sets them here (these models: nothing)."""


class InOutFanoutModel(LoadModel):
    name = "in-out-fanout"
    description = "a dispatched message costs 3x a published one, plus bytes; 10 Gbit/s NICs (CPU binds)"
    NIC_FACTOR = 10.0
    OUT_OVER_IN = 3.0
    PER_IN = CPU_PCT_PER_MSG * (1 + TYPICAL_FANOUT) / (1 + OUT_OVER_IN * TYPICAL_FANOUT)
    PER_OUT = OUT_OVER_IN * PER_IN

    def cpu(self, load: Load, base: float = CPU_BASE_PCT) -> float:
        return (
            base
            + self.PER_IN * load.msg_in
            + self.PER_OUT * load.msg_out
            + CPU_PCT_PER_BYTE * (load.thr_in + load.thr_out)
        )


class ConvexCpuModel(LoadModel):
    name = "convex-cpu"
    description = "reported cpu = u * (1 + (u/limit)^2): queueing-like near saturation; 10 Gbit/s NICs (CPU binds)"
    NIC_FACTOR = 10.0
    affine = False
    K = 1.0
    CAP = 3.0
    """The curve's input is capped at 3x the limit, so reports stay finite (at most 30x the limit)."""

    def cpu_curve(self, utilisation: float) -> float:
        x = min(max(utilisation, 0.0), self.CAP)
        return utilisation * (1.0 + self.K * x * x)

    def reported_cpu(self, cpu: float, limit: float) -> float:
        return self.cpu_curve(cpu / limit) * limit if limit > 0 else cpu


class NicBoundModel(LoadModel):
    name = "nic-bound"
    description = "NICs at 0.4x: bandwidth is the binding resource by far"
    NIC_FACTOR = 0.4


class HeterogeneousCapacityModel(LoadModel):
    name = "heterogeneous-capacity"
    description = "cores and NIC scaled by 0.5, 1 or 2 per broker (4/8/16 cores), from the seed"
    FACTORS = (0.5, 1.0, 2.0)

    def configure(self, broker: Broker, seed: int) -> None:
        super().configure(broker, seed)
        f = random.Random(f"{seed}:{broker.broker_id}").choice(self.FACTORS)
        broker.cores *= f
        broker.nic_mbps *= f


LOAD_MODELS: Mapping[str, Callable[[], LoadModel]] = {
    "linear": LoadModel,
    "in-out-fanout": InOutFanoutModel,
    "convex-cpu": ConvexCpuModel,
    "nic-bound": NicBoundModel,
    "heterogeneous-capacity": HeterogeneousCapacityModel,
}


def get_load_model(model: str | LoadModel | None) -> LoadModel:
    """A load model by name (``None``: ``linear``): one of :data:`LOAD_MODELS` or a held-out one
    (:data:`pulsar_rebalance.simulator.held_out_models.HELD_OUT_MODELS`); ``KeyError`` lists the known names."""
    if model is None:
        return LoadModel()
    if isinstance(model, LoadModel):
        return model
    if model in LOAD_MODELS:
        return LOAD_MODELS[model]()
    from pulsar_rebalance.simulator.held_out_models import HELD_OUT_LOAD_MODELS  # it imports this module

    if model in HELD_OUT_LOAD_MODELS:
        return HELD_OUT_LOAD_MODELS[model]()
    known = [*LOAD_MODELS, *HELD_OUT_LOAD_MODELS]
    raise KeyError(f"unknown load model {model!r}; known: {', '.join(known)}")


__all__ = [
    "CPU_BASE_PCT",
    "CPU_PCT_PER_BYTE",
    "CPU_PCT_PER_MSG",
    "LOAD_MODELS",
    "ConvexCpuModel",
    "HeterogeneousCapacityModel",
    "InOutFanoutModel",
    "Load",
    "LoadModel",
    "NicBoundModel",
    "get_load_model",
]
