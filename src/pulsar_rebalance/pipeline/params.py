"""Run parameters: what an operator passes when triggering the DAG (validated before anything is written)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pulsar_rebalance.core.guard import resource_weights  # noqa: F401  (re-exported: pipeline callers)
from pulsar_rebalance.core.modes import MODES
from pulsar_rebalance.core.strategies import (
    DEFAULT_PLACEMENT,
    DEFAULT_SHEDDER,
    capabilities,
    names,
    selectable_shedders,
)
from pulsar_rebalance.errors import ConfigError

SHEDDERS = selectable_shedders()  # GlobalPlanner + Pulsar's five shedders (core.strategies is the one registry)
PLACEMENTS = names("placement", selectable=True)  # Pulsar's placement strategies (core.strategies)

# Limits checked by RunParams.from_json and declared by the DAG's trigger form (dags/pulsar_rebalance.py).
MAX_PARALLEL_UNLOADS = 64
MAX_UNLOADS_PER_BROKER = 64
MAX_COUNT = 10**6  # max_unloads_per_run, auto_approve_max_unloads
MAX_REQUIRED_APPROVALS = 5
MAX_PACING_SECONDS = 600.0
MAX_DRIFT_TOLERANCE = 1e6
NAMESPACE_PATTERN = r"^[^/]+/[^/]+$"  # tenant/namespace
PLAN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"  # rollback_plan


@dataclass(frozen=True)
class RunParams:
    namespaces: tuple[str, ...] = ()
    cluster: str | None = None
    shedding_strategy: str = (
        DEFAULT_SHEDDER  # core.pulsar.shedders: GlobalPlanner (Pulsar's own: AvgShedder since PR #26609)
    )
    placement_strategy: str = DEFAULT_PLACEMENT
    split_algorithm: str | None = None  # None = config's defaultNamespaceBundleSplitAlgorithm
    dry_run: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)  # broker.conf overrides (Pulsar keys)
    approval_timeout_minutes: float = 60.0
    max_parallel_unloads: int = 4
    max_unloads_per_broker: int = 2  # concurrent unloads from or to one broker
    max_unloads_per_run: int | None = None  # None = every approved unload
    unload_pacing_seconds: float = 0.0  # pause between two moves
    drift_tolerance: float = 0.5  # skip an unload whose bundle's msg rate moved more than this fraction
    allow_pulsar_shedding: bool = False  # execute even when Pulsar's own shedding is on
    auto_approve_max_unloads: int | None = None  # read by the approval gate; None = off
    required_approvals: int = 1  # different people who must approve a plan (2 = four eyes)
    rollback_plan: str | None = None  # plan this run rolls back (instead of running the shedder)
    fix_policy_violations: bool = False  # plan to move the bundles that break their namespace's policies (only)
    mode: str = "rebalance"  # core.modes.MODES: rebalance (the strategy's plan), drain or fill ``brokers``
    brokers: tuple[str, ...] = ()  # the brokers to drain or fill (broker ids as the cluster lists them)
    seed: int = 0
    max_missing_brokers: float = 0.1  # fraction of brokers that may not answer collect_load (else the run fails)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> RunParams:
        doc = dict(doc or {})
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise ConfigError(f"unknown run parameter(s) {unknown}; known: {sorted(known)}", key=unknown[0])
        ns = doc.get("namespaces") or ()
        if isinstance(ns, str):
            ns = [n.strip() for n in ns.split(",") if n.strip()]
        if not all(isinstance(n, str) and re.fullmatch(NAMESPACE_PATTERN, n) for n in ns):
            raise ConfigError(f"namespaces must be 'tenant/namespace' strings, got {ns!r}", key="namespaces")
        shed = doc.get("shedding_strategy") or cls.shedding_strategy
        shed = shed.rsplit(".", 1)[-1]
        if shed not in SHEDDERS:
            raise ConfigError(f"unknown shedding_strategy {shed!r}; one of {SHEDDERS}", key="shedding_strategy")
        place = (doc.get("placement_strategy") or cls.placement_strategy).rsplit(".", 1)[-1]
        if place not in PLACEMENTS:
            raise ConfigError(f"unknown placement_strategy {place!r}; one of {PLACEMENTS}", key="placement_strategy")
        config = doc.get("config") or {}
        if not isinstance(config, Mapping):
            raise ConfigError("config must be a JSON object of broker.conf keys", key="config")
        timeout = doc.get("approval_timeout_minutes", cls.approval_timeout_minutes)
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"approval_timeout_minutes must be > 0, got {timeout!r}", key="approval_timeout_minutes")
        par = doc.get("max_parallel_unloads", cls.max_parallel_unloads)
        _int_in("max_parallel_unloads", par, 1, MAX_PARALLEL_UNLOADS)
        missing = doc.get("max_missing_brokers", cls.max_missing_brokers)
        if isinstance(missing, bool) or not isinstance(missing, (int, float)) or not 0 <= missing < 1:
            raise ConfigError(
                f"max_missing_brokers must be a fraction in [0, 1), got {missing!r}", key="max_missing_brokers"
            )
        per_broker = doc.get("max_unloads_per_broker", cls.max_unloads_per_broker)
        _int_in("max_unloads_per_broker", per_broker, 1, MAX_UNLOADS_PER_BROKER)
        per_run = doc.get("max_unloads_per_run")
        if per_run is not None:
            _int_in("max_unloads_per_run", per_run, 1, MAX_COUNT)
        auto = doc.get("auto_approve_max_unloads")
        if auto is not None:
            _int_in("auto_approve_max_unloads", auto, 1, MAX_COUNT)
        required = doc.get("required_approvals", cls.required_approvals)
        _int_in("required_approvals", required, 1, MAX_REQUIRED_APPROVALS)
        pacing = _number_in("unload_pacing_seconds", doc.get("unload_pacing_seconds", 0.0), 0.0, MAX_PACING_SECONDS)
        drift = _number_in("drift_tolerance", doc.get("drift_tolerance", cls.drift_tolerance), 0.0, MAX_DRIFT_TOLERANCE)
        fix = doc.get("fix_policy_violations", False)
        if not isinstance(fix, bool):
            raise ConfigError(f"fix_policy_violations must be true or false, got {fix!r}", key="fix_policy_violations")
        if fix and doc.get("rollback_plan"):
            raise ConfigError(
                "fix_policy_violations and rollback_plan are two different plans: set one of them",
                key="fix_policy_violations",
            )
        mode = doc.get("mode") or cls.mode
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {list(MODES)}, got {mode!r}", key="mode")
        brokers = doc.get("brokers") or ()
        if isinstance(brokers, str):
            brokers = [b.strip() for b in brokers.split(",") if b.strip()]
        if not isinstance(brokers, (list, tuple)) or not all(isinstance(b, str) and b.strip() for b in brokers):
            raise ConfigError(f"brokers must be a list of broker ids (host:port), got {brokers!r}", key="brokers")
        if mode != "rebalance" and not brokers:
            raise ConfigError(f"mode {mode!r} needs the brokers to {mode} (param brokers)", key="brokers")
        if mode == "rebalance" and brokers:
            raise ConfigError(
                "brokers are only for mode drain or fill; a rebalance plans for every broker", key="brokers"
            )
        if mode != "rebalance" and (fix or doc.get("rollback_plan")):
            raise ConfigError(
                f"mode {mode!r} is its own plan: not with fix_policy_violations or rollback_plan", key="mode"
            )
        params = cls(
            namespaces=tuple(ns),
            cluster=doc.get("cluster") or None,
            shedding_strategy=shed,
            placement_strategy=place,
            split_algorithm=doc.get("split_algorithm") or None,
            dry_run=bool(doc.get("dry_run", False)),
            config=dict(config),
            approval_timeout_minutes=float(timeout),
            max_parallel_unloads=par,
            max_unloads_per_broker=per_broker,
            max_unloads_per_run=per_run,
            unload_pacing_seconds=pacing,
            drift_tolerance=drift,
            allow_pulsar_shedding=bool(doc.get("allow_pulsar_shedding", False)),
            auto_approve_max_unloads=auto,
            required_approvals=required,
            rollback_plan=_rollback(doc.get("rollback_plan")),
            fix_policy_violations=fix,
            mode=mode,
            brokers=tuple(dict.fromkeys(b.strip() for b in brokers)),
            seed=int(doc.get("seed", 0) or 0),
            max_missing_brokers=float(missing),
        )
        params.lb_config()  # validate the broker.conf keys and the split algorithm now, not mid-run
        return params

    @property
    def effective_placement(self) -> str:
        """The placement that actually picks destinations with this shedder (what decide() uses)."""
        bound = capabilities(self.shedding_strategy).bound_placement  # core.strategies declares it
        if bound is not None:
            return bound  # the planner's own, AvgShedder's own, or the extensible load manager's
        if self.placement_strategy == "AvgShedder":  # pairs only with the AvgShedder shedder
            return "LeastLongTermMessageRate"
        return self.placement_strategy

    def lb_config(self):
        """The LoadBalancerConfig for this run: overrides + the chosen strategies under Pulsar's keys."""
        from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig

        merged = dict(self.config)
        if self.split_algorithm:
            merged["defaultNamespaceBundleSplitAlgorithm"] = self.split_algorithm
        return LoadBalancerConfig.from_mapping(merged)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["namespaces"] = list(self.namespaces)
        d["brokers"] = list(self.brokers)
        d["config"] = dict(self.config)
        return d


def _rollback(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not re.fullmatch(PLAN_ID_PATTERN, value):
        raise ConfigError(f"rollback_plan must be a plan id, got {value!r}", key="rollback_plan")
    return value


def _int_in(key: str, value: Any, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(f"{key} must be an integer in [{lo}, {hi}], got {value!r}", key=key)
    return value


def _number_in(key: str, value: Any, lo: float, hi: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(f"{key} must be a number in [{lo:g}, {hi:g}], got {value!r}", key=key)
    return float(value)
