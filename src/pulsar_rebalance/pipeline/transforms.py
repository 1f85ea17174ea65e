"""Spark schemas and DataFrame -> DataFrame transforms (the only pipeline module importing pyspark).

Functions here never create a session and never read or write; the Spark job entry points do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from pyspark import AccumulatorParam
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

TOPICS_SCHEMA = T.StructType(
    [
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
    ]
)

BUNDLE_STATS_SCHEMA = T.StructType(
    [
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
    ]
)


RANGE_BUCKET_SHIFT = 22
"""Ranges are looked up by ``(namespace, hash >> 22)``: 1,024 buckets over the 32-bit hash space."""

RANGES_SCHEMA = T.StructType(
    [
        T.StructField("namespace", T.StringType(), False),
        T.StructField("lo", T.LongType(), False),
        T.StructField("hi", T.LongType(), False),
        T.StructField("last", T.BooleanType(), False),
        T.StructField("bundle", T.StringType(), False),
    ]
)


def range_rows(boundaries: Mapping[str, Sequence[int]]) -> list[tuple[str, int, int, bool, str]]:
    """``(namespace, lo, hi, last, range name)`` for every live range (bundle-level data)."""
    rows: list[tuple[str, int, int, bool, str]] = []
    for ns, bs in boundaries.items():
        bs = sorted(int(b) for b in bs)
        rows.extend(
            (ns, lo, hi, i == len(bs) - 2, f"0x{lo:08x}_0x{hi:08x}") for i, (lo, hi) in enumerate(zip(bs, bs[1:]))
        )
    return rows


def range_lookup(spark, boundaries: Mapping[str, Sequence[int]]) -> DataFrame:
    """The ranges keyed by every hash bucket (``hash >> 22``) they overlap: about ``namespaces * 1024 + bundles`` rows."""
    top = F.when(F.col("last"), F.col("hi")).otherwise(F.col("hi") - 1)  # the last range [p_{n-1}, p_n] is closed
    rows = range_rows(boundaries)
    # in slices of at most 10,000 ranges (~200 KiB each): the rows travel inside the tasks that read them
    ranges = spark.sparkContext.parallelize(rows, max(1, -(-len(rows) // 10_000)))
    return spark.createDataFrame(ranges, RANGES_SCHEMA).withColumn(
        "bucket", F.explode(F.sequence(F.shiftright("lo", RANGE_BUCKET_SHIFT), F.shiftright(top, RANGE_BUCKET_SHIFT)))
    )


def with_live_bundle(topics: DataFrame, boundaries: Mapping[str, Sequence[int]]) -> DataFrame:
    """Add ``bundle`` (range name) and ``hash``: each topic mapped onto the namespace's LIVE ranges.

    Pulsar's mapping, with Spark built-ins only (no Python UDF, nothing collected): ``hash`` is Spark's
    ``crc32`` of the UTF-8 topic name, which is ``java.util.zip.CRC32`` = Guava ``Hashing.crc32()``
    = the core's ``topic_hash`` (tests check it on a sample). The bundle is the range ``[lo, hi)``
    containing the hash (the last range is closed), found by a broadcast join against a small
    table of ranges keyed by ``(namespace, hash >> 22)`` (:func:`range_lookup`). A topic whose
    namespace has no known boundaries, or whose hash no range contains, gets a null bundle.
    """
    ranges = range_lookup(topics.sparkSession, boundaries)
    hashed = topics.withColumn("hash", F.crc32(F.col("topic"))).withColumn(
        "_bucket", F.shiftright(F.col("hash"), RANGE_BUCKET_SHIFT)
    )
    r = F.broadcast(ranges.alias("_r"))
    cond = (
        (hashed["namespace"] == F.col("_r.namespace"))
        & (hashed["_bucket"] == F.col("_r.bucket"))
        & (hashed["hash"] >= F.col("_r.lo"))
        & ((hashed["hash"] < F.col("_r.hi")) | (F.col("_r.last") & (hashed["hash"] == F.col("_r.hi"))))
    )
    return hashed.join(r, cond, "left").select(
        *[hashed[c] for c in topics.columns], hashed["hash"], F.col("_r.bundle").alias("bundle")
    )


def bundle_load(mapped_topics: DataFrame) -> DataFrame:
    """Aggregate topic rows (already mapped by ``with_live_bundle``) into one row per live bundle.

    ``topics`` counts topic rows, like the rates sum them (a topic reported by two brokers while its
    bundle moved counts twice in both); a distinct count would shuffle every topic row once more.
    Topic rows are first summed per (bundle, reporting broker) with a hash aggregation (numeric
    buffers only); the list of reporting brokers is collected from that small result. A
    ``collect_set`` over the topic rows themselves would make Spark sort every topic row (its object
    hash aggregation falls back to sorting beyond 128 groups per task).
    """
    sums = (
        "msg_rate_in",
        "msg_rate_out",
        "msg_throughput_in",
        "msg_throughput_out",
        "producer_count",
        "consumer_count",
    )
    mismatched = F.when(F.col("bundle").isNull() | (F.col("reported_bundle") != F.col("bundle")), 1).otherwise(0)
    per_broker = mapped_topics.groupBy("namespace", "bundle", "broker").agg(
        F.count(F.lit(1)).alias("topics"),
        *[F.sum(c).alias(c) for c in sums],
        F.sum(mismatched).alias("mismatched_topics"),
    )
    return (
        per_broker.groupBy("namespace", "bundle")
        .agg(
            F.sum("topics").alias("topics"),
            *[F.sum(c).alias(c) for c in sums],
            F.sum("mismatched_topics").alias("mismatched_topics"),
            F.array_sort(F.collect_list("broker")).alias("brokers"),
        )
        .withColumn("bundle_full", F.concat_ws("/", "namespace", "bundle"))
    )


def total_mismatches(bundle_load_rows: DataFrame) -> int:
    """Sum of ``mismatched_topics`` over ``bundle_load`` output (one number to the driver)."""
    total = bundle_load_rows.agg(F.sum("mismatched_topics")).first()
    assert total is not None  # an aggregate without grouping has one row
    return int(total[0] or 0)


def mismatches(mapped_topics: DataFrame) -> DataFrame:
    """Topics whose broker reported them under a bundle other than the one their hash falls into."""
    return mapped_topics.where(F.col("bundle").isNull() | (F.col("reported_bundle") != F.col("bundle"))).select(
        "topic", "namespace", "reported_bundle", "bundle", "broker"
    )


def topics_in_bundles(topics: DataFrame, bundles: Sequence[str], boundaries: Mapping[str, Sequence[int]]) -> DataFrame:
    """Topic rows (``TOPICS_SCHEMA``) whose hash falls into one of ``bundles`` (full names of live ranges of
    ``boundaries``), with ``hash`` and ``bundle`` (range name) added: the topics a split divides.

    Only the rows of those bundles' namespaces are hashed (a filter Parquet applies while reading), and
    each is matched against those few ranges only (``[lo, hi)``, the namespace's last range closed) by a
    broadcast join on the namespace with the range as the join condition -- not one ``CASE WHEN`` branch
    per bundle, whose generated code grows with the bundles asked for (3,000 split candidates at 1,000
    brokers ran the driver out of a 1 GiB heap) -- and a result of the same rows as ``with_live_bundle``
    filtered to ``bundles``.
    """
    rows: list[tuple[str, int, int, bool, str]] = []
    for full in dict.fromkeys(bundles):  # each range once (a bundle two brokers report is asked for twice)
        ns, rng = full.rsplit("/", 1)
        lo, hi = (int(x, 16) for x in rng.split("_"))
        last = hi == max(int(b) for b in boundaries[ns])
        rows.append((ns, lo, hi, last, rng))
    if not rows:
        return (
            topics.withColumn("hash", F.crc32(F.col("topic"))).withColumn("bundle", F.lit(None).cast("string")).limit(0)
        )
    ranges = topics.sparkSession.createDataFrame(
        rows, "r_namespace string, r_lo long, r_hi long, r_last boolean, bundle string"
    )
    h = F.col("hash")
    inside = (
        (F.col("namespace") == F.col("r_namespace"))
        & (h >= F.col("r_lo"))
        & ((h < F.col("r_hi")) | (F.col("r_last") & (h == F.col("r_hi"))))
    )
    namespaces = sorted({r[0] for r in rows})
    return (
        topics.where(F.col("namespace").isin(namespaces))
        .withColumn("hash", F.crc32(F.col("topic")))
        .join(F.broadcast(ranges), inside, "inner")
        .drop("r_namespace", "r_lo", "r_hi", "r_last")
    )


def synthetic_topics(
    spark,
    *,
    topics: int,
    namespaces: Sequence[str],
    owners: Mapping[str, str],
    boundaries: Mapping[str, Sequence[int]],
    zipf_exponent: float,
    top_msg_rate: float,
    rank_multiplier: int,
    partitions: int,
) -> DataFrame:
    """``topics`` rows in ``TOPICS_SCHEMA``, generated inside Spark (the driver only holds bundle-level maps).

    Topic ``i`` is ``persistent://<namespaces[i % len]>/topic-<i>``; its rank in a Zipf law is
    ``(i * rank_multiplier) % topics + 1`` (a permutation: ``rank_multiplier`` is coprime with
    ``topics``), its ``msgRateIn`` is ``top_msg_rate / rank ** zipf_exponent``, ``1 + i % 3``
    subscriptions of one consumer each (``msgRateOut`` = in * subscriptions), messages of
    ``512 + 256 * (i % 8)`` bytes. It is reported under the live bundle its crc32 falls into, by
    that bundle's owner (``owners``: full bundle name -> broker).
    """
    ids = spark.range(0, topics, numPartitions=partitions)  # first: column expressions need an active session
    ns = F.array(*[F.lit(n) for n in namespaces])
    i = F.col("id")
    rank = (i * F.lit(rank_multiplier)) % F.lit(topics) + 1
    subs = (i % 3 + 1).cast("long")
    size = (F.lit(512) + (i % 8) * 256).cast("double")
    rate_in = F.lit(float(top_msg_rate)) / F.pow(rank.cast("double"), F.lit(float(zipf_exponent)))
    base = (
        ids.withColumn("namespace", F.element_at(ns, (i % len(namespaces) + 1).cast("int")))
        .withColumn("topic", F.concat(F.lit("persistent://"), F.col("namespace"), F.lit("/topic-"), i.cast("string")))
        .withColumn("msg_rate_in", rate_in)
        .withColumn("subs", subs)
        .withColumn("size", size)
        .withColumn("broker", F.lit(""))
        .withColumn("reported_bundle", F.lit(""))
    )
    owner_rows = [(*b.rsplit("/", 1), o) for b, o in owners.items()]
    own = F.broadcast(spark.createDataFrame(owner_rows, "o_ns string, o_bundle string, o_broker string"))
    mapped = with_live_bundle(
        base.select("broker", "namespace", "reported_bundle", "topic", "msg_rate_in", "subs", "size"), boundaries
    )
    return mapped.join(own, (mapped["namespace"] == own["o_ns"]) & (mapped["bundle"] == own["o_bundle"])).select(
        F.col("o_broker").alias("broker"),
        "namespace",
        F.col("bundle").alias("reported_bundle"),
        F.lit("persistent").alias("domain"),
        "topic",
        F.col("msg_rate_in"),
        (F.col("msg_rate_in") * F.col("subs")).alias("msg_rate_out"),
        (F.col("msg_rate_in") * F.col("size")).alias("msg_throughput_in"),
        (F.col("msg_rate_in") * F.col("subs") * F.col("size")).alias("msg_throughput_out"),
        F.lit(1).cast("long").alias("producer_count"),
        F.col("subs").alias("consumer_count"),
        F.col("subs").alias("subscription_count"),
    )


def bundle_stats_of_topics(topics: DataFrame) -> DataFrame:
    """``BUNDLE_STATS_SCHEMA`` rows (Pulsar's ``NamespaceBundleStats`` per owned bundle) summed from topic rows."""
    return (
        topics.groupBy("broker", "namespace", F.col("reported_bundle").alias("range"))
        .agg(
            F.sum("msg_rate_in").alias("msg_rate_in"),
            F.sum("msg_rate_out").alias("msg_rate_out"),
            F.sum("msg_throughput_in").alias("msg_throughput_in"),
            F.sum("msg_throughput_out").alias("msg_throughput_out"),
            F.sum("consumer_count").alias("consumer_count"),
            F.sum("producer_count").alias("producer_count"),
            F.count(F.lit(1)).alias("topics"),
        )
        .select(
            "broker",
            F.concat_ws("/", "namespace", "range").alias("bundle"),
            "namespace",
            "range",
            "msg_rate_in",
            "msg_rate_out",
            "msg_throughput_in",
            "msg_throughput_out",
            "consumer_count",
            "producer_count",
            "topics",
            F.col("msg_throughput_in").cast("long").alias("cache_size"),
        )
    )


class _MergeDicts(AccumulatorParam):
    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        a.update(b)
        return a


def fetch_topics(spark, brokers: Sequence[str], fetch, *, concurrency: int, path: str) -> dict[str, tuple]:
    """Run ``fetch(brokers_of_partition, outcome)`` in Spark tasks and write its topic rows to Parquet at ``path``.

    The broker list is split into ``min(len(brokers), concurrency)`` partitions, so at most that many
    fetches run at once (fewer when the executors have fewer cores); topic rows go from the tasks
    straight to Parquet, never through the driver. Returns what the tasks reported per broker,
    gathered with an accumulator (updates of failed task attempts are dropped; a re-run attempt
    reports the same broker again, so merging by broker is idempotent).
    """
    sc = spark.sparkContext
    outcome = sc.accumulator({}, _MergeDicts())
    rdd = sc.parallelize(list(brokers), max(1, min(len(brokers), concurrency))).mapPartitions(
        lambda part: fetch(part, outcome)
    )
    spark.createDataFrame(rdd, TOPICS_SCHEMA).write.mode("overwrite").parquet(path)
    return dict(outcome.value)


def _hadoop_path(spark, path: str):
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    return p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), p


@contextlib.contextmanager
def removed_on_failure(spark, paths: Sequence[str], parents: Sequence[str] = ()):
    """If the block raises, delete ``paths`` and each of ``parents`` (innermost first) that did not exist
    before the block: a created parent is deleted with what is in it when it is ``parents[0]`` (the
    run's own directory), and only if empty otherwise (the work root, shared with other runs).

    Any Spark filesystem (local, HDFS, S3...), through Hadoop's ``FileSystem``.
    """
    existed = {}
    for parent in parents:
        fs, p = _hadoop_path(spark, parent)
        existed[parent] = bool(fs.exists(p))
    try:
        yield
    except BaseException:
        for path in paths:
            fs, p = _hadoop_path(spark, path)
            fs.delete(p, True)
        for i, parent in enumerate(parents):
            if existed[parent]:
                break
            fs, p = _hadoop_path(spark, parent)
            if fs.exists(p) and (i == 0 or len(fs.listStatus(p)) == 0):
                fs.delete(p, i == 0)
        raise


def _warm_up_fetch(brokers, outcome):
    """A stand-in for collect's topic-stats fetch (no HTTP): a few topic rows per broker."""
    for broker in brokers:
        outcome.add({broker: ("ok", 4)})
        for i in range(4):
            yield (
                broker,
                "t/ns",
                "0x00000000_0x80000000",
                "persistent",
                f"persistent://t/ns/{broker}-{i}",
                1.0,
                2.0,
                100.0,
                200.0,
                1,
                2,
                2,
            )


def warm_up(spark, work_dir: str) -> dict[str, int]:
    """The Spark operations of every job, on a tiny dataset: what the driver's class-data-sharing archive
    (``pipeline.jvm``) records. Writes only under ``work_dir``."""
    boundaries = {"t/ns": [0, 0x80000000, 0xFFFFFFFF]}
    topics = f"{work_dir}/topics.parquet"
    fetched = fetch_topics(spark, ["b1:8080", "b2:8080"], _warm_up_fetch, concurrency=2, path=topics)
    mapped = with_live_bundle(spark.read.parquet(topics), boundaries)
    bundle_load(mapped).write.mode("overwrite").parquet(f"{work_dir}/bundle_load.parquet")
    mismatched = total_mismatches(spark.read.parquet(f"{work_dir}/bundle_load.parquet"))
    examples = mismatches(mapped).limit(10).collect()
    split = topics_in_bundles(spark.read.parquet(topics), ["t/ns/0x00000000_0x80000000"], boundaries).collect()
    bundle_stats_of_topics(spark.read.parquet(topics)).write.mode("overwrite").parquet(
        f"{work_dir}/bundle_stats.parquet"
    )
    generated = synthetic_topics(
        spark,
        topics=100,
        namespaces=["t/ns"],
        owners={"t/ns/0x00000000_0x80000000": "b1:8080", "t/ns/0x80000000_0xffffffff": "b2:8080"},
        boundaries=boundaries,
        zipf_exponent=0.8,
        top_msg_rate=100.0,
        rank_multiplier=61,
        partitions=2,
    ).count()
    spark.createDataFrame([("p", 1, "a")], "plan_id string, seq int, kind string").write.mode("overwrite").parquet(
        f"{work_dir}/actions.parquet"
    )
    with removed_on_failure(spark, [f"{work_dir}/none.parquet"], [f"{work_dir}/none"]):
        pass
    return {
        "brokers": len(fetched),
        "mismatches": mismatched,
        "examples": len(examples),
        "splitTopics": len(split),
        "generated": generated,
    }
