"""Spark transforms against the decision core: Spark's built-in crc32 is Pulsar's hash, and the
broadcast range lookup maps every topic to the same bundle as ``core.pulsar.bundles.NamespaceBundles.find``."""

from __future__ import annotations

import random

import pytest

from pulsar_rebalance.core.pulsar.bundles import NamespaceBundles, default_boundaries, topic_hash
from pulsar_rebalance.pipeline import transforms as T

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

# Pulsar's full topic names: v2 and v1 (with cluster), both domains, partitions, non-ASCII (hashed as UTF-8).
NAMED = [
    "persistent://public/default/my-topic",
    "non-persistent://public/default/my-topic",
    "persistent://pulsar/global/ns1/topic-1",
    "persistent://pulsar/use/ns2/topic-2",
    "persistent://t/ns/orders-partition-0",
    "persistent://t/ns/orders-partition-11",
    "persistent://t/ns/zahlungsvorgänge",
    "persistent://t/ns/注文",
    "persistent://t/ns/with space and %2F",
]


def _topic_rows(topics, namespace, reported="0x00000000_0xffffffff"):
    return [("b1:8080", namespace, reported, "persistent", t, 1.0, 2.0, 3.0, 4.0, 1, 1, 1) for t in topics]


def test_spark_crc32_equals_the_core_hash_on_a_sample(spark):
    rng = random.Random(9)
    sample = NAMED + [
        f"persistent://tenant-{rng.randrange(50)}/ns-{rng.randrange(200)}/topic-{i}-partition-{rng.randrange(64)}"
        for i in range(3000)
    ]
    df = spark.createDataFrame(_topic_rows(sample, "t/ns"), T.TOPICS_SCHEMA)
    got = {
        r.topic: r.hash
        for r in T.with_live_bundle(df, {"t/ns": default_boundaries(4)}).select("topic", "hash").collect()
    }
    assert got == {t: topic_hash(t) for t in sample}
    assert got["persistent://public/default/my-topic"] == 0x2BAD45F7  # the reference's worked example


def test_range_lookup_matches_the_core_for_uneven_ranges_edges_and_unknown_namespaces(spark):
    # uneven live ranges (after splits), incl. a tiny range inside one hash bucket and one spanning many
    bounds = [0x00000000, 0x00000010, 0x00400000, 0x00400001, 0x3FFFFFFF, 0x7FFFFFFF, 0xC0000000, 0xFFFFFFFF]
    core = NamespaceBundles(bounds)
    topics = [f"persistent://t/ns/topic-{i}" for i in range(5000)] + NAMED
    rows = _topic_rows(topics, "t/ns") + _topic_rows(["persistent://other/ns/x"], "other/ns")
    df = spark.createDataFrame(rows, T.TOPICS_SCHEMA)
    got = {r.topic: r.bundle for r in T.with_live_bundle(df, {"t/ns": bounds, "t/empty": []}).collect()}
    assert len(got) == len(topics) + 1
    assert got.pop("persistent://other/ns/x") is None  # namespace without known boundaries
    assert got == {t: core.find(t).name for t in topics}
    # only the last range is closed (a hash of exactly 0xffffffff maps to it, as in the core)
    lookup = {(r.namespace, r.lo): r for r in T.range_lookup(spark, {"t/ns": bounds}).collect()}
    assert lookup[("t/ns", 0xC0000000)].last and not lookup[("t/ns", 0x7FFFFFFF)].last


def test_bucketed_join_never_duplicates_or_drops_a_topic(spark):
    bounds = default_boundaries(16)
    core = NamespaceBundles(bounds)
    topics = [f"persistent://t/ns/{i}" for i in range(20000)]
    df = spark.createDataFrame(_topic_rows(topics, "t/ns"), T.TOPICS_SCHEMA)
    mapped = T.with_live_bundle(df, {"t/ns": bounds})
    assert mapped.count() == len(topics)  # the bucketed join never duplicates a topic
    wrong = [r for r in mapped.collect() if r.bundle != core.find(r.topic).name]
    assert wrong == []


def test_bundle_load_counts_mismatched_and_unmapped_topics(spark):
    bounds = default_boundaries(2)
    core = NamespaceBundles(bounds)
    topics = [f"persistent://t/ns/topic-{i}" for i in range(40)]
    rows = [
        (
            "b1:8080",
            "t/ns",
            core.find(t).name if i % 4 else "0x00000000_0x7fffffff",
            "persistent",
            t,
            1.0,
            2.0,
            3.0,
            4.0,
            1,
            1,
            1,
        )
        for i, t in enumerate(topics)
    ]
    rows += _topic_rows(["persistent://x/y/z"], "x/y")
    df = spark.createDataFrame(rows, T.TOPICS_SCHEMA)
    mapped = T.with_live_bundle(df, {"t/ns": bounds})
    agg = T.bundle_load(mapped)
    expected_wrong = sum(1 for i, t in enumerate(topics) if i % 4 == 0 and core.find(t).name != "0x00000000_0x7fffffff")
    assert T.total_mismatches(agg) == expected_wrong + 1 == T.mismatches(mapped).count()
    assert sum(r.topics for r in agg.collect()) == 41


def test_topics_of_the_bundles_to_split_are_those_the_range_lookup_maps_there(spark):
    bounds = [0x00000000, 0x00400000, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]
    topics = [f"persistent://t/ns/topic-{i}" for i in range(6000)] + NAMED
    rows = _topic_rows(topics, "t/ns") + _topic_rows([f"persistent://t/other/x-{i}" for i in range(500)], "t/other")
    df = spark.createDataFrame(rows, T.TOPICS_SCHEMA)
    boundaries = {"t/ns": bounds, "t/other": default_boundaries(4)}
    wanted = ["t/ns/0x00000000_0x00400000", "t/ns/0xc0000000_0xffffffff", "t/other/0x40000000_0x80000000"]
    expected = {
        (r.topic, r.bundle)
        for r in T.with_live_bundle(df, boundaries).collect()
        if f"{r.namespace}/{r.bundle}" in wanted
    }
    got = [(r.topic, r.bundle) for r in T.topics_in_bundles(df, wanted, boundaries).collect()]
    assert len(got) == len(set(got)) and set(got) == expected
    assert {b for _, b in got} == {"0x00000000_0x00400000", "0xc0000000_0xffffffff", "0x40000000_0x80000000"}
    assert T.topics_in_bundles(df, [], boundaries).count() == 0


def test_topics_of_thousands_of_bundles_in_one_pass_each_range_once(spark):
    # 2,048 ranges asked for at once (the planner asks for 3 per broker: 3,000 at 1,000 brokers), one listed twice
    bounds = [i * (0xFFFFFFFF // 2048) for i in range(2048)] + [0xFFFFFFFF]
    topics = [f"persistent://t/big/topic-{i}" for i in range(20000)]
    df = spark.createDataFrame(_topic_rows(topics, "t/big"), T.TOPICS_SCHEMA)
    boundaries = {"t/big": bounds}
    wanted = [f"t/big/0x{a:08x}_0x{b:08x}" for a, b in zip(bounds, bounds[1:])]
    got = [(r.topic, r.bundle) for r in T.topics_in_bundles(df, [*wanted, wanted[7]], boundaries).collect()]
    expected = {(r.topic, r.bundle) for r in T.with_live_bundle(df, boundaries).collect()}
    assert len(got) == len(set(got)) == len(topics) and set(got) == expected
