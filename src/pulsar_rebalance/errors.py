"""Exception tree. Choose the class by what the caller can do about it.

RebalanceError
├── ConfigError                 bad/unknown broker.conf key or strategy name (fails at load time)
├── ScenarioError               invalid JSON input to the decision core; names the offending field
│   └── SnapshotError           a cluster snapshot that contradicts itself or Pulsar's Java types;
│                               names broker, bundle, topic and field (core/snapshot.py)
├── PlanError
│   ├── UnknownPlanError        no plan with that id
│   ├── PlanAlreadyDecidedError approving/rejecting a plan that is no longer pending
│   ├── PlanAlreadyApprovedByYouError a second approval by the same person of a plan that needs
│   │                           several approvers
│   ├── PlanExpiredError        the plan's approval window has passed
│   ├── PlanSupersededError     a newer plan (or an execution) of the same cluster replaced it: re-plan
│   ├── PlanChangedError        decided on other content than the stored plan (content hash mismatch)
│   ├── PlanAtGateError         the plan waits at an Airflow approval gate: decide it there (``gate``)
│   ├── PlanStateError          the command does not apply in the plan's status (aborting an executed plan)
│   └── StalePlanError          made from a snapshot older than the cluster's last execution
├── ExecutionError
│   ├── ExecutionInProgressError another execution holds the lock
│   └── InvalidTransitionError  action state machine misuse (a bug)
├── PulsarAdminError            mirrors PulsarAdminException: status_code, url, body
│   ├── NotAuthorizedError      401/403
│   ├── NotFoundError           404
│   ├── ConflictError           409
│   ├── PreconditionFailedError 412
│   ├── ServerSideError         5xx (retryable)
│   ├── AdminConnectError       cannot reach the admin URL (retryable)
│   ├── AdminTimeoutError       request timed out (retryable)
│   └── MalformedResponseError  the body is not the JSON shape Pulsar returns
└── StoreError                  database unreachable or schema not migrated
"""

from __future__ import annotations

from typing import Any


class RebalanceError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(RebalanceError):
    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class ScenarioError(RebalanceError):
    """Invalid input to the decision core. ``field`` is a JSON path such as ``cycles[0].brokers.b1.cpu``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class SnapshotError(ScenarioError):
    """A cluster snapshot (collect's admin answers, or a ``decide`` input) that cannot be planned on.

    The message names what is known of ``broker``, ``bundle``, ``topic`` and ``field``.
    """

    def __init__(
        self,
        message: str,
        *,
        broker: str | None = None,
        bundle: str | None = None,
        topic: str | None = None,
        field: str | None = None,
    ) -> None:
        named = [
            f"{k} {v}"
            for k, v in (("broker", broker), ("bundle", bundle), ("topic", topic), ("field", field))
            if v is not None and str(v) not in message
        ]
        super().__init__(field or "snapshot", message + (f" [{', '.join(named)}]" if named else ""))
        self.broker = broker
        self.bundle = bundle
        self.topic = topic


class PlanError(RebalanceError):
    def __init__(self, message: str, *, plan_id: str | None = None) -> None:
        super().__init__(message)
        self.plan_id = plan_id


class UnknownPlanError(PlanError):
    pass


class PlanAlreadyDecidedError(PlanError):
    pass


class PlanAlreadyApprovedByYouError(PlanError):
    """A plan that needs several approvers got a second approval from the same person."""


class PlanExpiredError(PlanError):
    pass


class PlanSupersededError(PlanError):
    """A newer plan (or an execution) of the same cluster replaced this one: re-plan instead."""


class PlanChangedError(PlanError):
    """The decision was made on other content than the stored plan (content hash mismatch)."""


class PlanAtGateError(PlanError):
    """The plan waits at an Airflow approval gate: decide it there (UI or Airflow's REST API)."""

    def __init__(self, message: str, *, plan_id: str | None = None, gate: dict[str, Any] | None = None) -> None:
        super().__init__(message, plan_id=plan_id)
        self.gate = gate or {}


class PlanStateError(PlanError):
    """The command does not apply to the plan in its current status (e.g. aborting an executed plan)."""


class StalePlanError(PlanError):
    """The plan was made from a snapshot older than the cluster's last execution."""


class ExecutionError(RebalanceError):
    pass


class ExecutionInProgressError(ExecutionError):
    pass


class InvalidTransitionError(ExecutionError):
    pass


class PulsarAdminError(RebalanceError):
    """An admin REST call failed. ``status_code`` is None for transport errors."""

    retryable = False

    def __init__(
        self, message: str, *, status_code: int | None = None, url: str | None = None, body: str | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.url = url
        self.body = body


class NotAuthorizedError(PulsarAdminError):
    pass


class NotFoundError(PulsarAdminError):
    pass


class ConflictError(PulsarAdminError):
    pass


class PreconditionFailedError(PulsarAdminError):
    pass


class ServerSideError(PulsarAdminError):
    retryable = True


class AdminConnectError(PulsarAdminError):
    retryable = True


class AdminTimeoutError(PulsarAdminError):
    retryable = True


class MalformedResponseError(PulsarAdminError):
    pass


class StoreError(RebalanceError):
    pass
