"""The ninth held-out set (simulator/held_out_models_9.py: key-shared, entry-filters): each model's arithmetic by hand,
the phenomenon (a bundle of a Key_Shared or a filtered namespace costs more than another reporting the same rates, a
filtered topic by its own number of classes, and the extra moves with it), every scenario at its target, determinism
from the seed. The generic checks (the benchmark takes the set only when asked): test_held_out_models.py; --held-out 9:
test_held_out_sets_bench.py."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.pulsar.bundles import bundle_full_name
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Topic
from pulsar_rebalance.simulator.held_out_models_9 import (
    HELD_OUT_LOAD_MODELS_9,
    HELD_OUT_MODELS_9,
    EntryFiltersModel,
    KeySharedModel,
    NamespacePolicyModel,
)
from pulsar_rebalance.simulator.load_models import Load, LoadModel
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build
from tests.simulator.test_held_out_models import TARGETS
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
from tests.simulator.test_held_out_models_8 import _topic

pytestmark = pytest.mark.timeout(300)

NS_X, NS_P = "t/chosen", "t/plain"
EIGHT = [f"tenant-{i % 4}/ns-{i}" for i in range(8)]


@pytest.mark.parametrize("model", [KeySharedModel, EntryFiltersModel])
def test_the_chosen_namespaces_are_a_third_drawn_from_the_seed(model: type[NamespacePolicyModel]) -> None:
    lm = model()
    assert len(lm.chosen_namespaces(EIGHT, 1)) == 3
    assert len(lm.chosen_namespaces([f"ns-{i}" for i in range(40)], 1)) == 12
    assert len(lm.chosen_namespaces(["only"], 1)) == 1
    assert lm.chosen_namespaces(EIGHT, 1) == lm.chosen_namespaces(reversed(EIGHT + EIGHT), 1)
    assert len({lm.chosen_namespaces(EIGHT, seed) for seed in range(1, 6)}) > 1
    # a whole namespace or none of it: every topic of a chosen one carries its extra, by hand, the others none
    m = build("steady-with-noise", 1, load_model=lm).model
    assert lm.chosen == lm.chosen_namespaces(EIGHT, 1)
    for t in m.topics:
        if t.namespace not in lm.chosen:
            assert lm.topic_hidden(t) == 0.0
        elif isinstance(lm, KeySharedModel):
            assert lm.topic_hidden(t) == pytest.approx(1.5 * PER_MSG * t.rate_out, rel=1e-12)
        else:
            (k,) = lm.draws[t.name]
            assert k in (2.0, 3.0, 4.0)
            assert lm.topic_hidden(t) == pytest.approx((0.25 * k + 0.75 * (k - 1)) * PER_MSG * t.rate_out, rel=1e-12)


def test_the_two_models_draw_their_namespaces_apart() -> None:
    pairs = [
        (KeySharedModel().chosen_namespaces(EIGHT, s), EntryFiltersModel().chosen_namespaces(EIGHT, s))
        for s in range(1, 9)
    ]
    assert any(a != b for a, b in pairs)


def test_the_classes_of_a_filtered_topic_are_drawn_per_topic_from_the_seed() -> None:
    m = build("steady-with-noise", 1, load_model=EntryFiltersModel()).model
    lm = m.load_model
    assert isinstance(lm, EntryFiltersModel)
    ks = [lm.draws[t.name][0] for t in m.topics if t.namespace in lm.chosen]
    assert set(ks) == {2.0, 3.0, 4.0}  # every class count occurs, topic by topic
    assert 2.8 < sum(ks) / len(ks) < 3.2
    assert all(lm.draws[t.name] == lm.draw(t, m.seed) for t in m.topics)  # from the seed and the topic alone


# ---------------------------------------------------------------- key-shared


def _ks_extra(t: Topic) -> float:
    """key-shared's CPU % of a Key_Shared topic, by hand: +1.5x linear's per-message CPU per message out."""
    return 1.5 * PER_MSG * t.rate_out


def _cluster(lm: NamespacePolicyModel) -> tuple[ClusterModel, tuple[Topic, Topic, Topic]]:
    """b0: topic a of the chosen namespace; b1: topic c of the other, reporting exactly a's stats, and topic b of the
    chosen namespace (fan-out 3)."""
    a = _topic(NS_X, 0, 2000.0, 1500.0, 1.6)
    b = _topic(NS_X, 1, 1000.0, 3000.0, 3.0)
    c = _topic(NS_P, 0, 2000.0, 1500.0, 1.6)
    owners = {bundle_full_name(ns, r.name): B1 for ns in (NS_X, NS_P) for r in BUNDLES.ranges}
    owners[bundle_full_name(NS_X, BUNDLES.ranges[0].name)] = B0
    m = ClusterModel(
        brokers=[Broker(B0), Broker(B1)],
        namespaces={NS_X: BUNDLES, NS_P: BUNDLES},
        topics=[a, b, c],
        owners=owners,
        load_model=lm,
    )
    lm.attach(m)
    assert len(lm.chosen) == 1  # ceil(0.3 * 2)
    lm.chosen = frozenset({NS_X})  # which one, by hand
    lm.draws = {t.name: lm.draw(t, m.seed) for t in m.topics}
    return m, (a, b, c)


def test_key_shared_arithmetic_by_hand() -> None:
    m, (a, b, c) = _cluster(KeySharedModel())
    stats = m.bundle_stats()
    bundle_a, bundle_c = (bundle_full_name(ns, BUNDLES.ranges[0].name) for ns in (NS_X, NS_P))
    assert stats[bundle_a] == stats[bundle_c]  # the reports cannot tell a Key_Shared bundle from another
    assert stats[bundle_a]["msgRateOut"] == pytest.approx(3200.0)
    reports = m.load_reports()
    assert reports[B0]["cpu"] == {"usage": pytest.approx(10 + _linear(a) + _ks_extra(a), rel=1e-13), "limit": 800.0}
    assert reports[B1]["cpu"]["usage"] == pytest.approx(10 + _linear(b, c) + _ks_extra(b), rel=1e-13)
    # a Key_Shared message out costs 2.2x an Exclusive one at 1,500 bytes; a's topic (fan-out 1.6) 1.7x its linear
    # CPU, b's (fan-out 3, 3,000 bytes) 1.7x
    dispatch = PER_MSG + PER_BYTE * 1500
    assert (dispatch + 1.5 * PER_MSG) / dispatch == pytest.approx(2.17, abs=0.01)
    assert (_linear(a) + _ks_extra(a)) / _linear(a) == pytest.approx(1.72, abs=0.01)
    assert (_linear(b) + _ks_extra(b)) / _linear(b) == pytest.approx(1.72, abs=0.01)
    # NICs at 10 Gbit/s carry the bytes as reported; CPU is the true usage
    assert reports[B0]["bandwidthOut"]["usage"] == pytest.approx(3200 * 1500 * 8 / 1024)
    assert m.true_usage() == {x: pytest.approx(r["cpu"]["usage"] / 800) for x, r in reports.items()}


@pytest.mark.parametrize("model", [KeySharedModel, EntryFiltersModel])
def test_a_chosen_bundle_takes_its_extra_along_and_a_plain_one_with_the_same_rates_does_not(
    model: type[NamespacePolicyModel],
) -> None:
    lm = model()
    m, (a, _, c) = _cluster(lm)
    if isinstance(lm, EntryFiltersModel):
        lm.draws = {**lm.draws, a.name: (4.0,)}
    extra_a = lm.topic_hidden(a)
    assert extra_a == pytest.approx((1.5 if isinstance(lm, KeySharedModel) else 3.25) * PER_MSG * a.rate_out)
    bundle_a, bundle_c = (bundle_full_name(ns, BUNDLES.ranges[0].name) for ns in (NS_X, NS_P))
    before = _cpu(m)
    m.apply({"unloads": [{"bundle": bundle_c, "broker": B1, "destination": B0}]})  # the plain one, a's very rates
    joined = _cpu(m)
    assert joined[B0] - before[B0] == pytest.approx(_linear(c), rel=1e-12)
    assert before[B1] - joined[B1] == pytest.approx(_linear(c), rel=1e-12)
    m.apply({"unloads": [{"bundle": bundle_a, "broker": B0, "destination": B1}]})  # the chosen one
    after = _cpu(m)
    assert joined[B0] - after[B0] == pytest.approx(_linear(a) + extra_a, rel=1e-12)
    assert after[B1] - joined[B1] == pytest.approx(_linear(a) + extra_a, rel=1e-12)
    assert _linear(c) == pytest.approx(_linear(a), rel=1e-15)


# ---------------------------------------------------------------- entry-filters


def _ef_extra(t: Topic, k: float) -> float:
    """entry-filters' CPU % of a filtered topic of ``k`` classes, by hand: per message out ``k`` entries filtered
    (0.25x linear's per-message CPU each) and ``k - 1`` of them rejected (0.75x more each)."""
    return (0.25 * k + 0.75 * (k - 1)) * PER_MSG * t.rate_out


def test_entry_filters_arithmetic_by_hand() -> None:
    lm = EntryFiltersModel()
    m, (a, b, c) = _cluster(lm)
    bundle_a, bundle_c = (bundle_full_name(ns, BUNDLES.ranges[0].name) for ns in (NS_X, NS_P))
    lm.draws = {a.name: (2.0,), b.name: (4.0,), c.name: (0.0,)}
    stats = m.bundle_stats()
    assert stats[bundle_a] == stats[bundle_c]  # the filtered-out entries are in no msgRateOut
    reports = m.load_reports()
    assert reports[B0]["cpu"] == {"usage": pytest.approx(10 + _linear(a) + _ef_extra(a, 2), rel=1e-13), "limit": 800.0}
    assert reports[B1]["cpu"]["usage"] == pytest.approx(10 + _linear(b, c) + _ef_extra(b, 4), rel=1e-13)
    assert _ef_extra(a, 2) == pytest.approx(1.25 * PER_MSG * 3200.0)
    # the same topic with 4 classes instead of 2: its stats unchanged, its CPU higher by 2x linear's per message out
    lm.draws = {a.name: (4.0,), b.name: (4.0,), c.name: (0.0,)}
    assert m.bundle_stats() == stats
    assert _cpu(m)[B0] - reports[B0]["cpu"]["usage"] == pytest.approx(2.0 * PER_MSG * 3200.0, rel=1e-12)
    # a filtered message out costs 2.0x (k = 2) to 3.5x (k = 4) a plain dispatch at 1,500 bytes; a topic of fan-out
    # 1.6 1.6x to 2.6x its linear CPU
    dispatch = PER_MSG + PER_BYTE * 1500
    assert [(dispatch + (k - 0.75) * PER_MSG) / dispatch for k in (2, 4)] == pytest.approx([1.97, 3.53], abs=0.01)
    assert [(_linear(a) + _ef_extra(a, k)) / _linear(a) for k in (2, 4)] == pytest.approx([1.60, 2.56], abs=0.01)


@pytest.mark.parametrize("model", [KeySharedModel, EntryFiltersModel])
def test_the_ideal_spreads_the_true_cpu_and_an_unknown_load_gets_the_average(model: type[NamespacePolicyModel]) -> None:
    lm = model()
    m, (a, b, c) = _cluster(lm)
    if isinstance(lm, EntryFiltersModel):
        lm.draws = {a.name: (3.0,), b.name: (2.0,), c.name: (0.0,)}
        extra = _ef_extra(a, 3) + _ef_extra(b, 2)
    else:
        extra = _ks_extra(a) + _ks_extra(b)
    live = [m.brokers[x] for x in m.live_brokers()]
    whole = Load.of(m.bundle_stats().values())
    assert lm.ideal_parts(whole, live)["cpu"] == pytest.approx((20 + _linear(a, b, c) + extra) / 1600, rel=1e-12)
    # a load that is no bundle, broker or topic of the cluster: the cluster's average extra per message out
    half = Load(msg=whole.msg / 2, msg_out=whole.msg_out / 2, thr_out=whole.thr_out / 2, topics=99)
    assert lm.hidden(half) == pytest.approx(extra / 2, rel=1e-9)
    assert model().hidden(half) == pytest.approx(model().prior()[0] * half.msg_out)  # not attached: the prior


# ---------------------------------------------------------------- both: the scenarios, the seed


@pytest.mark.parametrize("model", HELD_OUT_MODELS_9)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_scenario_builds_at_its_target(model: str, scenario: str) -> None:
    lm: LoadModel = HELD_OUT_LOAD_MODELS_9[model]()
    assert isinstance(lm, NamespacePolicyModel)
    m = build(scenario, 1, load_model=lm).model
    ideal = m.ideal_usage()
    if scenario in TARGETS or scenario == "large-zipf":
        assert ideal == pytest.approx(TARGETS.get(scenario, 0.5), abs=1e-9)
    else:  # load added after calibrating (a hot bundle, a hot topic, a toggling consumer)
        assert 0.4 <= ideal <= 0.6
    live = [m.brokers[b] for b in m.live_brokers()]
    parts = lm.ideal_parts(Load.of(m.bundle_stats().values()), live)
    assert max(parts, key=lambda k: parts[k]) == "cpu"  # CPU binds, the NICs well below it
    assert max(parts["bandwidthIn"], parts["bandwidthOut"]) < 0.15 * ideal
    usage = m.true_usage()
    hidden = {b: 0.0 for b in usage}
    for t in m.topics:
        owner = m.owners[m.bundle_of_topic(t.name)]
        if owner in hidden:
            hidden[owner] += lm.topic_hidden(t)
    for b in usage:
        expected = (LINEAR.cpu(_owned_load(m, b)) + hidden[b]) / m.brokers[b].cpu_limit
        assert usage[b] == pytest.approx(expected, rel=1e-9)
    assert 0.15 < sum(hidden.values()) / sum(LINEAR.cpu(_owned_load(m, b)) + hidden[b] for b in usage) < 0.35
    if scenario == "steady-with-noise":  # the scenarios place with each bundle's cost: a balanced start
        assert max(usage.values()) - min(usage.values()) < 0.02
    if scenario == "hot-bundle-needs-split":  # the scenario scales the bundle by its share, exactly
        shares = [lm.share(Load.of([s]), lm.reference()) for s in m.bundle_stats().values()]
        assert max(shares) == pytest.approx(0.8, abs=1e-9)


@pytest.mark.parametrize("model", HELD_OUT_MODELS_9)
def test_deterministic_from_the_seed(model: str) -> None:
    def one(seed: int) -> tuple[frozenset[str], dict[str, tuple[float, ...]], dict[str, float]]:
        lm = HELD_OUT_LOAD_MODELS_9[model]()
        assert isinstance(lm, NamespacePolicyModel)
        m = build("periodic-jitter", seed, load_model=lm).model
        return lm.chosen, dict(lm.draws), m.true_usage()

    first = one(1)
    assert one(1) == first
    assert one(2)[0] != first[0] or one(2)[1] != first[1]
