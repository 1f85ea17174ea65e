"""The plan page's summary (pure): moves, traffic moved, reconnecting clients, balance, quality, warnings."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.plan_summary import Balance, summarize_plan

SUMMARY = {
    "brokers": {
        "b1": {"before": {"usage": 0.90}, "after": {"usage": 0.60}},
        "b2": {"before": {"usage": 0.30}, "after": {"usage": 0.50}},
        "b3": {"before": {"usage": 0.30}, "after": {"usage": 0.40}},
    },
    "warnings": [
        "3 topics reported under the wrong bundle",
        {"kind": "pulsar-shedding-enabled", "message": "loadBalancerSheddingEnabled is true"},
    ],
    "notes": [
        "split of t/n/0x80000000_0xffffffff skipped: range_equally_divide found no valid boundary (one topic)",
        "unload of t/n/x replaced by its child t/n/y (the bundle is split first)",
    ],
    "dataQuality": {"brokersReporting": 3, "brokersOwningBundles": 3, "bundleSamples": 7, "bundlesOwned": 8},
}


def traffic(rate_in, rate_out, thr_in, thr_out, topics, producers, consumers):
    return {
        "msgRateIn": rate_in,
        "msgRateOut": rate_out,
        "msgThroughputIn": thr_in,
        "msgThroughputOut": thr_out,
        "topics": topics,
        "producerCount": producers,
        "consumerCount": consumers,
    }


ACTIONS = [
    {
        "seq": 0,
        "kind": "split",
        "bundle": "t/n/0x00000000_0x40000000",
        "source_broker": "b1",
        "destination_broker": None,
        "boundaries": [0x20000000],
        "split_algorithm": "range_equally_divide",
        "predicted": {
            "children": ["0x00000000_0x20000000", "0x20000000_0x40000000"],
            "bundleLoad": traffic(600, 600, 6e6, 6e6, 10, 5, 9),
        },
        "state": "completed",
    },
    {
        "seq": 1,
        "kind": "unload",
        "bundle": "t/n/0x20000000_0x40000000",
        "source_broker": "b1",
        "destination_broker": "b2",
        "predicted": {
            "bundleLoad": traffic(100, 200, 1e6, 2e6, 3, 2, 4),
            "source": {"before": 0.9, "after": 0.7},
            "destination": {"before": 0.3, "after": 0.5},
        },
        "state": "completed",
    },
    {
        "seq": 2,
        "kind": "unload",
        "bundle": "t/n/0x40000000_0x80000000",
        "source_broker": "b1",
        "destination_broker": "b3",
        "predicted": {"bundleLoad": traffic(50, 50, 5e5, 5e5, 2, 1, 1)},
        "state": "skipped",
    },
]


def test_unloads_and_splits_are_listed_in_pulsar_terms():
    s = summarize_plan(summary=SUMMARY, actions=ACTIONS)
    assert [(u.bundle, u.source, u.destination) for u in s.unloads] == [
        ("t/n/0x20000000_0x40000000", "b1", "b2"),
        ("t/n/0x40000000_0x80000000", "b1", "b3"),
    ]
    (split,) = s.splits
    assert split.boundaries == ("0x20000000",) and split.children == ("0x00000000_0x20000000", "0x20000000_0x40000000")
    assert s.unloads[0].source_usage == (0.9, 0.7) and s.unloads[0].destination_usage == (0.3, 0.5)
    assert s.actions == 3 and s.action_states == {"completed": 2, "skipped": 1}


def test_traffic_moved_and_reconnecting_clients_sum_the_unloads_only():
    """A split runs with unload=false: its children stay on the owner and no client reconnects."""
    m = summarize_plan(summary=SUMMARY, actions=ACTIONS).moved
    assert (m.msg_rate_in, m.msg_rate_out, m.msg_rate) == (150, 250, 400)
    assert (m.msg_throughput_in, m.msg_throughput_out, m.msg_throughput) == (1.5e6, 2.5e6, 4e6)
    assert (m.topics, m.producers, m.consumers) == (5, 3, 5)
    assert m.complete


def test_an_unrecorded_count_makes_the_totals_incomplete_not_zero():
    actions = [
        dict(ACTIONS[1], predicted={"bundleLoad": traffic(1, 1, 1, 1, 1, None, None)}),
        dict(ACTIONS[2], predicted={}),
    ]
    s = summarize_plan(summary={}, actions=actions)
    assert not s.moved.complete and s.moved.unknown == (
        "msg_rate_in",
        "msg_rate_out",
        "msg_throughput_in",
        "msg_throughput_out",
        "topics",
        "producers",
        "consumers",
    )
    only_clients = summarize_plan(summary={}, actions=actions[:1]).moved
    assert only_clients.unknown == ("producers", "consumers") and only_clients.topics == 1
    assert s.unloads[0].traffic.producers is None and s.unloads[1].traffic.msg_rate is None


def test_balance_before_predicted_and_measured():
    s = summarize_plan(
        summary=SUMMARY, actions=ACTIONS, result={"broker_usage_after": {"b1": 0.55, "b2": 0.45, "b3": 0.5}}
    )
    assert (s.before.max, s.before.min, s.before.spread) == (0.9, 0.3, pytest.approx(0.6))
    assert s.before.std == pytest.approx(0.282843, abs=1e-6)
    assert (s.predicted.max, s.predicted.spread) == (0.6, pytest.approx(0.2))
    assert s.predicted.std == pytest.approx(0.081650, abs=1e-6)
    assert (s.measured.max, s.measured.spread, s.measured.brokers) == (0.55, pytest.approx(0.1), 3)


def test_not_executed_has_no_measured_balance():
    assert summarize_plan(summary=SUMMARY, actions=ACTIONS).measured is None
    assert Balance.of({}) is None


def test_data_quality_and_warnings():
    s = summarize_plan(summary=SUMMARY, actions=ACTIONS)
    dq = s.data_quality
    assert (dq.brokers_reporting, dq.brokers_owning_bundles, dq.bundle_samples, dq.bundles_owned) == (3, 3, 7, 8)
    assert [(w.kind, w.message) for w in s.warnings] == [
        ("warning", "3 topics reported under the wrong bundle"),
        ("pulsar-shedding-enabled", "loadBalancerSheddingEnabled is true"),
        ("unsplittable-hot-bundle", SUMMARY["notes"][0]),
    ]


def test_an_old_plan_without_data_quality_counts_the_brokers_it_predicted():
    s = summarize_plan(summary={"brokers": SUMMARY["brokers"]}, actions=[])
    assert s.data_quality.brokers_reporting == 3 and s.data_quality.bundle_samples is None
    assert s.warnings == () and s.moved.topics == 0 and s.moved.complete
