"""The ``decide`` state's JSON in: :class:`~pulsar_rebalance.core.pulsar.state.StrategyState` (what Pulsar's
strategies keep between cycles) and the GlobalPlanner's memory
(:class:`~pulsar_rebalance.core.planner.memory.PlannerMemory`), fully validated.

The shapes are documented with the types (``core/pulsar/state.py``, ``core/planner/memory.py``); unknown
members are errors naming their path, so a typo does not silently reset history.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pulsar_rebalance.core.contract.json_input import (
    check_int,
    check_number,
    field_path,
    reject_unknown_keys,
    require_object,
)
from pulsar_rebalance.core.contract.load_json import broker_load_data_from_json, bundle_data_from_json
from pulsar_rebalance.core.planner.memory import PlannerMemory
from pulsar_rebalance.core.pulsar.state import STATE_VERSION, AvgShedderBinding, StrategyState
from pulsar_rebalance.errors import ScenarioError

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def strategy_state_from_json(obj: object, path: str = "state") -> StrategyState:
    """Parse (and fully validate) a state produced by :meth:`StrategyState.to_json`; errors name the JSON path."""
    root = require_object(obj, path)
    reject_unknown_keys(
        root,
        {
            "version",
            "thresholdShedder",
            "leastResourceUsageWithWeight",
            "avgShedder",
            "transferShedder",
            "splitConditionHitCounts",
            "recentlyUnloadedBundles",
            "recentlyUnloadedBrokers",
            "bundleData",
            "random",
            "globalPlanner",
        },
        path,
    )
    version = root.get("version", STATE_VERSION)
    if version != STATE_VERSION or isinstance(version, bool):
        raise ScenarioError(
            field_path(path, "version"), f"unsupported state version {version!r} (expected {STATE_VERSION})"
        )

    ts = _section(root, "thresholdShedder", path, {"brokerAvgResourceUsage"})
    lr = _section(root, "leastResourceUsageWithWeight", path, {"brokerAvgResourceUsageWithWeight"})
    av = _section(
        root,
        "avgShedder",
        path,
        {"brokerHitCountForHigh", "brokerHitCountForLow", "brokerScoreMap", "bundleBrokerMap"},
    )
    tr = _section(root, "transferShedder", path, {"unloadConditionHitCount", "brokerLoadData"})
    p_ts, p_lr, p_av, p_tr = (
        field_path(path, k)
        for k in ("thresholdShedder", "leastResourceUsageWithWeight", "avgShedder", "transferShedder")
    )

    bindings: dict[str, AvgShedderBinding] = {}
    raw_bindings = av.get("bundleBrokerMap", [])
    p_bind = field_path(p_av, "bundleBrokerMap")
    if not isinstance(raw_bindings, list):
        raise ScenarioError(p_bind, "expected an array")
    for i, item in enumerate(raw_bindings):
        ip = field_path(p_bind, i)
        entry = require_object(item, ip)
        reject_unknown_keys(entry, {"bundle", "bundleDataKey", "broker"}, ip)
        strings = {}
        for key in ("bundle", "broker"):
            value = entry.get(key)
            if not isinstance(value, str) or not value:
                raise ScenarioError(field_path(ip, key), "expected a non-empty string")
            strings[key] = value
        # bundleDataKey: accepted from states written before PR #26246 was followed, not used
        bindings[strings["bundle"]] = AvgShedderBinding(strings["bundle"], strings["broker"])

    hit = tr.get("unloadConditionHitCount", 0)
    hit_count = check_int(hit, field_path(p_tr, "unloadConditionHitCount"))

    load_data: dict[str, Mapping[str, Any]] = {}
    p_bld = field_path(p_tr, "brokerLoadData")
    raw_bld = tr.get("brokerLoadData", {})
    require_object(raw_bld, p_bld)
    if raw_bld:
        for broker, value in raw_bld.items():
            bp = field_path(p_bld, broker)
            load_data[broker] = broker_load_data_from_json(require_object(value, bp), bp).to_json()

    bundle_data: dict[str, Mapping[str, Any]] = {}
    p_bd = field_path(path, "bundleData")
    raw_bd = require_object(root.get("bundleData", {}), p_bd)
    if raw_bd:
        for bundle, value in raw_bd.items():
            bundle_data[bundle] = bundle_data_from_json(value, field_path(p_bd, bundle)).to_json()

    return StrategyState(
        random_state=_random_state(root.get("random"), field_path(path, "random")),
        bundle_data=bundle_data,
        threshold_avg_usage=_number_map(ts, "brokerAvgResourceUsage", p_ts),
        lruww_avg_usage=_number_map(lr, "brokerAvgResourceUsageWithWeight", p_lr),
        avg_hit_high=_int_map(av, "brokerHitCountForHigh", p_av),
        avg_hit_low=_int_map(av, "brokerHitCountForLow", p_av),
        avg_scores=_number_map(av, "brokerScoreMap", p_av),
        avg_bundle_broker=bindings,
        transfer_hit_count=hit_count,
        transfer_broker_load_data=load_data,
        split_hit_counts=_nested_int_map(root, "splitConditionHitCounts", path),
        recently_unloaded_bundles=_int_map(root, "recentlyUnloadedBundles", path),
        recently_unloaded_brokers=_int_map(root, "recentlyUnloadedBrokers", path),
        planner=_planner_memory(root, path),
    )


_MT_WORDS = 624


def _random_state(value: object, path: str) -> tuple[int, ...] | None:
    """``{"mt": [624 words, index]}`` as written by :meth:`StrategyState.to_json` (or null)."""
    if value is None:
        return None
    obj = require_object(value, path)
    reject_unknown_keys(obj, {"mt"}, path)
    words = obj.get("mt")
    mp = field_path(path, "mt")
    if not isinstance(words, list) or len(words) != _MT_WORDS + 1:
        raise ScenarioError(mp, f"expected an array of {_MT_WORDS + 1} integers (a previous output's state.random.mt)")
    out = []
    for i, w in enumerate(words):
        n = check_int(w, field_path(mp, i))
        if n > 0xFFFFFFFF or (i == _MT_WORDS and n > _MT_WORDS):
            raise ScenarioError(field_path(mp, i), f"out of range: {n}")
        out.append(n)
    return tuple(out)


def _planner_memory(root: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    if "globalPlanner" not in root:
        return _EMPTY
    return planner_memory_from_json(root["globalPlanner"], field_path(path, "globalPlanner")).to_json()


def _section(root: Mapping[str, Any], key: str, path: str, allowed: set[str]) -> Mapping[str, Any]:
    value = root.get(key, {})
    sp = field_path(path, key)
    obj = require_object(value, sp)
    reject_unknown_keys(obj, allowed, sp)
    return obj


def _number_map(parent: Mapping[str, Any], key: str, path: str) -> dict[str, float]:
    mp = field_path(path, key)
    obj = require_object(parent.get(key, {}), mp)
    return {k: check_number(v, field_path(mp, k), allow_negative=True) for k, v in obj.items()}


def _int_map(parent: Mapping[str, Any], key: str, path: str) -> dict[str, int]:
    mp = field_path(path, key)
    obj = require_object(parent.get(key, {}), mp)
    return {k: check_int(v, field_path(mp, k)) for k, v in obj.items()}


def _nested_int_map(parent: Mapping[str, Any], key: str, path: str) -> dict[str, dict[str, int]]:
    mp = field_path(path, key)
    obj = require_object(parent.get(key, {}), mp)
    return {k: _int_map(obj, k, mp) for k in obj}


_PEAK_KEYS = ("msgRate", "msgThroughputIn", "msgThroughputOut")


_RESOURCES = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")


_FEATURES = 5


def planner_memory_from_json(obj: object, path: str) -> PlannerMemory:
    """Parse (and fully validate) the GlobalPlanner's memory as :meth:`PlannerMemory.to_json` writes it (an older
    state's ``above`` list counts one each); errors name the JSON path."""
    root = require_object(obj, path)
    reject_unknown_keys(
        root,
        {"moves", "membership", "peaks", "coefficients", "reports", "above", "below", "refused", "highs", "fell"},
        path,
    )
    mem = PlannerMemory()
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
    mem.refused = {b: check_int(t, field_path(rp, b)) for b, t in require_object(root.get("refused", {}), rp).items()}
    fp = field_path(path, "fell")
    mem.fell = {b: check_int(t, field_path(fp, b)) for b, t in require_object(root.get("fell", {}), fp).items()}
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


def _counts(raw: object, path: str) -> dict[str, int]:
    """``{"<broker>": n}`` with n a positive integer (consecutive cycles), else an error naming ``path``."""
    if not isinstance(raw, dict) or not all(
        isinstance(b, str) and b and isinstance(n, int) and not isinstance(n, bool) and n > 0 for b, n in raw.items()
    ):
        raise ScenarioError(path, "expected an object of non-empty broker ids to positive integers")
    return dict(raw)
