"""The third held-out set (simulator/held_out_models_3.py: catch-up-reads, gc-pressure): arithmetic, the mechanisms
(what a bundle costs depends on what shares its broker), calibration, determinism, reports in Pulsar's units.
The benchmark's --held-out 3: test_held_out_sets_bench.py."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pytest

from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.simulator.cluster import known_load_models, resolve_load_model
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel
from pulsar_rebalance.simulator.held_out_models import (
    HELD_OUT_LOAD_MODELS,
    HELD_OUT_MODELS,
    HELD_OUT_MODELS_2,
    HELD_OUT_SETS,
)
from pulsar_rebalance.simulator.held_out_models_3 import (
    HELD_OUT_LOAD_MODELS_3,
    HELD_OUT_MODELS_3,
    CatchUpReadsModel,
    GcPressureModel,
)
from pulsar_rebalance.simulator.load_models import LOAD_MODELS, Load, LoadModel, get_load_model
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build
from tests.simulator.test_held_out_models import MIB, STATS, TARGETS

pytestmark = pytest.mark.timeout(300)

PER_MSG = 100.0 / 40000.0  # linear's CPU % per message/s
PER_BYTE = 100.0 / (200.0 * MIB)  # linear's CPU % per byte/s

# a dispatch-heavy bundle (fan-out 3: two subscriptions read behind the first) and a write-heavy one (fan-out 1)
READERS = Load(msg=20_000.0, msg_in=5_000.0, msg_out=15_000.0, thr_in=5 * MIB, thr_out=15 * MIB)
WRITER = Load(msg=60_000.0, msg_in=30_000.0, msg_out=30_000.0, thr_in=60 * MIB, thr_out=60 * MIB)
# a busy bundle of few topics and a quiet one of many topics and clients
BUSY = Load(
    msg=50_000.0,
    msg_in=20_000.0,
    msg_out=30_000.0,
    thr_in=20 * MIB,
    thr_out=30 * MIB,
    topics=5,
    producers=5,
    consumers=10,
)
QUIET = Load(
    msg=250.0,
    msg_in=100.0,
    msg_out=150.0,
    thr_in=0.1 * MIB,
    thr_out=0.15 * MIB,
    topics=600,
    producers=700,
    consumers=1000,
)


def _plus(*loads: Load) -> Load:
    return Load(
        sum(x.msg for x in loads),
        sum(x.msg_in for x in loads),
        sum(x.msg_out for x in loads),
        sum(x.thr_in for x in loads),
        sum(x.thr_out for x in loads),
        sum(x.topics for x in loads),
        sum(x.producers for x in loads),
        sum(x.consumers for x in loads),
    )


def _cpu(lm: LoadModel, broker: Broker, load: Load) -> float:
    return lm.usage(broker, load)["cpu"]["usage"]


def _configured(lm: LoadModel, *brokers: Broker) -> None:
    for b in brokers:
        lm.configure(b, 0)


def test_the_third_set_is_registered_apart_from_the_first_two() -> None:
    assert HELD_OUT_MODELS_3 == ("catch-up-reads", "gc-pressure")
    # in a module of their own: the first two sets' module and the registry it extends are as the stored runs had them
    assert HELD_OUT_SETS == {"1": HELD_OUT_MODELS, "2": HELD_OUT_MODELS_2}
    assert not set(HELD_OUT_MODELS_3) & {*HELD_OUT_MODELS, *HELD_OUT_MODELS_2, *LOAD_MODELS, *HELD_OUT_LOAD_MODELS}
    assert tuple(HELD_OUT_LOAD_MODELS_3) == HELD_OUT_MODELS_3
    # the simulator (HTTP server, `standalone --load-model`) finds them by name like the others
    assert isinstance(resolve_load_model("catch-up-reads"), CatchUpReadsModel)
    assert isinstance(resolve_load_model("gc-pressure"), GcPressureModel)
    assert set(HELD_OUT_MODELS_3) <= set(known_load_models())
    with pytest.raises(ValueError, match="gc-pressure"):  # the unknown-name message lists them too
        resolve_load_model("young-gen")


# ---------------------------------------------------------------- catch-up-reads


def test_catch_up_reads_arithmetic_by_hand() -> None:
    lm = CatchUpReadsModel()
    broker, big = Broker("x"), Broker("big", cores=16.0)
    _configured(lm, broker, big)
    load = _plus(READERS, WRITER)  # 65 MiB/s in, 10,000 msg/s and 10 MiB/s to the subscriptions past the first
    assert lm.cache_mb(8.0) == pytest.approx(819.2)  # a fifth of 4 GiB of direct memory
    horizon = 819.2 / 65  # seconds of writes the cache holds
    assert lm.horizon(load.thr_in, 8.0) == pytest.approx(horizon)
    m = math.exp(-horizon / 10)
    assert lm.miss_ratio(load.thr_in, 8.0) == pytest.approx(m)
    assert lm.lagging(load) == (10_000.0, 10 * MIB)
    linear = 10 + 80_000 * PER_MSG + 140 * MIB * PER_BYTE
    misses = m * (3 * PER_MSG * 10_000 + PER_BYTE * 10 * MIB)
    u = lm.usage(broker, load)
    assert u["cpu"] == {"usage": pytest.approx(linear + misses), "limit": 800.0}
    # Pulsar's units; NIC in (the host's NIC) carries the bytes read back from the bookies too, NICs at 10 Gbit/s
    assert u["bandwidthIn"] == {"usage": pytest.approx((65 + m * 10) * MIB * 8 / 1024), "limit": 10_000.0 * 1024}
    assert u["bandwidthOut"] == {"usage": pytest.approx(75 * MIB * 8 / 1024), "limit": 10_000.0 * 1024}
    assert set(u) == {"cpu", "bandwidthIn", "bandwidthOut"}
    # twice the cores, twice the cache: the same traffic misses less
    assert lm.usage(big, load)["cpu"]["usage"] == pytest.approx(
        linear + math.exp(-2 * horizon / 10) * (3 * PER_MSG * 10_000 + PER_BYTE * 10 * MIB)
    )
    # a cache that holds a minute of writes: the age limit, 60 s, binds (and no bytes in at all)
    assert lm.horizon(1 * MIB, 8.0) == 60.0 and lm.horizon(0.0, 8.0) == 60.0
    # a bundle's share: alone on the reference broker (its own bytes in set its misses), without the idle base
    assert lm.share(load, lm.reference()) == pytest.approx((linear - 10 + misses) / 800)
    # ideal: the mix spread by cores (24 of them: three times the standard cache), one idle base per broker
    parts = lm.ideal_parts(load, [broker, big])
    m3 = math.exp(-3 * horizon / 10)
    assert parts["cpu"] == pytest.approx((linear + 10 + m3 * (3 * PER_MSG * 10_000 + PER_BYTE * 10 * MIB)) / 2400)
    assert parts["bandwidthIn"] == pytest.approx((65 + m3 * 10) * MIB * 8 / 1024 / (20_000.0 * 1024))


def test_the_same_reads_cost_more_beside_a_writer_that_overflows_the_cache() -> None:
    """The writer's bytes push the readers' lagging entries out of the cache: the pair costs more than its parts
    (a curve of the mix, not of the sum); under linear the pair is exactly its parts."""
    lm, linear = CatchUpReadsModel(), get_load_model("linear")
    b = Broker("x")
    _configured(lm, b)
    base = 10.0
    alone = _cpu(lm, b, READERS) - base  # 5 MiB/s in: the cache holds its last 60 s, hardly a miss
    assert lm.miss_ratio(READERS.thr_in, 8.0) < 0.003
    beside = _cpu(lm, b, _plus(READERS, WRITER)) - _cpu(lm, b, WRITER)  # the readers' cost beside the writer
    m_pair = lm.miss_ratio(READERS.thr_in + WRITER.thr_in, 8.0)
    assert m_pair > 0.25
    per_miss = 3 * PER_MSG * 10_000 + PER_BYTE * 10 * MIB  # the readers' lagging dispatch, all of it missed
    assert beside - alone == pytest.approx((m_pair - lm.miss_ratio(READERS.thr_in, 8.0)) * per_miss)
    assert beside > 1.3 * alone
    # the writer has no reader behind its first subscription: alone, it misses nothing
    assert lm.lagging(WRITER) == (0.0, 0.0)
    assert _cpu(lm, b, WRITER) == pytest.approx(_cpu(linear, b, WRITER))
    # moving the writer off relieves the readers: more than the writer's own cost
    relief = _cpu(lm, b, _plus(READERS, WRITER)) - _cpu(lm, b, READERS)
    assert relief > 1.1 * (_cpu(lm, b, WRITER) - base)
    linear_relief = _cpu(linear, b, _plus(READERS, WRITER)) - _cpu(linear, b, READERS)
    assert linear_relief == pytest.approx(_cpu(linear, b, WRITER) - base)


def test_the_miss_cost_is_convex_in_the_bytes_written() -> None:
    """Per unit of traffic, a broker written twice as fast pays well over twice the miss CPU: doubling a broker's
    traffic more than doubles what it reads from the bookies."""
    lm = CatchUpReadsModel()
    grid = [READERS.thr_in * k / 4 for k in range(1, 200)]
    ratios = [lm.miss_ratio(x, 8.0) for x in grid]
    assert all(b >= a for a, b in zip(ratios, ratios[1:], strict=False)) and ratios[-1] < 1.0
    mid = Load(msg=100_000.0, msg_in=40_000.0, msg_out=60_000.0, thr_in=50 * MIB, thr_out=75 * MIB)
    double = Load(msg=200_000.0, msg_in=80_000.0, msg_out=120_000.0, thr_in=100 * MIB, thr_out=150 * MIB)
    extra = lm.cpu(mid, 0.0) - get_load_model("linear").cpu(mid, 0.0)
    extra2 = lm.cpu(double, 0.0) - get_load_model("linear").cpu(double, 0.0)
    assert extra2 > 3 * extra


def _relief(m: ClusterModel, broker: str, bundle: str) -> tuple[float, float]:
    """(the broker's CPU drop when ``bundle`` leaves it, the bundle's share of the broker's CPU by its linear cost)."""
    stats = m.bundle_stats()
    owned = {b: s for b, s in stats.items() if m.owners[b] == broker}
    lm, spec = m.load_model, m.brokers[broker]
    before = _cpu(lm, spec, Load.of(owned.values()))
    after = _cpu(lm, spec, Load.of(s for b, s in owned.items() if b != bundle))
    linear = get_load_model("linear")
    rate_share = linear.cpu(Load.of([owned[bundle]]), 0.0) / linear.cpu(Load.of(owned.values()), 0.0)
    return before - after, rate_share * (before - 10.0)


def test_moving_the_biggest_writer_off_relieves_more_than_its_rate_share() -> None:
    m = build("one-hot-broker", 1, load_model=CatchUpReadsModel()).model
    stats = m.bundle_stats()
    hot = max(m.true_usage(), key=lambda b: m.true_usage()[b])
    writer = max((b for b in stats if m.owners[b] == hot), key=lambda b: stats[b]["msgThroughputIn"])
    relief, rate_share = _relief(m, hot, writer)
    assert relief > 1.1 * rate_share
    # and more than it costs alone on a standard broker (what the scenarios place it by)
    lm = m.load_model
    assert relief > 1.1 * lm.share(Load.of([stats[writer]]), lm.reference()) * m.brokers[hot].cpu_limit


def test_the_load_report_shows_the_reads_from_the_bookies_only_on_the_nic() -> None:
    """bandwidthIn is above the bundles' msgThroughputIn by what the broker reads back from the bookies; the bundle
    stats (what Pulsar's strategies and the planner see per bundle) are the traffic as always."""
    m = build("steady-with-noise", 1, load_model=CatchUpReadsModel(), noise=0.0).model
    lm = m.load_model
    assert isinstance(lm, CatchUpReadsModel)
    for b, r in m.load_reports().items():
        load = Load.of(r["lastStats"].values())  # no rate noise: the bundles' true traffic
        read_back = lm.misses(load, m.brokers[b].cores)[1]
        assert read_back > 0.1 * MIB
        assert r["bandwidthIn"]["usage"] == pytest.approx((load.thr_in + read_back) * 8 / 1024)
        assert set(r) - {"lastUpdate", "lastStats", "bundles"} == {"cpu", "bandwidthIn", "bandwidthOut"}
        data = local_broker_data_from_json(r, b)  # the decision core reads them as Pulsar's LocalBrokerData
        assert data.bandwidth_in.usage == r["bandwidthIn"]["usage"] and data.cpu.limit == 800.0


# ---------------------------------------------------------------- gc-pressure


def test_gc_factor_grows_with_the_live_set_and_turns_steep_past_half_the_heap() -> None:
    lm = GcPressureModel()
    f = lm.gc_factor
    assert f(0.0) == pytest.approx(0.2)
    assert f(0.45) == pytest.approx(1.1)  # where the heap is sized: G1's initiating occupancy
    assert f(0.5) == pytest.approx(1.2)
    assert f(0.6) == pytest.approx(1.75)
    assert f(0.75) == pytest.approx(3.4)
    assert f(0.95) == pytest.approx(21.0) and f(2.0) == f(0.95)  # capped: reports stay finite
    grid = [k / 100 for k in range(96)]
    values = [f(o) for o in grid]
    assert all(b > a for a, b in zip(values, values[1:], strict=False))
    slope = [b - a for a, b in zip(values, values[1:], strict=False)]
    assert max(slope[:50]) < 0.021 < min(slope[50:])  # eden half the heap, then only the free heap


def test_gc_pressure_arithmetic_by_hand() -> None:
    lm = GcPressureModel(heap_mb_per_core=100.0)
    broker, big = Broker("x"), Broker("big", cores=16.0)
    _configured(lm, broker, big)
    load = Load.of([STATS])  # 10 topics, 5 producers, 20 consumers; 12,000 msg/s, 3 MiB/s
    live = 256 + 10 * 0.1875 + 20 * 0.0625 + 5 * 0.03125
    assert lm.live_set(load) == pytest.approx(live)
    o = live / 800
    assert lm.occupancy(load, 8.0) == pytest.approx(o)
    gc = 0.25 * PER_MSG * 12_000 * (0.1 + o) / 0.5
    u = lm.usage(broker, load)
    assert u["cpu"] == {"usage": pytest.approx(10 + 12_000 * PER_MSG + 3 * MIB * PER_BYTE + gc), "limit": 800.0}
    # no memory reported (Pulsar's heap sample is garbage and all); NICs at 10 Gbit/s
    assert set(u) == {"cpu", "bandwidthIn", "bandwidthOut"}
    assert u["bandwidthIn"] == {"usage": 1.0 * MIB * 8 / 1024, "limit": 10_000.0 * 1024}
    # twice the cores, twice the heap: the same live set is half the share
    assert lm.occupancy(load, 16.0) == pytest.approx(live / 1600)
    # a bundle's share: alone on the reference broker (beside the broker's own live set), without the idle base
    assert lm.share(load, lm.reference()) == pytest.approx((12_000 * PER_MSG + 3 * MIB * PER_BYTE + gc) / 800)
    # ideal: topics, clients and traffic spread by cores (24 of them), one idle base and one own live set per broker
    o_ideal = (512 + live - 256) / 2400
    parts = lm.ideal_parts(load, [broker, big])
    want = 20 + 12_000 * PER_MSG + 3 * MIB * PER_BYTE + 0.25 * PER_MSG * 12_000 * (0.1 + o_ideal) / 0.5
    assert parts["cpu"] == pytest.approx(want / 2400)


def test_the_same_messages_cost_more_beside_many_topics() -> None:
    lm, linear = GcPressureModel(heap_mb_per_core=100.0), get_load_model("linear")
    b = Broker("x")
    _configured(lm, b)
    few = Load(QUIET.msg, QUIET.msg_in, QUIET.msg_out, QUIET.thr_in, QUIET.thr_out, 6, 7, 10)  # same rates, few topics
    many, fewer = _cpu(lm, b, _plus(BUSY, QUIET)), _cpu(lm, b, _plus(BUSY, few))
    o_many, o_few = lm.occupancy(_plus(BUSY, QUIET), 8.0), lm.occupancy(_plus(BUSY, few), 8.0)
    assert o_many > 0.55 > 0.35 > o_few
    msgs = BUSY.msg + QUIET.msg
    assert many - fewer == pytest.approx(0.25 * PER_MSG * msgs * (lm.gc_factor(o_many) - lm.gc_factor(o_few)))
    assert many > 1.1 * fewer
    assert _cpu(linear, b, _plus(BUSY, QUIET)) == pytest.approx(_cpu(linear, b, _plus(BUSY, few)))
    # moving the quiet bundle of many topics off relieves every busy message: far more than its own cost
    relief = _cpu(lm, b, _plus(BUSY, QUIET)) - _cpu(lm, b, BUSY)
    assert relief > 20 * (_cpu(lm, b, QUIET) - 10.0)
    assert relief > 0.1 * (_cpu(lm, b, BUSY) - 10.0)  # an eighth of what the busy bundle costs


def test_gc_fit_sizes_the_heap_to_the_cluster() -> None:
    m = build("steady-with-noise", 1, load_model=GcPressureModel()).model
    lm = m.load_model
    assert isinstance(lm, GcPressureModel)
    live = [m.brokers[b] for b in m.live_brokers()]
    load = Load.of(m.bundle_stats().values())
    cores = sum(b.cores for b in live)
    assert lm.occupancy(load, cores, lm.HEAP_BASE_MB * len(live)) == pytest.approx(0.45)
    assert 100 < lm.heap_mb_per_core < 120  # -Xmx ~860 MiB per 8 cores for ~400 topics a broker
    # a balanced start: every broker near the sizing point, so near the ideal
    per = m.true_usage()
    assert min(per.values()) > 0.48 and max(per.values()) < 0.52


def test_moving_the_quietest_bundle_of_most_topics_off_relieves_more_than_its_rate_share() -> None:
    """one-hot-broker piles the smallest bundles (many topics for their rates) on one broker: its heap fills."""
    m = build("one-hot-broker", 1, load_model=GcPressureModel()).model
    lm = m.load_model
    assert isinstance(lm, GcPressureModel)
    stats = m.bundle_stats()
    per: dict[str, list[Mapping[str, Any]]] = {b: [] for b in m.live_brokers()}
    for b, s in stats.items():
        per[m.owners[b]].append(s)
    occupancy = {b: lm.occupancy(Load.of(v), m.brokers[b].cores) for b, v in per.items()}
    hot = max(m.true_usage(), key=lambda b: m.true_usage()[b])
    assert occupancy[hot] == max(occupancy.values()) > 0.55 > sorted(occupancy.values())[-2]
    owned = [b for b in stats if m.owners[b] == hot]
    quiet = max(owned, key=lambda b: stats[b]["topics"] / (stats[b]["msgRateIn"] + stats[b]["msgRateOut"]))
    relief, rate_share = _relief(m, hot, quiet)
    assert relief > 1.5 * rate_share


# ---------------------------------------------------------------- both: calibration, determinism


@pytest.mark.parametrize("model", HELD_OUT_MODELS_3)
@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "large-zipf"])
def test_every_scenario_calibrates_under_the_model(model: str, scenario: str) -> None:
    m = build(scenario, 1, load_model=resolve_load_model(model)).model
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
    cores = sum(b.cores for b in live)
    cpu = ideal * sum(b.cpu_limit for b in live)
    if isinstance(lm, CatchUpReadsModel):  # the cache holds 12-16 s of writes; a fifth to a third of the reads miss
        assert 12.0 < lm.horizon(load.thr_in, cores) < 16.5
        assert 0.2 < lm.miss_ratio(load.thr_in, cores) < 0.31
        miss_msgs, miss_bytes = lm.misses(load, cores)
        assert 0.09 < (lm.MISS_PER_MSG * miss_msgs + lm.MISS_PER_BYTE * miss_bytes) / cpu < 0.15
    else:
        assert isinstance(lm, GcPressureModel)
        o = lm.occupancy(load, cores, lm.HEAP_BASE_MB * len(live))
        assert 0.445 < o < 0.455  # the heap sized at 45 % (a toggling consumer adds a little after)
        assert 0.16 < lm.gc(load, o) / cpu < 0.19


@pytest.mark.parametrize("model", HELD_OUT_MODELS_3)
def test_large_zipf_calibrates_under_the_model(model: str) -> None:
    m = build("large-zipf", 1, load_model=resolve_load_model(model)).model
    assert m.ideal_usage() == pytest.approx(0.5, abs=1e-9)
    lm = m.load_model
    if isinstance(lm, GcPressureModel):  # five times the topics a broker: Pulsar's default -Xmx2g per 8 cores
        assert 240 < lm.heap_mb_per_core < 270


@pytest.mark.parametrize("model", HELD_OUT_MODELS_3)
def test_the_hot_bundle_carries_80_percent_of_a_broker(model: str) -> None:
    m = build("hot-bundle-needs-split", 1, load_model=resolve_load_model(model)).model
    lm = m.load_model
    loads = [lm.share(Load.of([s]), lm.reference()) for s in m.bundle_stats().values()]
    assert max(loads) == pytest.approx(0.8, abs=1e-6)


@pytest.mark.parametrize("model", HELD_OUT_MODELS_3)
def test_the_ideal_is_every_broker_carrying_the_same_mix(model: str) -> None:
    """Two equal brokers each carrying half of everything (rates and counts) are both exactly at the ideal."""
    lm = resolve_load_model(model)
    a, b = Broker("a"), Broker("b")
    _configured(lm, a, b)
    half = _plus(BUSY, QUIET, READERS, WRITER)
    whole = _plus(half, half)
    parts = lm.ideal_parts(whole, [a, b])
    for broker in (a, b):
        usage = lm.usage(broker, half)
        for k, r in usage.items():
            assert r["usage"] / r["limit"] == pytest.approx(parts[k]), (model, k)


@pytest.mark.parametrize("model", HELD_OUT_MODELS_3)
def test_calibration_refuses_a_target_the_counts_alone_reach(model: str) -> None:
    m = build("steady-with-noise", 1, load_model=resolve_load_model(model)).model
    lm = m.load_model
    load = Load.of(m.bundle_stats().values())
    live = [m.brokers[b] for b in m.live_brokers()]
    counts_only = lm.ideal(Load(topics=load.topics, producers=load.producers, consumers=load.consumers), live)
    assert counts_only == pytest.approx(10 / 800)  # the idle base: no traffic, no misses, no garbage
    with pytest.raises(ValueError, match="counts alone put the cluster at cpu"):
        lm.fit(m, counts_only * 0.9)
    lm.fit(m, 0.3)
    assert m.ideal_usage() == pytest.approx(0.3, abs=1e-9)


@pytest.mark.parametrize("model", HELD_OUT_MODELS_3)
def test_deterministic_given_the_seed(model: str) -> None:
    def reports(seed: int) -> dict[str, Any]:
        m = build("one-hot-broker", seed, load_model=resolve_load_model(model)).model
        m.advance(3)
        return {b: {k: r[k] for k in ("cpu", "bandwidthIn", "bandwidthOut")} for b, r in m.load_reports().items()}

    assert json.dumps(reports(1), sort_keys=True) == json.dumps(reports(1), sort_keys=True)
    assert reports(1) != reports(2)
