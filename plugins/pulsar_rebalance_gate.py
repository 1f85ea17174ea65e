"""Airflow plugin: the guard in front of the pulsar-rebalance approval gate (wiring only).

See ``pulsar_rebalance.orchestration.gate_guard``: answers to a plan's Required Action are checked
against the stored plan before Airflow accepts them, and recorded in the plan's approvals at once.
"""

from airflow.plugins_manager import AirflowPlugin

from pulsar_rebalance.orchestration.gate_guard import GateGuardMiddleware


class PulsarRebalanceGatePlugin(AirflowPlugin):
    name = "pulsar_rebalance_gate"
    fastapi_root_middlewares = [
        {"middleware": GateGuardMiddleware, "args": [], "kwargs": {}, "name": "pulsar-rebalance gate guard"},
    ]
