"""Load models, measurement noise, cadences and the no-action baseline of the closed-loop model."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pulsar_rebalance.core.pulsar.bundles import NamespaceBundles
from pulsar_rebalance.core.pulsar.bundles import topic_hash as core_topic_hash
from pulsar_rebalance.simulator.closed_loop import LoopResult, execute_plan, run_closed_loop
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Event, Topic
from pulsar_rebalance.simulator.load_models import LOAD_MODELS, Load, get_load_model
from pulsar_rebalance.simulator.scenarios import build

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def _model(n_topics: int = 60, brokers: int = 3, bundles: int = 6, fanout: float = 1.0, **kw: Any) -> ClusterModel:
    ns = "t/ns"
    topics = [
        Topic(
            f"persistent://t/ns/topic-{i}", ns, core_topic_hash(f"persistent://t/ns/topic-{i}"), 50.0 + i, fanout=fanout
        )
        for i in range(n_topics)
    ]
    nb = NamespaceBundles.with_num_bundles(bundles)
    owners = {f"{ns}/{r.name}": f"b{i % brokers}:8080" for i, r in enumerate(nb.ranges)}
    return ClusterModel(
        brokers=[Broker(f"b{i}:8080") for i in range(brokers)], namespaces={ns: nb}, topics=topics, owners=owners, **kw
    )


def _bundle(msg_in: float, fanout: float, size: float = 1024.0) -> dict[str, float]:
    return {
        "msgRateIn": msg_in,
        "msgRateOut": msg_in * fanout,
        "msgThroughputIn": msg_in * size,
        "msgThroughputOut": msg_in * fanout * size,
    }


def _cpu(model: str, stats: list[dict[str, float]], broker: Broker | None = None) -> float:
    lm = get_load_model(model)
    return lm.usage(broker or Broker("x"), Load.of(stats))["cpu"]["usage"]


# ---------------------------------------------------------------- the models


def test_every_model_is_registered_by_name() -> None:
    assert {"linear", "in-out-fanout", "convex-cpu", "nic-bound", "heterogeneous-capacity"} <= set(LOAD_MODELS)
    assert get_load_model(None).name == "linear"
    for name in LOAD_MODELS:
        assert get_load_model(name).name == name
    with pytest.raises(KeyError, match="known: linear"):
        get_load_model("quadratic")
    with pytest.raises(KeyError, match="unknown load model"):
        build("steady-with-noise", 1, load_model="quadratic")


def test_linear_is_the_original_arithmetic_exactly() -> None:
    stats = [_bundle(1234.5, 2.0, 700.0), _bundle(99.0, 1.0, 3000.0)]
    rate = thr = 0.0
    for s in stats:
        rate += s["msgRateIn"] + s["msgRateOut"]
        thr_in = s["msgThroughputIn"]
        thr += thr_in + s["msgThroughputOut"]
    expected = (
        10.0
        + 100.0 / 40000.0 * rate
        + 100.0 / (200.0 * MIB) * (sum(s["msgThroughputIn"] for s in stats) + sum(s["msgThroughputOut"] for s in stats))
    )
    assert _cpu("linear", stats) == expected
    # a scenario built without a load model is the linear one, number for number
    a, b = build("one-hot-broker", 2), build("one-hot-broker", 2, load_model="linear")
    assert a.model.load_reports() == b.model.load_reports()
    assert a.model.ideal_usage() == b.model.ideal_usage() and a.model.floor_usage() == b.model.floor_usage()
    assert a.model.brokers["broker-0:8080"].nic_mbps == 1000.0 and a.model.brokers["broker-0:8080"].cores == 8.0


def test_convex_cpu_grows_faster_than_linear_near_saturation() -> None:
    broker = Broker("x")  # 8 cores: limit 800 %
    ratios = []
    for msg_in in (2_000.0, 20_000.0, 60_000.0, 120_000.0):
        stats = [_bundle(msg_in, 1.0, 100.0)]
        lin, convex = _cpu("linear", stats, broker), _cpu("convex-cpu", stats, broker)
        assert convex > lin
        ratios.append(convex / lin)
    assert ratios == sorted(ratios) and ratios[-1] > 1.5 and ratios[0] < 1.01
    # overloaded: above 100 % like a real report, and finite however far above
    huge = [_bundle(10_000_000.0, 1.0, 100.0)]
    reported = _cpu("convex-cpu", huge, broker)
    assert broker.cpu_limit < reported < float("inf")
    # the ideal of a convex model: the same linear share on every broker, through the curve
    m = build("steady-with-noise", 1, load_model="convex-cpu").model
    lm = m.load_model
    stats = m.bundle_stats()
    live = [m.brokers[b] for b in m.live_brokers()]
    share = (lm.cpu(Load.of(stats.values())) + 10.0 * (len(live) - 1)) / sum(b.cpu_limit for b in live)
    assert m.ideal_usage() == pytest.approx(lm.cpu_curve(share)) and lm.cpu_curve(share) > share
    assert m.ideal_usage() == pytest.approx(0.5, abs=1e-6)  # calibrated under the model


def test_in_out_fanout_charges_dispatch_three_times_publish() -> None:
    fanned = [_bundle(1000.0, 3.0)]
    assert _cpu("in-out-fanout", fanned) > _cpu("linear", fanned)  # a 3x fan-out bundle costs more
    publish_only = [_bundle(1000.0, 0.0)]
    assert _cpu("in-out-fanout", publish_only) < _cpu("linear", publish_only)
    base = _cpu("in-out-fanout", [])
    one_out = _cpu("in-out-fanout", [{**_bundle(0.0, 0.0), "msgRateOut": 1000.0}]) - base
    one_in = _cpu("in-out-fanout", [{**_bundle(0.0, 0.0), "msgRateIn": 1000.0}]) - base
    assert one_out == pytest.approx(3 * one_in)
    # calibrated: a typical bundle (fan-out 1.6) costs per message what it costs under linear
    typical = [{**_bundle(1000.0, 1.6), "msgThroughputIn": 0.0, "msgThroughputOut": 0.0}]
    assert _cpu("in-out-fanout", typical) == pytest.approx(_cpu("linear", typical))
    # and its brokers are CPU-bound (10 Gbit/s NICs): CPU is what binds on a calibrated scenario
    m = build("steady-with-noise", 1, load_model="in-out-fanout").model
    rep = m.load_reports()
    for r in rep.values():
        assert r["cpu"]["usage"] / r["cpu"]["limit"] > r["bandwidthOut"]["usage"] / r["bandwidthOut"]["limit"]


def test_nic_bound_makes_bandwidth_the_binding_resource() -> None:
    m = build("steady-with-noise", 1, load_model="nic-bound").model
    for r in m.load_reports().values():
        assert r["bandwidthOut"]["limit"] == pytest.approx(0.4 * 1000 * 1024)
        nic = max(
            r["bandwidthIn"]["usage"] / r["bandwidthIn"]["limit"],
            r["bandwidthOut"]["usage"] / r["bandwidthOut"]["limit"],
        )
        assert nic > 2 * r["cpu"]["usage"] / r["cpu"]["limit"]
    assert m.ideal_usage() == pytest.approx(0.5)


def test_heterogeneous_capacity_gives_different_reported_limits_per_seed() -> None:
    m = build("steady-with-noise", 1, load_model="heterogeneous-capacity").model
    limits = {b: (r["cpu"]["limit"], r["bandwidthIn"]["limit"]) for b, r in m.load_reports().items()}
    assert {c for c, _ in limits.values()} <= {400.0, 800.0, 1600.0}
    assert len({c for c, _ in limits.values()}) >= 2
    for cpu, nic in limits.values():
        assert nic == pytest.approx(cpu / 800.0 * 1000 * 1024)  # NIC scaled with the cores
    again = build("steady-with-noise", 1, load_model="heterogeneous-capacity").model
    assert {b: (x.cores, x.nic_mbps) for b, x in again.brokers.items()} == {
        b: (x.cores, x.nic_mbps) for b, x in m.brokers.items()
    }
    # placed under the model: the start is balanced per capacity (worst broker near the ideal)
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.1
    # a broker that joins later gets its limits from the model too
    j = _model(load_model="heterogeneous-capacity", seed=5, events=[Event(1, "join", broker="new:8080")])
    j.advance()
    assert j.brokers["new:8080"].cores in (4.0, 8.0, 16.0)


# ---------------------------------------------------------------- noise


def test_rate_noise_changes_reported_stats_but_not_true_usage() -> None:
    clean = _model(seed=3)
    noisy = _model(seed=3, rate_noise=0.1)
    stats = noisy.bundle_stats()
    assert stats == clean.bundle_stats()
    reported = noisy.reported_stats(stats)
    assert reported != stats
    assert all(reported[b]["topics"] == s["topics"] for b, s in stats.items())
    assert noisy.true_usage() == clean.true_usage() and noisy.ideal_usage() == clean.ideal_usage()
    reports = noisy.load_reports(stats, reported)
    clean_reports = clean.load_reports()
    for b, r in reports.items():
        assert r["lastStats"] == {k: reported[k] for k in r["bundles"]}
        for res in ("cpu", "bandwidthIn", "bandwidthOut"):  # usage is measured, not summed from the noisy rates
            assert r[res] == clean_reports[b][res]
    bundle = next(iter(stats))
    assert noisy.topic_rates(bundle) != noisy.topic_rates(bundle, reported=False)
    # deterministic per seed; the traffic itself does not depend on the rate noise
    again = _model(seed=3, rate_noise=0.1)
    assert again.reported_stats(again.bundle_stats()) == reported
    for m in (clean, noisy):
        m.drift_sigma = 0.05
        m.advance(3)
    assert clean.bundle_stats() == noisy.bundle_stats()


def test_build_takes_noise_levels() -> None:
    run = build("steady-with-noise", 1, noise=0.07, rate_noise=0.04)
    assert run.model.noise == 0.07 and run.model.rate_noise == 0.04
    assert build("steady-with-noise", 1).model.noise == 0.03


# ---------------------------------------------------------------- clock, cadences, baseline


def test_advance_in_one_step_runs_the_events_in_between() -> None:
    m = _model(
        brokers=3,
        events=[Event(2, "restart", broker="b1:8080", delay=2), Event(10, "restart", broker="b2:8080", delay=2)],
    )
    m.advance(7)
    assert m.cycle == 7 and m.now_ms == 1_700_000_000_000 + 7 * 60_000
    assert m.brokers["b1:8080"].alive and "b1:8080" not in m.owners.values()  # left at 2, back (empty) at 4
    m.advance(4)
    assert not m.brokers["b2:8080"].alive  # restarted at 10, back at 12
    m.advance(1)
    assert m.brokers["b2:8080"].alive
    # the drift's n-step draw: one draw per topic, deterministic
    a, b = _model(seed=1, drift_sigma=0.05), _model(seed=1, drift_sigma=0.05)
    a.advance(30), b.advance(30)
    assert [t.drift for t in a.topics] == [t.drift for t in b.topics] != [1.0] * len(a.topics)


def test_no_action_makes_no_move() -> None:
    r = run_closed_loop(build("one-hot-broker", 1), "no-action", decisions=5)
    assert r.moves == 0 and r.splits == 0 and len(r.max_usage) == 5 and not r.warnings
    # brokers leaving are still re-placed by lookup (the model's own doing, not a strategy's move)
    run = build("scale-down", 1)
    r = run_closed_loop(run, "no-action", decisions=4)
    assert r.moves == 0 and "broker-8:8080" not in run.model.owners.values()


def test_dag_cadence_decides_hourly_and_applies_after_the_delay() -> None:
    run = build("one-hot-broker", 1)
    start = run.model.now_ms
    r = run_closed_loop(run, "GlobalPlanner", cadence="dag", decisions=2, approval_delay_min=15)
    assert r.sim_minutes == 120 and r.cadence == "dag"
    assert [t - start for t in r.applied_ms] == [15 * 60_000, 75 * 60_000]
    assert r.moves_per_cycle[0] > 0 and r.summary()["moves_per_day"] == pytest.approx(r.moves * 12)
    assert r.max_usage[1] < r.max_usage[0]  # the plan was applied
    minute = run_closed_loop(build("one-hot-broker", 1), "GlobalPlanner", decisions=2)
    assert [t - start for t in minute.applied_ms] == [0, 60_000] and minute.sim_minutes == 2
    with pytest.raises(ValueError, match="cadence"):
        run_closed_loop(build("one-hot-broker", 1), "GlobalPlanner", cadence="weekly")


def test_the_executor_skips_an_unload_whose_source_lost_the_bundle_or_whose_load_drifted() -> None:
    m = _model(brokers=3, bundles=6)
    planned = copy.deepcopy(m.bundle_stats())
    owned = sorted(b for b, o in m.owners.items() if o == "b0:8080")
    lost, drifted, fine = owned[0], owned[1], sorted(b for b, o in m.owners.items() if o == "b1:8080")[0]
    m.owners[lost] = "b2:8080"  # moved by someone else between deciding and applying
    for t in m.topics_of(drifted):
        t.burst = 3.0  # its msg rate tripled: more than drift_tolerance 0.5
    m._update_rates()
    plan = {
        "splits": [],
        "unloads": [
            {"broker": "b0:8080", "bundle": lost, "destination": "b1:8080"},
            {"broker": "b0:8080", "bundle": drifted, "destination": "b1:8080"},
            {"broker": "b1:8080", "bundle": fine, "destination": "b2:8080"},
        ],
    }
    result = LoopResult("x", 0, "GlobalPlanner")
    res = execute_plan(m, plan, planned, 0.5, None, result)
    assert res.moved == [fine] and result.skipped == 2
    assert m.owners[lost] == "b2:8080" and m.owners[drifted] == "b0:8080" and m.owners[fine] == "b2:8080"
    # without the drift check the drifted one moves; max_unloads_per_run caps the rest
    m2 = _model(brokers=3, bundles=6)
    a, b = sorted(x for x, o in m2.owners.items() if o == "b0:8080")
    plan2 = {
        "unloads": [
            {"broker": "b0:8080", "bundle": a, "destination": "b1:8080"},
            {"broker": "b0:8080", "bundle": b, "destination": "b1:8080"},
        ]
    }
    result2 = LoopResult("x", 0, "GlobalPlanner")
    res2 = execute_plan(m2, plan2, m2.bundle_stats(), None, 1, result2)
    assert res2.moved == [a] and result2.skipped == 1


def test_every_strategy_gets_the_split_algorithm_of_its_config() -> None:
    run = build("hot-bundle-needs-split", 1)
    run_closed_loop(run, "ThresholdShedder+flowOrQps", decisions=1)
    assert run.model.config.default_namespace_bundle_split_algorithm == "flow_or_qps_equally_divide"
    run = build("hot-bundle-needs-split", 1)
    r = run_closed_loop(run, "ThresholdShedder", decisions=1)
    assert run.model.config.default_namespace_bundle_split_algorithm == "range_equally_divide" and r.splits == 1


# ---------------------------------------------------------------- the benchmark's verdict


def _bench() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import figures

    return figures.load_script("benchmarks/bench_balance.py")


def _row(seed: int, final: float, worst: float | None = None, moves: int = 0, minutes: int = 60, **kw: Any) -> dict:
    return {
        "seed": seed,
        "final_max": final,
        "worst_max": final if worst is None else worst,
        "moves": moves,
        "moves_per_day": moves * 1440 / minutes,
        "ideal": 0.5,
        "noise": kw.get("noise", 0.02),
        "rate_noise": kw.get("rate_noise", 0.0),
    }


def test_the_verdict_flags_each_broken_criterion() -> None:
    bench = _bench()

    def failed(scenario: str, by: dict) -> set[str]:
        return {c["key"] for c in bench.done_when(scenario, by) if c["ok"] is False}

    good = {
        "GlobalPlanner": [_row(1, 0.55, moves=2)],
        "no-action": [_row(1, 0.70)],
        "ThresholdShedder": [_row(1, 0.60, moves=2)],
    }
    assert failed("one-hot-broker", good) == set()
    # worse than doing nothing (beyond the half-point tie)
    assert failed("one-hot-broker", {**good, "GlobalPlanner": [_row(1, 0.71, moves=2)]}) == {"not_worse"}
    assert failed("one-hot-broker", {**good, "GlobalPlanner": [_row(1, 0.704, moves=2)]}) == set()  # a tie
    # a broker above 85 % where doing nothing stays below
    assert "no_hot" in failed("one-hot-broker", {**good, "GlobalPlanner": [_row(1, 0.55, worst=0.9, moves=2)]})
    assert "no_hot" not in failed(
        "one-hot-broker",
        {**good, "GlobalPlanner": [_row(1, 0.55, worst=0.9, moves=2)], "no-action": [_row(1, 0.7, worst=0.95)]},
    )
    # moves at steady state (noise <= 5 %); not checked above 5 %
    steady = {k: [_row(1, 0.5)] for k in good}
    assert failed("steady-with-noise", steady) == set()
    assert failed("steady-with-noise", {**steady, "GlobalPlanner": [_row(1, 0.5, moves=1)]}) == {"steady"}
    unbalanced = {**steady, "no-action": [_row(1, 0.69)], "GlobalPlanner": [_row(1, 0.57, moves=4)]}
    (cell,) = [c for c in bench.done_when("steady-with-noise", unbalanced) if c["key"] == "steady"]
    assert cell["detail"] == "seed 1: 4 moves (doing nothing ends +0.190 from the ideal, the planner +0.070)"
    loud = {k: [_row(1, 0.5, noise=0.08)] for k in good} | {"GlobalPlanner": [_row(1, 0.5, moves=1, noise=0.08)]}
    assert failed("steady-with-noise", loud) == set()
    # periodic jitter: <= 2 moves per simulated day (3 moves in 2 days is fine, 1 move in an hour is not)
    jitter = {k: [_row(1, 0.5)] for k in good}
    assert failed("periodic-jitter", {**jitter, "GlobalPlanner": [_row(1, 0.5, moves=3, minutes=2880)]}) == set()
    assert failed("periodic-jitter", {**jitter, "GlobalPlanner": [_row(1, 0.5, moves=1, minutes=60)]}) == {"jitter"}
    # its detail tells one relief from churn: in how many plans the moves came, and where the run ended
    over = {
        **jitter,
        "no-action": [_row(1, 0.62)],
        "GlobalPlanner": [{**_row(1, 0.55, moves=6, minutes=2880), "plans": 1}],
    }
    (cell,) = [c for c in bench.done_when("periodic-jitter", over) if c["key"] == "jitter"]
    assert (cell["ok"], cell["detail"]) == (False, "seed 1: 6 moves = 3.0/day in 1 plan, ending 0.070 below no-action")
    # lower than the closest Pulsar strategy, but with more than 1.5x its moves
    assert failed("one-hot-broker", {**good, "GlobalPlanner": [_row(1, 0.55, moves=4)]}) == {"moves"}
    (moves,) = [
        c
        for c in bench.done_when("one-hot-broker", {**good, "GlobalPlanner": [_row(1, 0.55, moves=4)]})
        if c["key"] == "moves"
    ]
    # the detail shows what each bought with its moves: how far below doing nothing it ended
    assert (
        moves["detail"]
        == "4.0 moves vs ThresholdShedder 2.0 (final 0.550 < 0.600; below no-action's 0.700 by 0.150 vs 0.100)"
    )
    assert failed("one-hot-broker", {**good, "GlobalPlanner": [_row(1, 0.55, moves=3)]}) == set()
    # missing baselines are reported as not checked, not as passing or failing
    crit = bench.done_when("one-hot-broker", {"GlobalPlanner": [_row(1, 0.55)]})
    assert {c["key"] for c in crit if c["ok"] is None and "not run" in c["detail"]} == {"not_worse", "no_hot", "moves"}
    # the worst case is where the planner ends furthest above doing nothing
    results = {
        "linear": {"minute": {"a": good, "b": {**good, "GlobalPlanner": [_row(1, 0.75)]}}},
        "convex-cpu": {"dag": {"a": {**good, "GlobalPlanner": [_row(1, 0.72)]}}},
    }
    lines = bench.verdict_lines(results)
    assert any(line.startswith("worst case: b / linear / minute") for line in lines)
    assert any(line.startswith("best case:  a / linear / minute") for line in lines)
    assert any(line.startswith("worst transient: b / linear / minute") for line in lines)
    assert sum(line.startswith("FAIL") for line in lines) == 2
    # means over seeds can hide one seed that ended worse: the single worst run is named with its seed
    hidden = {**good, "GlobalPlanner": [_row(1, 0.72), _row(2, 0.50)], "no-action": [_row(1, 0.70), _row(2, 0.70)]}
    assert bench.worst_run({"linear": {"dag": {"a": good, "c": hidden}}}) == {
        "model": "linear",
        "cadence": "dag",
        "scenario": "c",
        "seed": 1,
        "planner": 0.72,
        "no_action": 0.70,
        "delta": pytest.approx(0.02),
    }
    assert any(
        line.startswith("worst single run: c / linear / dag, seed 1")
        for line in bench.verdict_lines({"linear": {"dag": {"c": hidden}}})
    )


def test_quick_mode_prints_one_line_per_run_and_the_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    argv = ["--quick", "--scenarios", "steady-with-noise", "--models", "nic-bound", "--cadences", "dag"]
    assert bench.main([*argv, "--strategies", "GlobalPlanner", "no-action", "--rate-noise", "0.02"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("steady-with-noise")]
    assert [r.split()[3] for r in rows] == ["GlobalPlanner", "no-action"]
    assert all(r.split()[1:3] == ["nic-bound", "dag"] for r in rows)
    verdicts = [line for line in out if line.startswith(("PASS", "FAIL"))]
    assert len(verdicts) == 1 and "steady-with-noise / nic-bound / dag" in verdicts[0]
    assert any(line.startswith("worst case:") for line in out)
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--models", "quadratic"])
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--noise", "0.5"])


def test_the_report_and_headline_render_a_format_2_document() -> None:
    bench = _bench()
    good = {
        "GlobalPlanner": [_row(1, 0.55, moves=2)],
        "no-action": [_row(1, 0.70)],
        "ThresholdShedder": [_row(1, 0.6, moves=2)],
    }
    doc = {
        "format": 2,
        "meta": {},
        "seeds": [1],
        "large_seeds": [1],
        "noise": None,
        "rate_noise": 0.0,
        "approval_delay_min": 15,
        "elapsed_s": 1,
        "results": {"nic-bound": {"dag": {"one-hot-broker": good, "steady-with-noise": good}}},
    }
    head = bench.BLOCKS["balance-headline"](doc)
    assert "**Worst case**" in head and "**Best case**" in head and "| nic-bound | dag | 1 of 2 |" in head
    assert (
        "**Worst single run** (one seed, where means hide it): " in head
        and "/ nic-bound / dag, seed 1: planner 0.550" in head
    )
    report = bench.BLOCKS["balance-report"](doc)
    assert "## nic-bound, dag cadence" in report and "balance/nic-bound-dag.png" in report
    assert "* steady-with-noise: steady: seed 1: 2 moves" in report


@pytest.mark.parametrize("load_model", sorted(LOAD_MODELS))
def test_the_planner_leaves_a_balanced_noisy_cluster_alone_on_every_load_model(load_model: str) -> None:
    # an hour of one-minute decisions on a balanced cluster with 3 % CPU noise and 3 % rate noise: a load
    # report is one sample, so the planner's smoothed view (not one noisy reading) decides; before it
    # smoothed, the convex CPU made it move 17 bundles and end 3.5 points above doing nothing
    for seed in (1, 2):
        r = run_closed_loop(build("steady-with-noise", seed, load_model=load_model, rate_noise=0.03), "GlobalPlanner")
        assert r.moves == 0 and r.splits == 0, (seed, r.summary())


def test_the_safety_table_counts_every_strategy_against_doing_nothing() -> None:
    bench = _bench()
    cell = {
        "GlobalPlanner": [_row(1, 0.55, moves=2)],
        "no-action": [_row(1, 0.70, worst=0.80)],
        "AvgShedder": [_row(1, 0.72, worst=0.90, moves=9)],  # worse than nothing, and a broker above 85 %
    }
    other = {**cell, "AvgShedder": [_row(1, 0.60, moves=1)]}
    results = {"linear": {"minute": {"one-hot-broker": cell, "scale-up": other}}}
    rows = {r["strategy"]: r for r in bench.safety(results)}
    assert set(rows) == {"GlobalPlanner", "AvgShedder"}  # no-action is the baseline, not a row
    assert (rows["AvgShedder"]["cells"], rows["AvgShedder"]["worse"], rows["AvgShedder"]["hot"]) == (2, 1, 1)
    assert rows["AvgShedder"]["excess"][1] == "one-hot-broker / linear / minute"
    assert rows["AvgShedder"]["moves"] == 10
    assert (rows["GlobalPlanner"]["worse"], rows["GlobalPlanner"]["hot"]) == (0, 0)
    table = bench.safety_table(results)
    assert table[2].startswith("| **GlobalPlanner** | 2 | 0 | 0 |")  # the safest first
    assert table[3].startswith("| AvgShedder | 2 | 1 | 1 | +0.020 (one-hot-broker / linear / minute)")


def test_the_day_of_jitter_verdict_counts_moves_per_day_and_compares_with_doing_nothing_per_seed() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import figures

    bench = figures.load_script("benchmarks/bench_jitter_day.py")

    def row(model: str, strategy: str, seed: int, moves: int, final: float, worst: float) -> dict[str, Any]:
        return {
            "model": model,
            "strategy": strategy,
            "seed": seed,
            "moves": moves,
            "moves_per_day": float(moves),
            "final_max": final,
            "worst_max": worst,
            "ideal": 0.5,
            "seconds": 1.0,
        }

    doc = {
        "meta": {},
        "rate_noise": 0.03,
        "held_out": ["tls-crypto"],
        "seconds": 1,
        "rows": [
            row("linear", "GlobalPlanner", 1, 2, 0.53, 0.60),
            row("linear", "no-action", 1, 0, 0.55, 0.62),
            row("tls-crypto", "GlobalPlanner", 1, 7, 0.56, 0.70),
            row("tls-crypto", "no-action", 1, 0, 0.55, 0.65),
        ],
    }
    assert bench.verdict(doc).startswith("**not met** in 1 of 2 runs: tls-crypto seed 1: 7 moves")
    head = bench.render_headline(doc)
    assert "ends above doing nothing (by more than half a point) in 1 run(s): tls-crypto seed 1" in head
    assert "above doing nothing's (by more than half a point) in 1 of 2 runs: tls-crypto seed 1" in head
    assert "| tls-crypto (held out) | 7 / 0.560 | 0 / 0.550 |" in bench.render(doc)
    doc["rows"][2] = row("tls-crypto", "GlobalPlanner", 1, 2, 0.55, 0.65)
    assert bench.verdict(doc).startswith("**met** in all 2 day-long runs")
    assert "in no run" in bench.render_headline(doc) and "in none of 2 runs" in bench.render_headline(doc)


def _stored_run(bench: Any) -> dict[str, Any]:
    """A stored balance run as ``--merge`` finds it: one load model and cadence, two scenarios, three strategies."""
    by = {
        "GlobalPlanner": [_row(1, 0.60, moves=4)],
        "no-action": [_row(1, 0.70)],
        "ThresholdShedder": [_row(1, 0.65, moves=2)],
    }
    series = {st: [0.7, 0.65] for st in by}
    return {
        "format": 2,
        "meta": {"date": "2026-11-01 00:00 UTC", "command": "python benchmarks/bench_balance.py --rate-noise 0.03"},
        "seeds": [1],
        "large_seeds": [1],
        "noise": None,
        "rate_noise": 0.03,
        "approval_delay_min": 15,
        "drift_tolerance": 0.5,
        "max_unloads_per_run": None,
        "guard": True,
        "elapsed_s": 100,
        "results": {"linear": {"dag": {sc: copy.deepcopy(by) for sc in ("one-hot-broker", "scale-up")}}},
        "series": {
            "linear": {
                "dag": {sc: {"ideal": [0.5, 0.5], "max_usage": dict(series)} for sc in ("one-hot-broker", "scale-up")}
            }
        },
        "sources": bench.source_digests(),
    }


def _params(stored: dict[str, Any]) -> dict[str, Any]:
    keys = ("seeds", "large_seeds", "noise", "rate_noise", "approval_delay_min", "drift_tolerance")
    return {k: stored[k] for k in (*keys, "max_unloads_per_run", "guard")}


def test_merge_refuses_a_run_that_predates_it_other_flags_or_changed_sources_outside_the_planner() -> None:
    bench = _bench()
    stored = _stored_run(bench)
    params, digests = _params(stored), bench.source_digests()
    assert bench.merge_problems(stored, params, ["linear"], digests) == []
    # a change to the planner's own code is what --merge is for
    planner_file = next(f for f in digests if f.startswith("pulsar_rebalance/core/planner/"))
    assert bench.merge_problems(stored, params, ["linear"], {**digests, planner_file: "0" * 64}) == []
    # anything else the runs import would leave the other strategies' stored results stale
    (problem,) = bench.merge_problems(stored, params, ["linear"], {**digests, "pulsar_rebalance/core/guard.py": "0"})
    assert "outside pulsar_rebalance/core/planner/" in problem and "pulsar_rebalance/core/guard.py" in problem
    # a file added since (nothing the stored run had imports it) is no reason; one removed is
    assert bench.merge_problems(stored, params, ["linear"], {**digests, "pulsar_rebalance/simulator/new.py": "1"}) == []
    # a module nothing the runs execute can import is no reason either: the random load models (only their
    # own benchmark imports them), the Airflow pipeline (the closed loop calls the core, not the pipeline)
    random_models = "pulsar_rebalance/simulator/random_models.py"
    unreferenced = bench.unreferenced_sources()
    assert {random_models, "pulsar_rebalance/pipeline/detect.py", "pulsar_rebalance/store/plans.py"} <= unreferenced
    # nor the simulator's HTTP side: the closed loop shares a package with it, whose __init__ imports neither
    assert {"pulsar_rebalance/simulator/cluster.py", "pulsar_rebalance/simulator/server.py"} <= unreferenced
    # imported directly or through a package's __init__ (the shedders, which the registry also names)
    for used in (
        "core/guard.py",
        "core/__init__.py",
        "simulator/__init__.py",
        "simulator/dynamics.py",
        "core/pulsar/shedders/avg_shedder.py",
    ):
        assert f"pulsar_rebalance/{used}" not in unreferenced, used
    assert random_models not in bench.unreferenced_sources(Path(bench.__file__).parent / "bench_random_models.py")
    changed = {**digests, random_models: "2"}
    (problem,) = bench.merge_problems(stored, params, ["linear"], changed)
    assert random_models in problem
    assert bench.merge_problems(stored, params, ["linear"], changed, bench.unreferenced_sources()) == []
    gone = {f: d for f, d in digests.items() if f != "pulsar_rebalance/core/guard.py"}
    (problem,) = bench.merge_problems(stored, params, ["linear"], gone)
    assert "pulsar_rebalance/core/guard.py" in problem
    (problem,) = bench.merge_problems(stored, {**params, "rate_noise": 0.0}, ["linear"], digests)
    assert problem.startswith("rate_noise: the stored run used 0.03, this command 0.0")
    (problem,) = bench.merge_problems(stored, params, ["linear", "convex-cpu"], digests)
    assert problem.startswith("load models:")
    old = {k: v for k, v in stored.items() if k not in ("series", "sources")}
    (problem,) = bench.merge_problems(old, params, ["linear"], digests)
    assert "predates --merge" in problem and "run the full benchmark once" in problem


def test_merge_replaces_the_planners_cells_and_lines_keeps_everyone_elses_and_says_so() -> None:
    bench = _bench()
    stored = _stored_run(bench)
    new_rows = {sc: {"GlobalPlanner": [_row(1, 0.55, moves=3)]} for sc in ("one-hot-broker", "scale-up")}
    new_series = {
        "linear": {"dag": {sc: {"ideal": [0.5, 0.5], "max_usage": {"GlobalPlanner": [0.7, 0.55]}} for sc in new_rows}}
    }
    meta = {"date": "2026-11-02 00:00 UTC", "command": "python benchmarks/bench_balance.py --merge"}
    doc = bench.merge_doc(
        stored, {"linear": {"dag": new_rows}}, new_series, ["GlobalPlanner"], 12.3, meta, {"a.py": "1"}
    )
    for sc in new_rows:
        cell = doc["results"]["linear"]["dag"][sc]
        assert cell["GlobalPlanner"][0]["final_max"] == 0.55
        assert cell["ThresholdShedder"] == stored["results"]["linear"]["dag"][sc]["ThresholdShedder"]
        assert cell["no-action"] == stored["results"]["linear"]["dag"][sc]["no-action"]
        lines = doc["series"]["linear"]["dag"][sc]["max_usage"]
        assert lines["GlobalPlanner"] == [0.7, 0.55] and lines["ThresholdShedder"] == [0.7, 0.65]
    assert stored["results"]["linear"]["dag"]["scale-up"]["GlobalPlanner"][0]["final_max"] == 0.60  # not mutated
    assert doc["sources"] == {"a.py": "1"}  # the sources this run imported
    assert doc["merged"] == {
        "strategies": ["GlobalPlanner"],
        "elapsed_s": 12,
        "base": {"date": "2026-11-01 00:00 UTC", "command": stored["meta"]["command"], "elapsed_s": 100},
    }
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import figures

    line = figures.provenance({**doc["meta"], "machine": {"cores": 2}, "load_average": {"text": "1.0"}})
    assert "GlobalPlanner re-run by this command (12 s) and merged" in line
    assert "from the full run of 2026-11-01 00:00 UTC (`python benchmarks/bench_balance.py --rate-noise 0.03`)" in line
    # merged again later: the base stays the full run
    again = bench.merge_doc(doc, {"linear": {"dag": new_rows}}, new_series, ["GlobalPlanner"], 5, meta, {})
    assert again["merged"]["base"] == doc["merged"]["base"]
    with pytest.raises(ValueError, match="does not cover the stored run's cells"):
        bench.merge_doc(
            stored, {"linear": {"dag": {"scale-up": new_rows["scale-up"]}}}, new_series, ["GlobalPlanner"], 1, meta, {}
        )


def test_merge_on_the_command_line_refuses_before_running_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _bench()
    stored = _stored_run(bench)
    path = tmp_path / "balance.json"
    path.write_text(json.dumps({k: v for k, v in stored.items() if k != "series"}), encoding="utf-8")
    monkeypatch.setattr(bench, "JSON", path)
    assert bench.main(["--merge", "--seeds", "1", "--rate-noise", "0.03"]) == 2
    err = capsys.readouterr().err
    assert f"cannot merge into {path}:" in err and "predates --merge" in err
    monkeypatch.setattr(bench, "JSON", tmp_path / "missing.json")
    assert bench.main(["--merge"]) == 2
    assert "does not exist; run the full benchmark first" in capsys.readouterr().err
    for extra in (["--models", "linear"], ["--strategies", "ThresholdShedder"], ["--quick"]):
        with pytest.raises(SystemExit):
            bench.main(["--merge", *extra])


@pytest.mark.slow
def test_a_full_run_stores_what_merge_needs_and_merge_rewrites_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the whole write path on a benchmark shrunk to one scenario and one load model (both cadences): a full
    # run writes results, series and source digests; --merge then re-runs the planner only and rewrites the
    # report and the plots from the stored lines of everyone else
    bench = _bench()
    monkeypatch.setattr(bench, "SCENARIOS", {"steady-with-noise": bench.SCENARIOS["steady-with-noise"]})
    monkeypatch.setattr(bench, "LOAD_MODELS", {"linear": bench.LOAD_MODELS["linear"]})
    path = tmp_path / "balance.json"
    report, readme = tmp_path / "balance.md", tmp_path / "README.md"
    for md, name in ((report, "balance-report"), (readme, "balance-headline")):
        md.write_text(f"<!-- {name}:start (written by x from y) -->\nold\n<!-- {name}:end -->\n", encoding="utf-8")
    monkeypatch.setattr(bench, "JSON", path)
    monkeypatch.setattr(bench, "TARGETS", {"balance-report": [report], "balance-headline": [readme]})
    flags = ["--seeds", "1", "--rate-noise", "0.03"]
    assert bench.main([*flags, "--strategies", "GlobalPlanner", "no-action"]) == 0
    full = json.loads(path.read_text(encoding="utf-8"))
    panel = full["series"]["linear"]["minute"]["steady-with-noise"]
    assert set(panel["max_usage"]) == {"GlobalPlanner", "no-action"} and len(panel["ideal"]) == 60
    assert full["sources"] == bench.source_digests() and "merged" not in full
    assert {p.name for p in (tmp_path / "balance").iterdir()} == {"linear-minute.png", "linear-dag.png"}
    for png in (tmp_path / "balance").iterdir():
        png.unlink()
    assert bench.main(["--merge", *flags]) == 0
    merged = json.loads(path.read_text(encoding="utf-8"))
    assert merged["merged"]["strategies"] == ["GlobalPlanner"]
    assert merged["merged"]["base"]["date"] == full["meta"]["date"]
    assert (
        merged["results"]["linear"]["dag"]["steady-with-noise"]["no-action"]
        == (full["results"]["linear"]["dag"]["steady-with-noise"]["no-action"])
    )
    assert merged["series"] == full["series"]  # the same code re-run: the same lines (the model is deterministic)
    assert {p.name for p in (tmp_path / "balance").iterdir()} == {"linear-minute.png", "linear-dag.png"}
    assert "GlobalPlanner re-run by this command" in report.read_text(encoding="utf-8")
    assert "| linear | minute | 1 of 1 |" in readme.read_text(encoding="utf-8")
