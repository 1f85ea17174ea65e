"""plan_split: split boundaries, destinations and predictions, stored as one immutable plan."""

from __future__ import annotations

from pulsar_rebalance.pipeline import jobs as _job


def main(argv=None) -> int:
    args = _job.parse_args(__doc__, argv, extra=[("--run-type", str, None)])
    from pulsar_rebalance.pipeline.context import JobContext
    from pulsar_rebalance.pipeline.stages import stage_plan
    from pulsar_rebalance.store.engine import database_url, make_engine

    spark = _job.session(f"plan_split {args.run_id}")
    try:
        result = stage_plan(
            spark, JobContext(args.run_id, args.work_dir), engine=make_engine(database_url()), run_type=args.run_type
        )
    finally:
        spark.stop()
    _job.emit("plan_split", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
