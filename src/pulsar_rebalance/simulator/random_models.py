"""Random load models: a seeded family of unknown costs per message, for a benchmark nobody tunes on.

The five default models (:mod:`pulsar_rebalance.simulator.load_models`) and the two held-out sets
(:mod:`pulsar_rebalance.simulator.held_out_models`) are each one guess at how a broker turns traffic
into the load it reports. A real cluster's guess is unknown. ``random-<k>`` (``k`` >= 1) draws one from
a family wide enough to hold many of them, from ``k`` alone (so ``random-3`` is the same model on every
machine): ``RandomCostModel(k)`` or :func:`random_model` by name, passed as an instance wherever a load
model goes (``scenarios.build(..., load_model=RandomCostModel(3))``; :func:`get_load_model` returns an
instance as it is, and lists only the named models). ``benchmarks/bench_random_models.py`` runs a range
of them against doing nothing and Pulsar's shedders.

Per model, drawn once from ``k``:

================= ======================================================================================
NICs              every broker's NIC times 0.4, 1 or 10 (10 twice as likely): bandwidth binds, both
                  can, or CPU binds
per message       a published and a dispatched message each cost ``linear``'s per-message CPU times
                  10^u, u uniform in [-0.7, 0.7] (0.2x to 5x), drawn apart: fan-out can be cheap or dear
per byte          ``linear``'s per-byte CPU times 10^u, the same range
idle broker       2-25 % of a core's worth of CPU (``linear``: 10)
curve             the reported CPU is ``u * (1 + K * (u/limit)^2)`` of the linear ``u`` (queueing), K in
                  {0, 0, 0.5, 1.5, 3}; the curve's input is capped at 3x the limit
capacity          per broker, cores and NIC times one of (0.5, 1, 2) or (1, 1.5), or all the same
                  (one in three each); the reported limits show it
hidden speed      per broker, its traffic's CPU times 1 + U(0, s), s in {0, 0, 0.3, 0.6}: an older CPU or
                  a noisy neighbour. The reported limit does not show it, only more CPU for the traffic
background        per broker, U(0, g) % of its CPU limit not from traffic (compaction, GC, a sidecar),
                  g in {0, 0, 5, 15}: no move changes it
================= ======================================================================================

Where a model has a hidden speed or a background, a start the scenarios balance by the standard broker's
measure is not balanced under it: moving there is not churn. *Ideal*: every broker at the same reported
utilisation carrying a share of the cluster's traffic (same mix) that its speed, background and limit allow.
Deterministic; noise is the cluster model's.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pulsar_rebalance.simulator.held_out_models import BisectedFitModel
from pulsar_rebalance.simulator.load_models import CPU_PCT_PER_BYTE, CPU_PCT_PER_MSG, ConvexCpuModel, Load

if TYPE_CHECKING:  # pragma: no cover
    from pulsar_rebalance.simulator.dynamics import Broker

NAME = re.compile(r"random-([1-9][0-9]{0,5})")
"""``random-<k>``, ``k`` from 1 to 999999."""


class RandomCostModel(BisectedFitModel):
    """One model of the family, drawn from ``k`` (module docstring)."""

    proportional_share = True  # a bundle's share (before the curve, on the standard broker) is linear in its rates
    CAP = ConvexCpuModel.CAP

    def __init__(self, k: int) -> None:
        if not 1 <= k <= 999_999:
            raise ValueError(f"random load model index must be within 1-999999, got {k}")
        r = random.Random(f"random-cost:{k}")
        self.k = k
        self.name = f"random-{k}"
        self.NIC_FACTOR = r.choice((0.4, 1.0, 10.0, 10.0))
        self.per_in = CPU_PCT_PER_MSG * 10 ** r.uniform(-0.7, 0.7)
        self.per_out = CPU_PCT_PER_MSG * 10 ** r.uniform(-0.7, 0.7)
        self.per_byte = CPU_PCT_PER_BYTE * 10 ** r.uniform(-0.7, 0.7)
        self.base = r.uniform(2.0, 25.0)
        self.K = r.choice((0.0, 0.0, 0.5, 1.5, 3.0))
        self.capacity: tuple[float, ...] | None = r.choice((None, (0.5, 1.0, 2.0), (1.0, 1.5)))
        self.speed_spread = r.choice((0.0, 0.0, 0.3, 0.6))
        self.background_max = r.choice((0.0, 0.0, 5.0, 15.0))
        self.speed: dict[str, float] = {}
        """Broker id -> its traffic's CPU factor (1 for a broker :meth:`configure` has not seen, e.g. the reference)."""
        self.background: dict[str, float] = {}
        """Broker id -> its CPU not from traffic, % of its limit."""
        self.description = (
            f"NIC x{self.NIC_FACTOR:g}; per message in {self.per_in / CPU_PCT_PER_MSG:.2f}x, out "
            f"{self.per_out / CPU_PCT_PER_MSG:.2f}x, per byte {self.per_byte / CPU_PCT_PER_BYTE:.2f}x linear's; idle "
            f"{self.base:.0f} %; curve K={self.K:g}; capacity "
            + ("uniform" if self.capacity is None else "x" + "/".join(f"{f:g}" for f in self.capacity))
            + f"; hidden speed up to +{self.speed_spread:.0%}; background up to {self.background_max:g} %"
        )

    def traffic_cpu(self, load: Load) -> float:
        """CPU % of ``load``'s traffic on a standard-speed broker."""
        return self.per_in * load.msg_in + self.per_out * load.msg_out + self.per_byte * (load.thr_in + load.thr_out)

    def cpu(self, load: Load, base: float | None = None) -> float:
        """CPU % before the curve on a standard-speed broker without background (``base`` 0: a bundle's share)."""
        return (self.base if base is None else base) + self.traffic_cpu(load)

    def cpu_curve(self, utilisation: float) -> float:
        """convex-cpu's curve with this model's ``K`` (``K`` = 0: the identity)."""
        x = min(max(utilisation, 0.0), self.CAP)
        return utilisation * (1.0 + self.K * x * x)

    def reported_cpu(self, cpu: float, limit: float) -> float:
        return self.cpu_curve(cpu / limit) * limit if limit > 0 else cpu

    def configure(self, broker: Broker, seed: int) -> None:
        super().configure(broker, seed)
        r = random.Random(f"random-cost:{self.k}:{seed}:{broker.broker_id}")
        if self.capacity is not None:
            f = r.choice(self.capacity)
            broker.cores *= f
            broker.nic_mbps *= f
        self.speed[broker.broker_id] = 1.0 + r.uniform(0.0, self.speed_spread)
        self.background[broker.broker_id] = r.uniform(0.0, self.background_max)

    def _fixed(self, broker: Broker) -> float:
        """The broker's CPU % that no traffic makes: idle base plus background."""
        return self.base + self.background.get(broker.broker_id, 0.0) * broker.cpu_limit / 100.0

    def capacity_key(self, broker: Broker) -> tuple[float, ...]:
        bid = broker.broker_id
        return (broker.cores, broker.nic_mbps, self.speed.get(bid, 1.0), self.background.get(bid, 0.0))

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        out = super().usage(broker, load)
        cpu = self._fixed(broker) + self.speed.get(broker.broker_id, 1.0) * self.traffic_cpu(load)
        out["cpu"]["usage"] = self.reported_cpu(cpu, broker.cpu_limit)
        return out

    def ideal_parts(self, load: Load, live: Sequence[Broker]) -> dict[str, float]:
        """CPU: every broker at the same linear utilisation ``v`` (so the same reported one, the curve being
        monotone), broker ``i`` carrying ``x_i`` of the traffic ``W``: ``fixed_i + s_i x_i W = v limit_i``,
        ``sum x_i = 1``, so ``v = (W + sum fixed_i/s_i) / sum(limit_i/s_i)``. NICs: the capacity sums."""
        parts = dict(super().ideal_parts(load, live))
        if live:
            speeds = [self.speed.get(b.broker_id, 1.0) for b in live]
            v = (self.traffic_cpu(load) + sum(self._fixed(b) / s for b, s in zip(live, speeds, strict=True))) / sum(
                b.cpu_limit / s for b, s in zip(live, speeds, strict=True)
            )
            parts["cpu"] = self.cpu_curve(v)
        return parts


def random_model(name: str) -> RandomCostModel | None:
    """The model ``name`` names (``random-<k>``), or None when it is not one of the family's names."""
    m = NAME.fullmatch(name)
    return RandomCostModel(int(m.group(1))) if m else None


__all__ = ["NAME", "RandomCostModel", "random_model"]
