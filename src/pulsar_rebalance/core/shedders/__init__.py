"""Shedding strategies, one module per Pulsar class, and the explicit registry name -> implementation.

Modular load manager shedders (input :class:`~pulsar_rebalance.core.shedders.base.ModularInput`):
``ThresholdShedder`` (Pulsar's default in 2.10-4.x), ``OverloadShedder``, ``UniformLoadShedder``, ``AvgShedder``.
Extensible load manager shedder (input :class:`~pulsar_rebalance.core.shedders.transfer_shedder.ExtensibleInput`):
``TransferShedder``.

Opt-in variants (never defaults; see each module): ``ThresholdShedderSingleEma`` (lower-boundary
step without Pulsar's second EMA application), ``OverloadShedderUnweighted`` (pre-PIP-358 usage),
``UniformLoadShedderSkipZeroTraffic`` (the unmerged PR #21214's zero-traffic filter).

Every implementation has ``name`` and
``find_bundles_for_unloading(inp, config, state) -> (Decision, StrategyState)``; it never mutates
``state`` and is pure (no I/O, no clock, no randomness).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pulsar_rebalance.core.planner import GlobalPlanner
from pulsar_rebalance.core.shedders.avg_shedder import AvgShedder
from pulsar_rebalance.core.shedders.overload_shedder import OverloadShedder
from pulsar_rebalance.core.shedders.threshold_shedder import ThresholdShedder
from pulsar_rebalance.core.shedders.transfer_shedder import TransferShedder
from pulsar_rebalance.core.shedders.uniform_load_shedder import UniformLoadShedder

SHEDDERS: Mapping[str, Any] = MappingProxyType(
    {
        "ThresholdShedder": ThresholdShedder(),
        "OverloadShedder": OverloadShedder(),
        "UniformLoadShedder": UniformLoadShedder(),
        "AvgShedder": AvgShedder(),
        "TransferShedder": TransferShedder(),
        # opt-in variants
        "ThresholdShedderSingleEma": ThresholdShedder(name="ThresholdShedderSingleEma", double_ema_on_lower_boundary=False),
        "OverloadShedderUnweighted": OverloadShedder(name="OverloadShedderUnweighted", weighted=False),
        "UniformLoadShedderSkipZeroTraffic": UniformLoadShedder(name="UniformLoadShedderSkipZeroTraffic", skip_zero_traffic=True),
        # not a Pulsar class: the whole-cluster planner (core/planner); it plans its own splits
        "GlobalPlanner": GlobalPlanner(),
    }
)
"""Name -> shedder. Pulsar's own classes plus clearly named opt-in variants."""

SELECTABLE_SHEDDERS: tuple[str, ...] = (
    "GlobalPlanner", "ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder", "TransferShedder"
)
"""What an operator picks from: the DAG's ``shedding_strategy`` Param enum, the run params, the
quickstart. The single list those derive from (a test checks they agree and that each is registered)."""

DEFAULT_SHEDDER = "GlobalPlanner"
"""The pipeline's default (the DAG's ``shedding_strategy``, the run params): the planner, ahead of every
Pulsar strategy in the closed-loop benchmark (docs/benchmarks/balance.md). Pulsar's strategies are one
param away. The ``decide`` contract keeps Pulsar's own default (``loadBalancerLoadSheddingStrategy`` =
AvgShedder since PR #26609, in core.config)."""

EXTENSIBLE_SHEDDERS = frozenset({"TransferShedder"})
"""Shedders of the extensible load manager (they read BrokerLoadData / TopBundlesLoadData)."""

BASE_NAME: Mapping[str, str] = MappingProxyType(
    {"ThresholdShedderSingleEma": "ThresholdShedder", "OverloadShedderUnweighted": "OverloadShedder",
     "UniformLoadShedderSkipZeroTraffic": "UniformLoadShedder"}
)
"""Variant -> the Pulsar class it varies (for config keys and pairing rules)."""


def get_shedder(name: str) -> Any:
    """The registered shedder called ``name``; ``KeyError`` lists the known names."""
    try:
        return SHEDDERS[name]
    except KeyError:
        raise KeyError(f"unknown shedding strategy {name!r}; known: {', '.join(SHEDDERS)}") from None


__all__ = [
    "BASE_NAME",
    "DEFAULT_SHEDDER",
    "SELECTABLE_SHEDDERS",
    "EXTENSIBLE_SHEDDERS",
    "SHEDDERS",
    "AvgShedder",
    "OverloadShedder",
    "ThresholdShedder",
    "TransferShedder",
    "UniformLoadShedder",
    "get_shedder",
]
