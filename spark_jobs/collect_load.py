"""collect_load: brokers, namespaces, bundle boundaries, load reports, topic stats, ownership."""

from __future__ import annotations

import json

from pulsar_rebalance.pipeline import jobs as _job


def main(argv=None) -> int:
    args = _job.parse_args(__doc__, argv, with_params=True)
    from pulsar_rebalance.pipeline.context import JobContext, admin_client_from_env
    from pulsar_rebalance.pipeline.stages import stage_collect
    from pulsar_rebalance.store.engine import database_url, make_engine

    spark = _job.session(f"collect_load {args.run_id}")
    try:
        result = stage_collect(
            spark,
            JobContext(args.run_id, args.work_dir),
            params_doc=json.loads(args.params_json),
            engine=make_engine(database_url()),
            client=admin_client_from_env(),
        )
    finally:
        spark.stop()
    _job.emit("collect_load", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
