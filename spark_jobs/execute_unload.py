"""execute_unload: the approved actions, intent first, with bounded parallelism.

``--without-spark`` runs the same stage in a plain Python process (the outcome is in Postgres, only its
Parquet copy ``execution.parquet`` is not written): the fault-injection tests kill and retry it this way.
"""

from __future__ import annotations

from pulsar_rebalance.pipeline import jobs as _job


def main(argv=None) -> int:
    args = _job.parse_args(__doc__, argv, without_spark=True)
    from pulsar_rebalance.pipeline.context import JobContext, admin_client_from_env
    from pulsar_rebalance.pipeline.stages import stage_execute
    from pulsar_rebalance.store.engine import database_url, make_engine

    if args.without_spark:
        _job.plain_process()
        spark = None
    else:
        spark = _job.session(f"execute_unload {args.run_id}")
    try:
        result = stage_execute(
            spark,
            JobContext(args.run_id, args.work_dir),
            engine=make_engine(database_url()),
            client=admin_client_from_env(),
        )
    finally:
        if spark is not None:
            spark.stop()
    _job.emit("execute_unload", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
