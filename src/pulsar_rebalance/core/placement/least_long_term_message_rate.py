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
from pulsar_rebalance.core.shedders.base import unweighted_usage, weighted_usage

if TYPE_CHECKING:
    from pulsar_rebalance.core.config import LoadBalancerConfig
    from pulsar_rebalance.core.load import BundleData, LocalBrokerData, TimeAverageBrokerData
    from pulsar_rebalance.core.state import StrategyState


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
        usage = weighted_usage(data, config, with_memory=True) if self.weighted else unweighted_usage(data)
        if usage > overload:
            return math.inf
        total = 0.0
        for bd in preallocated.values():
            lt = bd.long_term_data
            total += lt.msg_rate_in + lt.msg_rate_out
        return total + (time_average.long_term_msg_rate_in + time_average.long_term_msg_rate_out)

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
    ) -> tuple[Placement, StrategyState]:
        """``selectBroker``: the lowest-score candidates, a seeded pick among them."""
        best: list[str] = []
        min_score = math.inf
        scores: dict[str, float] = {}
        for broker in candidates:
            score = self.score(brokers[broker], time_average[broker], preallocated.get(broker, {}), config)
            scores[broker] = score
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
            why = f"least long-term msg rate {min_score:.1f} msg/s" + (f" ({len(best)} tied: seeded pick)" if len(best) > 1 else "")
        return Placement(bundle, chosen, tuple(best), why), state
