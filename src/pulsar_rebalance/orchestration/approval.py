"""The manual-approval gate: a deferrable sensor over the stored, immutable plan of this run.

Why not Airflow's HITL ApprovalOperator: the approval belongs to a frozen plan row in *our*
Postgres (with who/when/comment and expiry), so it can be given from the CLI, a plugin page or any
tool that writes through ``store.repository.decide_plan``, and audited with the plan.

    plan status     sensor outcome
    empty           skip (nothing to do; execute_unload is skipped, the run is green)
    pending         defer to PlanApprovalTrigger, which polls Postgres without holding a worker slot
    approved        success, XCom = {"plan_id", "decision", "decided_by", "comment"}
    rejected        skip execute_unload (recorded, not an error)
    expired         skip execute_unload (the trigger records the expiry when expires_at passes)
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowSkipException
from airflow.triggers.base import BaseTrigger, TriggerEvent

DECIDED = ("approved", "rejected", "expired", "executing", "executed", "partially_executed", "failed")


def check_plan(url: str, run_id: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """Current gate state of the run's plan; expires it (recorded) when its window has passed."""
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    now = now or dt.datetime.now(dt.timezone.utc)
    with session_scope(make_engine(url)) as s:
        plan = repo.plan_for_run(s, run_id=run_id)
        if plan is None:
            return {"status": "missing", "run_id": run_id}
        if plan.status == "pending" and plan.expires_at is not None and plan.expires_at <= now:
            repo.expire_plan(s, plan_id=plan.plan_id, now=now)
            plan = repo.get_plan(s, plan_id=plan.plan_id)
        approval = plan.approval
        return {
            "status": plan.status,
            "plan_id": plan.plan_id,
            "decision": approval.decision if approval else None,
            "decided_by": approval.decided_by if approval else None,
            "comment": approval.comment if approval else None,
        }


class PlanApprovalTrigger(BaseTrigger):
    """Polls the plan row until it is decided (or expires). Runs in the triggerer (or inline in dag.test)."""

    def __init__(self, run_id: str, poll_interval: float = 5.0) -> None:
        super().__init__()
        self.run_id = run_id
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "pulsar_rebalance.orchestration.approval.PlanApprovalTrigger",
            {"run_id": self.run_id, "poll_interval": self.poll_interval},
        )

    async def run(self):
        from pulsar_rebalance.orchestration.connections import adatabase_url

        url = await adatabase_url()
        while True:
            state = await asyncio.to_thread(check_plan, url, self.run_id)
            if state["status"] != "pending":
                yield TriggerEvent(state)
                return
            await asyncio.sleep(self.poll_interval)


class PlanApprovalSensor(BaseSensorOperator):
    """Waits until this run's plan is approved, rejected or expired. Deferrable: no worker slot held."""

    template_fields = ("run_key",)
    ui_color = "#fff3cd"

    def __init__(self, *, run_key: str = "{{ run_id }}", poll_interval: float = 5.0, **kwargs: Any) -> None:
        kwargs.setdefault("timeout", 7 * 24 * 3600)  # the plan's own expiry is what ends the wait
        super().__init__(**kwargs)
        self.run_key = run_key
        self.poll_interval = poll_interval

    def execute(self, context):
        from pulsar_rebalance.orchestration.connections import database_url

        state = check_plan(database_url(), self.run_key)
        if state["status"] == "pending":
            self.log.info(
                "Plan %s is waiting for approval: pulsar-rebalance plans show %s; "
                "pulsar-rebalance plans approve %s [--comment ...]; pulsar-rebalance plans reject %s",
                state["plan_id"], state["plan_id"], state["plan_id"], state["plan_id"],
            )
            self.defer(
                trigger=PlanApprovalTrigger(run_id=self.run_key, poll_interval=self.poll_interval),
                method_name="execute_complete",
                timeout=dt.timedelta(seconds=self.timeout),
            )
        return self._finish(state)

    def execute_complete(self, context, event: dict[str, Any] | None = None):
        return self._finish(event or {})

    def poke(self, context) -> bool:  # not used: execute() defers; kept for BaseSensorOperator's contract
        from pulsar_rebalance.orchestration.connections import database_url

        return check_plan(database_url(), self.run_key)["status"] != "pending"

    def _finish(self, state: dict[str, Any]):
        status = state.get("status")
        if status == "missing":
            raise RuntimeError(f"run {self.run_key} has no plan: plan_split must run first")
        if status == "empty":
            raise AirflowSkipException("Nothing to do: the plan has no actions, so there is nothing to approve.")
        if status in ("rejected", "expired"):
            raise AirflowSkipException(
                f"Plan {state.get('plan_id')} was {status}"
                + (f" by {state['decided_by']}" if state.get("decided_by") else "")
                + ": nothing is executed."
            )
        self.log.info("Plan %s approved by %s", state.get("plan_id"), state.get("decided_by"))
        return state
