"""What the GlobalPlanner remembers between cycles (carried in the ``decide`` state as ``globalPlanner``).

JSON (unknown members are errors naming their path, like the rest of the state)::

    {"moves": {"<bundle>": {"from": "<broker>", "to": "<broker>", "atMs": ms, "fill": true}},
     "membership": {"brokers": ["<broker>", ...], "atMs": ms, "changedMs": ms | null},
     "peaks": {"<bundle>": {"msgRate": x, "msgThroughputIn": y, "msgThroughputOut": z, "atMs": ms}},
     "coefficients": {"<resource>": [5 numbers >= 0]},
     "reports": {"<broker>": {"usage": [5 numbers >= 0], "features": [5 numbers >= 0]}},
     "above": {"<broker>": n},
     "below": {"<broker>": n},
     "refused": {"<broker>": ms},
     "highs": {"<broker>": {"usage": x, "atMs": ms}}}

* ``moves``: the planner's own moves (hysteresis: cool-down, never straight back to where it came from);
  ``fill`` (optional, default false): a move that filled a broker far below the ideal;
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
  far as its reports ever showed it (see ``GlobalPlanner.plan``); forgotten like ``peaks``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.json_input import check_int, check_number, field_path, reject_unknown_keys, require_object
from pulsar_rebalance.errors import ScenarioError

_PEAK_KEYS = ("msgRate", "msgThroughputIn", "msgThroughputOut")
_RESOURCES = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
_FEATURES = 5


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
        }

    @classmethod
    def from_json(cls, obj: object, path: str) -> PlannerMemory:
        root = require_object(obj, path)
        reject_unknown_keys(
            root,
            {"moves", "membership", "peaks", "coefficients", "reports", "above", "below", "refused", "highs"},
            path,
        )
        mem = cls()
        mp = field_path(path, "moves")
        for bundle, raw in require_object(root.get("moves", {}), mp).items():
            ep = field_path(mp, bundle)
            entry = require_object(raw, ep)
            reject_unknown_keys(entry, {"from", "to", "atMs", "fill"}, ep)
            for key in ("from", "to"):
                if not isinstance(entry.get(key), str) or not entry[key]:
                    raise ScenarioError(field_path(ep, key), "expected a non-empty broker id")
            mem.moves[bundle] = {
                "from": entry["from"],
                "to": entry["to"],
                "atMs": check_int(entry.get("atMs"), field_path(ep, "atMs")),
            }
            if "fill" in entry:
                if not isinstance(entry["fill"], bool):
                    raise ScenarioError(field_path(ep, "fill"), "expected true or false")
                if entry["fill"]:
                    mem.moves[bundle]["fill"] = True
        sp = field_path(path, "membership")
        ms = require_object(root.get("membership", {}), sp)
        reject_unknown_keys(ms, {"brokers", "atMs", "changedMs"}, sp)
        brokers = ms.get("brokers", [])
        if not isinstance(brokers, list) or not all(isinstance(b, str) and b for b in brokers):
            raise ScenarioError(field_path(sp, "brokers"), "expected an array of non-empty broker ids")
        mem.members = list(brokers)
        for key, attr in (("atMs", "members_at"), ("changedMs", "membership_changed")):
            if ms.get(key) is not None:
                setattr(mem, attr, check_int(ms[key], field_path(sp, key)))
        pp = field_path(path, "peaks")
        for bundle, raw in require_object(root.get("peaks", {}), pp).items():
            ep = field_path(pp, bundle)
            entry = require_object(raw, ep)
            reject_unknown_keys(entry, {*_PEAK_KEYS, "atMs"}, ep)
            peak = {k: check_number(entry.get(k, 0.0), field_path(ep, k)) for k in _PEAK_KEYS}
            peak["atMs"] = check_int(entry.get("atMs"), field_path(ep, "atMs"))
            mem.peaks[bundle] = peak
        cp = field_path(path, "coefficients")
        coefs = require_object(root.get("coefficients", {}), cp)
        reject_unknown_keys(coefs, set(_RESOURCES), cp)
        for resource, raw in coefs.items():
            rp = field_path(cp, resource)
            if not isinstance(raw, list) or len(raw) != _FEATURES:
                raise ScenarioError(rp, f"expected an array of {_FEATURES} numbers")
            mem.coefficients[resource] = [check_number(v, field_path(rp, i)) for i, v in enumerate(raw)]
        bp = field_path(path, "reports")
        for broker, raw in require_object(root.get("reports", {}), bp).items():
            ep = field_path(bp, broker)
            entry = require_object(raw, ep)
            reject_unknown_keys(entry, {"usage", "features"}, ep)
            vecs = []
            for key in ("usage", "features"):
                vp = field_path(ep, key)
                v = entry.get(key)
                if not isinstance(v, list) or len(v) != _FEATURES:
                    raise ScenarioError(vp, f"expected an array of {_FEATURES} numbers")
                vecs.append([check_number(x, field_path(vp, i)) for i, x in enumerate(v)])
            mem.reports[broker] = (vecs[0], vecs[1])
        above = root.get("above", {})
        if isinstance(above, list):  # an older state: the brokers above in the last cycle, once each
            above = dict.fromkeys(above, 1)
        mem.above = _counts(above, field_path(path, "above"))
        mem.below = _counts(root.get("below", {}), field_path(path, "below"))
        rp = field_path(path, "refused")
        mem.refused = {
            b: check_int(t, field_path(rp, b)) for b, t in require_object(root.get("refused", {}), rp).items()
        }
        hp = field_path(path, "highs")
        for broker, raw in require_object(root.get("highs", {}), hp).items():
            ep = field_path(hp, broker)
            entry = require_object(raw, ep)
            reject_unknown_keys(entry, {"usage", "atMs"}, ep)
            mem.highs[broker] = {
                "usage": check_number(entry.get("usage"), field_path(ep, "usage")),
                "atMs": check_int(entry.get("atMs"), field_path(ep, "atMs")),
            }
        return mem

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> PlannerMemory:
        """From the (already validated) ``StrategyState.planner`` mapping."""
        return cls.from_json(dict(raw), "state.globalPlanner") if raw else cls()


def _counts(raw: object, path: str) -> dict[str, int]:
    """``{"<broker>": n}`` with n a positive integer (consecutive cycles), else an error naming ``path``."""
    if not isinstance(raw, dict) or not all(
        isinstance(b, str) and b and isinstance(n, int) and not isinstance(n, bool) and n > 0 for b, n in raw.items()
    ):
        raise ScenarioError(path, "expected an object of non-empty broker ids to positive integers")
    return dict(raw)


__all__ = ["PlannerMemory"]
