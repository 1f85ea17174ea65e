"""The random load-model family (simulator/random_models.py): drawn from the index alone, found by name,
arithmetic by hand, hidden speeds and background the reports do not explain, calibration under every
scenario, and the benchmark that runs them (benchmarks/bench_random_models.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pulsar_rebalance.simulator.dynamics import Broker
from pulsar_rebalance.simulator.load_models import CPU_PCT_PER_BYTE, CPU_PCT_PER_MSG, Load, get_load_model
from pulsar_rebalance.simulator.random_models import RandomCostModel, random_model
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build
from tests.simulator.test_held_out_models import STATS, TARGETS

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]


def test_a_model_is_drawn_from_its_index_alone() -> None:
    a, b = random_model("random-3"), random_model("random-3")
    assert isinstance(a, RandomCostModel) and isinstance(b, RandomCostModel) and a is not b
    assert get_load_model(a) is a  # an instance goes wherever a load model goes
    assert a.name == "random-3" and a.description == b.description
    assert (a.per_in, a.per_out, a.per_byte, a.K, a.NIC_FACTOR) == (b.per_in, b.per_out, b.per_byte, b.K, b.NIC_FACTOR)
    drawn = {RandomCostModel(k).description for k in range(1, 13)}
    assert len(drawn) == 12  # different indexes, different models
    for k in range(1, 41):  # the family's ranges
        m = RandomCostModel(k)
        assert 0.19 < m.per_in / CPU_PCT_PER_MSG < 5.02 and 0.19 < m.per_out / CPU_PCT_PER_MSG < 5.02
        assert 0.19 < m.per_byte / CPU_PCT_PER_BYTE < 5.02 and 2.0 <= m.base <= 25.0
        assert m.NIC_FACTOR in (0.4, 1.0, 10.0) and m.K in (0.0, 0.5, 1.5, 3.0)


@pytest.mark.parametrize("name", ["random-0", "random-", "random-x", "random-01", "random-1000000"])
def test_a_name_outside_the_family_is_refused(name: str) -> None:
    assert random_model(name) is None
    with pytest.raises(ValueError, match="within 1-999999"):
        RandomCostModel(0)


def _model(**fields: Any) -> RandomCostModel:
    m = RandomCostModel(1)
    for k, v in fields.items():
        setattr(m, k, v)
    return m


def test_arithmetic_by_hand() -> None:
    m = _model(
        per_in=2 * CPU_PCT_PER_MSG,
        per_out=0.5 * CPU_PCT_PER_MSG,
        per_byte=3 * CPU_PCT_PER_BYTE,
        base=12.0,
        K=1.5,
        NIC_FACTOR=10.0,
        capacity=None,
        speed_spread=0.0,
        background_max=0.0,
    )
    fast, slow = Broker("fast"), Broker("slow")
    m.configure(fast, 0)
    m.configure(slow, 0)
    m.speed.update({"fast": 1.0, "slow": 1.5})
    m.background.update({"fast": 0.0, "slow": 10.0})
    load = Load.of([STATS])
    # 4000 msg/s in at 2x (1 core per 20,000), 8000 out at 0.5x (1 core per 80,000), 3 MiB/s at 3x (1 core per 66.7 MiB/s)
    traffic = 4000 * 100 / 20000 + 8000 * 100 / 80000 + 3 * 100 * 3 / 200
    assert m.traffic_cpu(load) == pytest.approx(traffic)

    def curve(cpu: float) -> float:
        u = cpu / 800
        return u * (1 + 1.5 * u * u) * 800

    assert fast.nic_mbps == 10_000.0  # NICs at 10x: CPU binds
    assert m.usage(fast, load)["cpu"] == {"usage": pytest.approx(curve(12 + traffic)), "limit": 800.0}
    # the slow broker: 1.5x the traffic's CPU and 10 % of its limit in background, under the same reported limit
    assert m.usage(slow, load)["cpu"] == {"usage": pytest.approx(curve(12 + 80 + 1.5 * traffic)), "limit": 800.0}
    # a bundle's share: on the standard broker, no idle base, no curve
    assert m.share(load, m.reference()) == pytest.approx(traffic / 800)
    # ideal: both at the same linear utilisation v with (12 + bg_i + s_i x_i W) = v 800, x_fast + x_slow = 1
    cluster = Load.of([STATS] * 10)
    w = m.traffic_cpu(cluster)
    v = (w + 12 / 1.0 + (12 + 80) / 1.5) / (800 / 1.0 + 800 / 1.5)
    assert m.ideal_parts(cluster, [fast, slow])["cpu"] == pytest.approx(v * (1 + 1.5 * v * v))
    x_fast = (v * 800 - 12) / w
    x_slow = (v * 800 - 92) / (1.5 * w)
    assert x_fast + x_slow == pytest.approx(1.0)


def test_hidden_speeds_and_background_come_from_the_seed_and_the_broker() -> None:
    m = next(RandomCostModel(k) for k in range(1, 100) if RandomCostModel(k).speed_spread == 0.6)
    brokers = [Broker(f"b{i}") for i in range(20)]
    for b in brokers:
        m.configure(b, 7)
    speeds = [m.speed[b.broker_id] for b in brokers]
    assert all(1.0 <= s <= 1.6 for s in speeds) and max(speeds) - min(speeds) > 0.2
    again = RandomCostModel(m.k)
    for b in [Broker(f"b{i}") for i in range(20)]:
        again.configure(b, 7)
    assert again.speed == m.speed and again.background == m.background
    other = RandomCostModel(m.k)
    for b in [Broker(f"b{i}") for i in range(20)]:
        other.configure(b, 8)
    assert other.speed != m.speed


SOME = (2, 6, 11)
"""A curve (K=3) with a capacity mix; background CPU with a 0.5/1/2 capacity mix; bandwidth-bound (0.4x NICs),
a curve and hidden speeds."""


@pytest.mark.parametrize("k", SOME)
@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "large-zipf"])
def test_every_scenario_calibrates_under_the_model(k: int, scenario: str) -> None:
    m = build(scenario, 1, load_model=RandomCostModel(k)).model
    ideal = m.ideal_usage()
    if scenario in TARGETS:
        assert ideal == pytest.approx(TARGETS[scenario], abs=1e-9)
    else:  # load added after calibrating (a hot bundle, a hot topic, a toggling consumer)
        assert 0.4 <= ideal <= 0.65
    assert m.floor_usage() >= ideal - 1e-9


def test_the_picked_models_are_what_the_calibration_test_says() -> None:
    m2, m6, m11 = (RandomCostModel(k) for k in SOME)
    assert m2.K == 3.0 and m2.capacity is not None
    assert m6.background_max > 0 and m6.capacity == (0.5, 1.0, 2.0)
    assert m11.NIC_FACTOR == 0.4 and m11.K > 0 and m11.speed_spread > 0


def test_a_hidden_speed_unbalances_a_standard_start() -> None:
    """The scenarios balance by the standard broker's measure: under hidden speeds the slower brokers report more,
    at the same reported limit, so a steady cluster is not balanced and moving there is no churn."""
    m = build("steady-with-noise", 1, load_model=RandomCostModel(10)).model
    lm = m.load_model
    assert isinstance(lm, RandomCostModel)
    # CPU binds, one capacity for all, no background: only the hidden speeds tell the brokers apart
    assert lm.NIC_FACTOR == 10.0 and lm.capacity is None and lm.background_max == 0 and lm.speed_spread == 0.6
    reports = m.load_reports()
    assert {r["cpu"]["limit"] for r in reports.values()} == {800.0}
    true = m.true_usage()
    slowest = max(true, key=lambda b: lm.speed[b])
    fastest = min(true, key=lambda b: lm.speed[b])
    assert lm.speed[slowest] - lm.speed[fastest] > 0.2
    assert true[slowest] > true[fastest] + 0.05
    assert max(true.values()) > m.ideal_usage() + 0.05  # not balanced under the model


def test_the_benchmark_counts_per_run_against_doing_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_random_models as bench

    rc = bench.main(
        ["--models", "1", "--first", "2", "--scenarios", "steady-with-noise", "one-hot-broker", "--seeds", "1"]
        + ["--cadences", "minute", "--strategies", "GlobalPlanner", "no-action", "--no-write"]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "| **GlobalPlanner** | 2 |" in out and "random-2" in out
    with pytest.raises(SystemExit):
        bench.main(["--strategies", "GlobalPlanner", "--no-write"])  # no baseline


def test_merge_replaces_only_the_planners_runs_and_refuses_stale_sources(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_random_models as bench

    argv = ["--models", "1", "--first", "3", "--scenarios", "steady-with-noise", "--seeds", "1", "--cadences", "minute"]
    full = tmp_path / "full.json"
    bench.JSON, saved = full, bench.JSON
    try:
        argv_full = [*argv, "--strategies", "GlobalPlanner", "no-action", "AvgShedder"]
        run_args = {"models": ["random-3"], "scenarios": ["steady-with-noise"], "cadences": ["minute"], "seeds": [1]}
        digests = bench.bench_balance.source_digests()
        stored = {
            "meta": {"date": "2026-01-01 00:00 UTC", "command": "full"},
            "models": {"random-3": "drawn"},
            "rows": [
                {
                    "scenario": "steady-with-noise",
                    "model": "random-3",
                    "cadence": "minute",
                    "strategy": st,
                    "seed": 1,
                    "final_max": 0.9,
                    "worst_max": 0.9,
                    "moves": 7,
                    "ideal": 0.5,
                }
                for st in ("GlobalPlanner", "no-action", "AvgShedder")
            ],
            "seconds": 100.0,
            "args": run_args,
            "sources": digests,
        }
        assert bench.merge_problems(stored, run_args, digests) == []
        planner = next(f for f in digests if f.startswith("pulsar_rebalance/core/planner/"))
        assert bench.merge_problems(stored, run_args, {**digests, planner: "0"}) == []
        # this benchmark runs the random models: a change to them is a reason (bench_balance's is not)
        for changed in ("pulsar_rebalance/simulator/random_models.py", "pulsar_rebalance/core/guard.py"):
            (problem,) = bench.merge_problems(stored, run_args, {**digests, changed: "0"})
            assert changed in problem and "run the full benchmark" in problem
        (problem,) = bench.merge_problems(stored, {**run_args, "seeds": [1, 2]}, digests)
        assert problem.startswith("seeds: the stored run had [1]")
        (problem,) = bench.merge_problems({k: v for k, v in stored.items() if k != "sources"}, run_args, digests)
        assert "predates --merge" in problem

        bench.figures.write_json(full, stored)
        assert bench.main([*argv, "--merge", "--no-write"]) == 0  # refuses nothing; writes nothing
        assert bench.main([*argv_full, "--merge", "--models", "2", "--no-write"]) == 2  # other models: refused
        new = {**stored, "meta": {"date": "2026-01-02 00:00 UTC", "command": "merge"}, "seconds": 5.0}
        new["rows"] = [dict(stored["rows"][0], final_max=0.5, moves=0)]
        merged = bench.merge_doc(stored, new)
        assert [(r["strategy"], r["final_max"]) for r in merged["rows"]] == [
            ("GlobalPlanner", 0.5),
            ("no-action", 0.9),
            ("AvgShedder", 0.9),
        ]
        assert merged["seconds"] == 100.0 and merged["merged"]["seconds"] == 5.0
        assert "from the full run of 2026-01-01 00:00 UTC (`full`)" in merged["meta"]["note"]
        assert bench.merge_doc(merged, new)["merged"]["base"]["command"] == "full"  # a second merge keeps the base
    finally:
        bench.JSON = saved


def test_verdicts_by_hand() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_random_models as bench

    def row(strategy: str, scenario: str, final: float, worst: float, moves: int, seed: int = 1) -> dict[str, Any]:
        return {
            "scenario": scenario,
            "model": "random-1",
            "cadence": "minute",
            "strategy": strategy,
            "seed": seed,
            "final_max": final,
            "worst_max": worst,
            "moves": moves,
            "ideal": 0.5,
        }

    doc = {
        "models": {"random-1": "drawn"},
        "rows": [
            row("no-action", "steady-with-noise", 0.52, 0.53, 0),
            row("GlobalPlanner", "steady-with-noise", 0.52, 0.53, 2),  # churn on a balanced cluster
            row("no-action", "one-hot-broker", 0.80, 0.84, 0),
            row("GlobalPlanner", "one-hot-broker", 0.806, 0.86, 5),  # above by more than the tie, and hot
            row("no-action", "one-hot-broker", 0.70, 0.70, 0, seed=2),
            row("GlobalPlanner", "one-hot-broker", 0.60, 0.70, 3, seed=2),  # lower
            row("ThresholdShedder", "one-hot-broker", 0.56, 0.70, 9, seed=2),  # 4 points lower still
            row("ThresholdShedder", "one-hot-broker", 0.79, 0.84, 9),  # lower, but within 3 points
        ],
    }
    v = bench.verdicts(doc)["GlobalPlanner"]
    assert v["runs"] == 3 and v["below"] == 1 and v["moves"] == 10
    assert [r["scenario"] for r in v["worse"]] == ["one-hot-broker"] and len(v["hot"]) == 1
    assert v["excess_by"] == pytest.approx(0.006)
    assert v["steady_runs"] == 1 and len(v["steady_moved"]) == 1
    text = bench.render(doc | {"seconds": 1.0})
    assert "* ends above doing nothing: one-hot-broker / random-1 / minute / seed 1: 0.806 vs 0.800 (5 moves)" in text
    lag = bench.behind(doc)
    assert [(p["seed"], b["final_max"]) for p, b, _ in lag] == [(2, 0.56)]
    assert "in 1 of 3 runs the best of Pulsar's shedders ends more than 3 points below it" in text


def test_the_planner_relieves_a_hot_broker_among_slower_cpus() -> None:
    """random-4: hidden speeds up to +60 % (the same reported limits). The brokers' steady excess over the
    planner's fitted model is model error, not noise: counted as noise it had raised the trigger and the
    minimum gain of a move above every bundle, and the planner left the hot broker at ~84 % (0 moves) where
    ThresholdShedder brought it to ~57 %."""
    from pulsar_rebalance.simulator.closed_loop import run_closed_loop

    def run(strategy: str) -> dict[str, Any]:
        return run_closed_loop(
            build("one-hot-broker", 2, load_model=RandomCostModel(4), rate_noise=0.03), strategy
        ).summary()

    planner, nothing = run("GlobalPlanner"), run("no-action")
    assert nothing["final_max"] > 0.8
    assert planner["final_max"] < 0.6 and 0 < planner["moves"] <= 30
    assert planner["worst_max"] <= nothing["worst_max"] + 0.005


def test_a_steady_broker_just_below_the_trigger_is_not_confirmed_by_noisy_samples() -> None:
    """tls-crypto: the older brokers of a steady cluster sit about a point below the planner's trigger. With the
    noise measured sample to sample (smaller than the spread around the fit), three noisy reports in a row
    above the trigger moved a bundle that no Pulsar strategy moved; a report counts only above the trigger
    by more than the noise."""
    from pulsar_rebalance.simulator.closed_loop import run_closed_loop

    run = build("steady-with-noise", 2, load_model="tls-crypto", rate_noise=0.03)
    assert run_closed_loop(run, "GlobalPlanner").summary()["moves"] == 0


def test_unseen_draws_get_their_own_report_and_headline_and_leave_the_stored_report_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_random_models as bench

    report, readme = tmp_path / "unseen.md", tmp_path / "README.md"
    data, checks = tmp_path / "unseen.json", tmp_path / "checks.json"
    for path, names in (
        (report, ("random-unseen-report", "random-unseen-checks")),
        (readme, ("random-unseen-headline", "random-unseen-checks-headline")),
    ):
        path.write_text(
            "before\n"
            + "".join(
                f"<!-- {n}:start (written by {bench.SCRIPT} from {checks if 'checks' in n else data}) -->\n"
                f"<!-- {n}:end -->\n"
                for n in names
            )
            + "after\n",
            encoding="utf-8",
        )
    monkeypatch.setattr(bench, "UNSEEN_JSON", data)
    monkeypatch.setattr(bench, "UNSEEN_PNG", tmp_path / "unseen.png")
    monkeypatch.setattr(bench, "UNSEEN_TARGETS", {"random-unseen-report": [report], "random-unseen-headline": [readme]})
    monkeypatch.setattr(bench, "CHECKS_JSON", checks)
    monkeypatch.setattr(bench, "CHECKS_PNG", tmp_path / "checks.png")
    monkeypatch.setattr(
        bench, "CHECKS_TARGETS", {"random-unseen-checks": [report], "random-unseen-checks-headline": [readme]}
    )
    stored = {
        p: p.read_bytes()
        for p in (bench.JSON, bench.DOC, ROOT / "README.md", ROOT / "docs" / "benchmarks" / "README.md")
    }
    argv = ["--models", "1", "--scenarios", "steady-with-noise", "--seeds", "1", "--cadences", "minute"]
    argv += ["--strategies", "GlobalPlanner", "no-action"]

    with pytest.raises(SystemExit):  # random-2 is one of the random-models report's: seen
        bench.main([*argv, "--first", "2", "--unseen"])
    assert "random-2 (in docs/benchmarks/random-models.json)" in capsys.readouterr().err
    assert not data.exists() and not checks.exists()

    assert bench.main([*argv, "--first", "999", "--unseen"]) == 0

    doc = json.loads(data.read_text(encoding="utf-8"))
    assert doc["unseen"] is True and list(doc["models"]) == ["random-999"]
    headline = readme.read_text(encoding="utf-8")
    assert headline.startswith("before\n") and headline.endswith("after\n")
    assert "never run before this measurement (random-999; " in headline and "runs of the planner" in headline
    assert "(random-models-unseen.png)" in report.read_text(encoding="utf-8")
    assert (tmp_path / "unseen.png").stat().st_size > 0
    assert {p: p.read_bytes() for p in stored} == stored  # the seen report and both headline pages untouched
    # the ledger: one row for the check, its blocks, and the next never-run draw
    (row,) = json.loads(checks.read_text(encoding="utf-8"))["checks"]
    assert (row["first"], row["last"], row["runs"], row["above"], row["core"]) == (
        999,
        999,
        1,
        [],
        bench.core_digest(doc["sources"]),
    )
    assert (
        "1 so far (1 draw each; the first random-999 to random-999, the newest random-999 to random-999: "
        in readme.read_text(encoding="utf-8")
    )
    assert "Next never-run draws: `--first 1000`" in readme.read_text(encoding="utf-8")
    assert "| random-999 to random-999 | " in report.read_text(encoding="utf-8")
    assert (
        "(random-models-unseen-checks.png)" in report.read_text(encoding="utf-8")
        and (tmp_path / "checks.png").stat().st_size > 0
    )
    with pytest.raises(SystemExit):  # run now: not unseen any more
        bench.main([*argv, "--first", "998", "--models", "2", "--unseen"])
    assert "random-999 (the unseen check of " in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(
            [*argv, "--first", "1000", "--unseen", "--merge"]
        )  # a check on unseen draws is one run, as it came out


def test_no_guard_runs_the_plans_as_decide_returns_them_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_random_models as bench

    with pytest.raises(SystemExit):  # a report that says "guarded" everywhere must not hold unguarded runs
        bench.main(["--no-guard", "--models", "1", "--strategies", "GlobalPlanner", "no-action"])
    assert "--no-guard measures what the stored reports do not: pass --no-write too" in capsys.readouterr().err
    seen: list[tuple[Any, ...]] = []
    summary = {"final_max": 0.5, "worst_max": 0.6, "moves": 1, "plans": 1, "ideal": 0.5, "sim_minutes": 60}

    def run_one(task: tuple[Any, ...]) -> tuple[Any, ...]:
        seen.append(task)
        return task, summary, [], [], 0.0

    monkeypatch.setattr(bench.bench_balance, "run_one", run_one)
    for guard in (False, True):
        row = bench._run(("steady-with-noise", "random-1", "minute", "GlobalPlanner", 1, guard))
        assert row["moves"] == 1 and seen[-1][-1] is guard  # the closed loop's guard flag is the task's


@pytest.mark.slow
def test_a_broker_relieved_of_all_but_a_swinging_topic_is_not_relieved_again_in_its_off_phase() -> None:
    """random-5, seed 2, periodic jitter at one decision a minute: after 16 hours an on/off consumer's topic takes
    its broker to the overload threshold (0.85). The plan splits the topic off and moves the broker's 6 other
    bundles away, predicting 0.75 for it. One minute later, in the topic's off phase, the model planned the
    broker with the topic's remembered peak at 1.92, clipped to the 0.85 its reports had shown before the
    moves, and moved the topic whole to another broker, then 11 bundles off that one: 18 moves in 3 minutes.
    Believed at what the plan predicted until a report shows more, the broker keeps its topic: 6 moves."""
    from pulsar_rebalance.simulator.closed_loop import run_closed_loop

    run = build("periodic-jitter", 2, load_model=RandomCostModel(5), rate_noise=0.03)
    result = run_closed_loop(run, "GlobalPlanner", decisions=995)
    moves = [(minute, n) for minute, n in enumerate(result.moves_per_cycle) if n]
    assert moves == [(985, 6)]
    assert max(result.max_usage[986:]) < 0.8  # the topic alone on its broker stays below the threshold


STORED_META = json.loads((ROOT / "docs" / "benchmarks" / "random-models-unseen.json").read_text(encoding="utf-8"))[
    "meta"
]
"""A real report's meta (machine, load average): what a block's provenance line is written from."""


def _check_doc(first: int, date: str, planner_final: float, core: str) -> dict[str, Any]:
    """A stored ``--unseen`` report of one draw and one run per strategy (the planner's final max as given)."""
    name = f"random-{first}"

    def row(strategy: str, final: float, worst: float, moves: int) -> dict[str, Any]:
        return {
            "scenario": "one-hot-broker",
            "model": name,
            "cadence": "dag",
            "strategy": strategy,
            "seed": 1,
            "final_max": final,
            "worst_max": worst,
            "moves": moves,
            "plans": 1,
            "ideal": 0.5,
            "sim_minutes": 2880,
        }

    return {
        "meta": {**STORED_META, "date": date, "command": f"check {first}"},
        "models": {name: "drawn"},
        "rows": [
            row("no-action", 0.7, 0.7, 0),
            row("GlobalPlanner", planner_final, 0.7, 3),
            row("AvgShedder", 0.8, 0.9, 4),
        ],
        "seconds": 1.0,
        "args": {},
        "sources": {"pulsar_rebalance/core/planner/x.py": core, "pulsar_rebalance/simulator/y.py": str(first)},
        "unseen": True,
    }


def test_the_ledger_of_unseen_checks_is_rebuilt_from_the_reports_committed_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each range once, as first committed (a later commit of the same range, re-rendered or re-measured, is not a
    check); the working tree's report when its range is new; the README's counts over the last checks."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_random_models as bench

    repo, report = tmp_path / "repo", tmp_path / "repo" / "docs" / "unseen.json"
    report.parent.mkdir(parents=True)
    monkeypatch.setattr(bench, "ROOT", repo)
    monkeypatch.setattr(bench, "UNSEEN_JSON", report)
    monkeypatch.setattr(bench, "CHECKS_JSON", tmp_path / "checks.json")
    monkeypatch.setattr(bench, "CHECKS_PNG", tmp_path / "checks.png")
    monkeypatch.setattr(bench, "SEEN_THROUGH", 4)  # every draw up to random-4 run before the ledger began
    for name in [n for n in os.environ if n.startswith("GIT_")]:  # a caller's GIT_DIR would point elsewhere
        monkeypatch.delenv(name)

    def git(*args: str, where: Path = repo) -> None:
        isolated = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "core.hooksPath="]
        subprocess.run(["git", "-C", str(where), *isolated, *args], check=True)

    git("init", "-q")
    for doc in (
        _check_doc(5, "2026-01-01 00:00 UTC", 0.72, core="a"),  # 2 points above doing nothing
        _check_doc(5, "2026-01-04 00:00 UTC", 0.6, core="b"),  # the same draws re-run later: not a check
        _check_doc(6, "2026-01-02 00:00 UTC", 0.6, core="b"),
    ):
        report.write_text(json.dumps(doc), encoding="utf-8")
        git("add", "-A")
        git("commit", "-q", "-m", "check")
    report.write_text(json.dumps(_check_doc(7, "2026-01-03 00:00 UTC", 0.6, core="b")), encoding="utf-8")

    checks = bench.checks_from_git()

    assert [(c["first"], c["last"], c["date"][:10]) for c in checks] == [
        (5, 5, "2026-01-01"),
        (6, 6, "2026-01-02"),
        (7, 7, "2026-01-03"),
    ]
    first = checks[0]
    assert first["above"] == [{"run": "one-hot-broker / random-5 / dag / seed 1", "by": 0.02}]
    assert first["shedders"] == {"AvgShedder": {"above": 1, "pushed": 1}} and first["lower"] == 0
    assert checks[1]["above"] == [] and checks[1]["lower"] == 1 and checks[1]["core"] == checks[2]["core"]
    assert checks[0]["core"] != checks[1]["core"]
    headline = bench.render_checks_headline({"checks": checks})
    assert (
        "stored since random-5 is kept: 3 so far (1 draw each; the first random-5 to random-5, the newest random-7 to random-7: "
        in headline
    )
    assert (
        "In the last 3, the planner ended a run above doing nothing in **1** (random-5 to random-5: 1 of 1 runs"
        in headline
    )
    assert "by at most 2.0 points" in headline
    assert f"(`{checks[2]['core']}`) has been through the last 2: 0 of 2 runs above doing nothing" in headline
    assert headline.endswith("Next never-run draws: `--first 8`.")
    monkeypatch.setattr(bench, "LAST_CHECKS", 2)
    assert "In the last 2, the planner ended a run above doing nothing in **0**, and" in (
        bench.render_checks_headline({"checks": checks})
    )
    ledger = bench.ledger_doc(checks)  # its meta is the newest check's, which the report in the tree is
    assert ledger["meta"]["command"] == "check 7" and [c["first"] for c in ledger["checks"]] == [5, 6, 7]
    table = bench.render_checks(ledger)
    assert table.index("| random-7 to random-7 |") < table.index("| random-5 to random-5 |")  # newest first
    assert "one-hot-broker / random-5 / dag / seed 1 (+0.020)" in table

    monkeypatch.setattr(bench, "JSON", tmp_path / "seen.json")
    (tmp_path / "seen.json").write_text(json.dumps({"models": {"random-1": "drawn"}}), encoding="utf-8")
    (tmp_path / "checks.json").write_text(json.dumps(ledger), encoding="utf-8")
    assert bench.seen_draws(["random-1", "random-6", "random-9"]) == {
        "random-1": f"in {tmp_path / 'seen.json'}",
        "random-6": "the unseen check of 2026-01-02 00:00 UTC",
    }
    assert bench.next_unseen() == 8
    monkeypatch.setattr(bench, "SEEN_THROUGH", 20)
    assert bench.next_unseen() == 21  # past the floor where the ledger ends below it
    monkeypatch.setattr(bench, "SEEN_THROUGH", 4)

    # a row of the stored ledger that git does not have is kept, not dropped
    kept = dict(checks[0], first=3, last=3, date="2025-12-31 00:00 UTC")
    (tmp_path / "checks.json").write_text(json.dumps({"checks": [kept, *checks]}), encoding="utf-8")
    assert [c["first"] for c in bench.checks_from_git()] == [5, 6, 7, 3]
    # --checks-from-git through main: the ledger's JSON, plot and blocks
    page = tmp_path / "page.md"
    page.write_text(
        "".join(
            f"<!-- {n}:start (written by {bench.SCRIPT} from x.json) -->\n<!-- {n}:end -->\n"
            for n in ("random-unseen-checks", "random-unseen-checks-headline")
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(bench, "CHECKS_TARGETS", {n: [page] for n in bench.CHECKS_TARGETS})
    (tmp_path / "checks.json").unlink()
    assert bench.main(["--checks-from-git"]) == 0
    assert [c["first"] for c in bench.load_checks()] == [5, 6, 7]
    assert "| random-6 to random-6 |" in page.read_text(encoding="utf-8")
    assert (tmp_path / "checks.png").stat().st_size > 0
    # a shallow clone's history is cut: refused, rather than a ledger of its last commit
    git("clone", "-q", "--depth", "1", f"file://{repo}", str(tmp_path / "shallow"), where=tmp_path)
    monkeypatch.setattr(bench, "ROOT", tmp_path / "shallow")
    monkeypatch.setattr(bench, "UNSEEN_JSON", tmp_path / "shallow" / "docs" / "unseen.json")
    with pytest.raises(RuntimeError, match="shallow"):
        bench.checks_from_git()
