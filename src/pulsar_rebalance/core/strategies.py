"""The one strategy registry: every shedding and placement strategy, and what it is.

Each :class:`StrategySpec` says: the ``name`` (the ``decide`` contract's ``shedding``/``placement``,
the DAG's param, the config key's short class name), its ``kind`` (shedding or placement), its
``load_manager`` (modular or extensible), the Pulsar class name(s) it answers to (``None`` for
this project's GlobalPlanner, which is not a Pulsar class), whether it is an opt-in variant of
another strategy (``variant_of``; variants are accepted by the contract only, never offered to
operators or the config key), and its implementation (a module attribute built once, on first use).

Everything else is derived from :data:`STRATEGIES`: ``core.pulsar.shedders.SHEDDERS`` /
``SELECTABLE_SHEDDERS`` / ``EXTENSIBLE_SHEDDERS`` / ``BASE_NAME``, ``core.pulsar.placement.PLACEMENTS`` /
``EXTENSIBLE_PLACEMENTS``, ``core.pulsar.config.SHEDDING_STRATEGY_CLASSES`` /
``PLACEMENT_STRATEGY_CLASSES``, ``pipeline.params.SHEDDERS`` / ``PLACEMENTS``, the DAG's
``Param(enum=...)``, the quickstart's ``--strategy`` choices (``tests/core/test_strategy_registry.py``
checks they agree). Adding a strategy is one entry here.

This module imports no implementation at import time (``core.pulsar.config`` reads it, and the
implementations import ``core.pulsar.config``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

Kind = Literal["shedding", "placement"]
LoadManager = Literal["modular", "extensible"]

_IMPL = "org.apache.pulsar.broker.loadbalance.impl."
_EXT_SCHEDULER = "org.apache.pulsar.broker.loadbalance.extensions.scheduler."
_EXT_STRATEGY = "org.apache.pulsar.broker.loadbalance.extensions.strategy."
_SHEDDERS_PKG = "pulsar_rebalance.core.pulsar.shedders."
_PLACEMENT_PKG = "pulsar_rebalance.core.pulsar.placement."


@runtime_checkable
class SheddingStrategy(Protocol):
    """What the cycle calls on a shedder: ``find_bundles_for_unloading(inp, config, state)`` returns
    ``(Decision, StrategyState)``, pure (never mutates ``state``). ``inp`` is a ``ModularInput``
    (modular load manager) or an ``ExtensibleInput`` (extensible). A strategy with ``plans_splits``
    true (GlobalPlanner) is called through ``plan(PlannerInput, config, state)`` instead and plans its
    own splits and destinations."""

    name: str

    def find_bundles_for_unloading(self, inp: Any, config: Any, state: Any) -> tuple[Any, Any]: ...


@runtime_checkable
class PlacementStrategy(Protocol):
    """What the load manager calls on a placement strategy: ``select_broker(bundle=..., candidates=...,
    ...)`` returns a ``Placement`` (extensible) or ``(Placement, StrategyState)`` (modular); the
    remaining keyword arguments are the strategy's inputs (see ``core.pulsar.placement.assignment``)."""

    name: str

    def select_broker(self, *args: Any, **kwargs: Any) -> Any: ...


@dataclass(frozen=True)
class Capabilities:
    """What a shedding strategy does itself, declared here and read by the cycle, the contract and the
    pipeline (instead of comparing names)."""

    plans_splits: bool = False
    """Plans its own splits, with boundaries, together with its moves: Pulsar's split trigger is not run,
    and it is called through ``plan(PlannerInput, config, state)``."""
    reads_topic_rates: bool = False
    """Reads the per-topic rates of its split candidates (the ``decide`` cycle's ``bundleTopics``)."""
    bound_placement: str | None = None
    """The placement that always picks its destinations, whatever the run's placement param: its own
    (GlobalPlanner, AvgShedder) or its load manager's (TransferShedder)."""


@dataclass(frozen=True)
class StrategySpec:
    name: str
    kind: Kind
    load_manager: LoadManager
    pulsar_classes: tuple[str, ...] | None
    """Fully qualified Pulsar class names this strategy answers to in broker.conf; ``None``: not a Pulsar class."""
    module: str
    attr: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    variant_of: str | None = None
    """An opt-in variant (never a default, not operator-selectable): the Pulsar strategy it varies."""
    capabilities: Capabilities = field(default_factory=lambda: Capabilities())
    """What the strategy does beyond choosing bundles to unload (dispatch reads this, not names)."""

    @property
    def selectable(self) -> bool:
        """Offered to operators (DAG param, run params, config key, quickstart)."""
        return self.variant_of is None

    @property
    def base_name(self) -> str:
        return self.variant_of or self.name

    @property
    def implementation(self) -> Any:
        return _build(self.kind, self.load_manager, self.name)


def _spec(
    name: str,
    kind: Kind,
    lm: LoadManager,
    classes: tuple[str, ...] | None,
    module: str,
    attr: str,
    variant_of: str | None = None,
    capabilities: Capabilities | None = None,
    **kwargs: Any,
) -> StrategySpec:
    return StrategySpec(
        name, kind, lm, classes, module, attr, MappingProxyType(kwargs), variant_of, capabilities or Capabilities()
    )


STRATEGIES: tuple[StrategySpec, ...] = (
    # ---- shedding, modular load manager (Pulsar's ModularLoadManagerImpl) ---------------------------
    _spec(
        "ThresholdShedder",
        "shedding",
        "modular",
        (_IMPL + "ThresholdShedder",),
        _SHEDDERS_PKG + "threshold_shedder",
        "ThresholdShedder",
    ),
    _spec(
        "OverloadShedder",
        "shedding",
        "modular",
        (_IMPL + "OverloadShedder",),
        _SHEDDERS_PKG + "overload_shedder",
        "OverloadShedder",
    ),
    _spec(
        "UniformLoadShedder",
        "shedding",
        "modular",
        (_IMPL + "UniformLoadShedder",),
        _SHEDDERS_PKG + "uniform_load_shedder",
        "UniformLoadShedder",
    ),
    _spec(
        "AvgShedder",
        "shedding",
        "modular",
        (_IMPL + "AvgShedder",),
        _SHEDDERS_PKG + "avg_shedder",
        "AvgShedder",
        capabilities=Capabilities(bound_placement="AvgShedder"),  # Pulsar pairs it only with its own placement
    ),
    # ---- shedding, extensible load manager. Pulsar's ExtensibleLoadManagerImpl always uses it (it is
    # not read from loadBalancerLoadSheddingStrategy); the config key accepts it so one key selects the
    # shedder for both load managers.
    _spec(
        "TransferShedder",
        "shedding",
        "extensible",
        (_EXT_SCHEDULER + "TransferShedder",),
        _SHEDDERS_PKG + "transfer_shedder",
        "TransferShedder",
        capabilities=Capabilities(bound_placement="LeastResourceUsageWithWeight"),  # the extensible LM's placement
    ),
    # ---- opt-in shedding variants (see each module) ---------------------------------------------------
    _spec(
        "ThresholdShedderSingleEma",
        "shedding",
        "modular",
        None,
        _SHEDDERS_PKG + "threshold_shedder",
        "ThresholdShedder",
        variant_of="ThresholdShedder",
        double_ema_on_lower_boundary=False,
    ),
    _spec(
        "OverloadShedderUnweighted",
        "shedding",
        "modular",
        None,
        _SHEDDERS_PKG + "overload_shedder",
        "OverloadShedder",
        variant_of="OverloadShedder",
        weighted=False,
    ),
    _spec(
        "UniformLoadShedderSkipZeroTraffic",
        "shedding",
        "modular",
        None,
        _SHEDDERS_PKG + "uniform_load_shedder",
        "UniformLoadShedder",
        variant_of="UniformLoadShedder",
        skip_zero_traffic=True,
    ),
    # ---- not a Pulsar class: the whole-cluster planner (core/planner); it plans its own splits -------
    _spec(
        "GlobalPlanner",
        "shedding",
        "modular",
        None,
        "pulsar_rebalance.core.planner",
        "GlobalPlanner",
        capabilities=Capabilities(plans_splits=True, reads_topic_rates=True, bound_placement="GlobalPlanner"),
    ),
    # ---- placement -------------------------------------------------------------------------------------
    _spec(
        "LeastLongTermMessageRate",
        "placement",
        "modular",
        (_IMPL + "LeastLongTermMessageRate",),
        _PLACEMENT_PKG + "least_long_term_message_rate",
        "LeastLongTermMessageRate",
    ),
    # impl.* is the modular variant; extensions.strategy.* the extensible one (same rule on
    # BrokerLoadData.weightedMaxEMA). Both answer to the same short name; which one applies follows
    # from the load manager (loadManagerClassName / the shedder).
    _spec(
        "LeastResourceUsageWithWeight",
        "placement",
        "modular",
        (_IMPL + "LeastResourceUsageWithWeight",),
        _PLACEMENT_PKG + "least_resource_usage_with_weight",
        "LeastResourceUsageWithWeight",
    ),
    _spec(
        "LeastResourceUsageWithWeight",
        "placement",
        "extensible",
        (_EXT_STRATEGY + "LeastResourceUsageWithWeight",),
        _PLACEMENT_PKG + "least_resource_usage_with_weight",
        "ExtensibleLeastResourceUsageWithWeight",
    ),
    # AvgShedder is both a shedder and a placement strategy (state shared with the shedder)
    _spec(
        "AvgShedder",
        "placement",
        "modular",
        (_IMPL + "AvgShedder",),
        _SHEDDERS_PKG + "avg_shedder",
        "AvgShedderPlacement",
    ),
    _spec(
        "LeastLongTermMessageRateUnweighted",
        "placement",
        "modular",
        None,
        _PLACEMENT_PKG + "least_long_term_message_rate",
        "LeastLongTermMessageRate",
        variant_of="LeastLongTermMessageRate",
        weighted=False,
    ),
)
"""Every strategy, in the order the derived lists show them."""

DEFAULT_SHEDDER = "GlobalPlanner"
"""The pipeline's default (the DAG's ``shedding_strategy``, the run params): the planner, ahead of every
Pulsar strategy in the closed-loop benchmark (docs/benchmarks/balance.md). Pulsar's strategies are one
param away. The ``decide`` contract keeps Pulsar's own default (``loadBalancerLoadSheddingStrategy`` =
AvgShedder since PR #26609, in core.pulsar.config)."""

DEFAULT_PLACEMENT = "AvgShedder"
"""The pipeline's default placement (Pulsar's ``loadBalancerLoadPlacementStrategy`` since PR #26609)."""


def capabilities(shedding: str) -> Capabilities:
    """The declared capabilities of the shedding strategy ``shedding`` (a variant has its base's)."""
    for s in STRATEGIES:
        if s.kind == "shedding" and s.name == shedding:
            return s.capabilities
    raise KeyError(f"unknown shedding strategy {shedding!r}")


def plans_splits(shedder: Any) -> bool:
    """Whether a shedder implementation plans its own splits (by its registry entry, found by its name)."""
    name = getattr(shedder, "name", None)
    return any(s.kind == "shedding" and s.name == name and s.capabilities.plans_splits for s in STRATEGIES)


def specs(
    kind: Kind, load_manager: LoadManager | None = None, *, selectable: bool | None = None
) -> tuple[StrategySpec, ...]:
    return tuple(
        s
        for s in STRATEGIES
        if s.kind == kind
        and (load_manager is None or s.load_manager == load_manager)
        and (selectable is None or s.selectable == selectable)
    )


def names(kind: Kind, load_manager: LoadManager | None = None, *, selectable: bool | None = None) -> tuple[str, ...]:
    """Distinct names, registry order."""
    return tuple(dict.fromkeys(s.name for s in specs(kind, load_manager, selectable=selectable)))


def pulsar_classes(kind: Kind) -> Mapping[str, tuple[str, ...]]:
    """Short name -> the FQCNs the config key accepts for it (selectable strategies; ``()`` = not a Pulsar class)."""
    out: dict[str, tuple[str, ...]] = {}
    for s in specs(kind, selectable=True):
        out[s.name] = out.get(s.name, ()) + (s.pulsar_classes or ())
    return MappingProxyType(out)


def selectable_shedders() -> tuple[str, ...]:
    """What an operator picks from: the default first, then registry order."""
    rest = [n for n in names("shedding", selectable=True) if n != DEFAULT_SHEDDER]
    return (DEFAULT_SHEDDER, *rest)


def implementations(kind: Kind, load_manager: LoadManager | None = None) -> Mapping[str, Any]:
    """Name -> implementation (one load manager, or ``None`` for shedders: names are unique across both)."""
    return MappingProxyType({s.name: s.implementation for s in specs(kind, load_manager)})


@cache
def _build(kind: str, load_manager: str, name: str) -> Any:
    spec = next(s for s in STRATEGIES if (s.kind, s.load_manager, s.name) == (kind, load_manager, name))
    cls = getattr(importlib.import_module(spec.module), spec.attr)
    kwargs = dict(spec.kwargs)
    if spec.variant_of is not None:
        kwargs["name"] = spec.name
    return cls(**kwargs)


def _check_unique() -> None:
    seen = [(s.kind, s.load_manager, s.name) for s in STRATEGIES]
    shed = [s.name for s in STRATEGIES if s.kind == "shedding"]
    if len(seen) != len(set(seen)) or len(shed) != len(set(shed)):
        raise RuntimeError("a strategy is registered twice (shedding names are unique across load managers)")
    for s in STRATEGIES:
        if s.variant_of is not None and s.variant_of not in {t.name for t in STRATEGIES if t.kind == s.kind}:
            raise RuntimeError(f"{s.name} varies an unregistered strategy {s.variant_of}")


_check_unique()

__all__ = [
    "DEFAULT_PLACEMENT",
    "DEFAULT_SHEDDER",
    "Capabilities",
    "STRATEGIES",
    "PlacementStrategy",
    "SheddingStrategy",
    "StrategySpec",
    "implementations",
    "capabilities",
    "names",
    "plans_splits",
    "pulsar_classes",
    "selectable_shedders",
    "specs",
]
