"""``OverloadShedder`` (``pulsar-broker/.../loadbalance/impl/OverloadShedder.java``).

For every broker whose max resource usage is at or above
``loadBalancerBrokerOverloadedThresholdPercentage`` (``usage < threshold`` is "not overloaded", so
exactly the threshold counts as overloaded), offload at least
``(thrIn + thrOut) * (usage - threshold + 0.05)`` bytes/s, largest short-term-throughput bundles
first, skipping recently unloaded ones, at least one bundle. A broker with a single bundle is
never shed. There is no minimum-throughput floor (unlike ThresholdShedder).

Usage metric: Pulsar 4.x (PIP-358) uses the *weighted* max usage (5-argument form, so memory and
direct memory count only with a non-zero weight - both default to 0). The registry also offers
``OverloadShedderUnweighted``, the pre-PIP-358 ``getMaxResourceUsage()`` (all five resources,
unweighted), for clusters on older Pulsar releases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pulsar_rebalance.core.decision import Reason, Unload, skip, success
from pulsar_rebalance.core.pulsar.shedders.base import (
    ADDITIONAL_THRESHOLD_PERCENT_MARGIN,
    ModularInput,
    broker_throughput,
    fmt_mib,
    short_term_throughput,
    sort_desc_stable,
    unweighted_usage,
    weighted_usage,
)

if TYPE_CHECKING:
    from pulsar_rebalance.core.decision import Decision
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.state import StrategyState


@dataclass(frozen=True)
class OverloadShedder:
    """Pulsar's OverloadShedder; ``weighted=False`` selects the pre-PIP-358 unweighted usage."""

    name: str = "OverloadShedder"
    weighted: bool = True

    def find_bundles_for_unloading(
        self, inp: ModularInput, config: LoadBalancerConfig, state: StrategyState
    ) -> tuple[Decision, StrategyState]:
        overload = config.load_balancer_broker_overloaded_threshold_percentage / 100.0
        recent = inp.recently_unloaded_bundles
        broker_stats: dict[str, dict[str, Any]] = {}
        stats: dict[str, Any] = {"overloadThreshold": overload, "brokers": broker_stats}
        unloads: list[Unload] = []
        blocked = False
        for broker, data in inp.brokers.items():
            usage = weighted_usage(data, config, with_memory=True) if self.weighted else unweighted_usage(data)
            bs: dict[str, Any] = {"usage": usage}
            broker_stats[broker] = bs
            if usage < overload:
                bs["status"] = "not overloaded"
                continue
            percent = usage - overload + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            minimum = broker_throughput(data) * percent
            bs["minThroughputToOffload"] = minimum
            n_bundles = len(data.bundles)
            if n_bundles <= 1:
                bs["status"] = "overloaded, sole bundle" if n_bundles == 1 else "overloaded, no bundles"
                blocked = True
                continue
            candidates = [(b, short_term_throughput(bd)) for b, bd in inp.sheddable_bundles(broker) if b not in recent]
            marked = 0.0
            chosen: list[str] = []
            for bundle, thr in sort_desc_stable(candidates):
                if marked < minimum or not chosen:
                    chosen.append(bundle)
                    marked += thr
                else:
                    break
            if not chosen:
                bs["status"] = "overloaded, no sheddable bundle"
                blocked = True
                continue
            bs["status"] = "overloaded, shedding"
            why = (
                f"Overloaded: {broker} max usage {usage:.4f} >= threshold {overload:.4f}; "
                f"offload >= {fmt_mib(minimum)} (marked {fmt_mib(marked)})"
            )
            unloads.extend(Unload(broker, b, None, why) for b in chosen)
        if unloads:
            detail = f"{len(unloads)} bundle(s) from brokers at or above {overload:.2f} max usage"
            return success(Reason.OVERLOADED, detail, unloads, stats), state
        if not inp.brokers:
            return skip(Reason.NO_BROKERS, "no brokers in the load data", stats), state
        if blocked:
            return skip(
                Reason.NO_BUNDLES,
                "overloaded broker(s) have no sheddable bundle (sole bundle or all recently unloaded)",
                stats,
            ), state
        return skip(Reason.BALANCED, f"no broker at or above max usage {overload:.2f}", stats), state
