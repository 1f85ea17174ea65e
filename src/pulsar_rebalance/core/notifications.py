"""What operators are told, and when (pure: no I/O; the notifier in orchestration sends it).

Five events of a plan's life reach the configured channels (email, webhook):

    waiting      the plan waits at the approval gate: id, cluster, mode, strategy, unloads/splits,
                 the busiest broker's usage before -> after (predicted), expiry, the plan page
    executed     execute_unload finished: done / skipped / failed actions, measured usage after
    failed       a task of the run failed for good (after its retries): which task, the error's
                 class and message (secrets redacted, shortened), the plan if there is one
    interrupted  execute_unload failed while its plan was executing: the execution stopped partway
                 (``plans resume`` / ``plans abort``)
    expired      the plan was not decided in time: nothing runs

A :class:`Message` has a one-line ``subject`` and a plain-text ``text``; :meth:`Message.payload` is the
webhook's JSON, with a Slack-compatible ``text`` field (so a Slack incoming-webhook URL works as is).
:func:`redact` removes given secrets (and any ``user:password@`` of a URL) from every part of a message:
the sender passes every credential it knows of, so none can reach a message even through an error text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, get_args

NotificationEvent = Literal["waiting", "executed", "failed", "interrupted", "expired"]
EVENTS: tuple[NotificationEvent, ...] = get_args(NotificationEvent)

MAX_ERROR_CHARS = 500
"""An error message is cut to this many characters, its start and its end kept (the task log has all of it):
spark-submit's error, for one, names the command first and the exit code last."""

REDACTED = "***"
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):[^@\s/]*@")


@dataclass(frozen=True)
class PlanFacts:
    """A stored plan, reduced to what a notification says about it."""

    plan_id: str
    status: str
    cluster: str | None = None
    mode: str = "rebalance"
    strategy: str | None = None
    unloads: int = 0
    splits: int = 0
    max_usage_before: float | None = None
    max_usage_after_predicted: float | None = None
    max_usage_after: float | None = None  # measured after execution
    expires_at: datetime | None = None
    dry_run: bool = False
    done: int = 0
    skipped: int = 0
    failed: int = 0
    approvals: int = 0
    required_approvals: int = 1


def plan_mode(summary: Mapping[str, Any] | None) -> str:
    """The plan's kind from its stored summary: rebalance, drain, fill, rollback or fix_policy_violations."""
    summary = summary or {}
    mode = summary.get("mode")
    if isinstance(mode, Mapping) and mode.get("mode"):
        return str(mode["mode"])
    if summary.get("rollbackOf"):
        return "rollback"
    if summary.get("fixPolicyViolations"):
        return "fix_policy_violations"
    return "rebalance"


def plan_facts(
    *,
    plan_id: str,
    status: str,
    summary: Mapping[str, Any] | None,
    actions: Sequence[tuple[str, str]],
    result: Mapping[str, Any] | None = None,
    cluster: str | None = None,
    expires_at: datetime | None = None,
    dry_run: bool = False,
    approvals: int = 0,
    required_approvals: int = 1,
) -> PlanFacts:
    """Facts of a plan from what planning and execution store (``actions``: (kind, state) pairs)."""
    summary = summary or {}
    result = result or {}
    strategies = summary.get("strategies") or {}
    shedding, placement = strategies.get("shedding"), strategies.get("placement")
    strategy = f"{shedding} / {placement}" if shedding and placement else shedding or placement or None
    states = [state for _, state in actions]
    return PlanFacts(
        plan_id=plan_id,
        status=status,
        cluster=cluster,
        mode=plan_mode(summary),
        strategy=strategy,
        unloads=sum(kind == "unload" for kind, _ in actions),
        splits=sum(kind == "split" for kind, _ in actions),
        max_usage_before=_number(summary.get("maxUsageBefore")),
        max_usage_after_predicted=_number(summary.get("maxUsageAfterPredicted")),
        max_usage_after=_number(result.get("max_usage_after")),
        expires_at=expires_at,
        dry_run=dry_run,
        done=states.count("completed"),
        skipped=states.count("skipped"),
        failed=states.count("failed"),
        approvals=approvals,
        required_approvals=required_approvals,
    )


@dataclass(frozen=True)
class Failure:
    """A task that failed for good: where, and the error as its class and (shortened) message."""

    dag_id: str
    run_id: str
    task_id: str
    error_class: str
    error_message: str
    log_url: str | None = None


@dataclass(frozen=True)
class Message:
    """One notification: ``subject`` (one line), ``text`` (plain, multi-line), ``fields`` (for machines)."""

    event: NotificationEvent
    subject: str
    text: str
    link: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The webhook's JSON body; ``text`` is what Slack's incoming webhooks show."""
        body = f"*{self.subject}*\n{self.text}"
        return {"text": body, "event": self.event, "subject": self.subject, "link": self.link, **self.fields}


# --------------------------------------------------------------------------------------------- compose
def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1%}"


def _when(value: datetime | None) -> str:
    return "never" if value is None else value.strftime("%Y-%m-%d %H:%M %Z").strip()


def _title(f: PlanFacts) -> str:
    cluster = f" on cluster {f.cluster}" if f.cluster else ""
    dry = " (dry run)" if f.dry_run else ""
    return f"{f.mode} plan {f.plan_id}{cluster}{dry}"


def _plan_lines(f: PlanFacts) -> list[str]:
    return [
        f"Plan: {f.plan_id}",
        f"Cluster: {f.cluster or 'unknown'}",
        f"Mode: {f.mode}",
        f"Strategy: {f.strategy or 'unknown'}",
        f"Actions: {f.unloads} unload(s), {f.splits} split(s)",
    ]


def _plan_fields(f: PlanFacts) -> dict[str, Any]:
    fields = {k: v for k, v in asdict(f).items() if k not in ("approvals", "required_approvals")}
    return {**fields, "expires_at": f.expires_at.isoformat() if f.expires_at else None}


def _with_link(lines: list[str], link: str | None, label: str = "Plan page") -> str:
    return "\n".join([*lines, f"{label}: {link}"] if link else lines)


def waiting(f: PlanFacts, *, link: str | None) -> Message:
    """The plan waits at the gate: everything needed to decide whether to open its page now."""
    lines = _plan_lines(f) + [
        f"Busiest broker's usage: {_pct(f.max_usage_before)} -> {_pct(f.max_usage_after_predicted)} (predicted)",
        f"Expires: {_when(f.expires_at)} (undecided by then: nothing runs)",
    ]
    if f.required_approvals > 1:
        lines.append(f"Approvals: {f.approvals} of {f.required_approvals} (from different people)")
    return Message(
        "waiting",
        f"Approval needed: {_title(f)}: {f.unloads} unload(s), {f.splits} split(s)",
        _with_link(lines, link),
        link,
        _plan_fields(f),
    )


def executed(f: PlanFacts, *, link: str | None) -> Message:
    """Execution finished: how many actions ran, were skipped or failed, and the measured balance."""
    total = f.done + f.skipped + f.failed
    lines = _plan_lines(f) + [
        f"Status: {f.status}",
        f"Done: {f.done} of {total}; skipped: {f.skipped}; failed: {f.failed}",
        f"Busiest broker's usage: {_pct(f.max_usage_before)} before, {_pct(f.max_usage_after_predicted)} predicted, "
        f"{_pct(f.max_usage_after)} measured after",
    ]
    return Message(
        "executed",
        f"Executed: {_title(f)}: {f.done} done, {f.skipped} skipped, {f.failed} failed",
        _with_link(lines, link),
        link,
        _plan_fields(f),
    )


def expired(f: PlanFacts, *, link: str | None) -> Message:
    """Nobody decided in time: the plan expired and nothing was executed."""
    lines = _plan_lines(f) + [f"Expired at: {_when(f.expires_at)}; nothing was executed."]
    return Message(
        "expired",
        f"Expired: {_title(f)} was not decided in time",
        _with_link(lines, link),
        link,
        _plan_fields(f),
    )


def _failure_lines(x: Failure) -> list[str]:
    lines = [
        f"DAG run: {x.dag_id} / {x.run_id}",
        f"Failed task: {x.task_id}",
        f"Error: {x.error_class}: {x.error_message}",
    ]
    return lines + ([f"Task log: {x.log_url}"] if x.log_url else [])


def _failure_fields(x: Failure) -> dict[str, Any]:
    return {k: v for k, v in asdict(x).items() if k != "log_url"}


def failed(x: Failure, f: PlanFacts | None, *, link: str | None, cluster: str | None = None) -> Message:
    """A task failed after its retries; with the run's plan when planning got that far."""
    where = f" ({_title(f)})" if f else (f" on cluster {cluster}" if cluster else "")
    lines = _failure_lines(x)
    if f is not None:
        lines += [
            "",
            *_plan_lines(f),
            f"Plan status: {f.status}; done {f.done}, skipped {f.skipped}, failed {f.failed}",
        ]
    return Message(
        "failed",
        f"Failed: task {x.task_id} of run {x.run_id}{where}: {x.error_class}",
        _with_link(lines, link if f else None),
        link if f else None,
        {**(_plan_fields(f) if f else {"plan_id": None, "cluster": cluster}), **_failure_fields(x)},
    )


def interrupted(x: Failure, f: PlanFacts, *, link: str | None) -> Message:
    """The execution stopped partway: some actions ran, the rest waits for ``plans resume`` or ``abort``."""
    total = f.unloads + f.splits
    lines = [
        *_failure_lines(x),
        "",
        *_plan_lines(f),
        f"Done so far: {f.done} of {total}; skipped: {f.skipped}; failed: {f.failed}",
        f"Next: `pulsar-rebalance plans resume {f.plan_id}` (reconciles with Pulsar first) or "
        f"`pulsar-rebalance plans abort {f.plan_id}`",
    ]
    return Message(
        "interrupted",
        f"Interrupted: {_title(f)}: {f.done} of {total} action(s) done",
        _with_link(lines, link),
        link,
        {**_plan_fields(f), **_failure_fields(x)},
    )


def error_text(error: BaseException | str | None) -> tuple[str, str]:
    """(class name, message on one line, cut to :data:`MAX_ERROR_CHARS`) of a task's error."""
    if error is None:
        return "UnknownError", "no error was recorded (see the task log)"
    if isinstance(error, str):
        name, message = "Error", error
    else:
        name, message = type(error).__name__, str(error)
    message = " ".join(message.split()) or "(no message)"
    if len(message) > MAX_ERROR_CHARS:
        tail = MAX_ERROR_CHARS // 3
        message = message[: MAX_ERROR_CHARS - tail - 3] + " … " + message[-tail:]
    return name, message


# ---------------------------------------------------------------------------------------------- redact
def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every given secret, and every URL's ``user:password@``, replaced by ``***``."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _URL_PASSWORD.sub(rf"\g<head>:{REDACTED}@", text)


def _redact_value(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, Mapping):
        return {k: _redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v, secrets) for v in value]
    return value


def redact(message: Message, secrets: Iterable[str]) -> Message:
    """The message with ``secrets`` removed from its subject, text, link and fields."""
    known = list(secrets)
    return replace(
        message,
        subject=redact_text(message.subject, known),
        text=redact_text(message.text, known),
        link=redact_text(message.link, known) if message.link else None,
        fields=_redact_value(dict(message.fields), known),
    )
