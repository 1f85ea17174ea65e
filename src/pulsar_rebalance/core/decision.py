"""Result types of the decision core: what a shedding cycle decided, and why.

Vocabulary mirrors Pulsar's extensible load manager (``UnloadDecision.Label`` / ``Reason`` and
``SplitDecision``), applied to every strategy so an operator reads one language for all of them:

* :class:`Label` - ``Success`` (something to do), ``Skip`` (nothing to do, normal), ``Failure``.
* :class:`Reason` - Pulsar's ``UnloadDecision.Reason`` values (``Overloaded``, ``Underloaded``,
  ``Balanced``, ``NoBundles``, ``CoolDown``, ``OutDatedData``, ``NoLoadData``, ``NoBrokers``,
  ``HitCount``, ``Unknown``) plus ``Disabled`` (ours: ``loadBalancerEnabled`` or
  ``loadBalancerSheddingEnabled`` is false, where Pulsar silently returns).

Every :class:`Decision` carries a label, a reason and a one-line ``detail`` in plain words, also
when nothing is done ("broker-3: usage 0.62 < avg 0.55 + threshold 0.10 -> not overloaded"). Each
:class:`Unload` carries its own ``reason`` text with the numbers that led to it.

All types are frozen (a plan is approved and then executed unchanged) and validate themselves.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


class Label(str, enum.Enum):
    """``UnloadDecision.Label``: did the cycle produce work?"""

    SUCCESS = "Success"
    SKIP = "Skip"
    FAILURE = "Failure"


class Reason(str, enum.Enum):
    """``UnloadDecision.Reason`` (Pulsar's names), plus ``Disabled`` (ours)."""

    OVERLOADED = "Overloaded"
    UNDERLOADED = "Underloaded"
    BALANCED = "Balanced"
    NO_BUNDLES = "NoBundles"
    COOL_DOWN = "CoolDown"
    OUTDATED_DATA = "OutDatedData"
    NO_LOAD_DATA = "NoLoadData"
    NO_BROKERS = "NoBrokers"
    HIT_COUNT = "HitCount"
    UNKNOWN = "Unknown"
    DISABLED = "Disabled"


def _check_name(value: object, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")


@dataclass(frozen=True, slots=True)
class Unload:
    """Unload ``bundle`` from ``broker``; ``destination`` is the pre-assigned new owner or None.

    ``reason`` is human-readable text that starts with the :class:`Reason` name, e.g.
    ``"Overloaded: usage 0.99 >= avg 0.55 + 0.10; offload >= 12.0 MiB/s"``. ``tied`` and
    ``destination_reason`` are set when the destination was chosen by a placement strategy
    (``assignDestinations``): the brokers that tied for best and why the pick was made.
    """

    broker: str
    bundle: str
    destination: str | None
    reason: str
    tied: tuple[str, ...] = ()
    destination_reason: str | None = None

    def __post_init__(self) -> None:
        _check_name(self.broker, "Unload.broker")
        _check_name(self.bundle, "Unload.bundle")
        if self.destination is not None:
            _check_name(self.destination, "Unload.destination")
            if self.destination == self.broker:
                raise ValueError(f"Unload of {self.bundle}: destination equals the source broker {self.broker!r}")
        if not isinstance(self.reason, str) or not self.reason:
            raise ValueError(f"Unload of {self.bundle}: reason must be a non-empty string")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "broker": self.broker,
            "bundle": self.bundle,
            "destination": self.destination,
            "reason": self.reason,
        }
        if self.destination_reason is not None:
            out["tied"] = list(self.tied)
            out["destinationReason"] = self.destination_reason
        return out


class DropReason(str, enum.Enum):
    """Why ``doLoadShedding`` does not execute an unload the strategy selected."""

    DESTINATION_IS_SOURCE = "DestinationIsSource"
    """``selectBroker`` picked the current owner ("destination broker is the same as the current owner")."""
    NO_BROKER = "NoBroker"
    """``selectBroker`` found no broker ("No broker available to unload bundle")."""
    EXCLUDED_NAMESPACE = "ExcludedNamespace"
    """The namespace is in ``loadBalancerSheddingExcludedNamespaces``."""
    NAMESPACE_POLICIES = "NamespacePolicies"
    """``shouldNamespacePoliciesUnload`` is false: no broker but the owner satisfies the namespace's
    isolation policy ("if only current broker satisfy the NamespacePolicies should not unload")."""
    ANTI_AFFINITY_NAMESPACE = "AntiAffinityNamespace"
    """``shouldAntiAffinityNamespaceUnload`` is false: every candidate owns as many namespaces of the
    bundle's anti-affinity group as the owner, so the unload would land where it started."""


@dataclass(frozen=True, slots=True)
class DroppedUnload:
    """A strategy-selected unload the load manager does not execute, and why (``detail`` in words)."""

    broker: str
    bundle: str
    reason: DropReason
    detail: str
    strategy_reason: str
    tied: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "broker": self.broker,
            "bundle": self.bundle,
            "dropped": self.reason.value,
            "detail": self.detail,
            "reason": self.strategy_reason,
        }
        if self.tied:
            out["tied"] = list(self.tied)
        return out


@dataclass(frozen=True, slots=True)
class SplitDecision:
    """Split ``bundle`` (owned by ``broker``); ``reason`` is Pulsar's split reason with its numbers.

    ``algorithm`` is ``defaultNamespaceBundleSplitAlgorithm``; ``boundaries``/``children`` are what it
    gives on the bundle's range (None when it needs the topics, see ``note``); ``unload_children`` is
    ``loadBalancerAutoUnloadSplitBundlesEnabled`` (Pulsar then unloads every child).
    """

    bundle: str
    broker: str
    reason: str
    algorithm: str | None = None
    boundaries: list[str] | None = None
    children: list[str] | None = None
    unload_children: bool | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        _check_name(self.bundle, "SplitDecision.bundle")
        _check_name(self.broker, "SplitDecision.broker")
        if not isinstance(self.reason, str) or not self.reason:
            raise ValueError(f"SplitDecision of {self.bundle}: reason must be a non-empty string")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bundle": self.bundle, "broker": self.broker, "reason": self.reason}
        if self.algorithm is not None:
            out.update(
                {
                    "algorithm": self.algorithm,
                    "boundaries": self.boundaries,
                    "children": self.children,
                    "unloadChildren": self.unload_children,
                }
            )
            if self.note:
                out["note"] = self.note
        return out


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the placement strategy puts ``bundle``: ``broker`` (None if no candidate), chosen among ``tied``.

    Pulsar picks uniformly at random among ``tied``; we take a seeded choice and report the set so
    an operator sees when the pick was a coin toss.
    """

    bundle: str
    broker: str | None
    tied: tuple[str, ...]
    reason: str

    def __post_init__(self) -> None:
        _check_name(self.bundle, "Placement.bundle")
        if self.broker is not None:
            _check_name(self.broker, "Placement.broker")
            if self.tied and self.broker not in self.tied:
                raise ValueError(
                    f"Placement of {self.bundle}: chosen broker {self.broker!r} is not in tied {self.tied}"
                )
        if not isinstance(self.reason, str) or not self.reason:
            raise ValueError(f"Placement of {self.bundle}: reason must be a non-empty string")

    def to_json(self) -> dict[str, Any]:
        return {"broker": self.broker, "tied": list(self.tied), "reason": self.reason}


def _freeze(stats: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(stats))


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one cycle: label, reason, a plain-words ``detail``, actions and stats.

    ``stats`` holds the numbers the strategy looked at (per-broker usage, averages, thresholds) so
    the "why" is visible; it must be JSON-serialisable.
    """

    label: Label
    reason: Reason
    detail: str
    unloads: tuple[Unload, ...] = ()
    splits: tuple[SplitDecision, ...] = ()
    placements: tuple[Placement, ...] = ()
    stats: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.label, Label):
            raise ValueError(f"Decision.label must be a Label, got {self.label!r}")
        if not isinstance(self.reason, Reason):
            raise ValueError(f"Decision.reason must be a Reason, got {self.reason!r}")
        if not isinstance(self.detail, str) or not self.detail:
            raise ValueError("Decision.detail must be a non-empty string")
        if self.label is Label.SUCCESS and not (self.unloads or self.splits):
            raise ValueError("a Success decision must carry at least one unload or split")
        if self.label is Label.SKIP and self.unloads:
            raise ValueError("a Skip decision must not carry unloads")
        object.__setattr__(self, "unloads", tuple(self.unloads))
        object.__setattr__(self, "splits", tuple(self.splits))
        object.__setattr__(self, "placements", tuple(self.placements))
        object.__setattr__(self, "stats", _freeze(self.stats))

    def with_changes(
        self,
        *,
        unloads: Sequence[Unload] | None = None,
        splits: Sequence[SplitDecision] | None = None,
        placements: Sequence[Placement] | None = None,
        stats: Mapping[str, Any] | None = None,
        label: Label | None = None,
        reason: Reason | None = None,
        detail: str | None = None,
    ) -> Decision:
        """A copy with some parts replaced (decisions are immutable)."""
        return Decision(
            label=self.label if label is None else label,
            reason=self.reason if reason is None else reason,
            detail=self.detail if detail is None else detail,
            unloads=tuple(self.unloads if unloads is None else unloads),
            splits=tuple(self.splits if splits is None else splits),
            placements=tuple(self.placements if placements is None else placements),
            stats=self.stats if stats is None else stats,
        )

    def to_json(self) -> dict[str, Any]:
        """The ``decide`` contract's cycle shape (``placements`` keyed by bundle)."""
        return {
            "label": self.label.value,
            "reason": self.reason.value,
            "detail": self.detail,
            "unloads": [u.to_json() for u in self.unloads],
            "splits": [s.to_json() for s in self.splits],
            "placements": {p.bundle: p.to_json() for p in self.placements},
            "stats": _plain(self.stats),
        }


def _plain(value: Any) -> Any:
    """Deep-copy mapping proxies / tuples into plain JSON containers."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def skip(reason: Reason, detail: str, stats: Mapping[str, Any] | None = None) -> Decision:
    """A ``Skip`` decision (nothing to unload) with its reason and explanation."""
    return Decision(label=Label.SKIP, reason=reason, detail=detail, stats=stats or {})


def success(reason: Reason, detail: str, unloads: Sequence[Unload], stats: Mapping[str, Any] | None = None) -> Decision:
    """A ``Success`` decision carrying ``unloads``."""
    return Decision(label=Label.SUCCESS, reason=reason, detail=detail, unloads=tuple(unloads), stats=stats or {})
