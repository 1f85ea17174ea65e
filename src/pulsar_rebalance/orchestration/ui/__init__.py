"""The plan pages inside the Airflow UI: a FastAPI app mounted by ``plugins/pulsar_rebalance_plugin.py``."""
