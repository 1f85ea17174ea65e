"""The held-out load models (simulator/held_out_models.py): arithmetic, calibration, memory in the reports."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.core.pulsar.bundles import NamespaceBundles, bundle_full_name
from pulsar_rebalance.core.pulsar.bundles import topic_hash as core_topic_hash
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.simulator.closed_loop import run_closed_loop
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Topic
from pulsar_rebalance.simulator.held_out_models import (
    HELD_OUT_MODELS,
    HELD_OUT_MODELS_2,
    MemoryBoundModel,
    PerTopicCostModel,
)
from pulsar_rebalance.simulator.held_out_models_3 import HELD_OUT_MODELS_3
from pulsar_rebalance.simulator.held_out_models_4 import HELD_OUT_MODELS_4
from pulsar_rebalance.simulator.held_out_models_5 import HELD_OUT_MODELS_5
from pulsar_rebalance.simulator.held_out_models_6 import HELD_OUT_MODELS_6
from pulsar_rebalance.simulator.held_out_models_7 import HELD_OUT_MODELS_7
from pulsar_rebalance.simulator.held_out_models_8 import HELD_OUT_MODELS_8
from pulsar_rebalance.simulator.held_out_models_9 import HELD_OUT_MODELS_9
from pulsar_rebalance.simulator.load_models import LOAD_MODELS, Load, get_load_model
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
RESOURCES = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
TARGETS = {
    "steady-with-noise": 0.5,
    "scale-up": 0.6,
    "scale-down": 0.45,
    "rolling-restart": 0.5,
    "one-hot-broker": 0.45,
    "heterogeneous": 0.55,
}
"""The scenarios' calibration targets (the others add load after calibrating)."""

# one bundle's stats, as the cluster model reports them
STATS: dict[str, Any] = {
    "msgRateIn": 4000.0,
    "msgRateOut": 8000.0,
    "msgThroughputIn": 1.0 * MIB,
    "msgThroughputOut": 2.0 * MIB,
    "topics": 10,
    "producerCount": 5,
    "consumerCount": 20,
}


def test_held_out_models_are_registered_but_not_in_the_default_set() -> None:
    assert HELD_OUT_MODELS == ("memory-bound", "per-topic-cost")
    for name in HELD_OUT_MODELS:
        assert get_load_model(name).name == name
        assert name not in LOAD_MODELS
    assert isinstance(get_load_model("memory-bound"), MemoryBoundModel)
    with pytest.raises(KeyError, match="per-topic-cost"):  # the message lists them too
        get_load_model("quadratic")
    assert build("steady-with-noise", 1, load_model="per-topic-cost").model.load_model.name == "per-topic-cost"


def test_load_sums_the_counts_and_defaults_them_to_zero() -> None:
    load = Load.of(
        [STATS, STATS, {k: STATS[k] for k in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")}]
    )
    assert (load.topics, load.producers, load.consumers) == (20, 10, 40)
    assert load.msg == 36000.0 and load.thr_out == 6.0 * MIB


def test_memory_bound_arithmetic_by_hand() -> None:
    lm = MemoryBoundModel()
    broker = Broker("x")  # 8 cores, 1 Gbit/s before the model's 10x
    lm.configure(broker, 0)
    u = lm.usage(broker, Load.of([STATS]))
    # heap: 512 + 0.375 * 10 topics + 0.125 * 20 subscriptions; limit 8 cores * 512 MiB
    assert u["memory"] == {"usage": 512.0 + 3.75 + 2.5, "limit": 4096.0}
    # direct: 256 + 12 s * 2 MiB/s out + 0.125 * 20 consumers; limit 8 cores * 256 MiB
    assert u["directMemory"] == {"usage": 256.0 + 24.0 + 2.5, "limit": 2048.0}
    # cpu: the linear model's (10 + 12000 msg/s / 400 + 3 MiB/s / 2 MiB); NICs at 10 Gbit/s
    assert u["cpu"] == {"usage": pytest.approx(10.0 + 30.0 + 1.5), "limit": 800.0}
    assert u["bandwidthOut"] == {"usage": 2.0 * MIB * 8 / 1024, "limit": 10_000.0 * 1024}
    # a bundle's share of the standard broker: the largest of its parts without the idle broker's base
    ref = lm.reference()
    assert ref.nic_mbps == 10_000.0
    assert lm.share(Load.of([STATS]), ref) == pytest.approx(max(31.5 / 800, 6.25 / 4096, 26.5 / 2048))
    # a 16-core broker has twice the memory
    big = Broker("big", cores=16.0)
    assert lm.usage(big, Load())["directMemory"] == {"usage": 256.0, "limit": 4096.0}
    # the ideal of two standard brokers carrying the bundle: the base counted once per broker
    parts = lm.ideal_parts(Load.of([STATS]), [broker, Broker("y")])
    assert parts["directMemory"] == pytest.approx((282.5 + 256.0) / 4096.0)
    assert parts["memory"] == pytest.approx((518.25 + 512.0) / 8192.0)
    assert lm.ideal(Load.of([STATS]), [broker, Broker("y")]) == max(parts.values())


def test_per_topic_cost_arithmetic_by_hand() -> None:
    lm = PerTopicCostModel(per_topic=0.2, per_connection=0.1)
    broker = Broker("x")
    lm.configure(broker, 0)
    u = lm.usage(broker, Load.of([STATS]))
    # 10 + 0.2 * 10 topics + 0.1 * (5 + 20) connections + 12000 msg/s / 1600 + 3 MiB/s / 8 MiB
    assert u["cpu"]["usage"] == pytest.approx(10.0 + 2.0 + 2.5 + 7.5 + 0.375)
    assert u["cpu"]["limit"] == 800.0 and u["bandwidthIn"]["limit"] == 10_000.0 * 1024
    assert set(u) == {"cpu", "bandwidthIn", "bandwidthOut"}  # no memory reported
    # a bundle's share: without the idle broker's 10 %
    assert lm.share(Load.of([STATS]), lm.reference()) == pytest.approx(12.375 / 800)
    # the per-topic part does not follow the message rate: a bundle of 10 idle topics costs 4.5 % of a core
    idle = {**STATS, "msgRateIn": 0.0, "msgRateOut": 0.0, "msgThroughputIn": 0.0, "msgThroughputOut": 0.0}
    assert lm.cpu(Load.of([idle]), 0.0) == pytest.approx(4.5)


def _cluster(model: str, topics: list[Topic], owners: dict[str, str], brokers: int = 3, **kw: Any) -> ClusterModel:
    nb = NamespaceBundles.with_num_bundles(4)
    return ClusterModel(
        brokers=[Broker(f"b{i}:8080") for i in range(brokers)],
        namespaces={"t/ns": nb},
        topics=topics,
        owners=owners,
        load_model=model,
        **kw,
    )


def _topic(i: int, rate: float, size: float = 1024.0, fanout: float = 1.0) -> Topic:
    name = f"persistent://t/ns/topic-{i}"
    return Topic(name, "t/ns", core_topic_hash(name), rate, msg_size=size, fanout=fanout)


def test_per_topic_cost_fit_sets_the_fixed_costs_per_cluster() -> None:
    m = build("steady-with-noise", 1, load_model="per-topic-cost").model
    lm = m.load_model
    assert isinstance(lm, PerTopicCostModel)
    assert lm.per_topic == pytest.approx(2 * lm.per_connection)
    load = Load.of(m.bundle_stats().values())
    fixed = lm.per_topic * load.topics + lm.per_connection * (load.producers + load.consumers)
    assert fixed == pytest.approx(0.3 * 10 * 800.0)  # 30 % of the cluster's CPU
    assert 0.2 < lm.per_topic < 0.3  # ~0.25 % of a core per topic on the 4,000-topic scenarios
    # the fixed part is most of a broker's CPU, and the rates make up the rest to the target
    per = m.true_usage()
    assert min(per.values()) > 0.45 and max(per.values()) < 0.55


@pytest.mark.parametrize("model", HELD_OUT_MODELS)
@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "large-zipf"])
def test_calibration_puts_the_brokers_where_the_scenario_asks(model: str, scenario: str) -> None:
    """Built under the model, the ideal is the scenario's target under the same model (the scenarios that add
    load after calibrating - a hot bundle, a toggling consumer, a hot topic - end above it)."""
    m = build(scenario, 1, load_model=model).model
    ideal = m.ideal_usage()
    if scenario in TARGETS:
        assert ideal == pytest.approx(TARGETS[scenario], abs=1e-9)
    else:
        assert 0.4 <= ideal <= 0.55
    binding = "directMemory" if model == "memory-bound" else "cpu"
    live = [m.brokers[b] for b in m.live_brokers()]
    parts = m.load_model.ideal_parts(Load.of(m.bundle_stats().values()), live)
    assert max(parts, key=lambda k: parts[k]) == binding
    if model == "memory-bound":  # CPU and NIC well below the binding memory
        assert parts["cpu"] < 0.7 * ideal and max(parts["bandwidthIn"], parts["bandwidthOut"]) < 0.2 * ideal
        assert parts["memory"] < 0.5 * ideal


@pytest.mark.parametrize("model", ["linear", *HELD_OUT_MODELS])
def test_the_hot_bundle_carries_80_percent_of_a_broker_under_the_model(model: str) -> None:
    """The scenario's burst solves for the bundle's load under the model: per-topic and per-client costs do not
    grow with the rates, so ``0.8 / load`` (right for the models proportional to the rates) would fall short."""
    m = build("hot-bundle-needs-split", 1, load_model=model).model
    lm = m.load_model
    loads = {b: lm.share(Load.of([s]), lm.reference()) for b, s in m.bundle_stats().items()}
    assert max(loads.values()) == pytest.approx(0.8, abs=1e-6)


@pytest.mark.parametrize("model", HELD_OUT_MODELS)
def test_a_balanced_start_has_every_broker_at_the_target(model: str) -> None:
    m = build("steady-with-noise", 1, load_model=model).model
    usage = m.true_usage()
    assert max(usage.values()) < 0.51 and min(usage.values()) > 0.45
    assert sum(usage.values()) / len(usage) == pytest.approx(0.5, abs=0.01)


def test_calibration_refuses_a_target_the_counts_alone_exceed() -> None:
    topics = [_topic(i, 10.0) for i in range(40)]
    nb = NamespaceBundles.with_num_bundles(4)
    owners = {bundle_full_name("t/ns", r.name): "b0:8080" for r in nb.ranges}
    m = _cluster("memory-bound", topics, owners, brokers=1)
    with pytest.raises(ValueError, match="counts alone"):
        m.load_model.fit(m, 0.1)  # 512 MiB of a 4 GiB heap is 0.125 before any topic
    m.load_model.fit(m, 0.5)
    assert m.ideal_usage() == pytest.approx(0.5)


def test_memory_appears_in_the_load_report_and_in_the_true_usage() -> None:
    m = build("one-hot-broker", 1, load_model="memory-bound").model
    reports = m.load_reports()
    true = m.true_usage()
    for b, r in reports.items():
        assert set(RESOURCES) <= set(r)
        assert r["memory"]["limit"] == 4096.0 and r["directMemory"]["limit"] == 2048.0
        assert r["memory"]["usage"] > 512.0 and r["directMemory"]["usage"] > 256.0
        data = local_broker_data_from_json(r, b)  # the decision core reads them
        assert data.direct_memory.usage == r["directMemory"]["usage"] and data.memory.percent_usage() > 10.0
        fractions = {k: r[k]["usage"] / r[k]["limit"] for k in RESOURCES if k != "cpu"}
        # the true usage is the max over every resource, memory included: direct memory binds here
        assert true[b] == pytest.approx(fractions["directMemory"]) and true[b] > fractions["memory"]
        assert true[b] > 2 * max(fractions["bandwidthIn"], fractions["bandwidthOut"])
    # the benchmark's metrics: worst broker, ideal and floor under the model, memory included
    run = build("one-hot-broker", 1, load_model="memory-bound")
    r = run_closed_loop(run, "no-action", decisions=2)
    assert r.max_usage[0] == pytest.approx(max(true.values()))
    assert r.max_usage[0] > 0.7  # broker-0 holds about twice the average direct memory
    assert r.ideal[0] == pytest.approx(0.45) and r.floor[0] >= r.ideal[0]


def test_lookup_weighs_memory_as_pulsar_does() -> None:
    """Pulsar 4.x weighs memory and direct memory 0 by default: a broker whose direct memory is full still
    takes bundles; with loadBalancerDirectMemoryResourceWeight 1 it is overloaded and skipped."""
    nb = NamespaceBundles.with_num_bundles(4)
    ranges = [bundle_full_name("t/ns", r.name) for r in nb.ranges]
    topics = []
    for bundle_index, (rate, size) in enumerate([(160.0, 1.0 * MIB), (2000.0, 100.0), (2000.0, 100.0), (10.0, 100.0)]):
        r = nb.ranges[bundle_index]
        i = next(i for i in range(10_000) if r.contains(core_topic_hash(f"persistent://t/ns/topic-{i}")))
        topics.append(_topic(i, rate, size=size))
    owners = {ranges[0]: "b0:8080", ranges[1]: "b1:8080", ranges[2]: "b2:8080", ranges[3]: "b2:8080"}
    m = _cluster("memory-bound", topics, owners)
    reports = m.load_reports()
    d0 = reports["b0:8080"]["directMemory"]
    assert d0["usage"] / d0["limit"] > 0.85  # 12 s of 160 MiB/s out: full
    assert reports["b0:8080"]["cpu"]["usage"] / 800.0 < 0.5
    assert m.true_usage()["b0:8080"] > 0.85
    assert m.lookup(ranges[3]) == "b0:8080"  # least message rate, and not overloaded to Pulsar
    m.config = LoadBalancerConfig.from_mapping({"loadBalancerDirectMemoryResourceWeight": 1.0})
    assert m.overload_usage()["b0:8080"] == pytest.approx(m.true_usage()["b0:8080"])
    assert m.lookup(ranges[3]) != "b0:8080"


def test_the_benchmark_takes_the_held_out_models_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import figures

    bench = figures.load_script("benchmarks/bench_balance.py")
    assert list(bench.MODELS) == [
        *LOAD_MODELS,
        *HELD_OUT_MODELS,
        *HELD_OUT_MODELS_2,
        *HELD_OUT_MODELS_3,
        *HELD_OUT_MODELS_4,
        *HELD_OUT_MODELS_5,
        *HELD_OUT_MODELS_6,
        *HELD_OUT_MODELS_7,
        *HELD_OUT_MODELS_8,
        *HELD_OUT_MODELS_9,
    ]
    assert bench.HELD_OUT_JSON.name == "balance-held-out.json"
    assert "balance-held-out-report" in bench.BLOCKS and "balance-report" not in bench.HELD_OUT_TARGETS
    with pytest.raises(SystemExit):
        bench.main(["--held-out", "--models", "linear"])
    args = ["--quick", "--scenarios", "steady-with-noise", "--cadences", "minute", "--strategies", "no-action"]
    assert bench.main([*args, "--held-out"]) == 0
    out = capsys.readouterr().out
    assert "memory-bound" in out and "per-topic-cost" in out and " linear " not in out
    assert bench.main([*args, "--models", "memory-bound"]) == 0
    assert "memory-bound" in capsys.readouterr().out
