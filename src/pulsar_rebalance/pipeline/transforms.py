"""Spark schemas and DataFrame -> DataFrame transforms (the only pipeline module importing pyspark).

Functions here never create a session and never read or write; the Spark job entry points do.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

TOPICS_SCHEMA = T.StructType([
    T.StructField("broker", T.StringType(), False),
    T.StructField("namespace", T.StringType(), False),
    T.StructField("reported_bundle", T.StringType(), False),
    T.StructField("domain", T.StringType(), False),
    T.StructField("topic", T.StringType(), False),
    T.StructField("msg_rate_in", T.DoubleType(), False),
    T.StructField("msg_rate_out", T.DoubleType(), False),
    T.StructField("msg_throughput_in", T.DoubleType(), False),
    T.StructField("msg_throughput_out", T.DoubleType(), False),
    T.StructField("producer_count", T.LongType(), False),
    T.StructField("consumer_count", T.LongType(), False),
    T.StructField("subscription_count", T.LongType(), False),
])

BUNDLE_STATS_SCHEMA = T.StructType([
    T.StructField("broker", T.StringType(), False),
    T.StructField("bundle", T.StringType(), False),
    T.StructField("namespace", T.StringType(), False),
    T.StructField("range", T.StringType(), False),
    T.StructField("msg_rate_in", T.DoubleType(), False),
    T.StructField("msg_rate_out", T.DoubleType(), False),
    T.StructField("msg_throughput_in", T.DoubleType(), False),
    T.StructField("msg_throughput_out", T.DoubleType(), False),
    T.StructField("consumer_count", T.LongType(), False),
    T.StructField("producer_count", T.LongType(), False),
    T.StructField("topics", T.LongType(), False),
    T.StructField("cache_size", T.LongType(), False),
])


def with_live_bundle(topics: DataFrame, boundaries: Mapping[str, Sequence[int]]) -> DataFrame:
    """Add ``bundle`` (range name) and ``hash``: each topic mapped onto the namespace's LIVE ranges.

    Uses Pulsar's mapping (crc32 of the full topic name, largest boundary <= hash; the last range is
    closed). A topic whose namespace has no known boundaries gets a null bundle.
    """
    from pulsar_rebalance.core.bundles import topic_hash

    bounds = {ns: sorted(int(b) for b in bs) for ns, bs in boundaries.items()}

    @F.udf(returnType=T.StringType())
    def live_bundle(namespace: str, topic: str) -> str | None:
        bs = bounds.get(namespace)
        if not bs:
            return None
        h = topic_hash(topic)
        i = min(bisect_right(bs, h) - 1, len(bs) - 2)  # the last range [p_{n-1}, p_n] is closed
        if i < 0:
            return None
        return f"0x{bs[i]:08x}_0x{bs[i + 1]:08x}"

    @F.udf(returnType=T.LongType())
    def crc(topic: str) -> int:
        return topic_hash(topic)

    return topics.withColumn("hash", crc("topic")).withColumn("bundle", live_bundle("namespace", "topic"))


def bundle_load(mapped_topics: DataFrame) -> DataFrame:
    """Aggregate topic rows (already mapped by ``with_live_bundle``) into one row per live bundle."""
    return (
        mapped_topics.groupBy("namespace", "bundle")
        .agg(
            F.countDistinct("topic").alias("topics"),
            F.sum("msg_rate_in").alias("msg_rate_in"),
            F.sum("msg_rate_out").alias("msg_rate_out"),
            F.sum("msg_throughput_in").alias("msg_throughput_in"),
            F.sum("msg_throughput_out").alias("msg_throughput_out"),
            F.sum("producer_count").alias("producer_count"),
            F.sum("consumer_count").alias("consumer_count"),
            F.sum(F.when(F.col("reported_bundle") != F.col("bundle"), 1).otherwise(0)).alias("mismatched_topics"),
            F.collect_set("broker").alias("brokers"),
        )
        .withColumn("bundle_full", F.concat_ws("/", "namespace", "bundle"))
    )


def mismatches(mapped_topics: DataFrame) -> DataFrame:
    """Topics whose broker reported them under a bundle other than the one their hash falls into."""
    return mapped_topics.where(F.col("bundle").isNull() | (F.col("reported_bundle") != F.col("bundle"))).select(
        "topic", "namespace", "reported_bundle", "bundle", "broker"
    )


def topics_of_bundles(mapped_topics: DataFrame, bundles: Sequence[str]) -> DataFrame:
    """Topic rows of the given full bundle names (for split boundary computation)."""
    wanted = list(bundles)
    return mapped_topics.where(F.concat_ws("/", "namespace", "bundle").isin(wanted))
