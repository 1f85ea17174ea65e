"""The eighth held-out set (simulator/held_out_models_8.py: geo-replication, bookie-writes): each model's arithmetic by
hand, the phenomenon (a replicated namespace's bundle costs more than another reporting the same rates, and the extra
moves with it; NIC out carries the written bytes twice more, in no bundle's bytes out), every scenario at its target.
The generic checks (the benchmark takes the set only when asked): test_held_out_models.py; --held-out 8:
test_held_out_sets_bench.py."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.pulsar.bundles import bundle_full_name
from pulsar_rebalance.core.pulsar.bundles import topic_hash as core_topic_hash
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Topic
from pulsar_rebalance.simulator.held_out_models_8 import (
    HELD_OUT_LOAD_MODELS_8,
    HELD_OUT_MODELS_8,
    BookieWritesModel,
    GeoReplicationModel,
)
from pulsar_rebalance.simulator.load_models import Load, LoadModel
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build
from tests.simulator.test_held_out_models import MIB, TARGETS
from tests.simulator.test_held_out_models_6 import (
    B0,
    B1,
    BUNDLES,
    LINEAR,
    PER_BYTE,
    PER_MSG,
    _cpu,
    _linear,
    _owned_load,
)

pytestmark = pytest.mark.timeout(300)

NS_R, NS_P = "t/replicated", "t/plain"
GBIT_KBPS = 1000.0 * 1024  # a 1 Gbit/s NIC's limit as Pulsar reports it


# ---------------------------------------------------------------- geo-replication


def _topic(ns: str, bundle: int, rate: float, size: float, fanout: float) -> Topic:
    """A topic of ``ns`` whose hash falls in bundle ``bundle``."""
    r = BUNDLES.ranges[bundle]
    name = next(n for n in (f"persistent://{ns}/topic-{i}" for i in range(100_000)) if r.contains(core_topic_hash(n)))
    return Topic(name, ns, core_topic_hash(name), rate, msg_size=size, fanout=fanout)


def _extra(t: Topic) -> float:
    """geo-replication's CPU % of a replicated topic, by hand: each written message re-sent once, +2x linear's
    per-message and +3x its per-byte CPU."""
    return 2 * PER_MSG * t.rate_in + 3 * PER_BYTE * t.rate_in * t.msg_size


def _geo_cluster() -> tuple[ClusterModel, GeoReplicationModel, tuple[Topic, Topic, Topic]]:
    """b0: topic a of the replicated namespace; b1: topic c of the other, reporting exactly a's stats, and topic b of the
    replicated namespace (fan-out 3: the replicator and two subscriptions)."""
    a = _topic(NS_R, 0, 2000.0, 1500.0, 1.0)
    b = _topic(NS_R, 1, 1000.0, 3000.0, 3.0)
    c = _topic(NS_P, 0, 2000.0, 1500.0, 1.0)
    owners = {bundle_full_name(ns, r.name): B1 for ns in (NS_R, NS_P) for r in BUNDLES.ranges}
    owners[bundle_full_name(NS_R, BUNDLES.ranges[0].name)] = B0
    lm = GeoReplicationModel()
    m = ClusterModel(
        brokers=[Broker(B0), Broker(B1)],
        namespaces={NS_R: BUNDLES, NS_P: BUNDLES},
        topics=[a, b, c],
        owners=owners,
        load_model=lm,
    )
    lm.attach(m)
    assert len(lm.replicated) == 1  # ceil(0.3 * 2)
    lm.replicated = frozenset({NS_R})  # which one, by hand
    lm.draws = {t.name: lm.draw(t, m.seed) for t in m.topics}
    return m, lm, (a, b, c)


def test_the_replicated_namespaces_are_a_third_drawn_from_the_seed() -> None:
    lm = GeoReplicationModel()
    eight = [f"tenant-{i % 4}/ns-{i}" for i in range(8)]
    assert len(lm.replicated_namespaces(eight, 1)) == 3
    assert len(lm.replicated_namespaces([f"ns-{i}" for i in range(40)], 1)) == 12
    assert len(lm.replicated_namespaces(["only"], 1)) == 1
    assert lm.replicated_namespaces(eight, 1) == lm.replicated_namespaces(reversed(eight + eight), 1)
    assert len({lm.replicated_namespaces(eight, seed) for seed in range(1, 6)}) > 1
    # a whole namespace replicates or none of it: every topic of a replicated one carries the extra, the others none
    m = build("steady-with-noise", 1, load_model=lm).model
    assert lm.replicated == lm.replicated_namespaces(eight, 1)
    for t in m.topics:
        assert lm.topic_hidden(t) == pytest.approx(_extra(t) if t.namespace in lm.replicated else 0.0, rel=1e-12)


def test_geo_replication_arithmetic_by_hand() -> None:
    m, _, (a, b, c) = _geo_cluster()
    stats = m.bundle_stats()
    bundle_a, bundle_c = (bundle_full_name(ns, BUNDLES.ranges[0].name) for ns in (NS_R, NS_P))
    assert stats[bundle_a] == stats[bundle_c]  # the reports cannot tell them apart
    assert stats[bundle_a]["msgRateOut"] == 2000.0  # the replicator's rate, shown as a dispatch
    reports = m.load_reports()
    assert reports[B0]["cpu"] == {"usage": pytest.approx(10 + _linear(a) + _extra(a), rel=1e-13), "limit": 800.0}
    assert reports[B1]["cpu"]["usage"] == pytest.approx(10 + _linear(b, c) + _extra(b), rel=1e-13)
    # a replicated message costs 3.2x a dispatch at 1,500 bytes; a's topic (fan-out 1) 2.1x its linear CPU, b's 1.6x
    dispatch = PER_MSG + PER_BYTE * 1500
    assert (dispatch + _extra(a) / 2000) / dispatch == pytest.approx(3.22, abs=0.01)
    assert (_linear(a) + _extra(a)) / _linear(a) == pytest.approx(2.11, abs=0.01)
    assert (_linear(b) + _extra(b)) / _linear(b) == pytest.approx(1.6, abs=0.05)
    # NICs at 10 Gbit/s carry the bytes as reported (the replicated bytes are in the bytes out)
    assert reports[B0]["bandwidthOut"] == {"usage": 2000 * 1500 * 8 / 1024, "limit": 10 * GBIT_KBPS}
    assert m.true_usage() == {x: pytest.approx(r["cpu"]["usage"] / 800) for x, r in reports.items()}


def test_a_replicated_bundle_takes_its_extra_along_and_a_plain_one_with_the_same_rates_does_not() -> None:
    m, _, (a, _, c) = _geo_cluster()
    bundle_a, bundle_c = (bundle_full_name(ns, BUNDLES.ranges[0].name) for ns in (NS_R, NS_P))
    before = _cpu(m)
    m.apply({"unloads": [{"bundle": bundle_c, "broker": B1, "destination": B0}]})  # the plain one, a's very rates
    joined = _cpu(m)
    assert joined[B0] - before[B0] == pytest.approx(_linear(c), rel=1e-12)
    assert before[B1] - joined[B1] == pytest.approx(_linear(c), rel=1e-12)
    m.apply({"unloads": [{"bundle": bundle_a, "broker": B0, "destination": B1}]})  # the replicated one
    after = _cpu(m)
    assert joined[B0] - after[B0] == pytest.approx(_linear(a) + _extra(a), rel=1e-12)
    assert after[B1] - joined[B1] == pytest.approx(_linear(a) + _extra(a), rel=1e-12)
    assert _linear(c) == pytest.approx(_linear(a), rel=1e-15) and _extra(a) > _linear(a)


def test_the_geo_replication_ideal_spreads_the_true_cpu() -> None:
    m, lm, (a, b, c) = _geo_cluster()
    live = [m.brokers[x] for x in m.live_brokers()]
    whole = Load.of(m.bundle_stats().values())
    assert lm.ideal_parts(whole, live)["cpu"] == pytest.approx(
        (20 + _linear(a, b, c) + _extra(a) + _extra(b)) / 1600, rel=1e-12
    )
    # a load that is no bundle, broker or topic of the cluster: the cluster's average extra per message and byte out
    half = Load(msg=whole.msg / 2, msg_out=whole.msg_out / 2, thr_out=whole.thr_out / 2, topics=99)
    assert lm.hidden(half) == pytest.approx((_extra(a) + _extra(b)) / 2, rel=1e-9)


# ---------------------------------------------------------------- bookie-writes


def test_bookie_writes_arithmetic_by_hand() -> None:
    lm = BookieWritesModel()
    broker = Broker("x")
    lm.configure(broker, 0)
    assert broker.nic_limit_kbps == GBIT_KBPS  # linear's 1 Gbit/s
    load = Load(msg=30_000.0, msg_in=10_000.0, msg_out=20_000.0, thr_in=10 * MIB, thr_out=20 * MIB)
    usage = lm.usage(broker, load)
    assert usage["bandwidthOut"] == {"usage": (20 + 2 * 10) * MIB * 8 / 1024, "limit": GBIT_KBPS}
    assert usage["bandwidthIn"] == {"usage": 10 * MIB * 8 / 1024, "limit": GBIT_KBPS}  # the bytes in, nothing more
    linear = 10 + PER_MSG * 30_000 + PER_BYTE * 30 * MIB
    assert usage["cpu"] == {"usage": pytest.approx(linear + PER_BYTE * 10 * MIB, rel=1e-15), "limit": 800.0}
    assert lm.share(load, lm.reference()) == pytest.approx(40 * MIB * 8 / 1024 / GBIT_KBPS, rel=1e-15)
    live = [Broker("a"), Broker("b", cores=16, nic_mbps=2000.0)]
    assert lm.ideal_parts(load, live)["bandwidthOut"] == pytest.approx(40 * MIB * 8 / 1024 / (3 * GBIT_KBPS))


def test_the_nic_out_of_a_bundle_is_not_its_bytes_out() -> None:
    """Two bundles dispatching the same bytes: the one whose topics are read once writes three times what the other
    (read three times) writes, and costs the NIC 1.8x as much."""
    lm = BookieWritesModel()
    read_once = Load(thr_in=30 * MIB, thr_out=30 * MIB)
    read_thrice = Load(thr_in=10 * MIB, thr_out=30 * MIB)
    assert lm.nic_out(read_once) / read_once.thr_out == 3.0
    assert lm.nic_out(read_thrice) / read_thrice.thr_out == pytest.approx(5 / 3)
    assert lm.share(read_once, lm.reference()) / lm.share(read_thrice, lm.reference()) == pytest.approx(1.8)
    # a move between brokers relieves the source's NIC out of the bundle's bytes out plus twice its bytes in
    m = build("steady-with-noise", 1, load_model=BookieWritesModel()).model
    bundle = max(m.bundle_stats(), key=lambda k: m.bundle_stats()[k]["msgThroughputIn"])
    source = m.owners[bundle]
    dest = next(b for b in m.live_brokers() if b != source)
    s = m.bundle_stats()[bundle]
    before = m.load_reports()
    m.apply({"unloads": [{"bundle": bundle, "broker": source, "destination": dest}]})
    after = m.load_reports()
    moved = (s["msgThroughputOut"] + 2 * s["msgThroughputIn"]) * 8 / 1024
    assert before[source]["bandwidthOut"]["usage"] - after[source]["bandwidthOut"]["usage"] == pytest.approx(moved)
    assert after[dest]["bandwidthOut"]["usage"] - before[dest]["bandwidthOut"]["usage"] == pytest.approx(moved)


# ---------------------------------------------------------------- both: the scenarios


@pytest.mark.parametrize("model", HELD_OUT_MODELS_8)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_scenario_builds_at_its_target(model: str, scenario: str) -> None:
    lm: LoadModel = HELD_OUT_LOAD_MODELS_8[model]()
    m = build(scenario, 1, load_model=lm).model
    ideal = m.ideal_usage()
    if scenario in TARGETS or scenario == "large-zipf":
        assert ideal == pytest.approx(TARGETS.get(scenario, 0.5), abs=1e-9)
    else:  # load added after calibrating (a hot bundle, a hot topic, a toggling consumer)
        assert 0.4 <= ideal <= 0.6
    live = [m.brokers[b] for b in m.live_brokers()]
    parts = lm.ideal_parts(Load.of(m.bundle_stats().values()), live)
    usage = m.true_usage()
    if isinstance(lm, GeoReplicationModel):  # CPU binds, the NICs well below it
        assert max(parts, key=lambda k: parts[k]) == "cpu"
        assert max(parts["bandwidthIn"], parts["bandwidthOut"]) < 0.15 * ideal
        hidden = {b: 0.0 for b in usage}
        for t in m.topics:
            owner = m.owners[m.bundle_of_topic(t.name)]
            if owner in hidden:
                hidden[owner] += lm.topic_hidden(t)
        for b in usage:
            expected = (LINEAR.cpu(_owned_load(m, b)) + hidden[b]) / m.brokers[b].cpu_limit
            assert usage[b] == pytest.approx(expected, rel=1e-9)
        assert 0.15 < sum(hidden.values()) / sum(LINEAR.cpu(_owned_load(m, b)) + hidden[b] for b in usage) < 0.35
    else:  # NIC out binds, with the bookie copies; CPU well below it
        assert isinstance(lm, BookieWritesModel)
        assert max(parts, key=lambda k: parts[k]) == "bandwidthOut"
        assert parts["cpu"] < 0.45 * ideal
        for b in usage:
            load = _owned_load(m, b)
            nic = (load.thr_out + 2 * load.thr_in) * 8 / 1024 / m.brokers[b].nic_limit_kbps
            assert usage[b] == pytest.approx(max(nic, lm.cpu(load) / m.brokers[b].cpu_limit), rel=1e-12)
            assert usage[b] == pytest.approx(nic, rel=1e-12)
    if scenario == "steady-with-noise":  # the scenarios place with each bundle's cost: a balanced start
        assert max(usage.values()) - min(usage.values()) < 0.02
    if scenario == "hot-bundle-needs-split":  # the scenario scales the bundle by its share, exactly
        shares = [lm.share(Load.of([s]), lm.reference()) for s in m.bundle_stats().values()]
        assert max(shares) == pytest.approx(0.8, abs=1e-9)
