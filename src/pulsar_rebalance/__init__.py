"""pulsar_rebalance: an approval-gated, Airflow-orchestrated load rebalancer for Apache Pulsar.

Layers (imports only point downwards):

    core/            pure decision core: Pulsar's algorithms (no airflow/pyspark/sqlalchemy/httpx)
    pulsar_admin/    httpx client for Pulsar's admin REST API
    store/           Postgres state (SQLAlchemy 2 + Alembic), embedded Postgres adapter
    simulator/       a simulated Pulsar cluster that speaks the admin REST API
    pipeline/        the functions the Spark jobs call (collect, usage, detect, plan, execute)
    orchestration/   Airflow glue: operators, approval sensor + trigger
    cli/             the ``pulsar-rebalance`` console script
"""

__version__ = "0.1.0"
