"""What the GlobalPlanner remembers between cycles (carried in the ``decide`` state as ``globalPlanner``).

JSON (read and validated by ``core/contract/state_json.py``; unknown members are errors naming their path,
like the rest of the state)::

    {"moves": {"<bundle>": {"from": "<broker>", "to": "<broker>", "atMs": ms, "fill": true}},
     "membership": {"brokers": ["<broker>", ...], "atMs": ms, "changedMs": ms | null},
     "peaks": {"<bundle>": {"msgRate": x, "msgThroughputIn": y, "msgThroughputOut": z, "atMs": ms}},
     "coefficients": {"<resource>": [5 numbers >= 0]},
     "reports": {"<broker>": {"usage": [5 numbers >= 0], "features": [5 numbers >= 0]}},
     "above": {"<broker>": n},
     "below": {"<broker>": n},
     "refused": {"<broker>": ms},
     "highs": {"<broker>": {"usage": x, "atMs": ms}},
     "fell": {"<broker>": ms}}

* ``moves``: the planner's own moves (hysteresis: cool-down, never straight back to where it came from);
  ``fill`` (optional, default false): a move that filled a broker far below the ideal (its destination is
  filled on, up to the fill's level, while such a move is in the window);
* ``membership``: the brokers of the last cycle, when it was, and when the set of brokers last changed
  (a broker joined, left, or came back from a restart): the planner waits for the membership to be
  stable before re-planning (a rolling restart gets one corrective plan at its end, not one per broker);
* ``peaks``: the recent peak of bundles whose traffic swings (an on/off consumer), so that a bundle in
  its quiet phase is not mistaken for a small one; children of a split inherit their share of it;
* ``coefficients``: the load model's smoothed per-resource coefficients (``cpu``, ``memory``,
  ``directMemory``, ``bandwidthIn``, ``bandwidthOut``; features msg/s, bytes/s in, out, total, topics);
* ``reports``: per broker of the last cycle, its smoothed usage per resource (same order) and the summed
  features of its bundles then: a load report is one noisy sample, the next cycle's usage is predicted
  from it and the change in traffic, and only part of the unexplained difference is believed;
* ``above``: the brokers above the trigger in the last cycle, each with how many consecutive cycles
  saw it there (a broker acts when ``confirm_reports`` consecutive cycles do, unless it is far above);
  a list of broker ids (an older state) counts one each;
* ``below``: the brokers far below the ideal in the last cycle (as far below it as the trigger is above),
  each with how many consecutive cycles saw it there: the planner fills a broker that ``confirm_reports``
  consecutive cycles saw there (see ``GlobalPlanner.plan``);
* ``refused``: brokers a fill move did not reach - its bundle landed on another broker: the do-no-harm guard
  re-placed it (a cordoned broker, one its checks refuse) - and when that move was planned: not filled again
  for the history window (6 h), else every run would plan the same fill and the guard re-place it;
* ``highs``: per broker the highest usage its own load reports showed recently (Pulsar's weighted
  max over resources, as reported, not modelled) and when: the planner believes a broker hot only as
  far as its reports ever showed it (see ``GlobalPlanner.plan``); forgotten like ``peaks``;
* ``fell``: brokers whose run of reports above the trigger broke (a report back below it) and when:
  a load that comes and goes. Within the same window a broker there is never acted on from one report
  (far above the trigger), only when ``confirm_reports`` consecutive reports confirm it or it is above
  Pulsar's overload threshold; forgotten like ``peaks``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class PlannerMemory:
    moves: dict[str, dict[str, Any]] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)
    members_at: int | None = None
    membership_changed: int | None = None
    peaks: dict[str, dict[str, float]] = field(default_factory=dict)
    coefficients: dict[str, list[float]] = field(default_factory=dict)
    reports: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    above: dict[str, int] = field(default_factory=dict)
    below: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    highs: dict[str, dict[str, float]] = field(default_factory=dict)
    fell: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "moves": {b: dict(m) for b, m in self.moves.items()},
            "membership": {
                "brokers": list(self.members),
                "atMs": self.members_at,
                "changedMs": self.membership_changed,
            },
            "peaks": {b: dict(p) for b, p in self.peaks.items()},
            "coefficients": {r: list(c) for r, c in self.coefficients.items()},
            "reports": {b: {"usage": list(u), "features": list(f)} for b, (u, f) in self.reports.items()},
            "above": dict(self.above),
            "below": dict(self.below),
            "refused": dict(self.refused),
            "highs": {b: dict(h) for b, h in self.highs.items()},
            "fell": dict(self.fell),
        }

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> PlannerMemory:
        """From the ``StrategyState.planner`` mapping, read as is: what :meth:`to_json` wrote, or what the
        state's reader validated (:func:`pulsar_rebalance.core.contract.state_json.planner_memory_from_json`)."""
        if not raw:
            return cls()
        ms = raw.get("membership", {})
        return cls(
            moves={b: dict(m) for b, m in raw.get("moves", {}).items()},
            members=list(ms.get("brokers", [])),
            members_at=ms.get("atMs"),
            membership_changed=ms.get("changedMs"),
            peaks={b: dict(p) for b, p in raw.get("peaks", {}).items()},
            coefficients={r: list(c) for r, c in raw.get("coefficients", {}).items()},
            reports={b: (list(e["usage"]), list(e["features"])) for b, e in raw.get("reports", {}).items()},
            above=dict(raw.get("above", {})),
            below=dict(raw.get("below", {})),
            refused=dict(raw.get("refused", {})),
            highs={b: dict(h) for b, h in raw.get("highs", {}).items()},
            fell=dict(raw.get("fell", {})),
        )


__all__ = ["PlannerMemory"]
