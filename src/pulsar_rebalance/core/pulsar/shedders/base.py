"""Shared inputs and Java-arithmetic helpers for the shedding strategies.

Why a module of helpers: every modular shedder reads the same ``LoadData`` view (brokers' load
reports, bundles' time averages, recently unloaded bundles) and several need Java's numeric
semantics reproduced exactly - ``(int)`` casts that saturate, ``MutableInt.add(double)`` that
truncates, ``Math.sqrt`` of a negative that is NaN instead of an exception. Keeping them here keeps
the strategy modules line-by-line comparable with Pulsar's classes.

Iteration order: Pulsar iterates ``HashMap``/``ConcurrentHashMap`` views whose order depends on
Java string hashes; we iterate in **input order** (the JSON object order). Ties that Pulsar breaks
by hash order are therefore broken by input order (documented in docs/core-decide.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData

MB = 1024.0 * 1024.0
"""``ThresholdShedder.MB`` / ``AvgShedder.MB``: bytes per MiB, as a double."""

ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05
"""Extra fraction shed by OverloadShedder/ThresholdShedder so a broker lands below the threshold."""

_INT_MAX = 2**31 - 1
_INT_MIN = -(2**31)

# NamespaceService.isSystemServiceNamespace (newest): pulsar/system, SLA monitor and heartbeat namespaces.
_SYSTEM_NAMESPACE = "pulsar/system"
_HEARTBEAT = re.compile(r"pulsar/[^/]+/([^:]+:\d+)")
_HEARTBEAT_V2 = re.compile(r"pulsar/([^:]+:\d+)")
_SLA = re.compile(r"sla-monitor/[^/]+/([^:]+:\d+)")


def java_int(value: float) -> int:
    """Java's ``(int) double``: truncation toward zero, saturating at the int range, NaN -> 0."""
    if value != value:  # NaN
        return 0
    if value >= _INT_MAX:
        return _INT_MAX
    if value <= _INT_MIN:
        return _INT_MIN
    return int(value)


def java_int_add(a: int, b: int) -> int:
    """32-bit two's-complement ``a + b`` (Java ``int`` overflow wraps)."""
    r = (a + b) & 0xFFFFFFFF
    return r - (1 << 32) if r >= (1 << 31) else r


def java_sqrt(value: float) -> float:
    """``Math.sqrt``: NaN for negative input (Python's ``math.sqrt`` raises instead)."""
    if value != value or value < 0:
        return math.nan
    return math.sqrt(value)


def java_div(a: float, b: float) -> float:
    """Java double division: ``x / 0.0`` is +-inf (0/0 is NaN) instead of a Python exception."""
    if b != 0:
        return a / b
    if a != a or a == 0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def java_max(values: Iterable[float]) -> float:
    """``LocalBrokerData.max(double...)``: starts at -inf, replaces only on strictly greater (NaN never wins)."""
    best = -math.inf
    for v in values:
        if v > best:
            best = v
    return best


def namespace_of(bundle: str) -> str:
    """``LoadManagerShared.getNamespaceNameFromBundleName``: everything before the last ``/``."""
    idx = bundle.rfind("/")
    return bundle[:idx] if idx >= 0 else bundle


def is_system_namespace(namespace: str) -> bool:
    """``NamespaceService.isSystemServiceNamespace`` (full-string regex matches, as Java's ``matches``)."""
    return (
        namespace == _SYSTEM_NAMESPACE
        or _SLA.fullmatch(namespace) is not None
        or _HEARTBEAT.fullmatch(namespace) is not None
        or _HEARTBEAT_V2.fullmatch(namespace) is not None
    )


def weighted_usage(data: LocalBrokerData, config: LoadBalancerConfig, *, with_memory: bool = True) -> float:
    """``LocalBrokerData.getMaxResourceUsageWithWeight`` as a fraction (1.0 = 100%).

    ``with_memory=True`` is the 5-argument form (cpu, memory, directMemory, bwIn, bwOut) used by
    ThresholdShedder, OverloadShedder/LeastLongTermMessageRate (PIP-358) and the modular placement
    overload check; ``False`` is the newest 4-argument form (no memory) used by AvgShedder and the
    modular LeastResourceUsageWithWeight. Each ``percentUsage()`` is float32, as in Pulsar.
    """
    if with_memory:
        return data.max_resource_usage_with_config_weights(config)
    return data.max_resource_usage_with_weight_4(
        config.load_balancer_cpu_resource_weight,
        config.load_balancer_direct_memory_resource_weight,
        config.bandwidth_in_resource_weight,
        config.bandwidth_out_resource_weight,
    )


def unweighted_usage(data: LocalBrokerData) -> float:
    """``LocalBrokerData.getMaxResourceUsage()``: unweighted max of the five percentages / 100, in
    float32 like Java (the pre-PIP-358 metric)."""
    return data.max_resource_usage()


@dataclass(slots=True)
class ModularInput:
    """The leader's ``LoadData`` as the modular shedders see it (read-only by convention).

    ``brokers`` is ``loadData.getBrokerData()`` (broker id -> LocalBrokerData), ``bundle_data`` is
    ``loadData.getBundleData()`` (bundle -> BundleData), ``recently_unloaded_bundles`` is
    ``loadData.getRecentlyUnloadedBundles()`` (bundle -> epoch ms). Bundles of system namespaces are
    excluded from shedding (``getBundleDataForLoadShedding``).
    """

    brokers: Mapping[str, LocalBrokerData]
    bundle_data: Mapping[str, BundleData]
    recently_unloaded_bundles: Mapping[str, int] = field(default_factory=dict)
    _position: dict[str, int] | None = None

    def position(self, bundle: str) -> int:
        """Index of ``bundle`` in ``bundle_data`` iteration order (tie-breaker for stable sorts)."""
        if self._position is None:
            self._position = {b: i for i, b in enumerate(self.bundle_data)}
        return self._position[bundle]

    def sheddable_bundles(self, broker: str) -> list[tuple[str, BundleData]]:
        """``getBundleDataForLoadShedding()`` entries owned by ``broker``, in bundle_data order.

        Built from the broker's own bundle set (O(bundles of the broker)) instead of Pulsar's scan of
        every bundle per broker; the result and its order are the same.
        """
        data = self.brokers[broker]
        bundle_data = self.bundle_data
        out: list[tuple[str, BundleData]] = []
        for bundle in data.bundles:
            bd = bundle_data.get(bundle)
            if bd is not None and not is_system_namespace(namespace_of(bundle)):
                out.append((bundle, bd))
        out.sort(key=lambda e: self.position(e[0]))
        return out


def sort_desc_stable(items: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """``sorted((e1, e2) -> Double.compare(e2.v, e1.v))``: descending, stable for equal values.

    ``Double.compare`` orders NaN above +inf and -0.0 below 0.0; inputs are validated finite and
    non-negative, so a plain stable sort on the value is equivalent.
    """
    return sorted(items, key=lambda e: -e[1])


def fmt_mib(bytes_per_s: float) -> str:
    """Bytes/s as a short MiB/s string for explanations."""
    return f"{bytes_per_s / MB:.2f} MiB/s"


def short_term_throughput(bd: BundleData) -> float:
    """Short-term ``msgThroughputIn + msgThroughputOut`` of a bundle, bytes/s (the shedders' bundle size)."""
    st = bd.short_term_data
    return st.msg_throughput_in + st.msg_throughput_out


def short_term_msg_rate(bd: BundleData) -> float:
    """Short-term ``msgRateIn + msgRateOut`` of a bundle, msg/s."""
    st = bd.short_term_data
    return st.msg_rate_in + st.msg_rate_out


def broker_throughput(data: LocalBrokerData) -> float:
    """Broker-level ``msgThroughputIn + msgThroughputOut``, bytes/s."""
    return data.msg_throughput_in + data.msg_throughput_out


def broker_msg_rate(data: LocalBrokerData) -> float:
    """Broker-level ``msgRateIn + msgRateOut``, msg/s."""
    return data.msg_rate_in + data.msg_rate_out
