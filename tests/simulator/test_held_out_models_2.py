"""The second held-out set (simulator/held_out_models.py: tls-crypto, bookie-backpressure): arithmetic,
calibration, determinism, reports in Pulsar's units. The benchmark's --held-out 2: test_held_out_sets_bench.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.simulator.dynamics import Broker
from pulsar_rebalance.simulator.held_out_models import (
    HELD_OUT_MODELS,
    HELD_OUT_MODELS_2,
    HELD_OUT_SETS,
    BookieBackpressureModel,
    TlsCryptoModel,
)
from pulsar_rebalance.simulator.load_models import LOAD_MODELS, Load, get_load_model
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build
from tests.simulator.test_held_out_models import MIB, STATS, TARGETS

pytestmark = pytest.mark.timeout(300)


def test_the_second_set_is_registered_apart_from_the_first() -> None:
    assert HELD_OUT_MODELS_2 == ("tls-crypto", "bookie-backpressure")
    assert HELD_OUT_SETS == {"1": HELD_OUT_MODELS, "2": HELD_OUT_MODELS_2}
    assert not set(HELD_OUT_MODELS_2) & {*HELD_OUT_MODELS, *LOAD_MODELS}
    assert isinstance(get_load_model("tls-crypto"), TlsCryptoModel)
    assert isinstance(get_load_model("bookie-backpressure"), BookieBackpressureModel)


def test_tls_crypto_arithmetic_by_hand() -> None:
    lm = TlsCryptoModel()
    new, old = Broker("new"), Broker("old")
    lm.configure(new, 0)
    lm.configure(old, 0)
    lm.generation.update({"new": 1.0, "old": 1.6})  # whichever the seed chose
    load = Load.of([STATS])
    # plain: 12000 msg/s at half linear's cost (1 core per 80,000 msg/s) + 3 MiB/s at 1 core per 200 MiB/s
    plain = 12000 * 100 / 80000 + 3 * 100 / 200
    # crypto: 3 MiB/s at 1 core per 100 MiB/s + 25 connections * 0.02 %
    crypto = 3 * 100 / 100 + 25 * 0.02
    assert lm.plain(load) == pytest.approx(plain) and lm.crypto(load) == pytest.approx(crypto)
    u_new, u_old = lm.usage(new, load), lm.usage(old, load)
    assert u_new["cpu"] == {"usage": pytest.approx(10 + plain + crypto), "limit": 800.0}
    # the older generation: same limit, 1.6x the crypto
    assert u_old["cpu"] == {"usage": pytest.approx(10 + plain + 1.6 * crypto), "limit": 800.0}
    # Pulsar's units: NIC usage and limit in Kbit/s (10 Gbit/s NICs), no memory reported
    assert u_old["bandwidthIn"] == {"usage": 1.0 * MIB * 8 / 1024, "limit": 10_000.0 * 1024}
    assert set(u_old) == {"cpu", "bandwidthIn", "bandwidthOut"}
    # a bundle's share: on the reference (newer) broker, without the idle base
    assert lm.share(load, lm.reference()) == pytest.approx((plain + crypto) / 800)
    # the floor tells the generations apart, though cores and NIC are equal
    assert lm.capacity_key(new) != lm.capacity_key(old)
    # ideal: both brokers at the same usage u, each carrying the share of the load its generation allows
    parts = lm.ideal_parts(load, [new, old])
    u = parts["cpu"]
    s_new = (u * 800 - 10) / (plain + crypto)
    s_old = (u * 800 - 10) / (plain + 1.6 * crypto)
    assert s_new + s_old == pytest.approx(1.0)
    assert s_new > s_old
    # with one generation the ideal is linear's: total CPU over total capacity
    lm.generation["old"] = 1.0
    assert lm.ideal_parts(load, [new, old])["cpu"] == pytest.approx((20 + plain + crypto) / 1600)


def test_tls_generations_come_from_the_seed_and_the_broker() -> None:
    def gens(seed: int) -> dict[str, float]:
        lm = TlsCryptoModel()
        for i in range(40):
            lm.configure(Broker(f"broker-{i}:8080"), seed)
        return lm.generation

    assert gens(1) == gens(1)  # deterministic
    assert gens(1) != gens(2)
    assert set(gens(1).values()) == {1.0, 1.6}
    assert 10 <= list(gens(1).values()).count(1.6) <= 30


def test_bookie_write_cost_is_concave_then_convex() -> None:
    lm = BookieBackpressureModel()
    c = lm.write_cost
    assert c(0.0) == pytest.approx(2.2)
    assert c(12_000.0) == pytest.approx(0.6 + 1.6 / 13 + 1.0)
    assert c(1e9) == pytest.approx(0.6 + 9.0, abs=1e-5)  # backpressure capped at 3x saturation
    grid = [float(w) for w in range(0, 30_001, 50)]
    best = min(grid, key=c)
    assert 4000 <= best <= 4600 and c(best) == pytest.approx(1.03, abs=0.01)
    # a broker's write CPU, w * c(w): rising throughout, concave below the inflection, convex above
    total = [w * c(w) for w in grid]
    assert all(b > a for a, b in zip(total, total[1:], strict=False))
    second = [total[i - 1] - 2 * total[i] + total[i + 1] for i in range(1, len(total) - 1)]
    assert second[0] < 0 and second[200] > 0  # 50 and 10,050 writes/s per core
    flips = [i for i in range(1, len(second)) if (second[i - 1] < 0) != (second[i] < 0)]
    assert len(flips) == 1 and 2000 <= grid[flips[0]] <= 2400  # the inflection, ~2,200 writes/s per core


def test_bookie_backpressure_arithmetic_by_hand() -> None:
    lm = BookieBackpressureModel()
    broker, big = Broker("x"), Broker("big", cores=16.0)
    lm.configure(broker, 0)
    lm.configure(big, 0)
    load = Load.of([STATS])
    rest = 8000 * 100 / 40000 + 3 * 100 / 200  # dispatch and bytes as linear
    write = 4000 * 100 / 40000
    u = lm.usage(broker, load)
    assert u["cpu"] == {"usage": pytest.approx(10 + rest + write * lm.write_cost(500.0)), "limit": 800.0}
    # the same writes on twice the cores: half the writes per core, another point of the curve
    assert lm.usage(big, load)["cpu"] == {
        "usage": pytest.approx(10 + rest + write * lm.write_cost(250.0)),
        "limit": 1600.0,
    }
    assert u["bandwidthOut"] == {"usage": 2.0 * MIB * 8 / 1024, "limit": 10_000.0 * 1024}
    assert set(u) == {"cpu", "bandwidthIn", "bandwidthOut"}
    assert lm.share(load, lm.reference()) == pytest.approx((rest + write * lm.write_cost(500.0)) / 800)
    # ideal: writes spread over the cores (24 of them), one idle base per broker
    parts = lm.ideal_parts(load, [broker, big])
    assert parts["cpu"] == pytest.approx((20 + rest + write * lm.write_cost(4000 / 24)) / 2400)
    # doubling the writes more than doubles their CPU past the minimum of the curve
    hot = Load(msg_in=10_000.0 * 8, msg=10_000.0 * 8)
    warm = Load(msg_in=5_000.0 * 8, msg=5_000.0 * 8)
    assert lm.cpu(hot, 0.0) > 2.5 * lm.cpu(warm, 0.0)


@pytest.mark.parametrize("model", HELD_OUT_MODELS_2)
@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "large-zipf"])
def test_every_scenario_calibrates_under_the_model(model: str, scenario: str) -> None:
    m = build(scenario, 1, load_model=model).model
    ideal = m.ideal_usage()
    if scenario in TARGETS:
        assert ideal == pytest.approx(TARGETS[scenario], abs=1e-9)
    else:  # load added after calibrating (a hot bundle, a hot topic, a toggling consumer)
        assert 0.4 <= ideal <= 0.6
    live = [m.brokers[b] for b in m.live_brokers()]
    load = Load.of(m.bundle_stats().values())
    parts = m.load_model.ideal_parts(load, live)
    assert max(parts, key=lambda k: parts[k]) == "cpu"  # CPU binds, the NICs well below it
    assert max(parts["bandwidthIn"], parts["bandwidthOut"]) < 0.2 * ideal
    lm = m.load_model
    if isinstance(lm, TlsCryptoModel):  # crypto is a large part of the traffic's CPU
        assert 0.75 < lm.crypto(load) / lm.plain(load) < 0.95
    else:
        assert isinstance(lm, BookieBackpressureModel)
        w = load.msg_in / sum(b.cores for b in live)
        assert 5000 < w < 7200 and 1.04 < lm.write_cost(w) < 1.16
        assert lm.write_cost(w + 1) > lm.write_cost(w)  # past the curve's minimum


def test_large_zipf_calibrates_under_both_models() -> None:
    for model in HELD_OUT_MODELS_2:
        m = build("large-zipf", 1, load_model=model).model
        assert m.ideal_usage() == pytest.approx(0.5, abs=1e-9)


@pytest.mark.parametrize("model", HELD_OUT_MODELS_2)
def test_the_hot_bundle_carries_80_percent_of_a_broker(model: str) -> None:
    m = build("hot-bundle-needs-split", 1, load_model=model).model
    lm = m.load_model
    loads = [lm.share(Load.of([s]), lm.reference()) for s in m.bundle_stats().values()]
    assert max(loads) == pytest.approx(0.8, abs=1e-6)


def test_calibration_refuses_a_target_the_counts_alone_reach() -> None:
    m = build("steady-with-noise", 1, load_model="tls-crypto").model
    lm = m.load_model
    load = Load.of(m.bundle_stats().values())
    live = [m.brokers[b] for b in m.live_brokers()]
    counts_only = lm.ideal(Load(topics=load.topics, producers=load.producers, consumers=load.consumers), live)
    assert 0.01 < counts_only < 0.1  # the idle base and the handshakes
    with pytest.raises(ValueError, match="counts alone put the cluster at cpu"):
        lm.fit(m, counts_only * 0.9)
    lm.fit(m, 0.3)
    assert m.ideal_usage() == pytest.approx(0.3, abs=1e-9)


@pytest.mark.parametrize("model", HELD_OUT_MODELS_2)
def test_deterministic_given_the_seed(model: str) -> None:
    def reports(seed: int) -> dict[str, Any]:
        m = build("one-hot-broker", seed, load_model=model).model
        m.advance(3)
        return {b: {k: r[k] for k in ("cpu", "bandwidthIn", "bandwidthOut")} for b, r in m.load_reports().items()}

    assert json.dumps(reports(1), sort_keys=True) == json.dumps(reports(1), sort_keys=True)
    assert reports(1) != reports(2)


def test_older_generation_reports_more_cpu_at_the_same_limit() -> None:
    """A start balanced by the standard broker's measure: the older brokers report ~20-30 % more CPU, with the
    same limits; the decision core reads them as Pulsar's LocalBrokerData."""
    m = build("steady-with-noise", 1, load_model="tls-crypto").model
    lm = m.load_model
    assert isinstance(lm, TlsCryptoModel)
    true = m.true_usage()
    reports = m.load_reports()
    old = [b for b in true if lm.generation[b] == 1.6]
    new = [b for b in true if lm.generation[b] == 1.0]
    assert old and new
    assert {r["cpu"]["limit"] for r in reports.values()} == {800.0}
    ratio = (sum(true[b] for b in old) / len(old)) / (sum(true[b] for b in new) / len(new))
    assert 1.18 < ratio < 1.32
    for b, r in reports.items():
        data = local_broker_data_from_json(r, b)
        assert data.cpu.limit == 800.0 and data.bandwidth_out.limit == 10_000.0 * 1024
    # the floor: the hottest topic alone on the broker where it weighs least (a newer one)
    assert m.floor_usage() >= m.ideal_usage()
