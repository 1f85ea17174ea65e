"""Shedding strategies, one module per Pulsar class; the name -> implementation maps derive from
the one strategy registry, ``core.strategies.STRATEGIES``.

Modular load manager shedders (input :class:`~pulsar_rebalance.core.pulsar.shedders.base.ModularInput`):
``ThresholdShedder`` (Pulsar's default in 2.10-4.x), ``OverloadShedder``, ``UniformLoadShedder``, ``AvgShedder``.
Extensible load manager shedder (input :class:`~pulsar_rebalance.core.pulsar.shedders.transfer_shedder.ExtensibleInput`):
``TransferShedder``.

Opt-in variants (never defaults; see each module): ``ThresholdShedderSingleEma`` (lower-boundary
step without Pulsar's second EMA application), ``OverloadShedderUnweighted`` (pre-PIP-358 usage),
``UniformLoadShedderSkipZeroTraffic`` (the unmerged PR #21214's zero-traffic filter).

The registry is ``core.strategies.STRATEGIES`` (one entry per strategy); the maps here derive from it.
Every implementation satisfies ``core.strategies.SheddingStrategy``: ``name`` and
``find_bundles_for_unloading(inp, config, state) -> (Decision, StrategyState)``; it never mutates
``state`` and is pure (no I/O, no clock, no randomness).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pulsar_rebalance.core import strategies as _registry
from pulsar_rebalance.core.pulsar.shedders.avg_shedder import AvgShedder
from pulsar_rebalance.core.pulsar.shedders.overload_shedder import OverloadShedder
from pulsar_rebalance.core.pulsar.shedders.threshold_shedder import ThresholdShedder
from pulsar_rebalance.core.pulsar.shedders.transfer_shedder import TransferShedder
from pulsar_rebalance.core.pulsar.shedders.uniform_load_shedder import UniformLoadShedder

SHEDDERS: Mapping[str, Any] = _registry.implementations("shedding")
"""Name -> shedder (derived from ``core.strategies.STRATEGIES``). Pulsar's own classes, clearly named
opt-in variants, and the GlobalPlanner."""

SELECTABLE_SHEDDERS: tuple[str, ...] = _registry.selectable_shedders()
"""What an operator picks from: the DAG's ``shedding_strategy`` Param enum, the run params, the
quickstart (derived from the registry; tests/core/test_strategy_registry.py checks they agree)."""

DEFAULT_SHEDDER = _registry.DEFAULT_SHEDDER

EXTENSIBLE_SHEDDERS = frozenset(_registry.names("shedding", "extensible"))
"""Shedders of the extensible load manager (they read BrokerLoadData / TopBundlesLoadData)."""

BASE_NAME: Mapping[str, str] = MappingProxyType(
    {s.name: s.variant_of for s in _registry.specs("shedding", selectable=False) if s.variant_of is not None}
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
