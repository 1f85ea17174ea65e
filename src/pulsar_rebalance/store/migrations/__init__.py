"""Alembic migrations of the state store (driven by ``pulsar_rebalance.store.engine.migrate``)."""
