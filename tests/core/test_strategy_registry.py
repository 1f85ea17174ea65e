"""One strategy registry (core.strategies.STRATEGIES): the contract, the run params, the DAG's Param
enums, the config key and the Literal types all accept exactly the names it lists, and every
registered implementation satisfies its Protocol."""

from __future__ import annotations

import importlib.util
import typing
from pathlib import Path
from typing import Any

import pytest

from pulsar_rebalance.core import strategies
from pulsar_rebalance.core.contract.decide import parse_scenario
from pulsar_rebalance.core.pulsar.config import (
    PLACEMENT_STRATEGY_CLASSES,
    SHEDDING_STRATEGY_CLASSES,
    LoadBalancerConfig,
    PlacementStrategyName,
    SheddingStrategyName,
)
from pulsar_rebalance.core.pulsar.placement import EXTENSIBLE_PLACEMENTS, PLACEMENTS
from pulsar_rebalance.core.pulsar.shedders import BASE_NAME, EXTENSIBLE_SHEDDERS, SELECTABLE_SHEDDERS, SHEDDERS
from pulsar_rebalance.core.strategies import STRATEGIES, PlacementStrategy, SheddingStrategy
from pulsar_rebalance.errors import ConfigError, ScenarioError
from pulsar_rebalance.pipeline import detect
from pulsar_rebalance.pipeline.params import PLACEMENTS as RUN_PLACEMENTS
from pulsar_rebalance.pipeline.params import SHEDDERS as RUN_SHEDDERS
from pulsar_rebalance.pipeline.params import RunParams

ROOT = Path(__file__).resolve().parents[2]

ALL_SHEDDING = [s.name for s in STRATEGIES if s.kind == "shedding"]
SELECTABLE_SHEDDING = {s.name for s in STRATEGIES if s.kind == "shedding" and s.variant_of is None}
MODULAR_PLACEMENT = [s.name for s in STRATEGIES if s.kind == "placement" and s.load_manager == "modular"]
EXTENSIBLE_PLACEMENT = [s.name for s in STRATEGIES if s.kind == "placement" and s.load_manager == "extensible"]
SELECTABLE_PLACEMENT = list(dict.fromkeys(s.name for s in STRATEGIES if s.kind == "placement" and s.variant_of is None))


def _cycle() -> dict[str, Any]:
    usage = {"usage": 10.0, "limit": 100.0}
    report = {
        "cpu": usage,
        "bandwidthIn": usage,
        "bandwidthOut": usage,
        "lastUpdate": 1_700_000_000_000,
        "lastStats": {},
    }
    return {"brokers": {"b1:8080": report, "b2:8080": dict(report)}, "nowMs": 1_700_000_000_000}


def _scenario_error(doc: dict[str, Any]) -> ScenarioError:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    return err.value


def _dag_params() -> Any:
    """The DAG module imported from its file (no scheduler, no metadata DB)."""
    spec = importlib.util.spec_from_file_location("_dag_under_test", ROOT / "dags" / "pulsar_rebalance.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pulsar_rebalance.params  # the default cluster's DAG (the file defines one per cluster, by dag id)


def test_the_core_maps_are_the_registry():
    assert list(SHEDDERS) == ALL_SHEDDING
    assert list(PLACEMENTS) == MODULAR_PLACEMENT
    assert list(EXTENSIBLE_PLACEMENTS) == EXTENSIBLE_PLACEMENT == ["LeastResourceUsageWithWeight"]
    assert EXTENSIBLE_SHEDDERS == {
        s.name for s in STRATEGIES if s.kind == "shedding" and s.load_manager == "extensible"
    }
    assert dict(BASE_NAME) == {s.name: s.variant_of for s in STRATEGIES if s.kind == "shedding" and s.variant_of}
    assert set(SELECTABLE_SHEDDERS) == SELECTABLE_SHEDDING and SELECTABLE_SHEDDERS[0] == strategies.DEFAULT_SHEDDER
    # an implementation is built once and carries its registered name
    for s in STRATEGIES:
        assert s.implementation is s.implementation
        assert s.implementation.name == s.name
    assert SHEDDERS["GlobalPlanner"] is next(s for s in STRATEGIES if s.name == "GlobalPlanner").implementation


@pytest.mark.parametrize("spec", STRATEGIES, ids=lambda s: f"{s.kind}:{s.load_manager}:{s.name}")
def test_every_implementation_satisfies_its_protocol(spec):
    protocol = SheddingStrategy if spec.kind == "shedding" else PlacementStrategy
    assert isinstance(spec.implementation, protocol)


def test_protocols_reject_what_the_cycle_cannot_call():
    class NoMethod:
        name = "x"

    assert not isinstance(NoMethod(), SheddingStrategy)
    assert not isinstance(NoMethod(), PlacementStrategy)


def test_config_accepts_exactly_the_selectable_names_and_their_pulsar_classes():
    assert set(SHEDDING_STRATEGY_CLASSES) == SELECTABLE_SHEDDING
    assert list(PLACEMENT_STRATEGY_CLASSES) == SELECTABLE_PLACEMENT
    assert set(typing.get_args(SheddingStrategyName)) == SELECTABLE_SHEDDING
    assert list(typing.get_args(PlacementStrategyName)) == SELECTABLE_PLACEMENT
    for s in STRATEGIES:
        key = "loadBalancerLoadSheddingStrategy" if s.kind == "shedding" else "loadBalancerLoadPlacementStrategy"
        attr = (
            "load_balancer_load_shedding_strategy" if s.kind == "shedding" else "load_balancer_load_placement_strategy"
        )
        if s.variant_of is not None:
            with pytest.raises(ConfigError):
                LoadBalancerConfig.from_mapping({key: s.name})
            continue
        assert getattr(LoadBalancerConfig.from_mapping({key: s.name}), attr) == s.name
        for fqcn in s.pulsar_classes or ():
            assert getattr(LoadBalancerConfig.from_mapping({key: fqcn}), attr) == s.name
    with pytest.raises(ConfigError):
        LoadBalancerConfig.from_mapping({"loadBalancerLoadSheddingStrategy": "NoSuchShedder"})


def test_the_contract_accepts_every_registered_shedder_and_nothing_else():
    err = _scenario_error({"shedding": "NoSuchShedder", "cycles": [_cycle()]})
    assert str(err).endswith("known: " + ", ".join(ALL_SHEDDING))
    for name in ALL_SHEDDING:
        assert parse_scenario({"shedding": name, "cycles": [_cycle()]}).shedding == name


def test_the_contract_accepts_the_registered_placements_of_each_load_manager():
    err = _scenario_error({"shedding": "ThresholdShedder", "placement": "Nope", "cycles": [_cycle()]})
    assert str(err).endswith("known: " + ", ".join(MODULAR_PLACEMENT))
    err = _scenario_error({"shedding": "TransferShedder", "placement": "Nope", "cycles": [_cycle()]})
    assert str(err).endswith("known: " + ", ".join(EXTENSIBLE_PLACEMENT))
    for name in MODULAR_PLACEMENT:
        shedding = "AvgShedder" if name == "AvgShedder" else "ThresholdShedder"  # Pulsar pairs AvgShedder with itself
        assert parse_scenario({"shedding": shedding, "placement": name, "cycles": [_cycle()]}).placement == name
    for name in EXTENSIBLE_PLACEMENT:
        doc = {"shedding": "TransferShedder", "placement": name, "cycles": [_cycle()]}
        assert parse_scenario(doc).placement == name


def test_run_params_accept_exactly_the_selectable_names():
    assert set(RUN_SHEDDERS) == SELECTABLE_SHEDDING and list(RUN_PLACEMENTS) == SELECTABLE_PLACEMENT
    for name in SELECTABLE_SHEDDING:
        assert RunParams.from_json({"shedding_strategy": name}).shedding_strategy == name
    for name in SELECTABLE_PLACEMENT:
        assert RunParams.from_json({"placement_strategy": name}).placement_strategy == name
    for s in STRATEGIES:
        if s.variant_of is not None:
            key = "shedding_strategy" if s.kind == "shedding" else "placement_strategy"
            with pytest.raises(ConfigError):
                RunParams.from_json({key: s.name})
    assert RunParams().shedding_strategy == strategies.DEFAULT_SHEDDER
    assert RunParams().placement_strategy == strategies.DEFAULT_PLACEMENT


def test_the_pipeline_routes_by_the_registry():
    assert detect.PLANNERS == ("GlobalPlanner",)
    assert detect.MODULAR_SHEDDERS_WITH_PLACEMENT == ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder")


def test_the_dag_param_enums_are_the_registry():
    params = _dag_params()
    shedding = params.get_param("shedding_strategy")
    placement = params.get_param("placement_strategy")
    assert list(shedding.schema["enum"]) == list(SELECTABLE_SHEDDERS) == list(RUN_SHEDDERS)
    assert set(shedding.schema["enum"]) == SELECTABLE_SHEDDING
    assert list(placement.schema["enum"]) == SELECTABLE_PLACEMENT
    assert shedding.value == strategies.DEFAULT_SHEDDER and placement.value == strategies.DEFAULT_PLACEMENT


def test_the_quickstart_offers_the_selectable_shedders_and_runs_the_dags_default():
    import argparse

    from pulsar_rebalance.cli import quickstart
    from pulsar_rebalance.pipeline.params import RunParams

    parser = argparse.ArgumentParser()
    quickstart.register(parser.add_subparsers())
    assert parser.parse_args(["demo"]).strategy == RunParams().shedding_strategy == "GlobalPlanner"
    demo = parser.parse_args(["demo", "--strategy", "ThresholdShedder"])
    assert demo.strategy == "ThresholdShedder"
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    choices = next(a.choices for a in sub.choices["demo"]._actions if a.dest == "strategy")
    assert list(choices) == list(SELECTABLE_SHEDDERS)


def test_capabilities_are_declared_in_the_registry_and_drive_dispatch():
    from pulsar_rebalance.core.strategies import STRATEGIES, capabilities, plans_splits
    from pulsar_rebalance.pipeline.detect import MODULAR_SHEDDERS_WITH_PLACEMENT, PLANNERS
    from pulsar_rebalance.pipeline.params import RunParams

    shedders = [s for s in STRATEGIES if s.kind == "shedding"]
    assert [s.name for s in shedders if plans_splits(s.implementation)] == ["GlobalPlanner"]
    assert PLANNERS == ("GlobalPlanner",)
    assert capabilities("GlobalPlanner").reads_topic_rates
    # each bound placement is what the run really uses, whatever the placement param says
    for s in shedders:
        bound = s.capabilities.bound_placement
        eff = RunParams.from_json(
            {"shedding_strategy": s.base_name, "placement_strategy": "LeastLongTermMessageRate"}
        ).effective_placement
        assert eff == (bound or "LeastLongTermMessageRate"), s.name
    assert "AvgShedder" not in MODULAR_SHEDDERS_WITH_PLACEMENT and "ThresholdShedder" in MODULAR_SHEDDERS_WITH_PLACEMENT
    with pytest.raises(KeyError, match="unknown shedding strategy"):
        capabilities("NoSuchShedder")
