"""The ``pulsar_rebalance`` DAGs, one per Pulsar cluster: collect → usage → detect → plan → **human
approval** → execute.

:func:`build_dag` builds the DAG of one cluster (``core.clusters``: Connection ``pulsar_admin_<name>``,
DAG ``pulsar_rebalance_<name>``, ``pulsar_rebalance`` for ``default``); ``dags/pulsar_rebalance.py`` calls
it for every name :func:`~pulsar_rebalance.core.clusters.cluster_names` finds in the environment. Each
DAG has its own schedule (``PULSAR_REBALANCE_SCHEDULE_<NAME>``, else ``PULSAR_REBALANCE_SCHEDULE``,
else ``@hourly``), params, gate and plan list; its Spark jobs get its own admin Connection, and its runs
are recorded under :func:`~pulsar_rebalance.core.clusters.run_key`. Executions are serialised per Pulsar
cluster by the executor's lock and the state DB's one-executing-plan-per-cluster index, so clusters never
wait for each other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from pulsar_rebalance.core import clusters
from pulsar_rebalance.core.pulsar.config import SPLIT_ALGORITHM_NAMES, config_json_schema
from pulsar_rebalance.orchestration.approval import PlanApprovalGate
from pulsar_rebalance.orchestration.notify import attach_notifications
from pulsar_rebalance.orchestration.operators import PulsarSparkJobOperator
from pulsar_rebalance.orchestration.windows import MaintenanceWindowSensor
from pulsar_rebalance.pipeline import params as run_params
from pulsar_rebalance.pipeline.params import PLACEMENTS, SHEDDERS, RunParams

SCHEDULE_ENV = "PULSAR_REBALANCE_SCHEDULE"


def schedule(name: str, environ: Mapping[str, str]) -> str | None:
    """Cluster ``name``'s schedule: ``PULSAR_REBALANCE_SCHEDULE_<NAME>``, else ``PULSAR_REBALANCE_SCHEDULE``,
    else ``@hourly``; an empty value means no schedule (manual runs only)."""
    own = f"{SCHEDULE_ENV}_{name.upper()}"
    value = environ[own] if own in environ else environ.get(SCHEDULE_ENV, "@hourly")
    return value.strip() or None


def build_dags(environ: Mapping[str, str], doc_md: str | None = None) -> dict[str, DAG]:
    """``{dag_id: DAG}``: one DAG per cluster named in ``environ`` (see ``core.clusters.cluster_names``).

    Raises:
        ConfigError: a cluster name is not valid (the DAG file then fails to import, naming it).
    """
    from pulsar_rebalance.errors import ConfigError

    try:
        names = clusters.cluster_names(environ)
    except ValueError as exc:
        raise ConfigError(str(exc), key=clusters.CLUSTERS_ENV) from None
    return {clusters.dag_id(name): build_dag(name, doc_md=doc_md) for name in names}


def build_dag(name: str = clusters.DEFAULT_NAME, *, doc_md: str | None = None) -> DAG:
    """The DAG of cluster ``name`` (Connection ``pulsar_admin_<name>``)."""
    admin_conn_id = clusters.conn_id(name)
    run_key = clusters.run_key_template(name)
    # The trigger form validates every param (JSON schema, from the same tables and limits as
    # RunParams.from_json): a bad value or an unknown config key is refused when the run is triggered,
    # not by collect_load after a retry.
    with DAG(
        dag_id=clusters.dag_id(name),
        description="Approval-gated Pulsar bundle rebalancing (a whole-cluster planner, or Pulsar's own algorithms)"
        + ("" if name == clusters.DEFAULT_NAME else f" of cluster {name} (Connection {admin_conn_id})"),
        schedule=schedule(name, os.environ),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        # A run waiting at its gate must not hold back an operator's own run: a manual run's plan supersedes
        # the older pending one (a scheduled run's does not: it skips while a plan awaits a decision), and
        # executions are serialised per cluster by the executor's lock.
        max_active_runs=3,
        tags=["pulsar", "rebalance"] + ([] if name == clusters.DEFAULT_NAME else [f"cluster:{name}"]),
        doc_md=doc_md,
        default_args={"retries": 1, "retry_delay": timedelta(seconds=20)},
        params={
            "namespaces": Param(
                [],
                type="array",
                items={"type": "string", "pattern": run_params.NAMESPACE_PATTERN},
                description="tenant/namespace list; empty = every namespace",
            ),
            "shedding_strategy": Param(
                RunParams.shedding_strategy,
                enum=list(SHEDDERS),
                description="loadBalancerLoadSheddingStrategy (Pulsar's), or GlobalPlanner (whole-cluster plan)",
            ),
            "placement_strategy": Param(
                RunParams.placement_strategy, enum=list(PLACEMENTS), description="loadBalancerLoadPlacementStrategy"
            ),
            "split_algorithm": Param(
                None,
                type=["null", "string"],
                enum=[None, *SPLIT_ALGORITHM_NAMES],
                description="defaultNamespaceBundleSplitAlgorithm; null = config/Pulsar default",
            ),
            "dry_run": Param(RunParams.dry_run, type="boolean", description="plan and approve, but call no admin API"),
            "config": Param(
                {},
                description="broker.conf load-balancer overrides, Pulsar key names verbatim; unknown keys are refused",
                **config_json_schema(),
            ),
            "approval_timeout_minutes": Param(
                RunParams.approval_timeout_minutes,
                type="number",
                exclusiveMinimum=0,
                description="the plan expires (no change) if not decided in time",
            ),
            "max_parallel_unloads": Param(
                RunParams.max_parallel_unloads, type="integer", minimum=1, maximum=run_params.MAX_PARALLEL_UNLOADS
            ),
            "max_unloads_per_broker": Param(
                RunParams.max_unloads_per_broker,
                type="integer",
                minimum=1,
                maximum=run_params.MAX_UNLOADS_PER_BROKER,
                description="at most this many concurrent unloads from or to one broker",
            ),
            "max_unloads_per_run": Param(
                RunParams.max_unloads_per_run,
                type=["null", "integer"],
                minimum=1,
                maximum=run_params.MAX_COUNT,
                description="stop after this many unloads (the rest skipped); null = all",
            ),
            "unload_pacing_seconds": Param(
                RunParams.unload_pacing_seconds,
                type="number",
                minimum=0,
                maximum=run_params.MAX_PACING_SECONDS,
                description="pause between two moves",
            ),
            "drift_tolerance": Param(
                RunParams.drift_tolerance,
                type="number",
                minimum=0,
                maximum=run_params.MAX_DRIFT_TOLERANCE,
                description="skip an unload whose bundle's message rate changed by more than this fraction since planning",
            ),
            "allow_pulsar_shedding": Param(
                RunParams.allow_pulsar_shedding,
                type="boolean",
                description="execute even if Pulsar's own loadBalancerSheddingEnabled is on "
                "(the two balancers would fight)",
            ),
            "auto_approve_max_unloads": Param(
                RunParams.auto_approve_max_unloads,
                type=["null", "integer"],
                minimum=1,
                maximum=run_params.MAX_COUNT,
                description="auto-approve plans of at most this many unloads and no "
                "split (recorded as approved by the policy); null = off",
            ),
            "required_approvals": Param(
                RunParams.required_approvals,
                type="integer",
                minimum=1,
                maximum=run_params.MAX_REQUIRED_APPROVALS,
                description="how many different people must approve the plan (2 = a second "
                "approver); the gate opens again after each approval",
            ),
            "rollback_plan": Param(
                RunParams.rollback_plan,
                type=["null", "string"],
                pattern=run_params.PLAN_ID_PATTERN,
                description="a plan id: plan to return its completed unloads to their previous "
                "owners (needs approval like any plan) instead of running the shedder",
            ),
            "fix_policy_violations": Param(
                RunParams.fix_policy_violations,
                type="boolean",
                description="plan only the moves that put the bundles breaking their namespace's placement "
                "policies (isolation, anti-affinity) on brokers the policies allow, as few as possible (needs "
                "approval like any plan) instead of running the shedder",
            ),
            "mode": Param(
                RunParams.mode,
                type="string",
                enum=list(run_params.MODES),
                description="rebalance: the shedding strategy's plan; drain: move every bundle off the brokers "
                "below (and cordon them: no plan targets them until uncordoned); fill: move load only onto the "
                "brokers below until they reach the cluster's average",
            ),
            "brokers": Param(
                [],
                type="array",
                items={"type": "string"},
                description="for mode drain or fill: the broker ids (host:port, as `pulsar-admin brokers list` shows)",
            ),
            "cluster": Param(None, type=["null", "string"], description="Pulsar cluster name; null = the first"),
            "seed": Param(RunParams.seed, type="integer", description="seed for Pulsar's random tie-breaks"),
            "max_missing_brokers": Param(
                RunParams.max_missing_brokers,
                type="number",
                minimum=0,
                exclusiveMaximum=1,
                description="fraction of brokers that may not answer collect_load (recorded, "
                "left out of the run); more fails the run",
            ),
        },
    ) as dag:
        # every Spark job talks to this DAG's cluster, and records its run under this DAG's run key
        collect_load = PulsarSparkJobOperator(
            task_id="collect_load", job="collect_load", pass_params=True, admin_conn_id=admin_conn_id, run_key=run_key
        )
        compute_usage = PulsarSparkJobOperator(
            task_id="compute_usage", job="compute_usage", admin_conn_id=admin_conn_id, run_key=run_key
        )
        detect_overload = PulsarSparkJobOperator(
            task_id="detect_overload", job="detect_overload", admin_conn_id=admin_conn_id, run_key=run_key
        )
        # a scheduled run leaves a plan that awaits a decision alone (no new plan, no gate); a manual run's
        # plan supersedes it: plan_split is told the run's type
        plan_split = PulsarSparkJobOperator(
            task_id="plan_split",
            job="plan_split",
            admin_conn_id=admin_conn_id,
            application_args=["--run-id", run_key, "--run-type", "{{ dag_run.run_type }}"],
        )
        # one retry: Airflow 3.3 can fail a HITL task whose answer arrives while it is still parking (the
        # executor reports the parking process as finished after the answer re-queued it); the retry reads the
        # decision back from the stored plan, so nothing is asked or decided twice
        await_approval = PlanApprovalGate(
            task_id="await_approval", run_key=run_key, retries=1, retry_delay=pendulum.duration(seconds=5)
        )
        # an approved plan starts only inside its cluster's maintenance window (none set: at once); deferred, no slot
        wait_for_window = MaintenanceWindowSensor(task_id="wait_for_window", run_key=run_key)
        execute_unload = PulsarSparkJobOperator(
            task_id="execute_unload", job="execute_unload", admin_conn_id=admin_conn_id, run_key=run_key
        )

        collect_load >> compute_usage >> detect_overload >> plan_split >> await_approval >> wait_for_window
        wait_for_window >> execute_unload
        attach_notifications(
            dag
        )  # email / webhook: waiting, executed, failed, interrupted, expired (docs/operations.md)
    return dag
