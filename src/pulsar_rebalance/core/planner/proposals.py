"""A plan's moves as a diff of two assignments (Cruise Control's shape: goals change a model, the
proposals are what differs between the model before and after).

The goals (:mod:`.goals`) move bundles on the planner's what-if model and note *why* each time
(a :class:`Rationale`). The unloads a plan proposes are then not a log of what the goals did but the
difference between the assignment the cycle started from and the one the goals left: a bundle whose
owner differs moves, from its first owner to its last. A move tried and undone (a fill not worth it,
a plan made again without a broker) leaves no trace, and an unload can never disagree with the model
its prediction came from: :meth:`Proposals.diff` refuses a rationale whose move the model does not show.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pulsar_rebalance.core.decision import Unload


def rounded(x: float) -> float:
    """A usage as plans show it (4 decimals)."""
    return round(x, 4)


@dataclass(frozen=True, slots=True)
class PlannedUnload(Unload):
    """An unload with the planner's predicted usage of source and destination before/after."""

    predicted: Mapping[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        out = Unload.to_json(self)
        if self.predicted is not None:
            out["predicted"] = dict(self.predicted)
        return out


@dataclass(frozen=True, slots=True)
class Rationale:
    """Why a goal moved a bundle, and what it predicted for source and destination."""

    source: str
    destination: str
    reason: str
    destination_reason: str
    predicted: Mapping[str, float]
    fill: bool = False
    """Moved to fill a nearly empty broker (the band's lower edge), not to relieve its source."""


class Proposals:
    """The rationale of each move the goals made on the model, in the order they made them, and the
    assignment the cycle started from: :meth:`diff` turns the model's final assignment into unloads."""

    def __init__(self, initial: dict[str, str]) -> None:
        self.initial = initial
        """bundle -> broker before any goal ran (the caller's dict, not copied: it is not changed)."""
        self.origin: dict[str, str] = {}
        """A bundle split in this plan -> the broker its children start on (the parent's)."""
        self._why: dict[str, Rationale] = {}

    def moved(self, bundle: str, why: Rationale) -> None:
        if bundle in self._why:
            raise ValueError(f"{bundle} moved twice in one plan ({self._why[bundle].source} -> {why.destination})")
        self._why[bundle] = why

    def split(self, parent: str, broker: str, children: list[str]) -> None:
        for child in children:
            self.origin[child] = self.origin.get(parent, broker)

    def checkpoint(self) -> int:
        """A point :meth:`rollback` returns to (with the model's own snapshot)."""
        return len(self._why)

    def rollback(self, point: int) -> None:
        for bundle in list(self._why)[point:]:
            del self._why[bundle]

    def count(self) -> int:
        return len(self._why)

    def first_owner(self, bundle: str) -> str | None:
        return self.initial.get(bundle, self.origin.get(bundle))

    def diff(self, final: Iterable[tuple[str, str]]) -> list[PlannedUnload]:
        """The unloads that take the cluster from the initial assignment to ``final`` ((bundle, broker) pairs),
        each with its rationale, in the order the goals moved them."""
        initial, origin = self.initial, self.origin
        moved: dict[str, tuple[str, str]] = {}
        for bundle, broker in final:  # one pass over every bundle: a plan at 100,000 bundles pays ~10 ms here
            first = initial.get(bundle)
            if first is None:
                first = origin.get(bundle)
            if first is not None and first != broker:
                moved[bundle] = (first, broker)
        missing = moved.keys() - self._why.keys()
        if missing:
            raise ValueError(f"the plan moves {sorted(missing)} with no rationale recorded")
        out: list[PlannedUnload] = []
        for bundle, why in self._why.items():
            if bundle not in moved:
                raise ValueError(f"{bundle}: a rationale for a move the model does not show")
            first, last = moved[bundle]
            if (why.source, why.destination) != (first, last):
                raise ValueError(
                    f"{bundle}: moved {first} -> {last} in the model, the rationale says {why.source} -> {why.destination}"
                )
            out.append(
                PlannedUnload(
                    why.source,
                    bundle,
                    why.destination,
                    why.reason,
                    (why.destination,),
                    why.destination_reason,
                    why.predicted,
                )
            )
        return out

    def fills(self) -> list[str]:
        """The bundles moved to fill a nearly empty broker."""
        return [b for b, why in self._why.items() if why.fill]


__all__ = ["PlannedUnload", "Proposals", "Rationale", "rounded"]
