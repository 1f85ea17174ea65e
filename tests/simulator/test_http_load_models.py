"""One load model for both simulators: the HTTP simulator reports what the closed loop reports for the same
bundle stats, under every load model the benchmarks run (and the held-out and random ones)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.pulsar_admin.client import PulsarAdminClient
from pulsar_rebalance.simulator.cluster import BrokerSpec, ClusterState, known_load_models, resolve_load_model
from pulsar_rebalance.simulator.generator import generate_cluster, scenario_cluster, scenario_model_and_cluster
from pulsar_rebalance.simulator.held_out_models import HELD_OUT_LOAD_MODELS
from pulsar_rebalance.simulator.load_models import LOAD_MODELS
from pulsar_rebalance.simulator.scenarios import build
from pulsar_rebalance.simulator.server import SimulatedPulsar
from tests.simulator.commands import refusal, start_simulator, stop

MODELS = [*LOAD_MODELS, *HELD_OUT_LOAD_MODELS, "random-4", "random-7"]
RESOURCES = ("cpu", "bandwidthIn", "bandwidthOut")


@pytest.mark.parametrize("name", MODELS)
def test_a_scenario_served_over_http_reports_what_the_closed_loop_reports(name: str) -> None:
    # the balance benchmark's one-hot-broker scenario at its first cycle, without CPU noise, under each model:
    # the HTTP simulator's load reports are the closed loop's, number for number
    run = build("one-hot-broker", 1, load_model=resolve_load_model(name), noise=0.0)
    closed = run.model.load_reports()
    state = ClusterState.from_model(run.model, cluster="c", port_base=0)
    assert state.load_model is run.model.load_model and len(state.broker_ids()) == len(closed) == 10
    for b in state.broker_ids():
        key = state.machine_key(b)
        report, want = state.load_report(b), closed[key]
        assert set(report["lastStats"]) == set(want["lastStats"]), (name, b)
        for bundle, s in report["lastStats"].items():
            for f in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "topics"):
                assert s[f] == pytest.approx(want["lastStats"][bundle][f], rel=1e-12), (name, bundle, f)
        for res in RESOURCES:
            assert report[res] == pytest.approx(want[res], rel=1e-12), (name, b, res)
        for res in ("memory", "directMemory"):
            if res in want:  # memory-bound models them; the others leave the HTTP simulator's heap model
                assert report[res] == pytest.approx(want[res], rel=1e-12), (name, b, res)
        usage = max(report[r]["usage"] / report[r]["limit"] for r in (*RESOURCES, "memory", "directMemory"))
        assert report["maxResourceUsage"] == pytest.approx(usage, rel=1e-5)

    # the one hot broker is the same broker on both sides
    def worst(r: dict) -> float:
        return max(r[res]["usage"] / r[res]["limit"] for res in RESOURCES)

    hot = max(state.broker_ids(), key=lambda b: worst(state.load_report(b)))
    assert state.machine_key(hot) == max(closed, key=lambda b: worst(closed[b]))
    scenario = scenario_cluster("one-hot-broker", seed=1, load_model=name, port_base=0, cpu_noise=0.0)
    assert [scenario.load_report(b)["cpu"] for b in scenario.broker_ids()] == [
        state.load_report(b)["cpu"] for b in state.broker_ids()
    ]


def test_the_default_is_linear_and_the_models_differ_where_they_say() -> None:
    linear = generate_cluster(seed=5, brokers=3, port_base=0)
    assert linear.load_model_name == "linear"
    b0 = linear.broker_ids()[0]
    base = linear.load_report(b0)
    # linear: 10 % of a core idle + one core per 40,000 msg/s + one per 200 MiB/s, on the declared machine
    msg = base["msgRateIn"] + base["msgRateOut"]
    thr = base["msgThroughputIn"] + base["msgThroughputOut"]
    assert base["cpu"]["usage"] == pytest.approx(10 + 100 * msg / 40000 + 100 * thr / (200 * 1024 * 1024))
    assert base["cpu"]["limit"] == 800.0 and base["bandwidthOut"]["limit"] == 1000.0 * 1024
    convex = generate_cluster(seed=5, brokers=3, port_base=0, load_model="convex-cpu").load_report(b0)
    assert convex["lastStats"] == base["lastStats"]
    assert convex["cpu"]["usage"] > base["cpu"]["usage"]  # queueing: more CPU for the same traffic
    assert convex["bandwidthOut"]["limit"] == 10 * base["bandwidthOut"]["limit"]  # 10 Gbit/s: CPU binds
    nic = generate_cluster(seed=5, brokers=3, port_base=0, load_model="nic-bound").load_report(b0)
    assert nic["bandwidthOut"]["limit"] == pytest.approx(0.4 * base["bandwidthOut"]["limit"])
    hetero = generate_cluster(seed=5, brokers=6, port_base=0, load_model="heterogeneous-capacity")
    limits = {hetero.load_report(b)["cpu"]["limit"] for b in hetero.broker_ids()}
    assert len(limits) > 1 and limits <= {400.0, 800.0, 1600.0}


def test_a_broker_stays_the_same_machine_when_renamed_reloaded_or_joined(tmp_path: Path) -> None:
    state = generate_cluster(seed=9, brokers=5, port_base=0, load_model="heterogeneous-capacity")
    before = {state.machine_key(b): state.load_report(b)["cpu"]["limit"] for b in state.broker_ids()}
    state.rename_brokers({b: f"10.0.0.{i}:8080" for i, b in enumerate(state.broker_ids())})
    assert {state.machine_key(b): state.load_report(b)["cpu"]["limit"] for b in state.broker_ids()} == before
    path = tmp_path / "state.json"
    state.save(path)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["loadModel"] == "heterogeneous-capacity" and saved["loadModelSeed"] == 9
    again = ClusterState.load(path)
    assert again.load_model_name == "heterogeneous-capacity"
    assert {again.machine_key(b): again.load_report(b)["cpu"]["limit"] for b in again.broker_ids()} == before
    again.remove_broker(again.broker_ids()[1])
    again.add_broker(BrokerSpec("10.0.0.9:8080"))
    assert again.machine_key("10.0.0.9:8080") == "broker-1"  # the free key: the machine that left
    # a state file from before load models: linear, the i-th broker is broker-<i>
    del saved["loadModel"], saved["loadModelSeed"], saved["machines"]
    old = ClusterState.from_snapshot(saved)
    assert old.load_model_name == "linear"
    assert [old.machine_key(b) for b in old.broker_ids()] == [f"broker-{i}" for i in range(5)]


def test_a_scenario_under_a_random_model_reports_the_same_after_a_reload(tmp_path: Path) -> None:
    # random-4 gives every broker a hidden speed (up to +60 %) and its own capacity: drawn per machine key and
    # seed, kept in the model instance; a reloaded state draws them again from its file
    state = scenario_cluster("heterogeneous", seed=2, load_model="random-4", port_base=0)
    reports = {b: state.load_report(b) for b in state.broker_ids()}
    path = tmp_path / "state.json"
    state.save(path)
    again = ClusterState.load(path)
    assert again.load_model is not state.load_model and again.load_model_name == "random-4"
    for b, r in reports.items():
        got = again.load_report(b)
        for res in RESOURCES:
            assert got[res] == r[res], (b, res)
    assert len({round(r["cpu"]["usage"] / max(r["msgRateIn"], 1.0), 6) for r in reports.values()}) > 1


def test_an_unknown_load_model_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown load model 'quadratic'; known: linear, in-out-fanout") as exc:
        ClusterState(
            cluster="c",
            brokers=[BrokerSpec("b:1")],
            namespaces={"t/n": [0, 0xFFFFFFFF]},
            topics=[],
            owners={"t/n/0x00000000_0xffffffff": "b:1"},
            load_model="quadratic",
        )
    assert "random-<k>" in str(exc.value) and known_load_models()[-1] == "random-<k>"
    with pytest.raises(ConfigError, match="unknown load model 'random-0'") as refused:
        generate_cluster(brokers=1, port_base=0, load_model="random-0")
    assert refused.value.key == "load_model"


def test_the_admin_api_serves_the_load_models_reports() -> None:
    state = generate_cluster(seed=2, brokers=3, port_base=0, load_model="convex-cpu")
    with SimulatedPulsar(state, ephemeral=True) as sim, PulsarAdminClient.from_url(sim.admin_url, retries=0) as admin:
        b = sim.broker_ids[0]
        raw = admin.load_report(b)
        assert raw["cpu"] == state.load_report(b)["cpu"]
        assert raw["bandwidthIn"]["limit"] == 10 * 1000.0 * 1024


@pytest.mark.timeout(120)
def test_the_simulator_command_takes_a_load_model_and_a_state_file_keeps_it(tmp_path: Path) -> None:
    state_file, ready = tmp_path / "state.json", tmp_path / "ready.json"
    kept_args = ["--brokers", "2", "--state-file", str(state_file), "--ready-file", str(ready)]
    proc = start_simulator([*kept_args, "--load-model", "nic-bound", "--rate-noise", "0.05"])
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        assert info["load_model"] == "nic-bound"
    finally:
        stop(proc)
    kept = json.loads(state_file.read_text(encoding="utf-8"))
    assert kept["loadModel"] == "nic-bound" and kept["rateNoise"] == 0.05
    assert "--load-model linear contradicts --state-file" in refusal([*kept_args, "--load-model", "linear"])
    assert "--rate-noise and an existing --state-file" in refusal([*kept_args, "--rate-noise", "0.01"])
    assert "--load-model: unknown load model 'nope'" in refusal(["--load-model", "nope"])


@pytest.mark.timeout(120)
def test_the_simulator_command_serves_a_benchmark_scenario(tmp_path: Path) -> None:
    proc = start_simulator(
        ["--scenario", "one-hot-broker", "--seed", "1", "--load-model", "convex-cpu", "--cpu-noise", "0"]
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        assert info["load_model"] == "convex-cpu" and len(info["brokers"]) == 10
        with PulsarAdminClient.from_url(info["admin_url"], retries=0) as admin:
            served = {b: admin.load_report(b) for b in info["brokers"]}
    finally:
        stop(proc)
    run = build("one-hot-broker", 1, load_model="convex-cpu", noise=0.0)
    closed = run.model.load_reports()
    assert sorted(r["cpu"]["usage"] for r in served.values()) == pytest.approx(
        sorted(r["cpu"]["usage"] for r in closed.values()), rel=1e-12
    )
    for args, message in (
        (["--scenario", "one-hot-broker", "--brokers", "3"], "--scenario brings its own brokers"),
        (["--scenario", "no-such"], "--scenario: unknown scenario 'no-such'; known: steady-with-noise"),
    ):
        assert message in refusal(args)


def test_cpu_noise_is_a_fresh_draw_per_report_and_a_scenario_brings_its_own(tmp_path: Path) -> None:
    quiet = generate_cluster(seed=4, brokers=2, port_base=0)
    noisy = generate_cluster(seed=4, brokers=2, port_base=0, cpu_noise=0.03)
    b = noisy.broker_ids()[0]
    clean = quiet.load_report(b)
    draws = [noisy.load_report(b) for _ in range(400)]
    ratios = [d["cpu"]["usage"] / clean["cpu"]["usage"] for d in draws]
    assert all(d["bandwidthOut"] == clean["bandwidthOut"] and d["lastStats"] == clean["lastStats"] for d in draws)
    mean = sum(ratios) / len(ratios)
    spread = (sum((r - mean) ** 2 for r in ratios) / (len(ratios) - 1)) ** 0.5
    assert abs(mean - 1) < 0.01 and 0.02 < spread < 0.04  # 1 + N(0, 0.03)
    path = tmp_path / "state.json"
    noisy.save(path)
    assert ClusterState.load(path).cpu_noise == 0.03
    # a scenario's own noise by default (steady-with-noise: 3 %), none when asked
    assert scenario_cluster("steady-with-noise", port_base=0).cpu_noise == 0.03
    assert scenario_cluster("steady-with-noise", port_base=0, cpu_noise=0.0).cpu_noise == 0.0
    with pytest.raises(ConfigError, match="cpu_noise must be from 0 to 1"):
        generate_cluster(brokers=1, port_base=0, cpu_noise=1.5)


def test_rate_noise_is_on_the_reported_rates_only_a_fresh_draw_per_field_and_report(tmp_path: Path) -> None:
    quiet = generate_cluster(seed=4, brokers=2, port_base=0, topics_per_namespace=3)
    noisy = generate_cluster(seed=4, brokers=2, port_base=0, topics_per_namespace=3, rate_noise=0.03)
    b = noisy.broker_ids()[0]
    clean, clean_topics = quiet.load_report(b), quiet.topic_stats(b)
    reports = [noisy.load_report(b) for _ in range(200)]
    # the load the reports show is the true one: usage per resource and the bundles' counts do not move
    for r in reports:
        assert all(r[res] == clean[res] for res in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut"))
        assert r["numTopics"] == clean["numTopics"] and r["bundles"] == clean["bundles"]
    bundle = next(iter(clean["lastStats"]))
    ratios = {
        f: [r["lastStats"][bundle][f] / clean["lastStats"][bundle][f] for r in reports]
        for f in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")
    }
    for f, values in ratios.items():
        mean = sum(values) / len(values)
        spread = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
        assert abs(mean - 1) < 0.015 and 0.02 < spread < 0.04, f  # 1 + N(0, 0.03), each field its own draw
    assert ratios["msgRateIn"] != ratios["msgThroughputIn"]
    # the broker's totals are the sum of what it reports per bundle
    r = reports[0]
    assert r["msgRateIn"] == pytest.approx(sum(s["msgRateIn"] for s in r["lastStats"].values()))
    assert r["bundleStats"] == r["lastStats"]
    # a topic's stats: its rates measured, its publishers and consumers adding up to them, counters from the truth
    noisy_topics = noisy.topic_stats(b)
    ns = next(iter(clean_topics))
    rng = next(iter(clean_topics[ns]))
    name, true = next(iter(clean_topics[ns][rng]["persistent"].items()))
    got = noisy_topics[ns][rng]["persistent"][name]
    assert got["msgRateIn"] != true["msgRateIn"] and got["msgRateIn"] == pytest.approx(true["msgRateIn"], rel=0.2)
    assert sum(p["msgRateIn"] for p in got["publishers"]) == pytest.approx(got["msgRateIn"])
    assert sum(s["msgRateOut"] for s in got["subscriptions"].values()) == pytest.approx(got["msgRateOut"])
    for sub in got["subscriptions"].values():
        assert sum(c["msgThroughputOut"] for c in sub["consumers"]) == pytest.approx(sub["msgThroughputOut"])
    assert got["msgInCount"] == pytest.approx(true["msgInCount"], abs=true["msgRateIn"] * 5)  # uptime moves on
    # kept in a state file; a served scenario gives its model the same noise, so both sides measure alike
    path = tmp_path / "state.json"
    noisy.save(path)
    assert ClusterState.load(path).rate_noise == 0.03 and quiet.rate_noise == 0.0
    model, served = scenario_model_and_cluster("one-hot-broker", port_base=0, rate_noise=0.03)
    assert model.rate_noise == served.rate_noise == 0.03
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="rate_noise must be from 0 to 1"):
            generate_cluster(brokers=1, port_base=0, rate_noise=bad)
    with pytest.raises(ValueError, match="rate_noise must be a number from 0 to 1, got True"):
        ClusterState.from_snapshot({**noisy.snapshot(), "rateNoise": True})
