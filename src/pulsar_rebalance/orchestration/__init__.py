"""Airflow glue: the only package (with dags/ and plugins/) that imports airflow.

connections.py  Airflow Connections -> environment for jobs (secrets never on argv)
operators.py    PulsarSparkJobOperator: SparkSubmitOperator for our jobs
approval.py     PlanApprovalSensor + PlanApprovalTrigger: the deferrable manual-approval gate
"""
