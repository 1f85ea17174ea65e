"""warm_up: the Spark operations of every job on a tiny dataset (no database, no cluster to read).

Run by ``python -m pulsar_rebalance.pipeline.jvm`` (``scripts/install.sh``) with
``-XX:ArchiveClassesAtExit``: the classes it loads become the driver's class-data-sharing archive.
"""

from __future__ import annotations

from pulsar_rebalance.pipeline import jobs as _job


def main(argv=None) -> int:
    args = _job.parse_args(__doc__, argv)
    from pulsar_rebalance.pipeline.transforms import warm_up

    spark = _job.session(f"warm_up {args.run_id}")
    try:
        result = warm_up(spark, args.work_dir)
    finally:
        spark.stop()
    _job.emit("warm_up", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
