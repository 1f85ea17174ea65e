"""compute_usage: broker usage and EMA, bundle short/long-term averages, topic-to-bundle check."""

from __future__ import annotations

from pulsar_rebalance.pipeline import jobs as _job


def main(argv=None) -> int:
    args = _job.parse_args(__doc__, argv)
    from pulsar_rebalance.pipeline.context import JobContext
    from pulsar_rebalance.pipeline.stages import stage_compute_usage
    from pulsar_rebalance.store.engine import database_url, make_engine

    spark = _job.session(f"compute_usage {args.run_id}")
    try:
        result = stage_compute_usage(spark, JobContext(args.run_id, args.work_dir), engine=make_engine(database_url()))
    finally:
        spark.stop()
    _job.emit("compute_usage", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
