"""``LeastLongTermMessageRate`` (``pulsar-broker/.../loadbalance/impl/LeastLongTermMessageRate.java``) -
the modular load manager's default placement strategy.

Score of a candidate broker (msg/s): ``+inf`` if its max resource usage is strictly above
``loadBalancerBrokerOverloadedThresholdPercentage``; otherwise the long-term ``msgRateIn + msgRateOut``
of every bundle preallocated to it this cycle plus its ``TimeAverageBrokerData`` long-term rates.
The brokers tied at the minimum score are kept (scanning in candidate order: a lower score resets
the list, an equal one appends - so while the minimum is still ``+inf`` overloaded brokers are
listed, and dropped as soon as a finite score appears); if every candidate is overloaded, all
candidates tie. Pulsar then picks uniformly at random; we report the tie set and take a seeded pick.

Usage metric: the weighted 5-argument max usage (PIP-358, Pulsar 4.x) by default;
``LeastLongTermMessageRateUnweighted`` uses the pre-PIP-358 unweighted ``getMaxResourceUsage()``.
(The very old ``1 / (threshold - usage)`` weighting was removed from Pulsar in 2017 and is not
reproduced.)
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pulsar_rebalance.core.decision import Placement
from pulsar_rebalance.core.pulsar.shedders.base import unweighted_usage, weighted_usage

if TYPE_CHECKING:
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData, TimeAverageBrokerData
    from pulsar_rebalance.core.pulsar.state import StrategyState


@dataclass(frozen=True)
class LeastLongTermMessageRate:
    name: str = "LeastLongTermMessageRate"
    weighted: bool = True

    def score(
        self,
        data: LocalBrokerData,
        time_average: TimeAverageBrokerData,
        preallocated: Mapping[str, BundleData],
        config: LoadBalancerConfig,
    ) -> float:
        """``getScore``: +inf when overloaded, else preallocated + time-average long-term msg/s."""
        overload = config.load_balancer_broker_overloaded_threshold_percentage / 100.0
        if self.usage(data, config) > overload:
            return math.inf
        total = 0.0
        for bd in preallocated.values():
            lt = bd.long_term_data
            total += lt.msg_rate_in + lt.msg_rate_out
        return total + (time_average.long_term_msg_rate_in + time_average.long_term_msg_rate_out)

    def usage(self, data: LocalBrokerData, config: LoadBalancerConfig) -> float:
        """The max resource usage compared with the overload threshold (weighted or not, per variant)."""
        return weighted_usage(data, config, with_memory=True) if self.weighted else unweighted_usage(data)

    def select_broker(
        self,
        *,
        bundle: str,
        candidates: Sequence[str],
        brokers: Mapping[str, LocalBrokerData],
        time_average: Mapping[str, TimeAverageBrokerData],
        preallocated: Mapping[str, Mapping[str, BundleData]],
        config: LoadBalancerConfig,
        state: StrategyState,
        rng: random.Random,
        usage_of: Mapping[str, float] | None = None,
        preallocated_rate: Mapping[str, float] | None = None,
    ) -> tuple[Placement, StrategyState]:
        """``selectBroker``: the lowest-score candidates, a seeded pick among them.

        ``usage_of`` (broker -> :meth:`usage`) and ``preallocated_rate`` (broker -> sum of its
        preallocated bundles' long-term msg/s, accumulated in preallocation order) are optional
        caches from the placement context; with them a score costs O(1) instead of O(preallocated).
        """
        best: list[str] = []
        min_score = math.inf
        overload = config.load_balancer_broker_overloaded_threshold_percentage / 100.0
        for broker in candidates:
            if usage_of is not None and preallocated_rate is not None:
                if usage_of[broker] > overload:
                    score = math.inf
                else:
                    ta = time_average[broker]
                    score = preallocated_rate.get(broker, 0.0) + (ta.long_term_msg_rate_in + ta.long_term_msg_rate_out)
            else:
                score = self.score(brokers[broker], time_average[broker], preallocated.get(broker, {}), config)
            if score < min_score:
                best = [broker]
                min_score = score
            elif score == min_score:
                best.append(broker)
        if not best:
            best = list(candidates)
        if not best:
            return Placement(bundle, None, (), "no candidate brokers"), state
        chosen = best[rng.randrange(len(best))]
        if min_score == math.inf:
            why = f"all {len(best)} candidate(s) are overloaded: random pick"
        else:
            why = f"least long-term msg rate {min_score:.1f} msg/s" + (
                f" ({len(best)} tied: seeded pick)" if len(best) > 1 else ""
            )
        return Placement(bundle, chosen, tuple(best), why), state
