"""``LeastResourceUsageWithWeight`` - modular (``.../loadbalance/impl/``) and extensible
(``.../loadbalance/extensions/strategy/``) forms.

Modular (:class:`LeastResourceUsageWithWeight`), per placement call:

1. For every candidate, update its history in ``brokerAvgResourceUsageWithWeight`` (kept in
   :class:`StrategyState`): ``h = u`` on first sight *or when the broker has no bundles or zero
   msgRateIn and msgRateOut* (restart/idle resets history), else ``h = h * history + (1 - history) * u``,
   where ``u`` is the newest 4-argument weighted max usage (no memory). Note that Pulsar applies
   this EMA step on **every placement call**, so placing many bundles in one cycle moves history
   as many times - reproduced.
2. ``avg`` = mean of the candidates' h; best = candidates with ``h + diff <= avg``
   (``diff = loadBalancerAverageResourceUsageDifferenceThresholdPercentage / 100``; a candidate
   without history counts as 1.0). None -> all candidates. Seeded pick among best.

Extensible (:class:`ExtensibleLeastResourceUsageWithWeight`): the same rule on
``BrokerLoadData.weightedMaxEMA`` (the EMA is kept in the load data, not here); candidates without
load data are excluded from the average and from "best" but are part of the all-candidates fallback.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pulsar_rebalance.core.decision import Placement
from pulsar_rebalance.core.pulsar.shedders.base import weighted_usage

if TYPE_CHECKING:
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.load import BrokerLoadData, LocalBrokerData
    from pulsar_rebalance.core.pulsar.state import StrategyState

MAX_RESOURCE_USAGE = 1.0
"""Default history of a candidate never seen (``getOrDefault(broker, MAX_RESOURCE_USAGE)``)."""


def _pick(bundle: str, best: list[str], rng: random.Random, why: str) -> Placement:
    chosen = best[rng.randrange(len(best))]
    return Placement(bundle, chosen, tuple(best), why + (f" ({len(best)} tied: seeded pick)" if len(best) > 1 else ""))


@dataclass(frozen=True)
class LeastResourceUsageWithWeight:
    name: str = "LeastResourceUsageWithWeight"

    def select_broker(
        self,
        *,
        bundle: str,
        candidates: Sequence[str],
        brokers: Mapping[str, LocalBrokerData],
        config: LoadBalancerConfig,
        state: StrategyState,
        rng: random.Random,
    ) -> tuple[Placement, StrategyState]:
        if not candidates:
            return Placement(bundle, None, (), "no candidate brokers"), state
        history = config.load_balancer_history_resource_percentage
        hist = dict(state.lruww_avg_usage)
        total = 0.0
        for broker in candidates:
            data = brokers[broker]
            prev = hist.get(broker)
            if len(data.bundles) == 0 or (data.msg_rate_in == 0 and data.msg_rate_out == 0):
                prev = None  # restarted or idle broker: current usage replaces history
            usage = weighted_usage(data, config, with_memory=False)
            value = usage if prev is None else prev * history + (1 - history) * usage
            hist[broker] = value
            total += value
        avg = total / len(candidates)
        diff = config.load_balancer_average_resource_usage_difference_threshold_percentage / 100.0
        best = [b for b in candidates if hist.get(b, MAX_RESOURCE_USAGE) + diff <= avg]
        new_state = state.evolve(lruww_avg_usage=hist)
        if not best:
            return _pick(
                bundle, list(candidates), rng, f"no candidate {diff:.2f} below avg usage {avg:.4f}: random among all"
            ), new_state
        return _pick(bundle, best, rng, f"usage at least {diff:.2f} below avg {avg:.4f}"), new_state


@dataclass(frozen=True)
class ExtensibleLeastResourceUsageWithWeight:
    name: str = "LeastResourceUsageWithWeight"

    def select_broker(
        self,
        *,
        bundle: str,
        candidates: Sequence[str],
        load_data: Mapping[str, BrokerLoadData],
        config: LoadBalancerConfig,
        rng: random.Random,
    ) -> Placement:
        if not candidates:
            return Placement(bundle, None, (), "no candidate brokers")
        with_data = [b for b in candidates if b in load_data]
        best: list[str] = []
        avg = None
        if with_data:
            total = 0.0
            for broker in with_data:
                total += load_data[broker].weighted_max_ema
            avg = total / len(with_data)
            diff = config.load_balancer_average_resource_usage_difference_threshold_percentage / 100.0
            best = [b for b in with_data if load_data[b].weighted_max_ema + diff <= avg]
        if not best:
            return _pick(bundle, list(candidates), rng, "no candidate clearly below the average load: random among all")
        return _pick(bundle, best, rng, f"weightedMaxEMA clearly below avg {avg:.4f}")
