"""The maintenance-window wait between ``await_approval`` and ``execute_unload``.

``wait_for_window`` is a deferrable sensor: when the plan's cluster has maintenance windows
(``pulsar-rebalance windows set``) and none is open, it defers to Airflow's ``DateTimeTrigger`` until
the next opening (the task holds no worker slot while it waits; the triggerer wakes it), then checks
again: the setting may have changed meanwhile, so it never sleeps past :data:`RECHECK` either. The plan's
approval expiry still applies: an approved plan whose ``expires_at`` passes before a window opens is
marked ``expired`` (audited, with why) and nothing is executed.

    no windows for the cluster   success at once (today's behaviour)
    inside a window              success: execute_unload starts
    outside, before expiry       deferred until min(next opening, expiry, now + RECHECK)
    expiry passed                plan expired, task skipped (execute_unload skipped)
    plan not approved            skipped (rejected/expired/superseded at the gate, or meanwhile)
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowSkipException

RECHECK = dt.timedelta(minutes=5)


def window_gate(url: str, run_id: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """Where the run's approved plan stands against its cluster's windows (expires it when due).

    ``status``: ``open`` (execute now), ``wait`` (``opens_at``, ``wake_at``), ``expired``, ``not_approved``
    or ``missing``; with ``plan_id``, ``windows`` (the setting's one-line description or None).
    """
    from pulsar_rebalance.core.windows import describe, window_state
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store import windows as store_windows
    from pulsar_rebalance.store.engine import make_engine, session_scope

    now = now or dt.datetime.now(dt.UTC)
    with session_scope(make_engine(url)) as s:
        plan = repo.plan_for_run(s, run_id=run_id)
        if plan is None:
            return {"status": "missing", "run_id": run_id}
        base: dict[str, Any] = {"plan_id": plan.plan_id, "windows": None}
        if plan.status != "approved":
            return {**base, "status": "not_approved", "plan_status": plan.status}
        setting = store_windows.window_setting(s, cluster_id=plan.cluster_id)
        if setting is None:
            return {**base, "status": "open"}
        base["windows"] = describe(setting)
        state = window_state(setting, now)
        if state.open:
            return {**base, "status": "open", "closes_at": state.closes_at}
        if store_windows.expire_waiting_plan(s, plan_id=plan.plan_id, now=now, opens_at=state.opens_at):
            return {**base, "status": "expired", "opens_at": state.opens_at, "expires_at": plan.expires_at}
        wake = [now + RECHECK] + [t for t in (state.opens_at, plan.expires_at) if t is not None]
        return {**base, "status": "wait", "opens_at": state.opens_at, "wake_at": min(wake)}


class MaintenanceWindowSensor(BaseSensorOperator):
    """Let the approved plan through only inside one of its cluster's maintenance windows (see module doc)."""

    template_fields = ("run_key",)
    ui_color = "#e3f2fd"

    def __init__(self, *, run_key: str = "{{ run_id }}", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_key = run_key

    def poke(self, context) -> bool:  # pragma: no cover - execute() below never calls it
        raise NotImplementedError("MaintenanceWindowSensor defers; it does not poke")

    def execute(self, context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        from airflow.providers.standard.triggers.temporal import DateTimeTrigger

        from pulsar_rebalance.orchestration.connections import database_url

        state = window_gate(database_url(), self.run_key)
        status = state["status"]
        if status == "missing":
            raise RuntimeError(f"run {self.run_key} has no plan: plan_split must run first")
        if status == "not_approved":
            raise AirflowSkipException(f"Plan {state['plan_id']} is {state['plan_status']}: nothing to execute.")
        if status == "expired":
            raise AirflowSkipException(
                f"Plan {state['plan_id']} expired at {state['expires_at']:%Y-%m-%d %H:%M:%S} UTC while waiting for "
                f"the maintenance window ({state['windows']}; next opening "
                f"{_fmt(state['opens_at'])}): nothing is executed."
            )
        if status == "open":
            if state["windows"]:
                self.log.info(
                    "Plan %s: inside the maintenance window (%s; closes %s): executing.",
                    state["plan_id"],
                    state["windows"],
                    _fmt(state.get("closes_at")),
                )
            return {"plan_id": state["plan_id"], "windows": state["windows"]}
        self.log.info(
            "Plan %s is approved and waits for the maintenance window (%s): opens at %s; checking again at %s.",
            state["plan_id"],
            state["windows"],
            _fmt(state["opens_at"]),
            _fmt(state["wake_at"]),
        )
        self.defer(trigger=DateTimeTrigger(moment=state["wake_at"]), method_name="execute")
        raise AssertionError("unreachable: defer() raises")  # pragma: no cover


def _fmt(value: dt.datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value is not None else "never (no opening within five years)"


__all__ = ["RECHECK", "MaintenanceWindowSensor", "window_gate"]
