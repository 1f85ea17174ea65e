"""The closed-loop cluster model and its named scenarios (deterministic, Pulsar's arithmetic)."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.contract.decide import decide_scenario
from pulsar_rebalance.core.pulsar.bundles import (
    FULL_UPPER_BOUND,
    BundleRange,
    NamespaceBundles,
    default_boundaries,
    split_full_name,
)
from pulsar_rebalance.core.pulsar.bundles import topic_hash as core_topic_hash
from pulsar_rebalance.simulator.cluster import BrokerSpec, ClusterState, TopicLoad, creation_boundaries, range_name
from pulsar_rebalance.simulator.cluster import topic_hash as sim_topic_hash
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Event, Topic
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build

pytestmark = pytest.mark.timeout(120)

SMALL = [n for n in SCENARIOS if n != "large-zipf"]


def _model(n_topics: int = 200, brokers: int = 3, bundles: int = 4, **kw) -> ClusterModel:
    ns = "t/ns"
    topics = [
        Topic(f"persistent://t/ns/topic-{i}", ns, core_topic_hash(f"persistent://t/ns/topic-{i}"), 10.0 + i)
        for i in range(n_topics)
    ]
    nb = NamespaceBundles.with_num_bundles(bundles)
    owners = {f"{ns}/{r.name}": f"b{i % brokers}:8080" for i, r in enumerate(nb.ranges)}
    return ClusterModel(
        brokers=[Broker(f"b{i}:8080") for i in range(brokers)], namespaces={ns: nb}, topics=topics, owners=owners, **kw
    )


def _assert_partition(model: ClusterModel) -> None:
    """Bundles tile every namespace's hash space exactly; each topic in exactly one owned bundle."""
    for _ns, nb in model.namespaces.items():
        ranges = nb.ranges
        assert ranges[0].lower == 0 and ranges[-1].upper == FULL_UPPER_BOUND and ranges[-1].closed_upper
        for a, b in zip(ranges, ranges[1:]):
            assert a.upper == b.lower
    owned = set(model.owners)
    assert owned == set(model.bundles())
    counted = sum(len(model.topics_of(b)) for b in model.bundles())
    assert counted == len(model.topics)
    assert all(o in model.brokers and model.brokers[o].alive for o in model.owners.values())


def test_the_http_simulator_uses_the_cores_primitives_and_places_topics_as_the_core_does() -> None:
    # one implementation of Pulsar's hashing and creation boundaries, not copies that could drift apart
    assert sim_topic_hash is core_topic_hash and creation_boundaries is default_boundaries
    bounds = creation_boundaries(8)
    state = ClusterState(
        cluster="c",
        brokers=[BrokerSpec("b1:8080")],
        namespaces={"t/ns": bounds},
        topics=[TopicLoad(f"persistent://t/ns/x-{i}", 1, 1, 1, 1) for i in range(300)],
        owners={f"t/ns/{range_name(a, b)}": "b1:8080" for a, b in zip(bounds, bounds[1:])},
        heartbeat_namespaces=False,
    )
    model = _model(0, 1, 8)
    model.topics = []
    nb = NamespaceBundles(bounds)
    for i in range(300):
        t = f"persistent://t/ns/x-{i}"
        assert state.bundle_for_topic(t) == f"t/ns/{nb.find(core_topic_hash(t)).name}"


@pytest.mark.parametrize("name", SMALL)
def test_scenarios_are_deterministic_per_seed_and_feed_decide(name: str) -> None:
    a, b, c = build(name, 3), build(name, 3), build(name, 4)
    ra, rb = a.model.load_reports(), b.model.load_reports()
    assert ra == rb
    assert c.model.load_reports() != ra
    for _ in range(3):
        a.model.advance(), b.model.advance()
    assert a.model.load_reports() == b.model.load_reports()
    _assert_partition(a.model)
    # the model's reports are exactly the decide contract's cycle input: every strategy runs on it
    for shedding in ("ThresholdShedder", "TransferShedder", "GlobalPlanner"):
        out = decide_scenario(
            {"shedding": shedding, "assignDestinations": True, "cycles": [{"brokers": ra, "nowMs": a.model.now_ms}]}
        )
        assert out["cycles"][0]["label"] in ("Success", "Skip")


def test_a_scenario_can_be_built_with_another_broker_count_and_load() -> None:
    base = build("one-hot-broker", 1).model
    small = build("one-hot-broker", 1, brokers=3).model
    busy = build("one-hot-broker", 1, utilization=1.5).model
    assert len(base.brokers) == 10 and len(small.brokers) == 3
    assert set(small.owners.values()) <= set(small.brokers) and len(small.bundles()) == len(base.bundles())
    assert base.ideal_usage() == pytest.approx(0.45, abs=0.01)
    assert busy.ideal_usage() == pytest.approx(1.5 * 0.45, abs=0.01) and small.ideal_usage() == pytest.approx(
        0.45, abs=0.01
    )


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"brokers": 5, "name": "scale-up"}, "names its brokers in its events"),
        ({"brokers": 1}, "brokers must be at least 2"),
        ({"utilization": 0.0}, "utilization must be within"),
        ({"utilization": 2.5}, "utilization must be within"),
    ],
)
def test_a_broker_count_or_load_a_scenario_cannot_take_is_refused_by_name(kw: dict, message: str) -> None:
    name = kw.pop("name", "steady-with-noise")
    with pytest.raises(ValueError, match=message):
        build(name, 1, **kw)


@pytest.mark.slow
def test_large_zipf_has_the_required_size() -> None:
    run = build("large-zipf", 1)
    m = run.model
    assert len(m.brokers) >= 100 and len(m.bundles()) >= 5000 and len(m.topics) >= 200_000
    rates = sorted((t.rate_in for t in m.topics), reverse=True)
    assert rates[0] > 50 * rates[len(rates) // 2]  # Zipf: a few topics dominate


def test_traffic_drifts_follows_the_day_and_bursts() -> None:
    m = _model(
        drift_sigma=0.05,
        daily_amplitude=0.3,
        events=[Event(2, "burst", topic="persistent://t/ns/topic-0", factor=10.0)],
    )
    first = {t.name: t.rate_in for t in m.topics}
    m.advance()
    assert {t.name: t.rate_in for t in m.topics} != first  # drift
    m.advance()
    t0 = m.topics[[t.name for t in m.topics].index("persistent://t/ns/topic-0")]
    assert t0.burst == 10.0 and t0.rate_in > 5 * first["persistent://t/ns/topic-0"]
    # daily cycle: half a day later a topic with phase 0 and no drift sits at the other side of 1.0
    q = _model(daily_amplitude=0.5)
    q.now_ms = 0
    q.now_ms = 6 * 3600 * 1000 - q.interval_ms
    q.advance()
    assert q.topics[0].rate_in == pytest.approx(q.topics[0].base_rate * 1.5)


def test_resource_model_is_capacity_normalised_and_noise_is_seeded() -> None:
    m = _model(brokers=2, bundles=2)
    m.brokers["b1:8080"].cores = 16
    m.brokers["b1:8080"].nic_mbps = 2000
    m.owners = {b: "b0:8080" for b in m.owners}
    one = m.true_usage()
    m.owners = {b: "b1:8080" for b in m.owners}
    two = m.true_usage()
    # the same load on a broker twice as big: half the (load part of the) usage
    assert two["b1:8080"] < 0.55 * one["b0:8080"] + 0.01
    noisy_a = _model(noise=0.05, seed=9).load_reports()
    noisy_b = _model(noise=0.05, seed=9).load_reports()
    assert noisy_a == noisy_b
    rep = noisy_a["b0:8080"]
    assert rep["cpu"]["limit"] == 800 and rep["bandwidthIn"]["limit"] == 1000 * 1024
    assert rep["bandwidthIn"]["usage"] == pytest.approx(
        sum(s["msgThroughputIn"] for s in rep["lastStats"].values()) * 8 / 1024
    )


def test_unload_lands_on_destination_or_where_lookup_puts_it() -> None:
    m = _model()
    bundle = next(b for b, o in m.owners.items() if o == "b0:8080")
    res = m.apply({"unloads": [{"broker": "b0:8080", "bundle": bundle, "destination": "b2:8080"}]})
    assert m.owners[bundle] == "b2:8080" and res.unloads == 1 and res.clients_disconnected > 0
    res = m.apply({"unloads": [{"broker": "b2:8080", "bundle": bundle, "destination": "gone:8080"}]})
    assert m.owners[bundle] in m.live_brokers() and res.unloads + len(res.rejected) >= 0
    res = m.apply({"unloads": [{"broker": "b0:8080", "bundle": bundle, "destination": "b1:8080"}]})
    assert res.rejected and "not owned" in res.rejected[0]
    _assert_partition(m)


def test_splits_with_boundaries_and_pulsars_auto_split() -> None:
    m = _model(n_topics=400, brokers=2, bundles=2)
    bundle = sorted(m.owners)[0]
    owner = m.owners[bundle]
    _, rn = split_full_name(bundle)
    r = BundleRange.parse(rn, "x")
    mid = r.lower + (r.upper - r.lower) // 3
    res = m.apply(
        {
            "splits": [{"bundle": bundle, "boundaries": [f"0x{mid:08x}"]}],
            "unloads": [
                {
                    "broker": owner,
                    "bundle": f"t/ns/0x{mid:08x}_0x{r.upper:08x}",
                    "destination": "b1:8080" if owner == "b0:8080" else "b0:8080",
                }
            ],
        }
    )
    assert res.splits == 1 and res.unloads == 1 and not res.rejected  # the unload named a child of the split
    assert f"t/ns/0x{r.lower:08x}_0x{mid:08x}" in m.owners
    _assert_partition(m)
    # Pulsar's auto split: the configured algorithm (range_equally_divide) and the children unloaded
    other = sorted(m.owners)[-1]
    res = m.apply({"splits": [{"bundle": other}]})
    assert res.splits == 1
    _assert_partition(m)


def test_brokers_join_leave_restart_and_fail() -> None:
    m = _model(
        brokers=3,
        bundles=6,
        events=[
            Event(1, "join", broker="b3:8080"),
            Event(2, "leave", broker="b0:8080"),
            Event(3, "restart", broker="b1:8080", delay=2),
            Event(4, "fail", broker="b2:8080"),
        ],
    )
    m.advance()
    assert "b3:8080" in m.load_reports() and not m.load_reports()["b3:8080"]["lastStats"]
    m.advance()
    assert "b0:8080" not in m.brokers and "b0:8080" not in m.owners.values()
    m.advance()
    assert "b1:8080" not in m.load_reports() and "b1:8080" not in m.owners.values()
    m.advance()
    assert set(m.owners.values()) == {"b3:8080"}
    m.advance()
    assert "b1:8080" in m.load_reports()  # back, empty
    _assert_partition(m)


def test_periodic_jitter_toggles_a_consumer() -> None:
    run = build("periodic-jitter", 1)
    m = run.model
    t = next(t for t in m.topics if t.toggle_period)
    outs = []
    for _ in range(8):
        outs.append(t.rate_out)
        m.advance()
    assert max(outs) > 3 * min(outs)
    assert outs[0] == pytest.approx(outs[1], rel=0.2) and outs[0] != pytest.approx(outs[2], rel=0.2)


def test_the_load_manager_level_is_what_is_applied_and_unload_children_decides_the_lookup() -> None:
    m = _model(n_topics=400, brokers=2, bundles=2)
    a, b = sorted(m.owners)
    src = m.owners[a]
    other = "b1:8080" if src == "b0:8080" else "b0:8080"
    # the strategy selected a, the load manager dropped it (e.g. DestinationIsSource): nothing moves
    res = m.apply(
        {"unloads": [{"broker": src, "bundle": a, "destination": None}], "executed": {"unloads": [], "dropped": []}}
    )
    assert res.unloads == 0 and m.owners[a] == src
    res = m.apply(
        {"unloads": [], "executed": {"unloads": [{"broker": src, "bundle": a, "destination": other}], "dropped": []}}
    )
    assert res.unloads == 1 and m.owners[a] == other
    # a split with boundaries and unloadChildren false keeps its children on the owner
    owner = m.owners[b]
    r = BundleRange.parse(split_full_name(b)[1], "x")
    mid = r.lower + (r.upper - r.lower) // 2
    res = m.apply({"splits": [{"bundle": b, "boundaries": [f"0x{mid:08x}"], "unloadChildren": False}]})
    assert res.splits == 1 and res.unloads == 0
    assert {o for x, o in m.owners.items() if x.startswith("t/ns/") and x != a} == {owner}
    _assert_partition(m)


def test_the_floor_counts_what_cannot_be_split() -> None:
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig

    # one topic carries far more than the ideal share: the floor is that topic alone
    m = _model(n_topics=50, brokers=4, bundles=4)
    m.topics[0].burst = 2000.0
    m._update_rates()
    assert m.floor_usage() > m.ideal_usage()
    hot_alone = m.floor_usage()
    # the same cluster with the namespace at loadBalancerNamespaceMaximumBundles: no bundle can be split,
    # so the bundle that holds the hot topic (and others) alone is the floor, higher than the topic alone
    capped = _model(
        n_topics=50,
        brokers=4,
        bundles=4,
        config=LoadBalancerConfig.from_mapping({"loadBalancerNamespaceMaximumBundles": 4}),
    )
    capped.topics[0].burst = 2000.0
    capped._update_rates()
    assert capped.floor_usage() > hot_alone
