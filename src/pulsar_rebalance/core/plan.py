"""The typed plan: what a rebalance will do, validated when it is built, and the action state machine.

Planning builds a :class:`Plan` of :class:`SplitAction` and :class:`UnloadAction`; the store keeps it
(``plans``, ``plan_actions``) and the executor applies it. The types are frozen and check themselves
on construction (Cruise Control's ``ExecutionProposal`` habit): a planner bug or a damaged stored row
fails where it is built, with :class:`InvalidPlanError` naming the field and the value, instead of
in the middle of an execution.

**Content hash.** :meth:`Plan.content_hash` is the SHA-256 of what will run: the snapshot reference
(``run_id``), the dry-run flag and each action's move (:data:`HASHED_ACTION_FIELDS`), as canonical
JSON. Reasons and predictions explain a move and are not part of it. An approval records the hash
its approver saw and the executor recomputes it from the stored actions before anything runs, so the
encoding must never change: ``tests/core/test_plan_types.py`` pins a known hash.

**Action state machine** (:data:`ALLOWED_TRANSITIONS`; :func:`check_transition` is the one check,
used by ``store.transition_action``)::

    pending      ──► in_progress | skipped
    in_progress  ──► completed | failed | skipped     (skipped: reconciled as moot)
    failed       ──► in_progress                      (retry: attempts += 1)
    completed, skipped: final

``failed`` and ``skipped`` carry an error (the failure, or why the action was moot); ``in_progress``
and ``completed`` carry none.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from pulsar_rebalance.core.pulsar.bundles import FULL_UPPER_BOUND
from pulsar_rebalance.errors import InvalidTransitionError, PlanError

ACTION_KINDS = ("split", "unload")
ActionKind = Literal["split", "unload"]

ACTION_STATES = ("pending", "in_progress", "completed", "failed", "skipped")
ActionState = Literal["pending", "in_progress", "completed", "failed", "skipped"]

ALLOWED_TRANSITIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "pending": frozenset({"in_progress", "skipped"}),
        "in_progress": frozenset({"completed", "failed", "skipped"}),
        "failed": frozenset({"in_progress"}),
        "completed": frozenset(),
        "skipped": frozenset(),
    }
)
"""Action state machine: from-state -> states it may move to (see the module docstring)."""

FINAL_ACTION_STATES = frozenset(s for s, targets in ALLOWED_TRANSITIONS.items() if not targets)
_NEEDS_ERROR = frozenset({"failed", "skipped"})

HASHED_ACTION_FIELDS = ("seq", "kind", "namespace", "bundle_range", "source_broker", "destination_broker", "boundaries")
"""The fields of an action that say what it does, in the order the content hash reads them."""

ACTION_ROW_FIELDS = (
    "seq",
    "kind",
    "namespace",
    "bundle_range",
    "source_broker",
    "destination_broker",
    "boundaries",
    "split_algorithm",
    "reason",
    "predicted",
)
"""An action's row form (``plan_actions`` columns): what :meth:`SplitAction.to_row` returns and
:func:`action_from_mapping` reads."""

RANGE_NAME = re.compile(r"0x[0-9a-f]{8}_0x[0-9a-f]{8}")


class InvalidPlanError(PlanError, ValueError):
    """A plan type was built from a bad value. ``field`` names it (``boundaries[1]``, ``actions[3].seq``)."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        super().__init__(f"{field}: {problem} (got {_show(value)})")
        self.field = field
        self.value = value
        self.problem = problem

    def within(self, prefix: str) -> InvalidPlanError:
        """The same error with its field nested under ``prefix`` (``actions[2]`` + ``reason``)."""
        return InvalidPlanError(".".join(p for p in (prefix, self.field) if p), self.value, self.problem)


# ------------------------------------------------------------------------------------ state machine


def check_transition(current: str, to: str, *, error: str | None = None, label: str = "action") -> None:
    """Raise :class:`~pulsar_rebalance.errors.InvalidTransitionError` unless an action may move from
    ``current`` to ``to`` with ``error`` (required for failed/skipped, refused for in_progress/completed).

    ``label`` names the action in the message (``action 7 (unload t/n/0x..., plan p-...)``).
    """
    if to not in ALLOWED_TRANSITIONS:
        raise InvalidTransitionError(f"{label}: unknown state {to!r}")
    if current not in ALLOWED_TRANSITIONS:
        raise InvalidTransitionError(f"{label}: unknown current state {current!r}")
    if to not in ALLOWED_TRANSITIONS[current]:
        allowed = ", ".join(sorted(ALLOWED_TRANSITIONS[current])) or "nothing (final)"
        raise InvalidTransitionError(f"{label}: cannot go from {current} to {to}; allowed: {allowed}")
    if to in _NEEDS_ERROR and not (error and error.strip()):
        raise InvalidTransitionError(f"{label}: moving to {to} needs an error/reason")
    if to not in _NEEDS_ERROR and error is not None:
        raise InvalidTransitionError(f"{label}: error must be None when moving to {to}")


# -------------------------------------------------------------------------------------- predictions


@dataclass(frozen=True, kw_only=True)
class UsageChange:
    """A broker's predicted weighted max resource usage (a fraction, may exceed 1) before and after."""

    broker: str
    before: float
    after: float

    def __post_init__(self) -> None:
        _text("broker", self.broker)
        for name in ("before", "after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InvalidPlanError(name, value, "must be a finite usage fraction >= 0")
            object.__setattr__(self, name, float(value))

    def to_json(self) -> dict[str, Any]:
        return {"broker": self.broker, "before": self.before, "after": self.after}


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """What one action is predicted to do (stored as ``plan_actions.predicted``).

    * ``bundle_load``: the bundle's load at planning time (``msgRateIn``, ``msgThroughputOut``,
      ``topics``, ``producerCount``, ...): the executor's drift check compares against it, the plan
      page sums it into traffic moved and clients that reconnect;
    * ``source`` / ``destination``: what this unload alone changes on its two brokers (their usage just
      before and just after it, the plan's moves applied in order);
    * ``details``: everything else planning records (``tied``, ``children``, ``loadChange``,
      ``rollbackOf``), kept as given.
    """

    bundle_load: Mapping[str, float | int] | None = field(default=None, hash=False)
    source: UsageChange | None = None
    destination: UsageChange | None = None
    details: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def __post_init__(self) -> None:
        if self.bundle_load is not None:
            if not isinstance(self.bundle_load, Mapping):
                raise InvalidPlanError("bundleLoad", self.bundle_load, "must be an object of numbers")
            for key, value in self.bundle_load.items():
                if (
                    not isinstance(key, str)
                    or isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or not math.isfinite(value)
                    or value < 0
                ):
                    raise InvalidPlanError(f"bundleLoad.{key}", value, "must be a finite number >= 0")
            object.__setattr__(self, "bundle_load", MappingProxyType(dict(self.bundle_load)))
        for name in ("source", "destination"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, UsageChange):
                raise InvalidPlanError(name, value, "must be a UsageChange")
        if not isinstance(self.details, Mapping):
            raise InvalidPlanError("details", self.details, "must be a JSON object")
        overlap = sorted(set(self.details) & {"bundleLoad", "source", "destination"})
        if overlap:
            raise InvalidPlanError(
                f"details.{overlap[0]}", self.details[overlap[0]], "is a typed field of the prediction"
            )
        object.__setattr__(self, "details", frozen_json("details", self.details))

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``plan_actions.predicted``)."""
        doc: dict[str, Any] = _thaw(self.details)
        if self.bundle_load is not None:
            doc["bundleLoad"] = dict(self.bundle_load)
        if self.source is not None:
            doc["source"] = self.source.to_json()
        if self.destination is not None:
            doc["destination"] = self.destination.to_json()
        return doc


# ------------------------------------------------------------------------------------------ actions


@dataclass(frozen=True, kw_only=True)
class _Action:
    """Fields every action has: its place in the plan, the bundle, its owner and why it moves."""

    kind: ClassVar[ActionKind]

    seq: int
    namespace: str
    bundle_range: str
    source_broker: str
    reason: str

    def _check_common(self) -> None:
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) or self.seq < 0:
            raise InvalidPlanError("seq", self.seq, "must be a non-negative integer")
        _text("namespace", self.namespace)
        if (
            not isinstance(self.bundle_range, str)
            or not RANGE_NAME.fullmatch(self.bundle_range)
            or self.lower >= self.upper
        ):
            raise InvalidPlanError(
                "bundle_range", self.bundle_range, "must be a bundle range like 0x00000000_0xffffffff (lower < upper)"
            )
        _text("source_broker", self.source_broker)
        _text("reason", self.reason)

    @property
    def bundle(self) -> str:
        """The full bundle name, ``tenant/namespace/0x..._0x...``."""
        return f"{self.namespace}/{self.bundle_range}"

    @property
    def lower(self) -> int:
        return int(self.bundle_range[:10], 16)

    @property
    def upper(self) -> int:
        return int(self.bundle_range[11:], 16)


@dataclass(frozen=True, kw_only=True)
class SplitAction(_Action):
    """Split a bundle at ``boundaries`` (Pulsar's ``specified_positions_divide`` with ``unload=false``:
    the children stay on the owner). ``split_algorithm`` names the algorithm that chose them."""

    kind: ClassVar[ActionKind] = "split"

    boundaries: tuple[int, ...]
    split_algorithm: str | None = None
    predicted: Prediction | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        self._check_common()
        if not isinstance(self.boundaries, (list, tuple)) or not self.boundaries:
            raise InvalidPlanError("boundaries", self.boundaries, "a split needs at least one boundary")
        previous = self.lower
        for i, b in enumerate(self.boundaries):
            if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= FULL_UPPER_BOUND:
                raise InvalidPlanError(f"boundaries[{i}]", b, "must be an integer in [0, 0xffffffff]")
            if b <= previous:
                raise InvalidPlanError(
                    f"boundaries[{i}]",
                    b,
                    f"{b:#010x} must be above {previous:#010x} "
                    f"(boundaries rise strictly inside the range {self.bundle_range})",
                )
            previous = b
        if previous >= self.upper:
            raise InvalidPlanError(
                f"boundaries[{len(self.boundaries) - 1}]",
                previous,
                f"{previous:#010x} must be below the range's upper bound {self.upper:#010x}",
            )
        object.__setattr__(self, "boundaries", tuple(self.boundaries))
        if self.split_algorithm is not None:
            _text("split_algorithm", self.split_algorithm)
        _check_prediction(self.predicted)

    @property
    def destination_broker(self) -> None:
        """A split moves nothing: the children stay on the owner."""
        return None

    @property
    def children(self) -> tuple[str, ...]:
        """The range names the split creates, lowest first."""
        points = (self.lower, *self.boundaries, self.upper)
        return tuple(f"0x{lo:08x}_0x{hi:08x}" for lo, hi in zip(points, points[1:]))

    def to_row(self) -> dict[str, Any]:
        """The row form (:data:`ACTION_ROW_FIELDS`), JSON-ready."""
        return _row(self, boundaries=list(self.boundaries), split_algorithm=self.split_algorithm)


@dataclass(frozen=True, kw_only=True)
class UnloadAction(_Action):
    """Unload a bundle from ``source_broker`` to ``destination_broker`` (Pulsar's ``destinationBroker``;
    None lets Pulsar's lookup place it)."""

    kind: ClassVar[ActionKind] = "unload"

    destination_broker: str | None
    predicted: Prediction | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        self._check_common()
        if self.destination_broker is not None:
            _text("destination_broker", self.destination_broker)
            if self.destination_broker == self.source_broker:
                raise InvalidPlanError(
                    "destination_broker", self.destination_broker, "an unload must leave its source broker"
                )
        _check_prediction(self.predicted)
        for name, broker in (("source", self.source_broker), ("destination", self.destination_broker)):
            change = getattr(self.predicted, name, None)
            if change is not None and change.broker != broker:
                raise InvalidPlanError(
                    f"predicted.{name}.broker", change.broker, f"must be the action's {name} {broker}"
                )

    @property
    def boundaries(self) -> None:
        """An unload does not change the bundle's range."""
        return None

    @property
    def split_algorithm(self) -> None:
        return None

    def to_row(self) -> dict[str, Any]:
        """The row form (:data:`ACTION_ROW_FIELDS`), JSON-ready."""
        return _row(self, boundaries=None, split_algorithm=None)


Action = SplitAction | UnloadAction
"""A plan's action."""


# --------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True, kw_only=True)
class Plan:
    """One immutable rebalance plan.

    ``run_id`` is the snapshot it was made from (the run whose ``collect_load`` read the cluster);
    ``actions`` are in ``seq`` order (executed splits first, then unloads); ``summary`` is the
    reviewer's summary as stored in ``plans.summary`` (predicted usage per broker under ``brokers``,
    notes, warnings, data quality), read into :attr:`predicted`.
    """

    cluster: str
    run_id: str
    dry_run: bool
    actions: tuple[Action, ...]
    summary: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    predicted: Mapping[str, UsageChange] = field(init=False, hash=False, compare=False)
    """Each broker's predicted usage before and after the plan (from ``summary.brokers``)."""

    def __post_init__(self) -> None:
        _text("cluster", self.cluster)
        _text("run_id", self.run_id)
        if not isinstance(self.dry_run, bool):
            raise InvalidPlanError("dry_run", self.dry_run, "must be a bool")
        if not isinstance(self.actions, (list, tuple)):
            raise InvalidPlanError("actions", self.actions, "must be a sequence of actions")
        object.__setattr__(self, "actions", tuple(self.actions))
        seen: dict[tuple[str, str], int] = {}
        split_bundles = {a.bundle for a in self.actions if isinstance(a, SplitAction)}
        for i, a in enumerate(self.actions):
            if not isinstance(a, (SplitAction, UnloadAction)):
                raise InvalidPlanError(f"actions[{i}]", a, "must be a SplitAction or an UnloadAction")
            if i and a.seq <= self.actions[i - 1].seq:
                raise InvalidPlanError(
                    f"actions[{i}].seq",
                    a.seq,
                    f"must be above actions[{i - 1}].seq {self.actions[i - 1].seq} (unique, in order)",
                )
            if (a.kind, a.bundle) in seen:
                done = "split" if a.kind == "split" else "unloaded"
                raise InvalidPlanError(
                    f"actions[{i}].bundle_range",
                    a.bundle_range,
                    f"{a.bundle} is already {done} by actions[{seen[(a.kind, a.bundle)]}]",
                )
            seen[(a.kind, a.bundle)] = i
            if a.kind == "unload" and a.bundle in split_bundles:
                raise InvalidPlanError(
                    f"actions[{i}].bundle_range",
                    a.bundle_range,
                    f"{a.bundle} is split in this plan: unload one of its children instead",
                )
        summary = frozen_json("summary", {} if self.summary is None else self.summary)
        if not isinstance(summary, Mapping):
            raise InvalidPlanError("summary", self.summary, "must be a JSON object")
        object.__setattr__(self, "summary", summary)
        object.__setattr__(self, "predicted", MappingProxyType(_predicted_usage(summary)))

    @property
    def splits(self) -> tuple[SplitAction, ...]:
        return tuple(a for a in self.actions if isinstance(a, SplitAction))

    @property
    def unloads(self) -> tuple[UnloadAction, ...]:
        return tuple(a for a in self.actions if isinstance(a, UnloadAction))

    @property
    def empty(self) -> bool:
        return not self.actions

    def content_hash_input(self) -> str:
        """The canonical JSON the content hash is taken of (see the module docstring)."""
        return content_hash_input(run_id=self.run_id, dry_run=self.dry_run, actions=self.actions)

    def content_hash(self) -> str:
        """SHA-256 (hex) of :meth:`content_hash_input`."""
        return hashlib.sha256(self.content_hash_input().encode("utf-8")).hexdigest()


def content_hash_input(*, run_id: str, dry_run: bool, actions: Iterable[Any]) -> str:
    """Canonical JSON of what a plan will do: ``{"actions": [...], "dry_run": ..., "run_id": ...}``
    with each action's :data:`HASHED_ACTION_FIELDS`, by ``seq``, sorted keys, no whitespace.

    ``actions``: typed actions, or anything else with those fields as attributes or keys (a stored
    row, a view), so a plan stored before these types hashes exactly as it did.
    """
    rows: list[dict[str, Any]] = []
    for a in actions:
        get = a.get if isinstance(a, Mapping) else (lambda k, _a=a: getattr(_a, k))
        row: dict[str, Any] = {k: get(k) for k in HASHED_ACTION_FIELDS}
        if isinstance(row["boundaries"], tuple):
            row["boundaries"] = list(row["boundaries"])
        rows.append(row)
    rows.sort(key=lambda r: r["seq"])
    return json.dumps({"run_id": run_id, "dry_run": dry_run, "actions": rows}, sort_keys=True, separators=(",", ":"))


def content_hash(*, run_id: str, dry_run: bool, actions: Iterable[Any]) -> str:
    """SHA-256 (hex) of :func:`content_hash_input`."""
    canonical = content_hash_input(run_id=run_id, dry_run=dry_run, actions=actions)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------ helpers


def _text(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidPlanError(name, value, "must be a non-empty string")


def _check_prediction(predicted: Any) -> None:
    if predicted is not None and not isinstance(predicted, Prediction):
        raise InvalidPlanError(
            "predicted",
            predicted,
            "must be a Prediction (core.contract.plan_json.prediction_from_json reads the JSON form)",
        )


def _row(action: _Action, *, boundaries: list[int] | None, split_algorithm: str | None) -> dict[str, Any]:
    predicted = getattr(action, "predicted", None)
    return {
        "seq": action.seq,
        "kind": action.kind,
        "namespace": action.namespace,
        "bundle_range": action.bundle_range,
        "source_broker": action.source_broker,
        "destination_broker": getattr(action, "destination_broker", None),
        "boundaries": boundaries,
        "split_algorithm": split_algorithm,
        "reason": action.reason,
        "predicted": predicted.to_json() if predicted is not None else None,
    }


def _predicted_usage(summary: Mapping[str, Any]) -> dict[str, UsageChange]:
    brokers = summary.get("brokers")
    if brokers is None:
        return {}
    if not isinstance(brokers, Mapping):
        raise InvalidPlanError("summary.brokers", brokers, "must be an object {broker: {before, after}}")
    out = {}
    for broker, entry in brokers.items():
        usage: dict[str, Any] = {}
        for when in ("before", "after"):
            part = entry.get(when) if isinstance(entry, Mapping) else None
            usage[when] = part.get("usage") if isinstance(part, Mapping) else part
        try:
            out[broker] = UsageChange(broker=broker, before=usage["before"], after=usage["after"])
        except InvalidPlanError as exc:
            field_name = f"{exc.field}.usage" if exc.field in ("before", "after") else exc.field
            raise InvalidPlanError(f"summary.brokers[{broker}].{field_name}", exc.value, exc.problem) from None
    return out


def frozen_json(name: str, value: Any) -> Any:
    """``value`` as immutable JSON (objects -> read-only mappings, arrays -> tuples), after checking it
    is JSON: string keys, finite numbers, nothing but JSON types."""
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise InvalidPlanError(name, key, "is not JSON: object keys must be strings")
        return MappingProxyType({k: frozen_json(f"{name}.{k}" if name else k, v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen_json(f"{name}[{i}]", v) for i, v in enumerate(value))
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidPlanError(name, value, "is not JSON: numbers must be finite")
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise InvalidPlanError(name, value, f"is not JSON: a {type(value).__name__} is not a JSON type")


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _show(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
