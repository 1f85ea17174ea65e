"""The functions the Spark jobs call, one module per DAG task.

    collect.py   collect_load    admin REST -> snapshot -> Postgres (+ topic/bundle Parquet)
    usage.py     compute_usage   broker usage + EMA, bundle time averages, topic->bundle check
    detect.py    detect_overload the configured shedder + split trigger (core.decide)
    planning.py  plan_split      split boundaries, destinations, predictions -> one immutable plan
    execute.py   execute_unload  approved actions, intent-first, reconciled on retry

Everything here may import the store and the admin client; only ``transforms.py`` imports pyspark,
and only the Spark job entry points import ``transforms``.
"""
