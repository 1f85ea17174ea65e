"""execute_unload: the approved actions, intent first, with bounded parallelism."""

from __future__ import annotations

from pulsar_rebalance.pipeline import jobs as _job


def main(argv=None) -> int:
    args = _job.parse_args(__doc__, argv)
    from pulsar_rebalance.pipeline.context import JobContext, admin_client_from_env
    from pulsar_rebalance.pipeline.stages import stage_execute
    from pulsar_rebalance.store.engine import database_url, make_engine

    spark = _job.session(f"execute_unload {args.run_id}")
    try:
        result = stage_execute(spark, JobContext(args.run_id, args.work_dir), engine=make_engine(database_url()), client=admin_client_from_env())
    finally:
        spark.stop()
    _job.emit("execute_unload", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
