"""Airflow glue: the only package (with dags/ and plugins/) that imports airflow.

dag_factory.py  the pulsar_rebalance DAGs, one per cluster: collect -> usage -> detect -> plan -> approval -> execute
connections.py  Airflow Connections -> environment for jobs (secrets never on argv)
operators.py    PulsarSparkJobOperator: SparkSubmitOperator for our jobs
approval.py     PlanApprovalGate: the manual-approval gate (Airflow's human-in-the-loop request, no triggerer)
gate_guard.py   the check in front of Airflow's human-in-the-loop answer for that gate
windows.py      wait_for_window: the deferrable maintenance-window wait before execution
imbalance.py    the imbalance watch's sample task
notify.py       notifications (email, webhook) through Airflow's notifiers
ui/             the plan pages inside the Airflow UI
"""
