"""What the GlobalPlanner remembers between cycles (carried in the ``decide`` state as ``globalPlanner``).

JSON (unknown members are errors naming their path, like the rest of the state)::

    {"moves": {"<bundle>": {"from": "<broker>", "to": "<broker>", "atMs": ms}},
     "brokersSeenMs": {"<broker>": ms},
     "peaks": {"<bundle>": {"msgRate": x, "msgThroughputIn": y, "msgThroughputOut": z, "atMs": ms}}}

* ``moves``: the planner's own moves (hysteresis: cool-down, never straight back to where it came from);
* ``brokersSeenMs``: when each broker last reported (a broker that just vanished may be restarting);
* ``peaks``: the recent peak of bundles whose traffic swings (an on/off consumer), so that a bundle in
  its quiet phase is not mistaken for a small one; children of a split inherit their share of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.json_input import check_int, check_number, field_path, reject_unknown_keys, require_object
from pulsar_rebalance.errors import ScenarioError

_PEAK_KEYS = ("msgRate", "msgThroughputIn", "msgThroughputOut")


@dataclass(slots=True)
class PlannerMemory:
    moves: dict[str, dict[str, Any]] = field(default_factory=dict)
    brokers_seen: dict[str, int] = field(default_factory=dict)
    peaks: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "moves": {b: dict(m) for b, m in self.moves.items()},
            "brokersSeenMs": dict(self.brokers_seen),
            "peaks": {b: dict(p) for b, p in self.peaks.items()},
        }

    @classmethod
    def from_json(cls, obj: object, path: str) -> PlannerMemory:
        root = require_object(obj, path)
        reject_unknown_keys(root, {"moves", "brokersSeenMs", "peaks"}, path)
        mem = cls()
        mp = field_path(path, "moves")
        for bundle, raw in require_object(root.get("moves", {}), mp).items():
            ep = field_path(mp, bundle)
            entry = require_object(raw, ep)
            reject_unknown_keys(entry, {"from", "to", "atMs"}, ep)
            for key in ("from", "to"):
                if not isinstance(entry.get(key), str) or not entry[key]:
                    raise ScenarioError(field_path(ep, key), "expected a non-empty broker id")
            mem.moves[bundle] = {"from": entry["from"], "to": entry["to"], "atMs": check_int(entry.get("atMs"), field_path(ep, "atMs"))}
        sp = field_path(path, "brokersSeenMs")
        for broker, ms in require_object(root.get("brokersSeenMs", {}), sp).items():
            mem.brokers_seen[broker] = check_int(ms, field_path(sp, broker))
        pp = field_path(path, "peaks")
        for bundle, raw in require_object(root.get("peaks", {}), pp).items():
            ep = field_path(pp, bundle)
            entry = require_object(raw, ep)
            reject_unknown_keys(entry, {*_PEAK_KEYS, "atMs"}, ep)
            peak = {k: check_number(entry.get(k, 0.0), field_path(ep, k)) for k in _PEAK_KEYS}
            peak["atMs"] = check_int(entry.get("atMs"), field_path(ep, "atMs"))
            mem.peaks[bundle] = peak
        return mem

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> PlannerMemory:
        """From the (already validated) ``StrategyState.planner`` mapping."""
        return cls.from_json(dict(raw), "state.globalPlanner") if raw else cls()


__all__ = ["PlannerMemory"]
