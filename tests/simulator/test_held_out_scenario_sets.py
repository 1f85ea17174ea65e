"""The held-out scenario sets (simulator/held_out_scenarios.py and held_out_scenarios_2.py to held_out_scenarios_7.py):
each scenario builds under every default load model at its stated load and is the same for the same seed, unknown
names, cadences and load models are refused, and no scenario shares a name with a tuned-on one or another set's.
Nothing here runs a strategy (the seventh set is kept in reserve for the planner). What each set's benchmark run writes
(its report, and its headlines or not: the seventh writes its report only) is its own test file's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pulsar_rebalance.simulator import held_out_scenarios as hs1
from pulsar_rebalance.simulator import held_out_scenarios_2 as hs2
from pulsar_rebalance.simulator import held_out_scenarios_3 as hs3
from pulsar_rebalance.simulator import held_out_scenarios_4 as hs4
from pulsar_rebalance.simulator import held_out_scenarios_5 as hs5
from pulsar_rebalance.simulator import held_out_scenarios_6 as hs6
from pulsar_rebalance.simulator import held_out_scenarios_7 as hs7
from pulsar_rebalance.simulator.load_models import LOAD_MODELS
from pulsar_rebalance.simulator.scenarios import SCENARIOS, ScenarioRun
from tests.simulator.scenario_profiles import CRITERIA_KEYS


@dataclass(frozen=True)
class ScenarioSet:
    build: Callable[..., ScenarioRun]
    expectations: Mapping[str, Any]
    """Each scenario's declared criteria, description and why."""
    targets: Mapping[str, float]
    """Each scenario's stated load (its ideal usage once built)."""
    balanced: bool
    """Every scenario starts placed balanced (the first set's steady-growth and small-brokers do not)."""
    most: int = 5
    """The most scenarios the set may hold (the first set up to 6)."""


SETS = {
    "set-1": ScenarioSet(
        hs1.build,
        hs1.EXPECTATIONS,
        {
            "broker-crash": hs1.CRASH_LOAD,
            "diurnal-swing": hs1.SWING_LOAD,
            "flash-crowd": hs1.CROWD_LOAD,
            "steady-growth": hs1.GROWTH_LOAD,
            "small-brokers-few-bundles": hs1.SMALL_LOAD,
        },
        balanced=False,
        most=6,
    ),
    "set-2": ScenarioSet(
        hs2.build,
        hs2.EXPECTATIONS_2,
        {
            "topic-churn": hs2.CHURN_LOAD,
            "follow-the-sun": hs2.SUN_LOAD,
            "noisy-neighbour": hs2.DEGRADE_LOAD,
            "tenant-takeover": hs2.TAKEOVER_LOAD,
            "backlog-drain": hs2.DRAIN_LOAD,
        },
        balanced=True,
    ),
    "set-3": ScenarioSet(
        hs3.build,
        hs3.EXPECTATIONS_3,
        {
            "namespace-onboarding": hs3.ONBOARD_LOAD,
            "new-subscription": hs3.SUB_LOAD,
            "over-split-namespace": hs3.SPLIT_LOAD,
            "perf-test-namespace": hs3.PERF_LOAD,
        },
        balanced=True,
    ),
    "set-4": ScenarioSet(
        hs4.build,
        hs4.EXPECTATIONS_4,
        {
            "partition-increase": hs4.PART_LOAD,
            "bigger-messages": hs4.SIZE_LOAD,
            "bookie-recovery": hs4.RECOVERY_LOAD,
            "whale-topics": hs4.WHALE_LOAD,
        },
        balanced=True,
    ),
    "set-5": ScenarioSet(
        hs5.build,
        hs5.EXPECTATIONS_5,
        {
            "hourly-batch": hs5.BATCH_LOAD,
            "hardware-refresh": hs5.REFRESH_LOAD,
            "ingest-firehose": hs5.FIRE_LOAD,
            "hot-key": hs5.KEY_LOAD,
            "running-hot": hs5.HOT_LOAD,
        },
        balanced=True,
    ),
    "set-6": ScenarioSet(
        hs6.build,
        hs6.EXPECTATIONS_6,
        {
            "tenant-offboarding": hs6.OFFBOARD_LOAD,
            "rolling-upgrade": hs6.UPGRADE_LOAD,
            "subscription-replay": hs6.REPLAY_LOAD,
            "nic-link-down": hs6.LINK_LOAD,
        },
        balanced=True,
    ),
    "set-7": ScenarioSet(
        hs7.build,
        hs7.EXPECTATIONS_7,
        {
            "geo-replication-catchup": hs7.GEO_LOAD,
            "telemetry-flood": hs7.FLOOD_LOAD,
            "cdc-snapshot": hs7.CDC_LOAD,
            "host-agent-cron": hs7.AGENT_LOAD,
        },
        balanced=True,
    ),
}
CASES = [(s, name) for s, ss in SETS.items() for name in ss.targets]


def test_each_set_lists_exactly_its_scenarios_none_shared() -> None:
    assert set(SETS["set-1"].targets) == set(hs1.HELD_OUT_SCENARIOS)
    assert set(SETS["set-2"].targets) == set(hs2.HELD_OUT_SCENARIOS_2)
    assert set(SETS["set-3"].targets) == set(hs3.HELD_OUT_SCENARIOS_3)
    assert set(SETS["set-4"].targets) == set(hs4.HELD_OUT_SCENARIOS_4)
    assert set(SETS["set-5"].targets) == set(hs5.HELD_OUT_SCENARIOS_5)
    assert set(SETS["set-6"].targets) == set(hs6.HELD_OUT_SCENARIOS_6)
    assert set(SETS["set-7"].targets) == set(hs7.HELD_OUT_SCENARIOS_7)
    sets = [
        set(hs1.HELD_OUT_SCENARIOS),
        set(hs2.HELD_OUT_SCENARIOS_2),
        set(hs3.HELD_OUT_SCENARIOS_3),
        set(hs4.HELD_OUT_SCENARIOS_4),
        set(hs5.HELD_OUT_SCENARIOS_5),
        set(hs6.HELD_OUT_SCENARIOS_6),
        set(hs7.HELD_OUT_SCENARIOS_7),
    ]
    assert sum(len(s) for s in sets) == len(set().union(*sets))  # no two sets share a name
    assert not set().union(*sets) & set(SCENARIOS)


@pytest.mark.parametrize("which", list(SETS))
def test_each_scenario_declares_its_criteria_and_why(which: str) -> None:
    ss = SETS[which]
    assert 4 <= len(ss.targets) <= ss.most
    assert set(ss.expectations) == set(ss.targets)
    for name, e in ss.expectations.items():
        assert {"not_worse", "no_hot", "moves"} <= set(e.criteria) <= CRITERIA_KEYS, name
        assert e.description and e.why, name


@pytest.mark.parametrize("which", list(SETS))
def test_unknown_names_and_cadences_are_refused(which: str) -> None:
    ss = SETS[which]
    first = next(iter(ss.targets))
    other = next(iter(SETS["set-2" if which == "set-1" else "set-1"].targets))
    for unknown in ("steady-with-noise", other):  # a tuned-on scenario, the other set's
        with pytest.raises(KeyError, match=f"known: {first}"):
            ss.build(unknown, 1)
    with pytest.raises(ValueError, match="unknown cadence"):
        ss.build(first, 1, cadence="hourly")
    with pytest.raises(KeyError):
        ss.build(first, 1, load_model="no-such-model")


@pytest.mark.parametrize("model", list(LOAD_MODELS))
@pytest.mark.parametrize(("which", "name"), CASES)
def test_builds_at_its_load_and_is_deterministic(which: str, name: str, model: str) -> None:
    ss = SETS[which]
    for cadence in hs1.CADENCES:
        run = ss.build(name, 1, load_model=model, rate_noise=0.03, cadence=cadence)
        assert run.name == name and run.model.load_model.name == model
        assert run.model.ideal_usage() == pytest.approx(ss.targets[name], rel=1e-4)
        if ss.balanced:
            assert max(run.model.true_usage().values()) < ss.targets[name] * 1.1
        again = ss.build(name, 1, load_model=model, rate_noise=0.03, cadence=cadence)
        assert again.model.owners == run.model.owners
        assert again.model.bundle_stats() == run.model.bundle_stats()
        for m in (run.model, again.model):
            m.advance(30)
        assert again.model.bundle_stats() == run.model.bundle_stats()
        assert again.model.reported_stats() == run.model.reported_stats()
        assert again.model.true_usage() == run.model.true_usage()
    other = ss.build(name, 2, load_model=model)
    assert other.model.bundle_stats() != ss.build(name, 1, load_model=model).model.bundle_stats()
