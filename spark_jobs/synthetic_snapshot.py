"""synthetic_snapshot: write a collected snapshot at any scale (as collect_load would), without a cluster.

    PULSAR_REBALANCE_DATABASE_URL=... spark-submit spark_jobs/synthetic_snapshot.py \\
        --run-id bench-10m --work-dir /tmp/work --brokers 1000 --namespaces 200 --bundles 100000 --topics 10000000

Then run compute_usage, detect_overload and plan_split with the same --run-id and --work-dir.
"""

from __future__ import annotations

import json

from pulsar_rebalance.pipeline import jobs as _job


def main(argv=None) -> int:
    from pulsar_rebalance.pipeline.synthetic import SyntheticSpec

    args = _job.parse_args(__doc__, argv, with_params=True, extra=SyntheticSpec.cli_options())
    from pulsar_rebalance.pipeline.context import JobContext
    from pulsar_rebalance.pipeline.synthetic import generate_snapshot
    from pulsar_rebalance.store.engine import database_url, make_engine

    spec = SyntheticSpec.from_args(args)
    spark = _job.session(f"synthetic_snapshot {args.run_id}")
    try:
        result = generate_snapshot(
            spark,
            JobContext(args.run_id, args.work_dir),
            spec=spec,
            engine=make_engine(database_url()),
            params_doc=json.loads(args.params_json),
        )
    finally:
        spark.stop()
    _job.emit("synthetic_snapshot", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
