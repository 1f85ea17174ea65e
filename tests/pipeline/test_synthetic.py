"""The synthetic snapshot writes what collect_load writes, and the later stages run on it unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from pulsar_rebalance.core.pulsar.bundles import NamespaceBundles
from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.pipeline import context as C
from pulsar_rebalance.pipeline import transforms as T
from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pipeline.synthetic import SyntheticSpec, generate_snapshot
from pulsar_rebalance.store.engine import make_engine

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

SPEC = SyntheticSpec(
    brokers=7, namespaces=3, bundles=20, topics=6000, tenants=2, zipf_exponent=1.0, msg_rate_in_per_broker=5000.0
)


def _counts(url: str) -> dict[str, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return {
                t: c.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
                for t in ("runs", "brokers", "broker_load", "bundle_ranges", "ownership")
            }
    finally:
        engine.dispose()


def test_synthetic_snapshot_is_a_collected_snapshot_and_the_pipeline_plans_on_it(spark, db_url, tmp_path):
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    ctx = JobContext("synthetic-1", str(tmp_path / "work"))
    out = generate_snapshot(spark, ctx, spec=SPEC, engine=engine)
    assert out["topics"] == 6000 and out["bundles"] == 20

    topics = spark.read.parquet(ctx.path(C.TOPICS))
    assert [(f.name, f.dataType) for f in topics.schema] == [(f.name, f.dataType) for f in T.TOPICS_SCHEMA]
    rows = topics.collect()
    assert len(rows) == 6000 and len({r.topic for r in rows}) == 6000
    bounds = SPEC.boundaries()
    owners = SPEC.owners(bounds)
    for r in rows:  # every topic reported under the bundle its hash falls into, by that bundle's owner
        rng = NamespaceBundles(bounds[r.namespace]).find(r.topic).name
        assert r.reported_bundle == rng and r.broker == owners[f"{r.namespace}/{rng}"]
    total_in = sum(r.msg_rate_in for r in rows)
    assert total_in == pytest.approx(SPEC.msg_rate_in_per_broker * SPEC.brokers)
    by_rate = sorted((r.msg_rate_in for r in rows), reverse=True)
    assert by_rate[0] / by_rate[9] == pytest.approx(10.0)  # Zipf, exponent 1: rank 1 vs rank 10

    stats = spark.read.parquet(ctx.path(C.BUNDLE_STATS))
    assert [(f.name, f.dataType) for f in stats.schema] == [(f.name, f.dataType) for f in T.BUNDLE_STATS_SCHEMA]
    assert sum(r.topics for r in stats.collect()) == 6000
    assert _counts(db_url) == {"runs": 1, "brokers": 7, "broker_load": 7, "bundle_ranges": 20, "ownership": 20}

    usage = stages.stage_compute_usage(spark, ctx, engine=engine)
    assert usage["topicBundleMismatches"] == 0 and usage["bundles"] == 20
    stages.stage_detect(spark, ctx, engine=engine)
    planned = stages.stage_plan(spark, ctx, engine=engine)
    assert planned["status"] in ("pending", "empty")


def test_bad_spec_fails_before_anything_is_written(db_url):
    with pytest.raises(ConfigError, match="bundles .* must be >= namespaces"):
        SyntheticSpec(namespaces=10, bundles=5)
    with pytest.raises(ConfigError, match="topics must be a positive integer"):
        SyntheticSpec(topics=0)
    assert _counts(db_url)["runs"] == 0


def test_rank_multiplier_permutes_the_ranks():
    for n in (1, 2, 10, 97, 1000, 6000, 30030):
        m = SyntheticSpec(topics=n, bundles=200, namespaces=200).rank_multiplier()
        assert sorted((i * m) % n for i in range(n)) == list(range(n))


@pytest.mark.slow
def test_synthetic_snapshot_job_runs_through_spark_submit(db_url, tmp_path):
    env = {"PULSAR_REBALANCE_DATABASE_URL": db_url}
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            str(ROOT / "spark_jobs" / "synthetic_snapshot.py"),
            "--run-id",
            "synthetic-job",
            "--work-dir",
            str(tmp_path),
            "--brokers",
            "5",
            "--namespaces",
            "2",
            "--bundles",
            "8",
            "--topics",
            "1000",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RESULT synthetic_snapshot" in proc.stdout
    assert db_url not in proc.stdout + proc.stderr
    assert _counts(db_url)["bundle_ranges"] == 8
