"""The seventh held-out set (simulator/held_out_models_7.py: smt-knee, offload-bursts): arithmetic on hand-built
clusters, the mechanisms (above the knee a unit of work costs 1/0.3 of reported CPU, below it linear; a topic's written
chunks set off bursts of CPU and NIC on its bundle's owner, at most two at once, restarted on a new owner when the
bundle moves, in no reported rate), calibration, determinism. The benchmark's --held-out 7:
test_held_out_sets_bench.py."""

from __future__ import annotations

import json
import random

import pytest

from pulsar_rebalance.simulator.closed_loop import run_closed_loop
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Topic
from pulsar_rebalance.simulator.held_out_models_7 import (
    GIB,
    HELD_OUT_LOAD_MODELS_7,
    HELD_OUT_MODELS_7,
    Burst,
    OffloadBurstsModel,
    SmtKneeModel,
)
from pulsar_rebalance.simulator.load_models import Load, LoadModel
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build
from tests.simulator.test_held_out_models import MIB, TARGETS
from tests.simulator.test_held_out_models_6 import (
    B0,
    B1,
    BUNDLES,
    LINEAR,
    NS,
    PER_BYTE,
    _bundle,
    _cpu,
    _linear,
    _owned_load,
    _topic_in,
)

pytestmark = pytest.mark.timeout(300)

ABOVE = 1 / 0.3 - 1  # smt-knee's extra slope above the knee
D_MS = 20 * 1024 / 96 * 1000  # offload-bursts: a burst's duration, 20 GiB at 96 MiB/s
BURST_CPU = 1.5 * PER_BYTE * 96 * MIB  # CPU % of a running burst: 72


# ---------------------------------------------------------------- smt-knee


def _r(w: float) -> float:
    """smt-knee's reported usage for work ``w`` (both over the limit), by hand."""
    if w <= 0.45:
        h = 0.0
    elif w >= 0.55:
        h = w - 0.5
    else:
        h = (w - 0.45) ** 2 / 0.2
    return min(w + ABOVE * h, 1.0)


def test_the_knee_by_hand() -> None:
    lm = SmtKneeModel()
    for w in (0.0, 0.2, 0.45):  # up to half the logical CPUs busy (less the band): linear, to the digit
        assert lm.cpu_curve(w) == w
    assert lm.cpu_curve(0.5) == pytest.approx(0.5 + ABOVE * 0.05**2 / 0.2)
    assert lm.cpu_curve(0.55) == pytest.approx(0.55 + ABOVE * 0.05)
    assert lm.cpu_curve(0.6) == pytest.approx(0.6 + ABOVE * 0.1) == pytest.approx(0.8333, abs=1e-4)
    assert lm.cpu_curve(0.65) == pytest.approx(1.0)  # every logical CPU busy: half doing a core's work, half 0.3
    assert lm.cpu_curve(0.7) == lm.cpu_curve(2.5) == 1.0  # capped by the limit and nothing else
    for w in (0.3, 0.46, 0.5, 0.54, 0.58, 0.62):
        assert lm.cpu_curve(w) == pytest.approx(_r(w), rel=1e-12)
        assert lm.work(lm.cpu_curve(w)) == pytest.approx(w, rel=1e-12)
    # the slope: 1 below the band, 1/0.3 above it, continuous through it
    eps = 1e-7
    assert (lm.cpu_curve(0.3 + eps) - lm.cpu_curve(0.3)) / eps == pytest.approx(1.0, rel=1e-6)
    assert (lm.cpu_curve(0.6 + eps) - lm.cpu_curve(0.6)) / eps == pytest.approx(1 / 0.3, rel=1e-6)
    for edge in (0.45, 0.55):
        left = (lm.cpu_curve(edge) - lm.cpu_curve(edge - eps)) / eps
        right = (lm.cpu_curve(edge + eps) - lm.cpu_curve(edge)) / eps
        assert left == pytest.approx(right, rel=1e-5)
    # the reported CPU of a broker of any size: the curve of its work over its limit
    assert lm.reported_cpu(480.0, 800.0) == pytest.approx(800 * _r(0.6))
    assert lm.reported_cpu(960.0, 1600.0) == pytest.approx(1600 * _r(0.6))


def _knee_cluster() -> tuple[ClusterModel, list[Topic]]:
    """b0 above the knee (bundle 0, and bundle 1 which moves), b1 well below it (bundle 2)."""
    topics = [
        _topic_in(0, 40_000.0, 2500.0, fanout=2.0),
        _topic_in(1, 5_000.0, 1000.0),
        _topic_in(2, 20_000.0, 1000.0),
    ]
    m = ClusterModel(
        brokers=[Broker(B0), Broker(B1)],
        namespaces={NS: BUNDLES},
        topics=topics,
        owners={_bundle(0): B0, _bundle(1): B0, _bundle(2): B1, _bundle(3): B1},
        load_model=SmtKneeModel(),
    )
    return m, topics


def test_smt_knee_arithmetic_by_hand() -> None:
    m, (a, b, c) = _knee_cluster()
    reports = m.load_reports()
    w0 = (10 + _linear(a, b)) / 800
    w1 = (10 + _linear(c)) / 800
    assert 0.55 < w0 < 0.65 and w1 < 0.45
    assert reports[B0]["cpu"] == {"usage": pytest.approx(800 * (w0 + ABOVE * (w0 - 0.5)), rel=1e-13), "limit": 800.0}
    assert reports[B1]["cpu"] == {"usage": 10 + _linear(c), "limit": 800.0}  # below the knee: linear, to the digit
    # NICs at 10 Gbit/s carry the bytes as reported; the reported rates are the rates
    assert reports[B0]["bandwidthOut"] == {"usage": (80_000 * 2500.0 + 5000 * 1000.0) * 8 / 1024, "limit": 10_240_000.0}
    assert reports[B0]["lastStats"][_bundle(0)]["msgRateOut"] == 80_000.0
    # what a strategy sees and what the benchmark measures are the same
    assert m.true_usage() == {x: pytest.approx(r["cpu"]["usage"] / 800) for x, r in reports.items()}


def test_above_the_knee_a_move_relieves_more_than_its_rate_share_and_below_it_costs_linear() -> None:
    m, (_, b, _) = _knee_cluster()
    before = _cpu(m)
    m.apply({"unloads": [{"bundle": _bundle(1), "broker": B0, "destination": B1}]})
    after = _cpu(m)
    moved = _linear(b)  # the bundle's linear CPU
    assert (before[B0] - after[B0]) / moved == pytest.approx(1 / 0.3, rel=1e-9)  # both ends above the band
    assert after[B1] - before[B1] == pytest.approx(moved, rel=1e-12)  # both ends below it
    # back: the same, the other way
    m.apply({"unloads": [{"bundle": _bundle(1), "broker": B1, "destination": B0}]})
    assert _cpu(m) == before


def test_one_hot_broker_reads_full_until_its_work_is_below_saturation() -> None:
    lm = SmtKneeModel()
    m = build("one-hot-broker", 1, load_model=lm, noise=0.0).model
    hot = "broker-0:8080"
    usage = m.true_usage()
    work = {b: LINEAR.cpu(_owned_load(m, b)) / 800 for b in usage}
    assert usage[hot] == 1.0 and 0.8 < work[hot] < 0.9  # twice the average work, past what the CPUs can deliver
    others = [b for b in usage if b != hot]
    assert all(work[b] < 0.45 and usage[b] == work[b] for b in others)  # the rest below the knee: linear
    stats = m.bundle_stats()
    mine = sorted((b for b in stats if m.owners[b] == hot), key=lambda b: LINEAR.cpu(Load.of([stats[b]]), 0.0))
    coolest = min(others, key=lambda b: usage[b])
    bundle = mine[len(mine) // 2]
    m.owners[bundle] = coolest  # one bundle off: the hot broker still reads 100 %; the destination pays linear
    after = m.true_usage()
    assert after[hot] == 1.0
    assert after[coolest] - usage[coolest] == pytest.approx(LINEAR.cpu(Load.of([stats[bundle]]), 0.0) / 800)


def test_the_ideal_is_every_broker_at_the_same_work_and_no_split_beats_it() -> None:
    lm = SmtKneeModel()
    brokers = [Broker(B0), Broker(B1, 16.0)]
    for b in brokers:
        lm.configure(b, 0)
    total = 1150.0  # CPU % of work (traffic) between them: 0.5 of their 2,400 with the two bases
    load = Load(msg=total / (100 / 40000))
    u = lm.ideal(load, brokers)
    assert u == pytest.approx(_r((total + 20) / 2400), rel=1e-12)
    assert u == pytest.approx(lm.cpu_curve(LINEAR.ideal_parts(load, brokers)["cpu"]), rel=1e-15)

    def worst(t0: float) -> float:
        return max(_r((10 + t0) / 800), _r((10 + total - t0) / 1600))

    best = min(worst(total * k / 10_000) for k in range(10_001))
    assert u <= best + 1e-12 and best < u + 1e-3


def test_the_hot_topic_alone_is_charged_through_the_curve() -> None:
    m = build("hot-single-topic-unsplittable", 1, load_model=SmtKneeModel()).model
    # the topic's share (its work) is 0.6 of a broker: alone on one, with the idle base, past the knee
    assert m.floor_usage() == pytest.approx(_r(0.6 + 10 / 800)) == pytest.approx(0.875)


# ---------------------------------------------------------------- offload-bursts


def _bursting(*topics: Topic, owners: dict[int, str] | None = None) -> tuple[ClusterModel, OffloadBurstsModel]:
    """A hand-built cluster (no noise, drift or daily swing) under offload-bursts: bundles 0 and 1 on b0, 2 and 3 on b1
    unless ``owners`` says otherwise; read once."""
    lm = OffloadBurstsModel()
    m = ClusterModel(
        brokers=[Broker(B0), Broker(B1)],
        namespaces={NS: BUNDLES},
        topics=list(topics),
        owners={_bundle(i): (owners or {}).get(i, B0 if i < 2 else B1) for i in range(4)},
        load_model=lm,
    )
    lm.attach(m)
    _cpu(m)
    return m, lm


def _trigger_soon(m: ClusterModel, lm: OffloadBurstsModel, *topics: int) -> float:
    """Forget every burst; ``topics`` trigger half a second after now (the others much later). Returns the trigger."""
    lm.bursts, lm._free = [], {}
    for i, t in enumerate(m.topics):
        rate = t.rate_in * t.msg_size
        lm.left[i] = 0.5 * rate if i in topics else 1e6 * rate
    return m.now_ms + 500.0


def _windowed(spans: list[tuple[float, float]], now: float) -> float:
    """The bursts (start, end in ms) in the minute ending ``now``, each weighted by its share of it, by hand."""
    return sum(max(min(e, now) - max(s, now - 60_000), 0.0) / 60_000 for s, e in spans)


def test_the_burst_arithmetic() -> None:
    lm = OffloadBurstsModel()
    assert lm.duration_s == pytest.approx(213.333, abs=1e-3) == D_MS / 1000
    assert lm.burst_cpu == pytest.approx(72.0) == pytest.approx(BURST_CPU)  # 9 % of a standard broker
    assert lm.CHUNK_BYTES == 20 * GIB and lm.THREADS == 2
    load = Load(msg=1.0, thr_in=65 * MIB, thr_out=100 * MIB)
    assert lm.average_cpu(load) == pytest.approx(1.5 * 100 * 65 / 200)  # 48.75 %: 0.061 of an 8-core broker
    burst = Burst(0, B0, 0.0, 10_000.0, 10_000.0 + D_MS)
    assert lm.window_share(burst, 40_000.0) == pytest.approx(0.5)
    assert lm.window_share(burst, 100_000.0) == 1.0
    assert lm.window_share(burst, 10_000.0 + D_MS + 30_000.0) == pytest.approx(0.5)
    assert lm.window_share(burst, 10_000.0 + D_MS + 60_000.0) == 0.0 == lm.window_share(burst, 9_000.0)


def test_a_topics_bursts_by_hand() -> None:
    """One topic writing 50 MiB/s on b0: a burst every 409.6 s from its drawn phase, each 213.3 s of 72 % CPU and 96 MiB/s
    on each NIC, in the reports' minute windows; b1's topic writes too little to reach its threshold for days."""
    a = _topic_in(0, 512.0, 102_400.0)  # 50 MiB/s written
    c = _topic_in(2, 100.0, 1000.0)
    m, lm = _bursting(a, c)
    t0 = float(m.now_ms)
    rate = 50 * MIB
    first = t0 + lm.left[0] / rate * 1000  # the drawn phase: the first trigger after the first reading
    period = 20 * GIB / rate * 1000
    spans = [(first + k * period, first + k * period + D_MS) for k in range(-1, 12)]
    spans = [(s, e) for s, e in spans if e > t0]  # a burst that started within D before the first reading: running
    assert [(b.start_ms, b.end_ms) for b in lm.bursts] == [pytest.approx(sp, abs=1e-3) for sp in spans if sp[0] <= t0]
    seen = []
    for _ in range(40):
        m.advance(1)
        reports = m.load_reports()
        now = float(m.now_ms)
        share = _windowed(spans, now)
        seen.append(share)
        assert reports[B0]["cpu"]["usage"] == pytest.approx(10 + _linear(a) + BURST_CPU * share, rel=1e-9)
        nic = 96 * MIB * 8 / 1024 * share
        assert reports[B0]["bandwidthIn"]["usage"] == pytest.approx(rate * 8 / 1024 + nic, rel=1e-9)
        assert reports[B0]["bandwidthOut"]["usage"] == pytest.approx(rate * 8 / 1024 + nic, rel=1e-9)
        # in no reported rate: the bundle's stats are its topic's
        assert reports[B0]["lastStats"][_bundle(0)]["msgThroughputIn"] == rate
        assert reports[B1]["cpu"]["usage"] == 10 + _linear(c)
    assert 0 in seen and 1.0 in seen  # minutes with none of it, minutes with a whole burst
    # the time in bursts: 40 minutes of reports partition the time, 409.6 s apart, 213.3 s each
    assert sum(seen) * 60 == pytest.approx(
        sum(max(min(e, t0 + 2_400_000) - max(s, t0), 0) for s, e in spans) / 1000, rel=1e-9
    )


def test_the_long_run_average_is_the_per_byte_cost_of_the_written_bytes() -> None:
    """Topics at steady rates: over twelve hours a broker's burst CPU averages 1.5x linear's per-byte CPU of what it
    writes, up to a burst or two at the ends."""
    topics = [_topic_in(0, 300.0 * (k + 1), 13_000.0, skip=k) for k in range(5)]
    m, lm = _bursting(*topics)
    total = 0.0
    minutes = 720
    for _ in range(minutes):
        m.advance(1)
        _cpu(m)
        total += lm.running(B0)
    written = sum(t.rate_in * t.msg_size for t in topics)
    average = total * BURST_CPU / minutes
    # up to one trigger more or less per topic, and two bursts at either end
    assert average == pytest.approx(lm.average_cpu(Load(thr_in=written)), abs=9 * BURST_CPU * D_MS / 60_000 / minutes)
    assert written / MIB == pytest.approx(55.8, abs=0.1)  # about a scenario broker's writes: 0.052 of its limit
    assert lm.average_cpu(Load(thr_in=written)) / 800 == pytest.approx(0.0523, abs=1e-3)


def test_at_most_two_bursts_at_once_the_rest_wait_for_a_thread() -> None:
    topics = [_topic_in(0, 512.0, 102_400.0), _topic_in(1, 512.0, 102_400.0), _topic_in(0, 512.0, 102_400.0, skip=1)]
    m, lm = _bursting(*topics)
    at = _trigger_soon(m, lm, 0, 1, 2)
    m.advance(1)
    _cpu(m)
    assert sorted((b.topic, b.start_ms, b.end_ms) for b in lm.bursts) == [
        (0, at, pytest.approx(at + D_MS, abs=1e-3)),
        (1, at, pytest.approx(at + D_MS, abs=1e-3)),
        (2, pytest.approx(at + D_MS, abs=1e-3), pytest.approx(at + 2 * D_MS, abs=1e-3)),  # queued behind them, in turn
    ]
    assert lm.running(B0) == pytest.approx(2 * 59.5 / 60)
    for _ in range(12):
        m.advance(1)
        _cpu(m)
        assert lm.running(B0) <= 2 + 1e-12


def test_a_moved_bundle_cuts_its_burst_and_restarts_it_whole_on_the_new_owner() -> None:
    """b0 runs topics 0 and 1 and queues topic 2 (bundles 0, 1, 0). Bundle 1 moves to b1 a minute in: topic 1's burst is
    cut on b0, which frees the thread for topic 2 at once, and starts over, whole, on b1."""
    topics = [_topic_in(0, 512.0, 102_400.0), _topic_in(1, 512.0, 102_400.0), _topic_in(0, 512.0, 102_400.0, skip=1)]
    m, lm = _bursting(*topics)
    at = _trigger_soon(m, lm, 0, 1, 2)
    m.advance(1)
    _cpu(m)
    moved = float(m.now_ms)
    m.apply({"unloads": [{"bundle": _bundle(1), "broker": B0, "destination": B1}]})
    m.advance(1)
    reports = m.load_reports()
    # topic 1's burst on b0 was cut at the move (the partial upload is garbage): no report after it holds any of it
    assert sorted((b.topic, b.broker, b.start_ms, b.end_ms) for b in lm.bursts) == [
        (0, B0, at, pytest.approx(at + D_MS, abs=1e-3)),
        (1, B1, moved, pytest.approx(moved + D_MS, abs=1e-3)),  # started over, whole, at the move
        (2, B0, moved, pytest.approx(moved + D_MS, abs=1e-3)),  # on the thread the move freed
    ]
    # what the reports show a minute after the move: b0 still two bursts (topics 0 and 2), b1 one
    assert reports[B0]["cpu"]["usage"] == pytest.approx(10 + _linear(topics[0], topics[2]) + 2 * BURST_CPU)
    assert reports[B1]["cpu"]["usage"] == pytest.approx(10 + _linear(topics[1]) + BURST_CPU)
    # in no reported rate, on either broker
    assert reports[B1]["lastStats"][_bundle(1)]["msgThroughputIn"] == 512.0 * 102_400.0
    # moved while queued: it starts over on the new owner at the move (b1's threads are free)
    m, lm = _bursting(*topics)
    _trigger_soon(m, lm, 0, 1, 2)
    m.advance(1)
    _cpu(m)
    moved = float(m.now_ms)
    m.apply({"unloads": [{"bundle": _bundle(0), "broker": B0, "destination": B1}]})  # topics 0 and 2
    m.advance(1)
    _cpu(m)
    assert sorted((b.topic, b.broker, b.start_ms) for b in lm.bursts if b.end_ms > moved) == [
        (0, B1, moved),
        (1, B0, moved - 59_500),  # not moved: untouched
        (2, B1, moved),
    ]


def test_only_a_brokers_own_load_gets_its_bursts() -> None:
    a = _topic_in(0, 512.0, 102_400.0, fanout=2.0)
    c = _topic_in(2, 512.0, 102_400.0)
    m, lm = _bursting(a, c)
    _trigger_soon(m, lm, 0)
    m.advance(1)
    assert _cpu(m)[B0] == pytest.approx(10 + _linear(a) + BURST_CPU * 59.5 / 60)
    # one topic alone on b0 (what the floor asks), one of b1's bundles on b0, any other load: linear
    alone = Load(msg=8000.0, msg_in=2000.0, msg_out=6000.0, thr_in=2e6, thr_out=6e6, topics=1, producers=1, consumers=3)
    assert lm.usage(m.brokers[B0], alone)["cpu"]["usage"] == LINEAR.cpu(alone)
    theirs = Load.of([m.bundle_stats()[_bundle(2)]])
    assert lm.usage(m.brokers[B0], theirs)["cpu"]["usage"] == LINEAR.cpu(theirs)
    # the floor: the hottest topic alone, as linear (no plan can do better at an instant without its bursts)
    total = Load.of(m.bundle_stats().values())
    live = [m.brokers[x] for x in m.live_brokers()]
    assert m.floor_usage() == pytest.approx(max(lm.ideal(total, live), (10 + _linear(a)) / 800))
    # not attached: linear, whatever happens
    free = OffloadBurstsModel()
    assert free.usage(m.brokers[B0], _owned_load(m, B0))["cpu"]["usage"] == LINEAR.cpu(_owned_load(m, B0))


def test_the_ideal_is_linears_plus_the_average_bursts() -> None:
    m, lm = _bursting(_topic_in(0, 512.0, 102_400.0, fanout=2.0), _topic_in(2, 100.0, 1000.0))
    total = Load.of(m.bundle_stats().values())
    live = [m.brokers[x] for x in m.live_brokers()]
    parts = lm.ideal_parts(total, live)
    linear = LINEAR.ideal_parts(total, live)
    assert parts["cpu"] == pytest.approx(linear["cpu"] + 1.5 * PER_BYTE * total.thr_in / 1600)
    assert parts["bandwidthIn"] == pytest.approx(linear["bandwidthIn"] * 2)  # written, and read back once
    assert parts["bandwidthOut"] == pytest.approx(linear["bandwidthOut"] + linear["bandwidthIn"])  # and uploaded
    assert m.ideal_usage() == parts["cpu"]


def test_the_bursts_follow_the_ownership_through_events_lookups_moves_and_splits() -> None:
    """At every reading of a loop with leaving and restarting brokers, lookups, moves and splits: every burst not over
    runs on its topic's owner, no broker runs more than two at once, and a report's CPU is linear plus its bursts."""
    for scenario in ("scale-down", "rolling-restart"):
        lm = OffloadBurstsModel()
        m = build(scenario, 3, load_model=lm, noise=0.0).model
        rng = random.Random(5)
        restarts = 0
        for cycle in range(24):
            usage = m.true_usage()
            now = float(m.now_ms)
            for b in lm.bursts:
                if b.end_ms > now:
                    assert b.broker == lm._owner(b.topic), (scenario, cycle)
            for x in m.live_brokers():
                assert lm.running(x) <= 2 + 1e-12
                linear = LINEAR.cpu(_owned_load(m, x))
                assert usage[x] == pytest.approx((linear + BURST_CPU * lm.running(x)) / 800, rel=1e-12)
            m.floor_usage()
            live = m.live_brokers()
            bursting = sorted({m.bundle_of_topic(m.topics[x.topic].name) for x in lm.bursts if x.end_ms > now})
            unloads = [
                {"bundle": b, "broker": m.owners[b], "destination": rng.choice([*live, None])}
                for b in rng.sample(bursting, min(2, len(bursting)))
                if m.owners[b] in live
            ]
            splits = []
            if cycle % 5 == 3:
                biggest = max(m.bundle_stats().items(), key=lambda kv: kv[1]["topics"])[0]
                splits.append({"bundle": biggest})
            m.apply({"splits": splits, "unloads": unloads})
            m.advance(1 if cycle % 4 else 3)
            m.true_usage()
            restarts += sum(1 for b in lm.bursts if b.trigger_ms == now)
        assert restarts > 0  # moves did restart bursts


# ---------------------------------------------------------------- both: the scenarios


@pytest.mark.parametrize("model", HELD_OUT_MODELS_7)
@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "large-zipf"])
def test_every_scenario_builds_at_its_target(model: str, scenario: str) -> None:
    m = build(scenario, 1, load_model=HELD_OUT_LOAD_MODELS_7[model]()).model
    ideal = m.ideal_usage()
    if scenario in TARGETS:
        assert ideal == pytest.approx(TARGETS[scenario], abs=1e-9)
    else:  # load added after calibrating (a hot bundle, a hot topic, a toggling consumer)
        assert 0.4 <= ideal <= 0.6
    lm = m.load_model
    live = [m.brokers[b] for b in m.live_brokers()]
    load = Load.of(m.bundle_stats().values())
    parts = lm.ideal_parts(load, live)
    assert max(parts, key=lambda k: parts[k]) == "cpu"  # CPU binds, the NICs well below it
    assert max(parts["bandwidthIn"], parts["bandwidthOut"]) < 0.25 * ideal
    usage = m.true_usage()
    for b in m.live_brokers():
        limit = m.brokers[b].cpu_limit
        linear = LINEAR.cpu(_owned_load(m, b)) / limit
        if isinstance(lm, SmtKneeModel):  # the curve of the work
            assert usage[b] == pytest.approx(_r(linear), rel=1e-12)
        else:  # linear plus at most two bursts
            assert isinstance(lm, OffloadBurstsModel)
            assert usage[b] == pytest.approx(linear + BURST_CPU * lm.running(b) / limit, rel=1e-12)
    if isinstance(lm, OffloadBurstsModel):
        assert any(lm.running(b) > 0 for b in m.live_brokers())  # bursting from the first report
    if scenario == "steady-with-noise":  # the scenarios place with each bundle's cost: a balanced start
        spread = [LINEAR.cpu(_owned_load(m, b)) / 800 for b in m.live_brokers()]
        assert max(spread) - min(spread) < 0.02


@pytest.mark.parametrize("model", HELD_OUT_MODELS_7)
def test_large_zipf_builds_at_its_target(model: str) -> None:
    m = build("large-zipf", 1, load_model=HELD_OUT_LOAD_MODELS_7[model]()).model
    assert m.ideal_usage() == pytest.approx(0.5, abs=1e-9)
    usage = m.true_usage()
    assert len(usage) == 100
    m.advance(1)
    assert m.true_usage() != usage


@pytest.mark.parametrize("model", HELD_OUT_MODELS_7)
def test_the_hot_bundle_and_the_hot_topic(model: str) -> None:
    lm = HELD_OUT_LOAD_MODELS_7[model]()
    m = build("hot-bundle-needs-split", 1, load_model=lm).model
    shares = [lm.share(Load.of([s]), lm.reference()) for s in m.bundle_stats().values()]
    assert max(shares) == pytest.approx(0.8, abs=1e-9)  # the scenario scales the bundle by its share, exactly
    m = build("hot-single-topic-unsplittable", 1, load_model=HELD_OUT_LOAD_MODELS_7[model]()).model
    lm = m.load_model
    t = max(m.topics, key=lambda x: x.rate_in * x.msg_size * (1 + x.rate_out / x.rate_in))
    counts = {"topics": 1, "producerCount": t.producers, "consumerCount": t.clients - t.producers}
    alone = Load.of([{**m.topic_rates(m.bundle_of_topic(t.name), reported=False)[t.name], **counts}])
    if isinstance(lm, SmtKneeModel):  # alone on a broker, through the curve
        assert m.floor_usage() == pytest.approx(_r(LINEAR.cpu(alone) / 800)) == pytest.approx(_r(10 / 800 + 0.6))
    else:  # its share holds its average bursts; alone it is charged linear
        assert isinstance(lm, OffloadBurstsModel)
        assert m.floor_usage() == pytest.approx(LINEAR.cpu(alone) / 800)
        assert m.floor_usage() == pytest.approx(10 / 800 + 0.6 - lm.average_cpu(alone) / 800)


@pytest.mark.parametrize("model", HELD_OUT_MODELS_7)
def test_calibration_refuses_a_target_the_counts_alone_reach(model: str) -> None:
    m = build("steady-with-noise", 1, load_model=HELD_OUT_LOAD_MODELS_7[model]()).model
    lm = m.load_model
    load = Load.of(m.bundle_stats().values())
    live = [m.brokers[b] for b in m.live_brokers()]
    counts_only = lm.ideal(Load(topics=load.topics, producers=load.producers, consumers=load.consumers), live)
    assert counts_only == pytest.approx(10 / 800)  # no messages: the idle base
    with pytest.raises(ValueError, match="counts alone put the cluster at cpu"):
        lm.fit(m, counts_only * 0.9)
    lm.fit(m, 0.3)
    assert m.ideal_usage() == pytest.approx(0.3, abs=1e-9)


@pytest.mark.parametrize("model", HELD_OUT_MODELS_7)
def test_deterministic_given_the_seed(model: str) -> None:
    def run(seed: int) -> tuple[list[float], LoadModel]:
        lm = HELD_OUT_LOAD_MODELS_7[model]()
        r = run_closed_loop(build("scale-up", seed, load_model=lm), "ThresholdShedder", decisions=8)
        return r.max_usage, lm

    first, lm = run(1)
    again, lm_again = run(1)
    assert json.dumps(first) == json.dumps(again)
    assert run(2)[0] != first
    if isinstance(lm, OffloadBurstsModel):
        assert isinstance(lm_again, OffloadBurstsModel) and lm.bursts == lm_again.bursts and lm.left == lm_again.left
        assert lm.bursts
