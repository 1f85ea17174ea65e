"""The arrival-cost load models (simulator/move_cost.py): an arrival's arithmetic by hand on a hand-built cluster (the
destination charged as documented, back to exactly linear, the source never charged, no arrival at the start, a split
in place no arrival), the scenarios built at their targets, determinism; and benchmarks/bench_move_cost.py's minute
probe and report on a tiny run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pulsar_rebalance.core.pulsar.bundles import NamespaceBundles, bundle_full_name
from pulsar_rebalance.simulator.closed_loop import run_closed_loop
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Event, Topic
from pulsar_rebalance.simulator.load_models import LOAD_MODELS, Load, LoadModel
from pulsar_rebalance.simulator.move_cost import (
    ARRIVAL_COST,
    MOVE_COST_MODELS,
    MOVE_COST_VARIANTS,
    NO_ARRIVAL_COST,
    ArrivalCostModel,
)
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures  # noqa: E402

bench = figures.load_script("benchmarks/bench_move_cost.py")

NS = "tenant/ns"
HALVES = NamespaceBundles.with_num_bundles(2)
LEFT, RIGHT = (bundle_full_name(NS, r.name) for r in HALVES.ranges)
OLD, OTHER, NEW = "old:8080", "other:8080", "new:8080"
MIB = 1024 * 1024
# one topic in LEFT: 1,000 msg/s in of 1 KiB, read by two subscriptions (2,000 msg/s out), one producer
HOT = Topic("persistent://tenant/ns/a", NS, 0x10000000, 1000.0, msg_size=1024.0, fanout=2.0, producers=1)
# a second topic in LEFT past 0x20000000 (a split there separates them), and one in RIGHT
WARM = Topic("persistent://tenant/ns/b", NS, 0x30000000, 400.0, msg_size=2048.0, fanout=1.0, producers=2)
COLD = Topic("persistent://tenant/ns/c", NS, 0x90000000, 300.0, msg_size=512.0, fanout=3.0, producers=1)


def _cluster(
    params: Any = ARRIVAL_COST, topics: tuple[Topic, ...] = (HOT,), events: tuple[Event, ...] = ()
) -> ClusterModel:
    """OLD owns LEFT, OTHER owns RIGHT, NEW owns nothing; no noise, drift or daily swing; the model attached."""
    lm = ArrivalCostModel(params)
    m = ClusterModel(
        brokers=[Broker(OLD), Broker(OTHER), Broker(NEW)],
        namespaces={NS: HALVES},
        topics=[
            Topic(t.name, t.namespace, t.hash, t.base_rate, t.msg_size, t.fanout, producers=t.producers) for t in topics
        ],
        owners={LEFT: OLD, RIGHT: OTHER},
        load_model=lm,
        events=events,
    )
    lm.attach(m)
    return m


def _cpu(m: ClusterModel) -> dict[str, float]:
    return {b: r["cpu"]["usage"] for b, r in m.load_reports().items()}


def _linear_cpu(m: ClusterModel) -> dict[str, float]:
    """What ``linear``'s arithmetic gives each broker for the bundles it owns now."""
    owned: dict[str, list[dict[str, Any]]] = {b: [] for b in m.live_brokers()}
    for bundle, s in m.bundle_stats().items():
        owned[m.owners[bundle]].append(s)
    return {b: LoadModel().cpu(Load.of(stats)) for b, stats in owned.items()}


def _move(m: ClusterModel, bundle: str, source: str, destination: str) -> None:
    res = m.apply({"unloads": [{"bundle": bundle, "broker": source, "destination": destination}]})
    assert res.unloads == 1


def test_an_arrival_charges_its_destination_as_documented_then_exactly_linear() -> None:
    m = _cluster()
    assert _cpu(m) == _linear_cpu(m)  # the first reading: the placement as it is, no arrival
    _move(m, LEFT, OLD, NEW)
    # by hand: HOT dispatches 2,000 msg/s of 1 KiB; 1 topic, 2 subscriptions, 3 clients
    d = 100 / 40000 * 2000 + 100 / (200 * MIB) * 2000 * 1024
    takeover = 100 * (0.025 * 1 + 0.010 * 2 + 0.003 * 3) + 4 * d  # spread over the first 10 s
    cold = [
        1.5 * d * ((60 - 60**2 / 240) - 0),  # (k - 1) d * integral of 1 - s/120 over [0, 60]
        1.5 * d * ((120 - 120**2 / 240) - (60 - 60**2 / 240)),  # ... over [60, 120]
    ]
    expected = [(takeover + cold[0]) / 60, cold[1] / 60, 0.0, 0.0]
    for minute, extra in enumerate(expected, 1):
        m.advance(1)
        cpu, linear = _cpu(m), _linear_cpu(m)
        assert cpu[NEW] == pytest.approx(linear[NEW] + extra, rel=1e-12), minute
        assert cpu[OLD] == linear[OLD] == 10.0  # the source is never charged: its idle base
        assert cpu[OTHER] == linear[OTHER]
    assert cpu[NEW] == linear[NEW]  # exactly linear from the third report on
    assert m.load_model.arrivals == {}  # and the arrival forgotten
    assert expected[0] == pytest.approx(7.212, abs=1e-3) and expected[1] == pytest.approx(2.2412109375)


def test_a_report_averages_its_minute_and_a_later_arrival_is_charged_from_its_own_time() -> None:
    lm = ArrivalCostModel()
    load = Load(3000.0, 1000.0, 2000.0, 1024e3, 2048e3, 1, 1, 2)
    assert lm.arrival_extra(load, 0.0) == 0.0 and lm.arrival_extra(load, -5.0) == 0.0
    # 30 s after the arrival: all of the takeover, half a minute of cold reads, averaged over the minute
    d = lm.dispatch(load)
    assert lm.arrival_extra(load, 30.0) == pytest.approx(
        (lm.takeover_cost(load) + 1.5 * d * (30 - 30**2 / 240)) / 60, rel=1e-12
    )
    assert lm.arrival_extra(load, ARRIVAL_COST.horizon_s) == 0.0 < lm.arrival_extra(load, ARRIVAL_COST.horizon_s - 1)
    # in all, the reports carry the whole cost: the takeover and (k - 1) d D / 2 of cold reads
    total = sum(lm.arrival_extra(load, 60.0 * k) for k in range(1, 5)) * 60
    assert total == pytest.approx(lm.takeover_cost(load) + lm.cold_cost(load), rel=1e-12)
    assert lm.cold_cost(load) == pytest.approx(1.5 * d * 60)


@pytest.mark.parametrize("name", list(MOVE_COST_VARIANTS))
def test_every_variant_charges_its_whole_cost_over_its_reports_and_stops_at_its_horizon(name: str) -> None:
    lm = MOVE_COST_MODELS[name]()
    assert isinstance(lm, ArrivalCostModel) and lm.name == name and lm.NIC_FACTOR == 10.0
    load = Load(3000.0, 1000.0, 2000.0, 1024e3, 2048e3, 4, 3, 5)
    params = MOVE_COST_VARIANTS[name]
    reports = [lm.arrival_extra(load, 60.0 * k) for k in range(1, int(params.horizon_s // 60) + 2)]
    assert sum(reports) * 60 == pytest.approx(lm.takeover_cost(load) + lm.cold_cost(load), rel=1e-12)
    assert reports[-1] == 0.0
    assert all(a >= b for a, b in zip(reports, reports[1:], strict=False))  # the cost only fades
    if params is NO_ARRIVAL_COST:
        assert not any(reports)


def test_a_split_in_place_is_no_arrival_and_a_child_moved_away_is_one() -> None:
    m = _cluster(topics=(HOT, WARM, COLD))
    _cpu(m)
    res = m.apply({"splits": [{"bundle": LEFT, "boundaries": [0x20000000], "unloadChildren": False}]})
    assert res.splits == 1 and res.unloads == 0
    low, high = (bundle_full_name(NS, r.name) for r in m.namespaces[NS].ranges[:2])
    assert m.owners[low] == m.owners[high] == OLD
    m.advance(1)
    assert _cpu(m) == _linear_cpu(m) and m.load_model.arrivals == {}
    _move(m, high, OLD, NEW)  # the child with WARM moves: an arrival of WARM's bundle alone
    m.advance(1)
    cpu, linear = _cpu(m), _linear_cpu(m)
    lm = m.load_model
    warm = Load.of([m.bundle_stats()[high]])
    assert warm.topics == 1 and warm.producers == 2
    assert cpu[NEW] == pytest.approx(linear[NEW] + lm.arrival_extra(warm, 60.0), rel=1e-12)
    assert cpu[OLD] == linear[OLD] and cpu[OTHER] == linear[OTHER]


def test_a_split_of_a_bundle_still_warming_up_keeps_its_arrival_on_both_children() -> None:
    m = _cluster(topics=(HOT, WARM))
    _cpu(m)
    _move(m, LEFT, OLD, NEW)
    m.advance(1)
    first = _cpu(m)[NEW]
    m.apply({"splits": [{"bundle": LEFT, "boundaries": [0x20000000], "unloadChildren": False}]})
    m.advance(1)
    # the children carry their parent's arrival (the same topics, 2 minutes old): the report is the unsplit one's
    twin = _cluster(topics=(HOT, WARM))
    _cpu(twin)
    _move(twin, LEFT, OLD, NEW)
    twin.advance(1)
    assert _cpu(twin)[NEW] == first
    twin.advance(1)
    assert _cpu(m)[NEW] == pytest.approx(_cpu(twin)[NEW], rel=1e-12) and _cpu(m)[NEW] > _linear_cpu(m)[NEW]


def test_only_the_brokers_own_load_is_charged_and_a_leaving_brokers_bundles_arrive_where_lookup_puts_them() -> None:
    m = _cluster()
    _cpu(m)
    _move(m, LEFT, OLD, NEW)
    m.advance(1)
    lm = m.load_model
    own = Load.of([m.bundle_stats()[LEFT]])
    broker = m.brokers[NEW]
    assert lm.usage(broker, own)["cpu"]["usage"] > LoadModel().cpu(own)
    alone = Load(own.msg, own.msg_in, own.msg_out, own.thr_in, own.thr_out, 1, 1, 1)  # another load (the floor's)
    assert lm.usage(broker, alone)["cpu"]["usage"] == LoadModel().cpu(alone)
    # a broker failing at minute 1: lookup re-places its bundle, an arrival where it lands (dated at minute 1)
    m2 = _cluster(topics=(HOT, COLD), events=(Event(1, "fail", broker=OLD),))
    _cpu(m2)
    m2.advance(1)
    assert m2.owners[LEFT] == NEW  # the least message rate (NEW carries none)
    assert _cpu(m2) == _linear_cpu(m2)  # the instant its ownership changed: linear (its cost starts at 0)
    m2.advance(1)
    load = Load.of([m2.bundle_stats()[LEFT]])
    assert _cpu(m2)[NEW] == pytest.approx(_linear_cpu(m2)[NEW] + m2.load_model.arrival_extra(load, 60.0), rel=1e-12)


def test_no_arrival_at_the_start_of_any_scenario_and_each_builds_at_linears_target() -> None:
    targets = {"steady-with-noise": 0.5, "scale-up": 0.6, "rolling-restart": 0.5, "one-hot-broker": 0.45}
    for scenario in [s for s in SCENARIOS if s != "large-zipf"]:
        costly = build(scenario, 1, load_model=MOVE_COST_MODELS["arrival-cost-heavy"]()).model
        free = build(scenario, 1, load_model=MOVE_COST_MODELS["arrival-free"]()).model
        # the ideal and calibration are the steady (linear) costs: the same cluster, the same start
        assert costly.ideal_usage() == free.ideal_usage()
        assert [t.rate_in for t in costly.topics] == [t.rate_in for t in free.topics]
        assert costly.owners == free.owners
        assert costly.true_usage() == free.true_usage()
        assert costly.load_model.arrivals == {}
        if scenario in targets:
            assert costly.ideal_usage() == pytest.approx(targets[scenario], abs=1e-9)
        else:  # load added after calibrating (a hot bundle, a hot topic, a toggling consumer)
            assert 0.4 <= costly.ideal_usage() <= 0.62
        live = [costly.brokers[b] for b in costly.live_brokers()]
        parts = costly.load_model.ideal_parts(Load.of(costly.bundle_stats().values()), live)
        assert max(parts, key=lambda k: parts[k]) == "cpu"  # 10 Gbit/s NICs: CPU binds


def test_what_an_arrival_costs_where_the_scenarios_calibrate() -> None:
    """The ranges the module's docstring states (scale-up's bundles, 10th to 90th percentile)."""
    stated = {"arrival-cost": (0.76, 0.87, 58, 67), "arrival-cost-long": (0.43, 0.51, 89, 102)}
    stated["arrival-cost-heavy"] = (1.49, 1.72, 145, 168)
    for name, (lo, hi, total_lo, total_hi) in stated.items():
        lm = MOVE_COST_MODELS[name]()
        assert isinstance(lm, ArrivalCostModel)
        m = build("scale-up", 1, load_model=lm).model
        loads = sorted((Load.of([s]) for s in m.bundle_stats().values()), key=lambda x: lm.cpu(x, 0.0))
        first = sorted(lm.arrival_extra(x, 60.0) / lm.cpu(x, 0.0) for x in loads)
        totals = sorted((lm.takeover_cost(x) + lm.cold_cost(x)) / lm.cpu(x, 0.0) for x in loads)
        n = len(loads)
        assert lo - 0.01 <= first[n // 10] and first[9 * n // 10] <= hi + 0.01, name
        assert total_lo <= totals[n // 10] and totals[9 * n // 10] <= total_hi, name


def test_the_family_is_in_no_registry() -> None:
    assert not set(MOVE_COST_MODELS) & set(LOAD_MODELS)
    with pytest.raises(KeyError, match="unknown load model 'arrival-cost'"):
        build("scale-up", 1, load_model="arrival-cost")  # not found by name outside the bench


def test_deterministic_given_the_seed() -> None:
    def run(seed: int) -> tuple[list[float], list[int]]:
        r = run_closed_loop(
            build("scale-up", seed, load_model=MOVE_COST_MODELS["arrival-cost"]()), "AvgShedder", decisions=8
        )
        return r.max_usage, r.moves_per_cycle

    first = run(1)
    assert json.dumps(first) == json.dumps(run(1))
    assert run(2)[0] != first[0]


# ---------------------------------------------------------------- the benchmark


def test_the_probe_samples_the_minutes_after_each_applied_plan_at_the_dag_cadence() -> None:
    row = bench._run(("scale-up", "arrival-cost", "dag", "no-action", 1, 0.0, 2))
    # no sample list in the row (compare drops them after use); the run itself: two hourly decisions
    assert row["moves"] == 0 and row["plans"] == []
    run = build("scale-up", 1, load_model=MOVE_COST_MODELS["arrival-cost"]())
    probe = bench.MinuteProbe(run.model)
    run_closed_loop(run, "no-action", cadence="dag", decisions=2)
    assert [m for m, _ in probe.samples] == [0, 15, 16, 17, 18, 19, 20, 60, 75, 76, 77, 78, 79, 80, 120]


def test_the_report_on_a_tiny_run() -> None:
    """The planner fills the two new brokers of scale-up in one decision (at minute 11, 8 moves in this run), leaving
    them room for the moves' own cost (``arrival_reserve``): under arrival-cost the next minutes' worst broker stays
    at doing nothing's (before the reserve a new broker read 0.73 there, doing nothing 0.61)."""
    tasks = [("scale-up", "arrival-cost", "minute", s, 1, 0.03, 14) for s in ("GlobalPlanner", "no-action")]
    tasks.append(("scale-up", "arrival-free", "minute", "GlobalPlanner", 1, 0.03, 14))
    tasks.append(("scale-up", "arrival-free", "minute", "no-action", 1, 0.03, 14))
    rows = [bench._run(t) for t in tasks]
    plotted = bench.series(rows, 1)
    assert [len(pts) for pts in plotted["minute"]["arrival-cost"].values()] == [15, 15]
    bench.compare(rows)
    assert all("samples" not in r for r in rows)
    planner, na, free, free_na = rows
    assert planner["moves"] >= 8 and na["moves"] == 0
    (plan,) = planner["plans"]
    assert plan["after"] <= plan["no_action"] + 0.005  # the fill's cost fits in the room left for it
    assert (
        planner["peak"] <= na["peak"] + 0.005 and planner["na_peak"] == na["peak"]
    )  # no transient above doing nothing
    assert free["plans"][0]["after"] < free["plans"][0]["no_action"]  # without the cost: only relief
    doc = {"rows": rows, "series": plotted, "seeds": [1], "rate_noise": 0.03, "after_min": 5, "seconds": 3.0}
    report = bench.render(doc)
    assert "| arrival-cost | minute | **GlobalPlanner** |" in report
    assert f"{plan['after']:.3f} vs {plan['no_action']:.3f} ({plan['moves']} moves, seed 1)" in report
    assert bench._moves(1) == "1 move" and bench._moves(0) == "0 moves"
    assert "above 85% where doing nothing stays below: none." in report
    headline = bench.render_headline(doc)
    assert f"arrival-cost: no-action {na['peak']:.3f}, GlobalPlanner {planner['peak']:.3f}" in headline
    assert "(of 1 each): GlobalPlanner 0" in headline
    # a run pushed above 85 % is named, with doing nothing's peak
    planner.update(peak=0.9, peak_minute=12, pushed_hot=True)
    assert (
        f"GlobalPlanner on scale-up / arrival-cost / minute / seed 1 (0.900 at minute 12, doing nothing {na['peak']:.3f})"
        in (bench.render(doc))
    )


def test_the_benchmark_refuses_to_run_without_its_baseline() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--no-write", "--strategies", "GlobalPlanner"])
