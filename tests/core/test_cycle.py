"""core.cycle.run_cycle: the typed cycle analyzer behind the ``decide`` contract and the pipeline.
The contract's JSON output is exactly the rendered CycleResult, the pipeline's detect step runs the same
function, and the result is frozen and typed."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from pulsar_rebalance.core import cycle as cycle_module
from pulsar_rebalance.core.contract.decide import decide_scenario, parse_scenario
from pulsar_rebalance.core.cycle import (
    CycleInput,
    CycleResult,
    CycleSettings,
    run_cycle,
    seeded_random,
    with_random_position,
)
from pulsar_rebalance.core.decision import Unload
from pulsar_rebalance.core.strategies import names
from pulsar_rebalance.pipeline import detect
from tests.core.test_decide_contract import NOW, cluster

SHEDDERS = names("shedding")


def _doc(shedding: str, cycles: int = 2) -> dict:
    second = copy.deepcopy(cluster())
    second["nowMs"] = NOW + 60_000
    return {
        "shedding": shedding,
        "assignDestinations": True,
        "seed": 3,
        "config": {"loadBalancerBrokerThresholdShedderPercentage": 5},
        "cycles": [cluster(), second][:cycles],
    }


@pytest.mark.parametrize("shedding", SHEDDERS)
def test_the_contract_output_is_run_cycle_rendered(shedding):
    doc = _doc(shedding)
    expected = decide_scenario(copy.deepcopy(doc))
    parsed = parse_scenario(copy.deepcopy(doc))
    settings = parsed.settings
    assert settings == CycleSettings(parsed.shedding, parsed.placement, parsed.config, True)
    rng = seeded_random(parsed.seed, parsed.state)
    state = parsed.state
    rendered = []
    for inp in parsed.cycles:
        assert isinstance(inp, CycleInput)
        result = run_cycle(inp, state, settings, rng)
        assert isinstance(result, CycleResult)
        assert all(isinstance(u, Unload) for u in (*result.decision.unloads, *result.executed))
        rendered.append(result.to_json())
        state = result.state
    assert rendered == expected["cycles"]
    assert with_random_position(state, rng).to_json() == expected["state"]


def test_results_and_settings_are_frozen():
    parsed = parse_scenario(_doc("ThresholdShedder", cycles=1))
    result = run_cycle(parsed.cycles[0], parsed.state, parsed.settings, seeded_random(0, parsed.state))
    assert result.decision.unloads  # broker-1 is above the threshold: something to look at
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.state = parsed.state  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.settings.shedding = "AvgShedder"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.cycles[0].now_ms = 0  # type: ignore[misc]


@pytest.mark.parametrize("shedding", ["ThresholdShedder", "GlobalPlanner", "TransferShedder"])
def test_the_pipeline_runs_the_same_cycle_function(shedding, monkeypatch):
    doc = _doc(shedding, cycles=1)
    calls: list[CycleSettings] = []
    real = cycle_module.run_cycle

    def spy(inp, state, settings, rng):
        calls.append(settings)
        return real(inp, state, settings, rng)

    monkeypatch.setattr(cycle_module, "run_cycle", spy)
    out = detect.decide(copy.deepcopy(doc))
    assert [c.shedding for c in calls] == [shedding]
    expected = decide_scenario(copy.deepcopy(doc))
    assert out == {"cycle": expected["cycles"][0], "state": expected["state"]}
