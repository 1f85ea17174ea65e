"""Placement strategies, one module per Pulsar class; the name -> implementation maps derive from
the one strategy registry, ``core.strategies.STRATEGIES`` (each implementation satisfies
``core.strategies.PlacementStrategy``).

* ``LeastLongTermMessageRate`` - modular default (``least_long_term_message_rate``).
* ``LeastResourceUsageWithWeight`` - modular and extensible forms (``least_resource_usage_with_weight``).
* ``AvgShedder`` - AvgShedder's own placement (``core/pulsar/shedders/avg_shedder.select_broker``).
* ``LeastLongTermMessageRateUnweighted`` - opt-in: pre-PIP-358 unweighted overload check.

:func:`~pulsar_rebalance.core.pulsar.placement.assignment.select_broker_for_assignment` wraps a modular
strategy in ``ModularLoadManagerImpl.selectBrokerForAssignment``'s candidate filters and
preallocation. Where Pulsar picks at random among ties, the strategies report the tied set and pick
with a caller-seeded ``random.Random``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulsar_rebalance.core import strategies as _registry
from pulsar_rebalance.core.pulsar.placement.least_long_term_message_rate import LeastLongTermMessageRate
from pulsar_rebalance.core.pulsar.placement.least_resource_usage_with_weight import (
    ExtensibleLeastResourceUsageWithWeight,
    LeastResourceUsageWithWeight,
)

PLACEMENTS: Mapping[str, Any] = _registry.implementations("placement", "modular")
"""Modular placement strategies by name (derived from ``core.strategies.STRATEGIES``)."""

EXTENSIBLE_PLACEMENTS: Mapping[str, Any] = _registry.implementations("placement", "extensible")
"""Extensible load manager placement strategies (used with TransferShedder)."""

__all__ = [
    "EXTENSIBLE_PLACEMENTS",
    "PLACEMENTS",
    "ExtensibleLeastResourceUsageWithWeight",
    "LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight",
]
