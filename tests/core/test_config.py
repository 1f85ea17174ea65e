"""LoadBalancerConfig: Pulsar keys, Pulsar defaults, strict loading, strategy-name normalisation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pulsar_rebalance.core.pulsar.config import (
    MIBI,
    PLACEMENT_STRATEGY_NAMES,
    PULSAR_KEYS,
    SHEDDING_STRATEGY_NAMES,
    LoadBalancerConfig,
    to_snake,
)
from pulsar_rebalance.errors import ConfigError

# Defaults read from ServiceConfiguration.java at apache/pulsar 0023b9371b309b64aca6f47f03cd05aba78bb280.
# Strategy FQCNs appear here in the short form the config normalises them to.
PULSAR_DEFAULTS = {
    "loadBalancerEnabled": True,
    "loadBalancerSheddingEnabled": True,
    "loadBalancerLoadSheddingStrategy": "AvgShedder",  # PR #26609
    "loadBalancerLoadPlacementStrategy": "AvgShedder",
    "topicBundleAssignmentStrategy": "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner",
    "loadManagerClassName": "ModularLoadManagerImpl",
    "lowerBoundarySheddingEnabled": False,
    "loadBalancerReportUpdateThresholdPercentage": 10,
    "loadBalancerReportUpdateMinIntervalMillis": 5000,
    "loadBalancerReportUpdateMaxIntervalMinutes": 15,
    "loadBalancerHostUsageCheckIntervalMinutes": 1,
    "loadBalancerSheddingIntervalMinutes": 1,
    "loadBalancerDistributeBundlesEvenlyEnabled": True,
    "loadBalancerSheddingGracePeriodMinutes": 30,
    "loadBalancerBrokerMaxTopics": 50000,
    "loadBalancerBrokerOverloadedThresholdPercentage": 85,
    "loadBalancerBrokerThresholdShedderPercentage": 10,
    "loadBalancerAverageResourceUsageDifferenceThresholdPercentage": 10,
    "flowOrQpsDifferenceThresholdPercentage": 10,
    "loadBalancerAvgShedderLowThreshold": 15,
    "loadBalancerAvgShedderHighThreshold": 40,
    "loadBalancerAvgShedderHitCountLowThreshold": 8,
    "loadBalancerAvgShedderHitCountHighThreshold": 2,
    "minUnloadMessage": 1000,
    "minUnloadMessageThroughput": 1048576,
    "maxUnloadPercentage": 0.2,
    "atLeastOneBundleSelected": True,
    "loadBalancerMsgRateDifferenceShedderThreshold": 50.0,
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 4.0,
    "maxUnloadBundleNumPerShedding": -1,
    "loadBalancerHistoryResourcePercentage": 0.9,
    "loadBalancerBandwidthInResourceWeight": 1.0,
    "loadBalancerBandwidthOutResourceWeight": 1.0,
    "loadBalancerBandwithInResourceWeight": 1.0,
    "loadBalancerBandwithOutResourceWeight": 1.0,
    "loadBalancerCPUResourceWeight": 1.0,
    "loadBalancerMemoryResourceWeight": 0.0,
    "loadBalancerDirectMemoryResourceWeight": 0.0,
    "loadBalancerBundleUnloadMinThroughputThreshold": 10.0,
    "loadBalancerAutoBundleSplitEnabled": True,
    "loadBalancerAutoUnloadSplitBundlesEnabled": True,
    "loadBalancerNamespaceBundleMaxTopics": 1000,
    "loadBalancerNamespaceBundleMaxSessions": 1000,
    "loadBalancerNamespaceBundleMaxMsgRate": 30000,
    "loadBalancerNamespaceBundleMaxBandwidthMbytes": 100,
    "loadBalancerNamespaceMaximumBundles": 128,
    "supportedNamespaceBundleSplitAlgorithms": [
        "range_equally_divide",
        "topic_count_equally_divide",
        "specified_positions_divide",
        "flow_or_qps_equally_divide",
    ],
    "defaultNamespaceBundleSplitAlgorithm": "range_equally_divide",
    "loadBalancerOverrideBrokerNicSpeedGbps": None,
    "loadBalancerDebugModeEnabled": False,
    "loadBalancerBrokerLoadTargetStd": 0.25,
    "loadBalancerSheddingConditionHitCountThreshold": 3,
    "loadBalancerTransferEnabled": True,
    "loadBalancerMaxNumberOfBrokerSheddingPerCycle": 3,
    "loadBalanceSheddingDelayInSeconds": 180,
    "loadBalancerBrokerLoadDataTTLInSeconds": 1800,
    "loadBalancerMaxNumberOfBundlesInBundleLoadReport": 10,
    "loadBalancerSplitIntervalMinutes": 1,
    "loadBalancerMaxNumberOfBundlesToSplitPerCycle": 10,
    "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 3,
    "loadBalancerSheddingBundlesWithPoliciesEnabled": False,
    "failureDomainsEnabled": False,
    "loadBalancerSheddingExcludedNamespaces": [],
    "preferLaterVersions": False,
    "defaultNumberOfNamespaceBundles": 4,
}


def test_defaults_are_pulsars_and_every_key_is_covered() -> None:
    dumped = LoadBalancerConfig().to_pulsar_dict()
    assert dumped == PULSAR_DEFAULTS
    assert set(PULSAR_KEYS) == set(PULSAR_DEFAULTS)


def test_attribute_names_are_the_mechanical_snake_case_of_the_keys() -> None:
    for name, info in LoadBalancerConfig.model_fields.items():
        assert name == to_snake(info.alias), info.alias
    assert to_snake("loadBalancerCPUResourceWeight") == "load_balancer_cpu_resource_weight"
    assert to_snake("loadBalancerBrokerLoadDataTTLInSeconds") == "load_balancer_broker_load_data_ttl_in_seconds"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder", "ThresholdShedder"),
        ("org.apache.pulsar.broker.loadbalance.impl.OverloadShedder", "OverloadShedder"),
        ("org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder", "UniformLoadShedder"),
        ("org.apache.pulsar.broker.loadbalance.impl.AvgShedder", "AvgShedder"),
        ("org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder", "TransferShedder"),
        ("UniformLoadShedder", "UniformLoadShedder"),
    ],
)
def test_shedding_strategy_fqcn_and_short_names_normalise(value: str, expected: str) -> None:
    cfg = LoadBalancerConfig.from_mapping({"loadBalancerLoadSheddingStrategy": value})
    assert cfg.load_balancer_load_shedding_strategy == expected
    assert expected in SHEDDING_STRATEGY_NAMES


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate", "LeastLongTermMessageRate"),
        ("org.apache.pulsar.broker.loadbalance.impl.LeastResourceUsageWithWeight", "LeastResourceUsageWithWeight"),
        (
            "org.apache.pulsar.broker.loadbalance.extensions.strategy.LeastResourceUsageWithWeight",
            "LeastResourceUsageWithWeight",
        ),
        ("org.apache.pulsar.broker.loadbalance.impl.AvgShedder", "AvgShedder"),
    ],
)
def test_placement_strategy_names_normalise(value: str, expected: str) -> None:
    cfg = LoadBalancerConfig.from_mapping({"loadBalancerLoadPlacementStrategy": value})
    assert cfg.load_balancer_load_placement_strategy == expected
    assert expected in PLACEMENT_STRATEGY_NAMES


def test_load_manager_fqcn_normalises() -> None:
    cfg = LoadBalancerConfig.from_mapping(
        {"loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"}
    )
    assert cfg.load_manager_class_name == "ExtensibleLoadManagerImpl"


@pytest.mark.parametrize(
    ("mapping", "key", "fragment"),
    [
        (
            {"loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.Nope"},
            "loadBalancerLoadSheddingStrategy",
            "unknown shedding strategy",
        ),
        # a real class in the wrong package is not accepted either
        (
            {"loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.TransferShedder"},
            "loadBalancerLoadSheddingStrategy",
            "unknown shedding strategy",
        ),
        (
            {"loadBalancerLoadPlacementStrategy": "RoundRobinBrokerSelector"},
            "loadBalancerLoadPlacementStrategy",
            "unknown placement strategy",
        ),
        (
            {"loadManagerClassName": "org.apache.pulsar.broker.loadbalance.impl.SimpleLoadManagerImpl"},
            "loadManagerClassName",
            "unknown load manager",
        ),
        (
            {"defaultNamespaceBundleSplitAlgorithm": "hash_divide"},
            "defaultNamespaceBundleSplitAlgorithm",
            "unknown split algorithm",
        ),
        (
            {"supportedNamespaceBundleSplitAlgorithms": ["range_equally_divide", "x"]},
            "supportedNamespaceBundleSplitAlgorithms",
            "unknown split algorithm 'x'",
        ),
        (
            {"loadBalancerCPUResourceWieght": 1.0},
            "loadBalancerCPUResourceWieght",
            "did you mean 'loadBalancerCPUResourceWeight'",
        ),
        ({"loadBalancerCPUResourceWeight": "abc"}, "loadBalancerCPUResourceWeight", "valid number"),
        ({"loadBalancerNamespaceBundleMaxTopics": "1000"}, "loadBalancerNamespaceBundleMaxTopics", "valid integer"),
        ({"loadBalancerNamespaceBundleMaxTopics": 1000.5}, "loadBalancerNamespaceBundleMaxTopics", "valid integer"),
        ({"loadBalancerNamespaceBundleMaxTopics": True}, "loadBalancerNamespaceBundleMaxTopics", "valid integer"),
        ({"loadBalancerEnabled": "true"}, "loadBalancerEnabled", "valid boolean"),
        ({"loadBalancerEnabled": 1}, "loadBalancerEnabled", "valid boolean"),
        ({"loadBalancerHistoryResourcePercentage": float("nan")}, "loadBalancerHistoryResourcePercentage", "finite"),
        (
            {"loadBalancerHistoryResourcePercentage": 1.5},
            "loadBalancerHistoryResourcePercentage",
            "less than or equal to 1",
        ),
        (
            {"loadBalancerBrokerOverloadedThresholdPercentage": 101},
            "loadBalancerBrokerOverloadedThresholdPercentage",
            "less than or equal to 100",
        ),
        ({"loadBalancerCPUResourceWeight": -0.5}, "loadBalancerCPUResourceWeight", "greater than or equal to 0"),
        ({"maxUnloadBundleNumPerShedding": -2}, "maxUnloadBundleNumPerShedding", "greater than or equal to -1"),
        ({"load_balancer_cpu_resource_weight": -1}, "load_balancer_cpu_resource_weight", "greater than or equal to 0"),
    ],
)
def test_invalid_values_are_config_errors_naming_the_key(mapping: dict, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoadBalancerConfig.from_mapping(mapping)
    assert info.value.key == key
    assert fragment in str(info.value)


def test_ints_are_accepted_for_float_keys_and_snake_names_work() -> None:
    cfg = LoadBalancerConfig.from_mapping(
        {"loadBalancerCPUResourceWeight": 2, "load_balancer_history_resource_percentage": 1}
    )
    assert cfg.load_balancer_cpu_resource_weight == 2.0
    assert isinstance(cfg.load_balancer_cpu_resource_weight, float)
    assert cfg.load_balancer_history_resource_percentage == 1.0


def test_same_key_twice_is_rejected() -> None:
    with pytest.raises(ConfigError) as info:
        LoadBalancerConfig.from_mapping(
            {"loadBalancerCPUResourceWeight": 1.0, "load_balancer_cpu_resource_weight": 2.0}
        )
    assert info.value.key == "loadBalancerCPUResourceWeight"


def test_default_algorithm_must_be_supported() -> None:
    with pytest.raises(ConfigError) as info:
        LoadBalancerConfig.from_mapping(
            {
                "supportedNamespaceBundleSplitAlgorithms": "range_equally_divide,topic_count_equally_divide",
                "defaultNamespaceBundleSplitAlgorithm": "flow_or_qps_equally_divide",
            }
        )
    assert info.value.key == "defaultNamespaceBundleSplitAlgorithm"


def test_list_keys_accept_broker_conf_comma_form() -> None:
    cfg = LoadBalancerConfig.from_mapping(
        {
            "supportedNamespaceBundleSplitAlgorithms": "range_equally_divide, flow_or_qps_equally_divide",
            "loadBalancerSheddingExcludedNamespaces": "public/default,pulsar/system",
        }
    )
    assert cfg.supported_namespace_bundle_split_algorithms == ("range_equally_divide", "flow_or_qps_equally_divide")
    assert cfg.load_balancer_shedding_excluded_namespaces == ("public/default", "pulsar/system")


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [
        (1.0, 1.0, 1.0),
        (0.5, 1.0, 0.5),  # new key set
        (1.0, 0.3, 0.3),  # only the deprecated key set
        (0.5, 0.3, 0.5),  # both set: the new one wins
    ],
)
def test_bandwidth_weight_getter_rule(new: float, old: float, expected: float) -> None:
    cfg = LoadBalancerConfig.from_mapping(
        {
            "loadBalancerBandwidthInResourceWeight": new,
            "loadBalancerBandwithInResourceWeight": old,
            "loadBalancerBandwidthOutResourceWeight": new,
            "loadBalancerBandwithOutResourceWeight": old,
        }
    )
    assert cfg.bandwidth_in_resource_weight == expected
    assert cfg.bandwidth_out_resource_weight == expected


def test_config_is_frozen_and_hash_is_canonical() -> None:
    a = LoadBalancerConfig()
    b = LoadBalancerConfig.from_mapping(
        {"loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.AvgShedder"}
    )
    assert a.config_hash() == b.config_hash()  # FQCN and short name are the same config
    assert len(a.config_hash()) == 64
    c = a.with_overrides({"loadBalancerBrokerThresholdShedderPercentage": 20})
    assert c.config_hash() != a.config_hash()
    assert c.load_balancer_broker_threshold_shedder_percentage == 20
    with pytest.raises(ValidationError):
        a.load_balancer_enabled = False  # type: ignore[misc]
    with pytest.raises(ConfigError):
        a.with_overrides({"loadBalancerBrokerThresholdShedderPercentage": "20"})


def test_round_trip_through_pulsar_dict() -> None:
    cfg = LoadBalancerConfig.from_mapping(
        {
            "loadBalancerLoadPlacementStrategy": "LeastResourceUsageWithWeight",
            "loadBalancerOverrideBrokerNicSpeedGbps": 10,
        }
    )
    again = LoadBalancerConfig.from_mapping(cfg.to_pulsar_dict())
    assert again == cfg
    assert again.load_balancer_override_broker_nic_speed_gbps == 10.0


def test_derived_units() -> None:
    cfg = LoadBalancerConfig()
    assert cfg.overload_threshold_fraction == 0.85
    assert cfg.threshold_shedder_fraction == 0.10
    assert cfg.average_resource_usage_difference_fraction == 0.10
    assert cfg.bundle_unload_min_throughput_bytes == 10 * MIBI
    assert cfg.namespace_bundle_max_bandwidth_bytes == 100 * 1024 * 1024
    assert cfg.flow_or_qps_difference_fraction == 0.10
    assert cfg.shedding_grace_period_ms == 30 * 60 * 1000


def test_non_mapping_is_rejected() -> None:
    with pytest.raises(ConfigError):
        LoadBalancerConfig.from_mapping(["loadBalancerEnabled"])  # type: ignore[arg-type]
