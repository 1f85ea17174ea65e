"""What every part of the repository shares: its two errors, the system actor and the input checks.

Split out of ``store/repository.py`` (which re-exports the public names); see its docstring for the
rules every repository function follows.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select

from pulsar_rebalance.errors import StoreError

SYSTEM_ACTOR = "system"


class InvalidRowError(StoreError, ValueError):
    """Input to a repository function is malformed; ``field`` names the offending value."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class UnknownRunError(StoreError, LookupError):
    """No ``runs`` row with that id (call :func:`start_run` first)."""


def _json_value(field: str, value: Any) -> Any:
    """Check ``value`` is JSON (finite numbers, string keys) before it reaches a jsonb column."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidRowError(field, f"is not JSON-serialisable: {exc}") from exc
    return value


def _require_text(field: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRowError(field, f"must be a non-empty string, got {value!r}")


def _aware(field: str, value: datetime | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    if not isinstance(value, datetime):
        raise TypeError(f"{field} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field} must be timezone-aware (got naive {value.isoformat()})")
    return value


def _for_update(stmt: Select[Any], *, of: Any = None) -> Select[Any]:
    """``SELECT ... FOR UPDATE`` that also refreshes rows already in the session's identity map
    (without ``populate_existing`` a previously loaded object would keep its stale attributes)."""
    return stmt.with_for_update(of=of).execution_options(populate_existing=True)
