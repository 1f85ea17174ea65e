"""The algorithm configuration: one frozen, typed object whose keys are Pulsar's ``broker.conf`` keys.

Why one object mirroring Pulsar verbatim: an operator can paste the load-balancer section of their
``broker.conf`` (as a JSON object) and get exactly the behaviour their brokers would have; a reviewer
can grep Pulsar's source for any key they see here. Rules (see ``style-anchors.md`` §6.9):

* Each field's **alias is the Pulsar key verbatim**, quirky spellings included (the deprecated
  ``loadBalancerBandwithInResourceWeight`` *and* the renamed ``loadBalancerBandwidthInResourceWeight``).
* The Python attribute is the mechanical snake_case of the key (:func:`to_snake`), e.g.
  ``loadBalancerCPUResourceWeight`` -> ``load_balancer_cpu_resource_weight``.
* **Defaults are Pulsar's**, read from ``ServiceConfiguration.java`` at commit
  ``0023b9371b309b64aca6f47f03cd05aba78bb280`` (Pulsar 4.x: ThresholdShedder default, memory and
  direct-memory weights 0, the bandwidth-weight rename, ``atLeastOneBundleSelected``).
* Unknown keys, wrong types (no coercion of ``"10"`` to 10, nor of ``true`` to 1; ints *are*
  accepted for float keys), NaN/infinity and out-of-range values are a :class:`ConfigError` naming
  the key, raised when the config is **loaded** - unlike Pulsar, which ignores unknown keys.
* Strategy keys accept Pulsar's fully-qualified class names and the short class name, and are
  normalised to the short class name (``ThresholdShedder``); an unknown name is a ``ConfigError``.

Units follow Pulsar and are stated per field: many "percentage" keys are 0-100 numbers, but
``loadBalancerHistoryResourcePercentage`` and ``maxUnloadPercentage`` are fractions (0-1), and
bandwidth limits are in MiB ("Mbytes" = 1024*1024 bytes in Pulsar's code). The derived properties at
the bottom convert once, so strategies never divide by 100 inline.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pulsar_rebalance.core import strategies as _registry
from pulsar_rebalance.errors import ConfigError

MIBI = 1024 * 1024
"""Pulsar's ``LoadManagerShared.MIBI`` / ``MBytes``: the unit of every ``...Mbytes``/``MB`` key."""

PULSAR_DEFAULTS_COMMIT = "0023b9371b309b64aca6f47f03cd05aba78bb280"
"""The ``ServiceConfiguration.java`` commit the defaults below were read from."""

_SNAKE_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def to_snake(key: str) -> str:
    """The mechanical snake_case of a Pulsar key (the Python attribute name of its field)."""
    return _SNAKE_RE.sub("_", key).lower()


# ---------------------------------------------------------------------------------------------
# Strategy / algorithm names. Short class name -> the FQCNs Pulsar accepts for it.
# ---------------------------------------------------------------------------------------------
_IMPL = "org.apache.pulsar.broker.loadbalance.impl."

SHEDDING_STRATEGY_CLASSES: Mapping[str, tuple[str, ...]] = _registry.pulsar_classes("shedding")
"""Derived from ``core.strategies.STRATEGIES`` (operator-selectable shedders). TransferShedder is read
from this key only here (Pulsar's extensible load manager always uses it): one key selects the shedder
for both load managers. GlobalPlanner (not a Pulsar class) has no FQCN."""
PLACEMENT_STRATEGY_CLASSES: Mapping[str, tuple[str, ...]] = _registry.pulsar_classes("placement")
"""Derived from the registry. LeastResourceUsageWithWeight answers to impl.* (modular) and
extensions.strategy.* (extensible); which applies follows from loadManagerClassName. AvgShedder is both
a shedder and a placement strategy."""
LOAD_MANAGER_CLASSES: Mapping[str, tuple[str, ...]] = {
    "ModularLoadManagerImpl": (_IMPL + "ModularLoadManagerImpl",),
    "ExtensibleLoadManagerImpl": ("org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",),
}
SplitAlgorithmName = Literal[
    "range_equally_divide", "topic_count_equally_divide", "specified_positions_divide", "flow_or_qps_equally_divide"
]
SPLIT_ALGORITHM_NAMES: tuple[SplitAlgorithmName, ...] = get_args(SplitAlgorithmName)
"""Pulsar's ``NamespaceBundleSplitAlgorithm`` names, in ``supportedNamespaceBundleSplitAlgorithms`` order."""

SHEDDING_STRATEGY_NAMES = frozenset(SHEDDING_STRATEGY_CLASSES)
PLACEMENT_STRATEGY_NAMES = frozenset(PLACEMENT_STRATEGY_CLASSES)
LOAD_MANAGER_NAMES = frozenset(LOAD_MANAGER_CLASSES)

# Kept for typing; tests/core/test_strategy_registry.py checks they equal the registry's selectable names.
SheddingStrategyName = Literal[
    "ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder", "TransferShedder", "GlobalPlanner"
]
PlacementStrategyName = Literal["LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "AvgShedder"]
LoadManagerName = Literal["ModularLoadManagerImpl", "ExtensibleLoadManagerImpl"]


def _normalise_class_name(value: object, table: Mapping[str, tuple[str, ...]], what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a class name string, got {type(value).__name__}")
    name = value.strip()
    if name in table:
        return name
    for short, fqcns in table.items():
        if name in fqcns:
            return short
    raise ValueError(
        f"unknown {what} {value!r}; supported: "
        + ", ".join(f"{short} ({' or '.join(fqcns)})" for short, fqcns in table.items())
    )


def _string_tuple(value: object) -> object:
    """Accept a JSON array of strings or broker.conf's comma-separated form; returns a tuple."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        for item in items:
            if not isinstance(item, str):
                raise ValueError(f"expected a list of strings, found {type(item).__name__} {item!r}")
        return tuple(items)
    return value  # let strict validation report the type


class LoadBalancerConfig(BaseModel):
    """Pulsar's load-balancer tunables. Aliases are ``broker.conf`` keys verbatim; defaults are Pulsar's.

    Build it with :meth:`from_mapping` (errors become :class:`ConfigError` naming the key). Direct
    construction works too but reports type errors as pydantic ``ValidationError``.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        populate_by_name=True,
        validate_default=False,
    )

    # ---- general / drivers ------------------------------------------------------------------
    load_balancer_enabled: bool = Field(True, alias="loadBalancerEnabled", description="Enable load balancer.")
    load_balancer_shedding_enabled: bool = Field(
        True, alias="loadBalancerSheddingEnabled", description="Enable automatic bundle unloading (shedding)."
    )
    load_manager_class_name: LoadManagerName = Field(
        "ModularLoadManagerImpl",
        alias="loadManagerClassName",
        description="Modular (leader-driven) or extensible load manager; FQCN accepted, stored as short name.",
    )
    load_balancer_load_shedding_strategy: SheddingStrategyName = Field(
        "AvgShedder",
        alias="loadBalancerLoadSheddingStrategy",
        description="Shedding strategy; Pulsar default org.apache.pulsar.broker.loadbalance.impl.AvgShedder "
        "since PR #26609 (ThresholdShedder from 2.10 to 4.x).",
    )
    load_balancer_load_placement_strategy: PlacementStrategyName = Field(
        "AvgShedder",
        alias="loadBalancerLoadPlacementStrategy",
        description="Placement strategy; Pulsar default org.apache.pulsar.broker.loadbalance.impl.AvgShedder "
        "since PR #26609 (LeastLongTermMessageRate before); AvgShedder pairs only with the AvgShedder shedder.",
    )
    topic_bundle_assignment_strategy: Literal[
        "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner"
    ] = Field(
        "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner",
        alias="topicBundleAssignmentStrategy",
        description="Topic -> bundle mapping; only Pulsar's default (crc32 consistent hashing) is implemented.",
    )
    load_balancer_shedding_interval_minutes: int = Field(
        1, ge=1, alias="loadBalancerSheddingIntervalMinutes", description="Shedding cycle period, minutes."
    )
    load_balancer_shedding_grace_period_minutes: int = Field(
        30,
        ge=0,
        alias="loadBalancerSheddingGracePeriodMinutes",
        description="A bundle unloaded within this many minutes is not shed again (recentlyUnloadedBundles).",
    )
    load_balancer_report_update_threshold_percentage: int = Field(
        10,
        ge=0,
        alias="loadBalancerReportUpdateThresholdPercentage",
        description="Load-report change (%) forcing a write.",
    )
    load_balancer_report_update_min_interval_millis: int = Field(
        5000, ge=0, alias="loadBalancerReportUpdateMinIntervalMillis", description="Min interval between reports, ms."
    )
    load_balancer_report_update_max_interval_minutes: int = Field(
        15,
        ge=0,
        alias="loadBalancerReportUpdateMaxIntervalMinutes",
        description="Max interval between reports, minutes.",
    )
    load_balancer_host_usage_check_interval_minutes: int = Field(
        1, ge=1, alias="loadBalancerHostUsageCheckIntervalMinutes", description="Host usage sampling period, minutes."
    )
    load_balancer_distribute_bundles_evenly_enabled: bool = Field(
        True, alias="loadBalancerDistributeBundlesEvenlyEnabled", description="Spread a namespace's bundles evenly."
    )
    load_balancer_broker_max_topics: int = Field(
        50000,
        ge=0,
        alias="loadBalancerBrokerMaxTopics",
        description="Placement skips brokers with more topics than this.",
    )
    load_balancer_broker_overloaded_threshold_percentage: int = Field(
        85,
        ge=0,
        le=100,
        alias="loadBalancerBrokerOverloadedThresholdPercentage",
        description="Max resource usage (%) at which a broker is overloaded (OverloadShedder, placement).",
    )
    prefer_later_versions: bool = Field(
        False, alias="preferLaterVersions", description="BrokerVersionFilter: place only on the newest broker version."
    )
    at_least_one_bundle_selected: bool = Field(
        True,
        alias="atLeastOneBundleSelected",
        description="ThresholdShedder/OverloadShedder unload at least one bundle from a selected broker.",
    )

    # ---- ThresholdShedder / resource weights ----------------------------------------------------
    load_balancer_broker_threshold_shedder_percentage: int = Field(
        10,
        ge=0,
        le=100,
        alias="loadBalancerBrokerThresholdShedderPercentage",
        description="ThresholdShedder: shed when usage exceeds the average by this many percentage points.",
    )
    load_balancer_history_resource_percentage: float = Field(
        0.9,
        ge=0.0,
        le=1.0,
        alias="loadBalancerHistoryResourcePercentage",
        description="EMA history weight - a FRACTION despite the name (0.9 keeps 90% of history).",
    )
    load_balancer_bundle_unload_min_throughput_threshold: float = Field(
        10.0,
        ge=0.0,
        alias="loadBalancerBundleUnloadMinThroughputThreshold",
        description="ThresholdShedder: skip brokers whose throughput to offload is below this, MiB/s.",
    )
    lower_boundary_shedding_enabled: bool = Field(
        False, alias="lowerBoundarySheddingEnabled", description="ThresholdShedder lower-boundary shedding."
    )
    load_balancer_cpu_resource_weight: float = Field(1.0, ge=0.0, alias="loadBalancerCPUResourceWeight")
    load_balancer_memory_resource_weight: float = Field(
        0.0, ge=0.0, alias="loadBalancerMemoryResourceWeight", description="Deprecated since Pulsar 3.0.0 (default 0)."
    )
    load_balancer_direct_memory_resource_weight: float = Field(
        0.0, ge=0.0, alias="loadBalancerDirectMemoryResourceWeight"
    )
    load_balancer_bandwidth_in_resource_weight: float = Field(
        1.0,
        ge=0.0,
        alias="loadBalancerBandwidthInResourceWeight",
        description="New key; see bandwidth_in_resource_weight.",
    )
    load_balancer_bandwidth_out_resource_weight: float = Field(
        1.0,
        ge=0.0,
        alias="loadBalancerBandwidthOutResourceWeight",
        description="New key; see bandwidth_out_resource_weight.",
    )
    load_balancer_bandwith_in_resource_weight: float = Field(
        1.0, ge=0.0, alias="loadBalancerBandwithInResourceWeight", description="Deprecated key (Pulsar's typo)."
    )
    load_balancer_bandwith_out_resource_weight: float = Field(
        1.0, ge=0.0, alias="loadBalancerBandwithOutResourceWeight", description="Deprecated key (Pulsar's typo)."
    )

    # ---- placement ------------------------------------------------------------------------------
    load_balancer_average_resource_usage_difference_threshold_percentage: int = Field(
        10,
        ge=0,
        le=100,
        alias="loadBalancerAverageResourceUsageDifferenceThresholdPercentage",
        description="LeastResourceUsageWithWeight: best candidates are this many points below average.",
    )

    # ---- UniformLoadShedder / AvgShedder --------------------------------------------------------
    load_balancer_msg_rate_difference_shedder_threshold: float = Field(
        50.0,
        alias="loadBalancerMsgRateDifferenceShedderThreshold",
        description="UniformLoadShedder msg-rate gap, %; <=0 disables.",
    )
    load_balancer_msg_throughput_multiplier_difference_shedder_threshold: float = Field(
        4.0,
        alias="loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold",
        description="UniformLoadShedder max/min throughput multiplier; <=0 disables.",
    )
    max_unload_percentage: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        alias="maxUnloadPercentage",
        description="Fraction of the gap to unload (Uniform/AvgShedder).",
    )
    min_unload_message: int = Field(1000, ge=0, alias="minUnloadMessage", description="Min msg/s worth unloading.")
    min_unload_message_throughput: int = Field(
        1048576, ge=0, alias="minUnloadMessageThroughput", description="Min bytes/s worth unloading."
    )
    max_unload_bundle_num_per_shedding: int = Field(
        -1,
        ge=-1,
        alias="maxUnloadBundleNumPerShedding",
        description="UniformLoadShedder cap per cycle; -1 = unlimited.",
    )
    load_balancer_avg_shedder_low_threshold: int = Field(15, ge=0, le=100, alias="loadBalancerAvgShedderLowThreshold")
    load_balancer_avg_shedder_high_threshold: int = Field(40, ge=0, le=100, alias="loadBalancerAvgShedderHighThreshold")
    load_balancer_avg_shedder_hit_count_low_threshold: int = Field(
        8, ge=0, alias="loadBalancerAvgShedderHitCountLowThreshold"
    )
    load_balancer_avg_shedder_hit_count_high_threshold: int = Field(
        2, ge=0, alias="loadBalancerAvgShedderHitCountHighThreshold"
    )

    # ---- extensible load manager (TransferShedder, split scheduler) -----------------------------
    load_balancer_debug_mode_enabled: bool = Field(False, alias="loadBalancerDebugModeEnabled")
    load_balancer_broker_load_target_std: float = Field(
        0.25,
        ge=0.0,
        alias="loadBalancerBrokerLoadTargetStd",
        description="TransferShedder target std of load (1.0 = 100%).",
    )
    load_balancer_shedding_condition_hit_count_threshold: int = Field(
        3, ge=0, alias="loadBalancerSheddingConditionHitCountThreshold"
    )
    load_balancer_transfer_enabled: bool = Field(True, alias="loadBalancerTransferEnabled")
    load_balancer_max_number_of_broker_shedding_per_cycle: int = Field(
        3, ge=0, alias="loadBalancerMaxNumberOfBrokerSheddingPerCycle"
    )
    load_balance_shedding_delay_in_seconds: int = Field(
        180, ge=0, alias="loadBalanceSheddingDelayInSeconds", description="Cool-down after unloading, seconds."
    )
    load_balancer_broker_load_data_ttl_in_seconds: int = Field(
        1800,
        ge=0,
        alias="loadBalancerBrokerLoadDataTTLInSeconds",
        description="Ignore broker load data older than this, s.",
    )
    load_balancer_max_number_of_bundles_in_bundle_load_report: int = Field(
        10, ge=-1, alias="loadBalancerMaxNumberOfBundlesInBundleLoadReport"
    )
    load_balancer_split_interval_minutes: int = Field(1, ge=1, alias="loadBalancerSplitIntervalMinutes")
    load_balancer_max_number_of_bundles_to_split_per_cycle: int = Field(
        10,
        ge=0,
        alias="loadBalancerMaxNumberOfBundlesToSplitPerCycle",
        description="Extensible split cap per cycle. Pulsar stops when the count == this, so 0 means no cap.",
    )
    load_balancer_namespace_bundle_split_condition_hit_count_threshold: int = Field(
        3,
        ge=0,
        alias="loadBalancerNamespaceBundleSplitConditionHitCountThreshold",
        description="Extensible split: split when the consecutive hit count exceeds this (4th hit by default).",
    )
    load_balancer_shedding_bundles_with_policies_enabled: bool = Field(
        False,
        alias="loadBalancerSheddingBundlesWithPoliciesEnabled",
        description="TransferShedder (and TopKBundles) may shed bundles with isolation or anti-affinity policies.",
    )
    failure_domains_enabled: bool = Field(
        False,
        alias="failureDomainsEnabled",
        description="Anti-affinity placement first keeps the failure domains owning the fewest group namespaces.",
    )
    load_balancer_shedding_excluded_namespaces: tuple[str, ...] = Field(
        (),
        alias="loadBalancerSheddingExcludedNamespaces",
        description="Namespaces never shed (doLoadShedding skips them; TransferShedder skips them too).",
    )

    # ---- bundle split triggers / algorithms ----------------------------------------------------
    load_balancer_auto_bundle_split_enabled: bool = Field(True, alias="loadBalancerAutoBundleSplitEnabled")
    load_balancer_auto_unload_split_bundles_enabled: bool = Field(
        True, alias="loadBalancerAutoUnloadSplitBundlesEnabled"
    )
    load_balancer_namespace_bundle_max_topics: int = Field(
        1000, ge=0, alias="loadBalancerNamespaceBundleMaxTopics", description="Split when a bundle has more topics."
    )
    load_balancer_namespace_bundle_max_sessions: int = Field(
        1000,
        ge=-1,
        alias="loadBalancerNamespaceBundleMaxSessions",
        description="Split when producers+consumers exceed this; <=0 disables (Pulsar documents -1).",
    )
    load_balancer_namespace_bundle_max_msg_rate: int = Field(
        30000, ge=0, alias="loadBalancerNamespaceBundleMaxMsgRate", description="Split above this msg/s (in+out)."
    )
    load_balancer_namespace_bundle_max_bandwidth_mbytes: int = Field(
        100, ge=0, alias="loadBalancerNamespaceBundleMaxBandwidthMbytes", description="Split above this MiB/s (in+out)."
    )
    load_balancer_namespace_maximum_bundles: int = Field(
        128, ge=1, alias="loadBalancerNamespaceMaximumBundles", description="No split once a namespace has this many."
    )
    supported_namespace_bundle_split_algorithms: tuple[SplitAlgorithmName, ...] = Field(
        SPLIT_ALGORITHM_NAMES, alias="supportedNamespaceBundleSplitAlgorithms"
    )
    default_namespace_bundle_split_algorithm: SplitAlgorithmName = Field(
        "range_equally_divide", alias="defaultNamespaceBundleSplitAlgorithm"
    )
    flow_or_qps_difference_threshold_percentage: int = Field(
        10,
        ge=0,
        alias="flowOrQpsDifferenceThresholdPercentage",
        description="flow_or_qps_equally_divide splits only when the bundle exceeds a limit by this %.",
    )
    load_balancer_override_broker_nic_speed_gbps: float | None = Field(
        None, gt=0.0, alias="loadBalancerOverrideBrokerNicSpeedGbps", description="NIC speed override, Gbit/s."
    )
    default_number_of_namespace_bundles: int = Field(
        4, ge=1, le=1 << 32, alias="defaultNumberOfNamespaceBundles", description="Bundles of a new namespace."
    )

    # ---- normalisation --------------------------------------------------------------------------
    @field_validator("load_balancer_load_shedding_strategy", mode="before")
    @classmethod
    def _shedder_name(cls, value: object) -> str:
        return _normalise_class_name(value, SHEDDING_STRATEGY_CLASSES, "shedding strategy")

    @field_validator("load_balancer_load_placement_strategy", mode="before")
    @classmethod
    def _placement_name(cls, value: object) -> str:
        return _normalise_class_name(value, PLACEMENT_STRATEGY_CLASSES, "placement strategy")

    @field_validator("load_manager_class_name", mode="before")
    @classmethod
    def _load_manager_name(cls, value: object) -> str:
        return _normalise_class_name(value, LOAD_MANAGER_CLASSES, "load manager")

    @field_validator("default_namespace_bundle_split_algorithm", mode="before")
    @classmethod
    def _split_algorithm_name(cls, value: object) -> object:
        if isinstance(value, str) and value not in SPLIT_ALGORITHM_NAMES:
            raise ValueError(f"unknown split algorithm {value!r}; supported: {', '.join(SPLIT_ALGORITHM_NAMES)}")
        return value

    @field_validator("supported_namespace_bundle_split_algorithms", mode="before")
    @classmethod
    def _split_algorithm_names(cls, value: object) -> object:
        value = _string_tuple(value)
        if isinstance(value, tuple):
            for name in value:
                if name not in SPLIT_ALGORITHM_NAMES:
                    raise ValueError(f"unknown split algorithm {name!r}; supported: {', '.join(SPLIT_ALGORITHM_NAMES)}")
        return value

    @field_validator("load_balancer_shedding_excluded_namespaces", mode="before")
    @classmethod
    def _namespaces(cls, value: object) -> object:
        return _string_tuple(value)

    @model_validator(mode="after")
    def _cross_checks(self) -> LoadBalancerConfig:
        if self.default_namespace_bundle_split_algorithm not in self.supported_namespace_bundle_split_algorithms:
            # Pulsar rejects a split whose algorithm is not in the supported list ("Unsupported
            # namespace bundle split algorithm"); with the default unsupported every auto split fails.
            raise ConfigError(
                f"defaultNamespaceBundleSplitAlgorithm {self.default_namespace_bundle_split_algorithm!r} is not in "
                f"supportedNamespaceBundleSplitAlgorithms {list(self.supported_namespace_bundle_split_algorithms)}",
                key="defaultNamespaceBundleSplitAlgorithm",
            )
        if self.load_balancer_avg_shedder_low_threshold > self.load_balancer_avg_shedder_high_threshold:
            raise ConfigError(
                "loadBalancerAvgShedderLowThreshold must not exceed loadBalancerAvgShedderHighThreshold "
                f"({self.load_balancer_avg_shedder_low_threshold} > {self.load_balancer_avg_shedder_high_threshold})",
                key="loadBalancerAvgShedderLowThreshold",
            )
        return self

    # ---- loading / dumping ----------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> LoadBalancerConfig:
        """Build from Pulsar keys (or the snake_case attribute names); every error is a ``ConfigError(key=...)``."""
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"config must be a JSON object of broker.conf keys, got {type(mapping).__name__}")
        by_alias = _ALIAS_BY_NAME
        seen: dict[str, str] = {}
        for key in mapping:
            if not isinstance(key, str):
                raise ConfigError(f"config keys must be strings, got {key!r}", key=str(key))
            alias = key if key in _NAME_BY_ALIAS else by_alias.get(key)
            if alias is None:
                close = difflib.get_close_matches(key, list(_NAME_BY_ALIAS), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown load-balancer config key {key!r}{hint}", key=key)
            if alias in seen:
                raise ConfigError(f"config key {alias!r} given twice (as {seen[alias]!r} and {key!r})", key=alias)
            seen[alias] = key
        try:
            return cls.model_validate(dict(mapping))
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            loc = err.get("loc") or ()
            field = str(loc[0]) if loc else ""
            alias = field if field in _NAME_BY_ALIAS else by_alias.get(field, field)
            key = seen.get(alias, alias)  # the spelling the caller used
            msg = err.get("msg", "invalid value")
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            raise ConfigError(f"config key {key!r}: {msg} (got {mapping.get(key)!r})", key=key or None) from None

    def with_overrides(self, overrides: Mapping[str, Any]) -> LoadBalancerConfig:
        """A validated copy with some keys replaced (use instead of ``model_copy``, which skips validation)."""
        merged = dict(self.to_pulsar_dict())
        for key, value in overrides.items():
            merged.pop(_ALIAS_BY_NAME.get(key, key), None)
            merged[key] = value
        return LoadBalancerConfig.from_mapping(merged)

    def to_pulsar_dict(self) -> dict[str, Any]:
        """The config as JSON-ready ``{pulsarKey: value}`` (strategy names in their short form)."""
        return self.model_dump(by_alias=True, mode="json")

    def config_hash(self) -> str:
        """sha256 (hex) of the canonical JSON of :meth:`to_pulsar_dict` - stored with each plan."""
        canonical = json.dumps(self.to_pulsar_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    # ---- Pulsar getters with logic ---------------------------------------------------------------
    @property
    def bandwidth_in_resource_weight(self) -> float:
        """Pulsar's ``getLoadBalancerBandwidthInResourceWeight()``: the new key if it is not 1.0, else
        the deprecated ``...Bandwith...`` key if it is not 1.0, else 1.0 (so either key overrides)."""
        if self.load_balancer_bandwidth_in_resource_weight != 1.0:
            return self.load_balancer_bandwidth_in_resource_weight
        if self.load_balancer_bandwith_in_resource_weight != 1.0:
            return self.load_balancer_bandwith_in_resource_weight
        return 1.0

    @property
    def bandwidth_out_resource_weight(self) -> float:
        """Pulsar's ``getLoadBalancerBandwidthOutResourceWeight()`` (same rule as the "in" weight)."""
        if self.load_balancer_bandwidth_out_resource_weight != 1.0:
            return self.load_balancer_bandwidth_out_resource_weight
        if self.load_balancer_bandwith_out_resource_weight != 1.0:
            return self.load_balancer_bandwith_out_resource_weight
        return 1.0

    # ---- derived units (convert once, here) ------------------------------------------------------
    @property
    def overload_threshold_fraction(self) -> float:
        """``loadBalancerBrokerOverloadedThresholdPercentage / 100`` (0.85 by default)."""
        return self.load_balancer_broker_overloaded_threshold_percentage / 100.0

    @property
    def threshold_shedder_fraction(self) -> float:
        """``loadBalancerBrokerThresholdShedderPercentage / 100`` (0.10 by default)."""
        return self.load_balancer_broker_threshold_shedder_percentage / 100.0

    @property
    def average_resource_usage_difference_fraction(self) -> float:
        """``loadBalancerAverageResourceUsageDifferenceThresholdPercentage / 100`` (0.10 by default)."""
        return self.load_balancer_average_resource_usage_difference_threshold_percentage / 100.0

    @property
    def bundle_unload_min_throughput_bytes(self) -> float:
        """``loadBalancerBundleUnloadMinThroughputThreshold * MiB`` in bytes/s (double, as Pulsar)."""
        return self.load_balancer_bundle_unload_min_throughput_threshold * MIBI

    @property
    def namespace_bundle_max_bandwidth_bytes(self) -> int:
        """``loadBalancerNamespaceBundleMaxBandwidthMbytes * MiB`` in bytes/s (Java long)."""
        return self.load_balancer_namespace_bundle_max_bandwidth_mbytes * MIBI

    @property
    def flow_or_qps_difference_fraction(self) -> float:
        """``flowOrQpsDifferenceThresholdPercentage / 100.0`` (0.10 by default)."""
        return self.flow_or_qps_difference_threshold_percentage / 100.0

    @property
    def shedding_grace_period_ms(self) -> int:
        """``loadBalancerSheddingGracePeriodMinutes`` in milliseconds."""
        return self.load_balancer_shedding_grace_period_minutes * 60_000


_NAME_BY_ALIAS: dict[str, str] = {
    info.alias: name for name, info in LoadBalancerConfig.model_fields.items() if info.alias is not None
}
_ALIAS_BY_NAME: dict[str, str] = {name: alias for alias, name in _NAME_BY_ALIAS.items()}

PULSAR_KEYS: frozenset[str] = frozenset(_NAME_BY_ALIAS)
"""Every broker.conf key the config object understands."""


_CLASS_NAME_TABLES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "loadBalancerLoadSheddingStrategy": SHEDDING_STRATEGY_CLASSES,
    "loadBalancerLoadPlacementStrategy": PLACEMENT_STRATEGY_CLASSES,
    "loadManagerClassName": LOAD_MANAGER_CLASSES,
}
"""The keys whose value may be a short class name or one of Pulsar's FQCNs (their ``mode="before"`` validators)."""
_LIST_OR_CSV_KEYS = ("supportedNamespaceBundleSplitAlgorithms", "loadBalancerSheddingExcludedNamespaces")
"""The list keys that also take broker.conf's comma-separated string (:func:`_string_tuple`)."""


def config_json_schema() -> dict[str, Any]:
    """JSON schema of a ``config`` override object: one property per Pulsar key, with its type, range and
    choices, and no other key (``additionalProperties: false``; ``propertyNames`` makes the error of an
    unknown key list the known ones). Derived from :class:`LoadBalancerConfig`, so the DAG's trigger form
    refuses what :meth:`LoadBalancerConfig.from_mapping` would refuse for the same reasons (the
    cross-key checks and strictness on ``5.0`` for an integer are left to it). Snake_case attribute names,
    which ``from_mapping`` also takes, are not offered: the form speaks broker.conf."""
    generated = LoadBalancerConfig.model_json_schema(by_alias=True, mode="validation")
    properties: dict[str, Any] = {}
    for key, prop in generated["properties"].items():
        prop = {k: v for k, v in prop.items() if k != "title"}
        if key in _CLASS_NAME_TABLES:
            table = _CLASS_NAME_TABLES[key]
            prop["enum"] = [*table, *(fqcn for fqcns in table.values() for fqcn in fqcns)]
        if key in _LIST_OR_CSV_KEYS:
            description = prop.pop("description", None)
            default = prop.pop("default", None)
            prop = {
                "anyOf": [prop, {"type": "string", "description": "comma-separated, as in broker.conf"}],
                "default": default,
                **({"description": description} if description else {}),
            }
        properties[key] = prop
    if set(properties) != PULSAR_KEYS:  # an alias-less field would be accepted by from_mapping only
        raise RuntimeError(f"config schema misses keys: {sorted(PULSAR_KEYS - set(properties))}")
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "propertyNames": {"enum": sorted(properties)},
    }


def default_config() -> LoadBalancerConfig:
    """Pulsar's defaults (a fresh object; configs are immutable so sharing would also be fine)."""
    return LoadBalancerConfig()
