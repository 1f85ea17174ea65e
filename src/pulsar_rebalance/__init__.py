"""pulsar_rebalance: an approval-gated, Airflow-orchestrated load rebalancer for Apache Pulsar.

Layers (imports only point downwards):

    core/            pure decision core (no airflow/pyspark/sqlalchemy/httpx):
      pulsar/        Pulsar's own algorithms reproduced: load reports, bundles, splits, shedders, placement
      planner/       this project's GlobalPlanner
      contract/      the JSON documents in and out (decide, split) and their validation
      (the rest)     the product's own: the do-no-harm guard, plans, cycles, modes, windows, progress
    pulsar_admin/    httpx client for Pulsar's admin REST API
    store/           Postgres state (SQLAlchemy 2 + Alembic), embedded Postgres adapter
    simulator/       a simulated Pulsar cluster that speaks the admin REST API
    pipeline/        the functions the Spark jobs call (collect, usage, detect, plan, execute)
    orchestration/   Airflow glue: operators, approval sensor + trigger
    cli/             the ``pulsar-rebalance`` console script
"""

__version__ = "0.1.0"
