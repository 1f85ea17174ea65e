"""Pulsar's load data model, reproduced field for field (JSON names = Pulsar's, attributes = snake_case).

Sources (apache/pulsar): ``pulsar-common/.../policies/data/loadbalancer/`` (``ResourceUsage``,
``NamespaceBundleStats``, ``LocalBrokerData``, ``TimeAverageMessageData``, ``BundleData``,
``TimeAverageBrokerData``) and ``pulsar-broker/.../loadbalance/extensions/data/BrokerLoadData.java``.

Units: ``msgRate*`` are messages/s, ``msgThroughput*`` bytes/s, ``ResourceUsage`` is (usage, limit)
in the resource's own unit (cpu: percent, limit = cores x 100; memory and direct memory: MiB;
bandwidth: the NIC unit the broker samples) - only the ratio matters. ``percent_usage()`` is 0-100 (may exceed 100);
``max_resource_usage*()`` return fractions (1.0 = 100%).

Arithmetic fidelity: ``ResourceUsage.percentUsage()`` is computed in 32-bit float in Java, and
``getMaxResourceUsage()`` takes the max of those floats and divides by 100 *in float* too; both are
emulated exactly here (see :func:`f32`). Weighted maxima multiply a float by a double weight, which
Java does in double - so do we.

The types are plain dataclasses with ``slots=True`` (100,000 bundle entries per ``decide`` run) and
parse no JSON: :mod:`pulsar_rebalance.core.contract.load_json` reads Pulsar's JSON into them
(``to_json`` writes it back, with Pulsar's names).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig

NUM_SHORT_SAMPLES = 10
"""``ModularLoadManagerImpl.NUM_SHORT_SAMPLES``: samples in a bundle's short-term average."""
NUM_LONG_SAMPLES = 1000
"""``ModularLoadManagerImpl.NUM_LONG_SAMPLES``: samples in a bundle's long-term average."""
DEFAULT_MESSAGE_RATE = 50.0
"""Default msg/s applied to *each* of in and out for a bundle never seen before."""
DEFAULT_MESSAGE_THROUGHPUT = 50000.0
"""Default bytes/s applied to *each* of in and out for a bundle never seen before."""
DEFAULT_RESOURCE_USAGE = 1.0
"""``BrokerLoadData.DEFAULT_RESOURCE_USAGE``: initial maxResourceUsage / weightedMaxEMA (100%)."""

_F32 = struct.Struct("<f")


def f32(x: float) -> float:
    """Round a double to the nearest IEEE-754 binary32 value, like a Java ``(float)`` cast.

    Overflow gives +/-infinity as in Java (``struct`` would raise instead).
    """
    try:
        return _F32.unpack(_F32.pack(x))[0]  # type: ignore[no-any-return]
    except OverflowError:
        return math.copysign(math.inf, x)


# ---------------------------------------------------------------------------------------------
# ResourceUsage
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """``ResourceUsage``: a (usage, limit) pair in the resource's unit; JSON ``{"usage", "limit"}``."""

    usage: float = 0.0
    limit: float = 0.0
    _percent: float = field(init=False, repr=False, compare=False, default=0.0)

    def __post_init__(self) -> None:
        # Precomputed once: strategies call percent_usage() per broker per resource per cycle.
        object.__setattr__(self, "_percent", _percent_usage(self.usage, self.limit))

    def percent_usage(self) -> float:
        """Java ``limit > 0 ? ((float) usage / (float) limit) * 100 : 0`` in float32 (0-100, may exceed 100).

        E.g. 999/1000 -> 99.90000152587890625 (not 99.9).
        """
        return self._percent

    def to_json(self) -> dict[str, float]:
        return {"usage": self.usage, "limit": self.limit}


def _percent_usage(usage: float, limit: float) -> float:
    proportion = 0.0
    if limit > 0:
        lim = f32(limit)
        if lim == 0.0:  # a limit below float32's range: Java's x / 0.0f is Infinity (NaN for 0 / 0)
            return math.inf if f32(usage) > 0 else math.nan
        proportion = f32(f32(usage) / lim)
    # float * int in Java: the int literal 100 becomes float; the product is rounded to float.
    return f32(proportion * 100.0)


_ZERO_USAGE = ResourceUsage(0.0, 0.0)


@dataclass(frozen=True, slots=True)
class SystemResourceUsage:
    """``SystemResourceUsage``: the five resources a broker samples (input of ``BrokerLoadData.update``)."""

    cpu: ResourceUsage = _ZERO_USAGE
    memory: ResourceUsage = _ZERO_USAGE
    direct_memory: ResourceUsage = _ZERO_USAGE
    bandwidth_in: ResourceUsage = _ZERO_USAGE
    bandwidth_out: ResourceUsage = _ZERO_USAGE


# ---------------------------------------------------------------------------------------------
# NamespaceBundleStats
# ---------------------------------------------------------------------------------------------
_THROUGHPUT_DIFFERENCE_THRESHOLD = 1e5  # bytes/s: "equal if difference is less than 100 KB/s"
_MSG_RATE_DIFFERENCE_THRESHOLD = 100.0  # msg/s
_TOPIC_CONNECTION_DIFFERENCE_THRESHOLD = 500
_CACHE_SIZE_DIFFERENCE_THRESHOLD = 100000


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


@dataclass(frozen=True, slots=True)
class NamespaceBundleStats:
    """``NamespaceBundleStats``: one bundle's instantaneous stats as reported by its owner broker.

    JSON: ``msgRateIn, msgThroughputIn, msgRateOut, msgThroughputOut`` (required), ``topics``
    (required), ``consumerCount, producerCount, cacheSize`` (optional, default 0 - the Java
    constructor's ``reset()`` values, which is what Jackson leaves for absent members).
    """

    msg_rate_in: float = 0.0
    msg_throughput_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_out: float = 0.0
    consumer_count: int = 0
    producer_count: int = 0
    topics: int = 0
    cache_size: int = 0

    @classmethod
    def new_default(cls) -> NamespaceBundleStats:
        """The stats assumed for an unseen bundle: 50 msg/s and 50000 B/s for *each* of in and out."""
        return cls(
            msg_rate_in=DEFAULT_MESSAGE_RATE,
            msg_throughput_in=DEFAULT_MESSAGE_THROUGHPUT,
            msg_rate_out=DEFAULT_MESSAGE_RATE,
            msg_throughput_out=DEFAULT_MESSAGE_THROUGHPUT,
        )

    @property
    def total_msg_rate(self) -> float:
        """``msgRateIn + msgRateOut`` (msg/s)."""
        return self.msg_rate_in + self.msg_rate_out

    @property
    def total_msg_throughput(self) -> float:
        """``msgThroughputIn + msgThroughputOut`` (bytes/s)."""
        return self.msg_throughput_in + self.msg_throughput_out

    @property
    def sessions(self) -> int:
        """``consumerCount + producerCount``."""
        return self.consumer_count + self.producer_count

    def compare_to(self, other: NamespaceBundleStats) -> int:
        """Pulsar's ``compareTo``: bandwidthIn, then bandwidthOut (equal within 1e5 B/s), then total msg
        rate (equal within 100), then topics+connections (within 500), then cacheSize (within 1e5).

        Like Pulsar's, this is not a strict weak ordering (the tolerance is not transitive); callers
        that sort with it must not rely on a total order.
        """
        if abs(self.msg_throughput_in - other.msg_throughput_in) > _THROUGHPUT_DIFFERENCE_THRESHOLD:
            return _cmp(self.msg_throughput_in, other.msg_throughput_in)
        if abs(self.msg_throughput_out - other.msg_throughput_out) > _THROUGHPUT_DIFFERENCE_THRESHOLD:
            return _cmp(self.msg_throughput_out, other.msg_throughput_out)
        this_rate = self.msg_rate_in + self.msg_rate_out
        other_rate = other.msg_rate_in + other.msg_rate_out
        if abs(this_rate - other_rate) > _MSG_RATE_DIFFERENCE_THRESHOLD:
            return _cmp(this_rate, other_rate)
        this_tc = self.topics + self.consumer_count + self.producer_count
        other_tc = other.topics + other.consumer_count + other.producer_count
        if abs(this_tc - other_tc) > _TOPIC_CONNECTION_DIFFERENCE_THRESHOLD:
            return _cmp(this_tc, other_tc)
        if abs(self.cache_size - other.cache_size) > _CACHE_SIZE_DIFFERENCE_THRESHOLD:
            return _cmp(self.cache_size, other.cache_size)
        return 0

    def to_json(self) -> dict[str, Any]:
        return {
            "msgRateIn": self.msg_rate_in,
            "msgThroughputIn": self.msg_throughput_in,
            "msgRateOut": self.msg_rate_out,
            "msgThroughputOut": self.msg_throughput_out,
            "consumerCount": self.consumer_count,
            "producerCount": self.producer_count,
            "topics": self.topics,
            "cacheSize": self.cache_size,
        }


# ---------------------------------------------------------------------------------------------
# LocalBrokerData (modular load manager's per-broker report)
# ---------------------------------------------------------------------------------------------
def max_f32_percent(*usages: ResourceUsage) -> float:
    """Java ``max(float...)/100``: a float max divided by the int 100 - all in float32."""
    return f32(max(u._percent for u in usages) / 100.0)


@dataclass(frozen=True, slots=True)
class LocalBrokerData:
    """``LocalBrokerData``: what ``GET /admin/v2/broker-stats/load-report`` returns (modular LM).

    JSON parsing rules (:func:`pulsar_rebalance.core.contract.load_json.local_broker_data_from_json`):

    * ``cpu``, ``bandwidthIn``, ``bandwidthOut`` are required; ``memory`` and ``directMemory`` are
      optional and default to ``{"usage": 0, "limit": 0}`` (0%) - Pulsar's defaults weight them 0.
    * ``lastStats`` (map bundle -> NamespaceBundleStats) is required; Pulsar's ``bundleStats``
      spelling is accepted when ``lastStats`` is absent.
    * ``msgRateIn/Out``, ``msgThroughputIn/Out``, ``numTopics``, ``numBundles``, ``numConsumers``,
      ``numProducers``: when absent they are derived exactly as Pulsar's ``updateBundleData`` does -
      sums over ``lastStats`` (``numBundles`` = its size). When present, the reported values are kept.
    * ``bundles`` (Pulsar's ``Set<String>`` of full bundle names): when absent it is derived from the
      ``lastStats`` keys (Pulsar's ``updateBundleData`` keeps ``bundles`` equal to those keys).
      Order is preserved (first occurrence) so sums over bundles are deterministic.
    * ``loadReportType``, when present, must be ``"LocalBrokerData"``.
    """

    cpu: ResourceUsage
    bandwidth_in: ResourceUsage
    bandwidth_out: ResourceUsage
    memory: ResourceUsage = _ZERO_USAGE
    direct_memory: ResourceUsage = _ZERO_USAGE
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    last_update: int = 0
    last_stats: Mapping[str, NamespaceBundleStats] = field(default_factory=dict)
    num_topics: int = 0
    num_bundles: int = 0
    num_consumers: int = 0
    num_producers: int = 0
    bundles: tuple[str, ...] = ()
    last_bundle_gains: tuple[str, ...] = ()
    last_bundle_losses: tuple[str, ...] = ()
    web_service_url: str | None = None
    web_service_url_tls: str | None = None
    pulsar_service_url: str | None = None
    pulsar_service_url_tls: str | None = None
    persistent_topics_enabled: bool = True
    non_persistent_topics_enabled: bool = True
    broker_version_string: str | None = None

    LOAD_REPORT_TYPE = "LocalBrokerData"

    # -- resource usage (all return fractions: 1.0 = 100%) -------------------------------------
    def max_resource_usage(self) -> float:
        """Pulsar ``getMaxResourceUsage()``: unweighted max of the 5 resources' percentUsage / 100.

        Computed in float32 like Java (float max, divided by int 100), widened to a Python float.
        """
        return max_f32_percent(self.cpu, self.memory, self.direct_memory, self.bandwidth_in, self.bandwidth_out)

    def max_resource_usage_with_weight(
        self,
        cpu_weight: float,
        memory_weight: float,
        direct_memory_weight: float,
        bandwidth_in_weight: float,
        bandwidth_out_weight: float,
    ) -> float:
        """Pulsar ``getMaxResourceUsageWithWeight(cpuW, memoryW, directMemoryW, bwInW, bwOutW)`` (5-arg).

        ``max(percent * weight) / 100`` in double. Used by ThresholdShedder and (post-PIP-358)
        LeastLongTermMessageRate / OverloadShedder.
        """
        return (
            max(
                self.cpu._percent * cpu_weight,
                self.memory._percent * memory_weight,
                self.direct_memory._percent * direct_memory_weight,
                self.bandwidth_in._percent * bandwidth_in_weight,
                self.bandwidth_out._percent * bandwidth_out_weight,
            )
            / 100
        )

    def max_resource_usage_with_weight_4(
        self,
        cpu_weight: float,
        direct_memory_weight: float,
        bandwidth_in_weight: float,
        bandwidth_out_weight: float,
    ) -> float:
        """Pulsar's newest 4-arg ``getMaxResourceUsageWithWeight(cpuW, directMemoryW, bwInW, bwOutW)``
        (no memory term). Used by the newest AvgShedder and LeastResourceUsageWithWeight."""
        return (
            max(
                self.cpu._percent * cpu_weight,
                self.direct_memory._percent * direct_memory_weight,
                self.bandwidth_in._percent * bandwidth_in_weight,
                self.bandwidth_out._percent * bandwidth_out_weight,
            )
            / 100
        )

    def max_resource_usage_with_weight_within_limit(
        self,
        cpu_weight: float,
        memory_weight: float,
        direct_memory_weight: float,
        bandwidth_in_weight: float,
        bandwidth_out_weight: float,
    ) -> float:
        """Pulsar ``getMaxResourceUsageWithWeightWithinLimit``: max of the weighted percents that are
        ``<= 100``, starting from 0 (only a 2.10-era ThresholdShedder used it)."""
        best = 0.0
        for value in (
            self.cpu._percent * cpu_weight,
            self.memory._percent * memory_weight,
            self.direct_memory._percent * direct_memory_weight,
            self.bandwidth_in._percent * bandwidth_in_weight,
            self.bandwidth_out._percent * bandwidth_out_weight,
        ):
            if best < value <= 100.0:
                best = value
        return best / 100

    def max_resource_usage_with_config_weights(self, config: LoadBalancerConfig) -> float:
        """The 5-arg weighted max with the config's weights (bandwidth weights via Pulsar's getter rule)."""
        return self.max_resource_usage_with_weight(
            config.load_balancer_cpu_resource_weight,
            config.load_balancer_memory_resource_weight,
            config.load_balancer_direct_memory_resource_weight,
            config.bandwidth_in_resource_weight,
            config.bandwidth_out_resource_weight,
        )

    @property
    def total_msg_rate(self) -> float:
        """``msgRateIn + msgRateOut`` (msg/s)."""
        return self.msg_rate_in + self.msg_rate_out

    @property
    def total_msg_throughput(self) -> float:
        """``msgThroughputIn + msgThroughputOut`` (bytes/s)."""
        return self.msg_throughput_in + self.msg_throughput_out

    # -- JSON ----------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "webServiceUrl": self.web_service_url,
            "webServiceUrlTls": self.web_service_url_tls,
            "pulsarServiceUrl": self.pulsar_service_url,
            "pulsarServiceUrlTls": self.pulsar_service_url_tls,
            "persistentTopicsEnabled": self.persistent_topics_enabled,
            "nonPersistentTopicsEnabled": self.non_persistent_topics_enabled,
            "cpu": self.cpu.to_json(),
            "memory": self.memory.to_json(),
            "directMemory": self.direct_memory.to_json(),
            "bandwidthIn": self.bandwidth_in.to_json(),
            "bandwidthOut": self.bandwidth_out.to_json(),
            "msgThroughputIn": self.msg_throughput_in,
            "msgThroughputOut": self.msg_throughput_out,
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "lastUpdate": self.last_update,
            "lastStats": {b: s.to_json() for b, s in self.last_stats.items()},
            "numTopics": self.num_topics,
            "numBundles": self.num_bundles,
            "numConsumers": self.num_consumers,
            "numProducers": self.num_producers,
            "bundles": list(self.bundles),
            "lastBundleGains": list(self.last_bundle_gains),
            "lastBundleLosses": list(self.last_bundle_losses),
            "brokerVersionString": self.broker_version_string,
            "loadReportType": self.LOAD_REPORT_TYPE,
        }


# ---------------------------------------------------------------------------------------------
# TimeAverageMessageData / BundleData / TimeAverageBrokerData
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class TimeAverageMessageData:
    """``TimeAverageMessageData``: a running average of a bundle's rates over up to ``max_samples`` samples.

    Mutable on purpose, like Pulsar's: :meth:`update` folds one sample in place. The arithmetic is
    ``numSamples = min(numSamples + 1, maxSamples)`` then, for each value,
    ``avg = ((numSamples - 1) * avg + sample) / numSamples`` - a cumulative mean until
    ``maxSamples`` is reached, then an EMA with alpha = 1/maxSamples. With ``numSamples == 0`` the
    first sample overwrites whatever default the average started from.
    """

    max_samples: int
    num_samples: int = 0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0

    @classmethod
    def with_default_stats(cls, max_samples: int, default_stats: NamespaceBundleStats) -> TimeAverageMessageData:
        """Pulsar's ``TimeAverageMessageData(maxSamples, defaultStats)``: values = the defaults, 0 samples."""
        return cls(
            max_samples=max_samples,
            num_samples=0,
            msg_throughput_in=default_stats.msg_throughput_in,
            msg_throughput_out=default_stats.msg_throughput_out,
            msg_rate_in=default_stats.msg_rate_in,
            msg_rate_out=default_stats.msg_rate_out,
        )

    def update(
        self,
        new_msg_throughput_in: float,
        new_msg_throughput_out: float,
        new_msg_rate_in: float,
        new_msg_rate_out: float,
    ) -> None:
        """Fold in one sample (Pulsar's argument order: throughput in, out, rate in, out)."""
        n = min(self.num_samples + 1, self.max_samples)
        self.num_samples = n
        k = n - 1
        self.msg_throughput_in = (k * self.msg_throughput_in + new_msg_throughput_in) / n
        self.msg_throughput_out = (k * self.msg_throughput_out + new_msg_throughput_out) / n
        self.msg_rate_in = (k * self.msg_rate_in + new_msg_rate_in) / n
        self.msg_rate_out = (k * self.msg_rate_out + new_msg_rate_out) / n

    def update_with_stats(self, sample: NamespaceBundleStats) -> None:
        """Pulsar's ``update(NamespaceBundleStats)``."""
        self.update(sample.msg_throughput_in, sample.msg_throughput_out, sample.msg_rate_in, sample.msg_rate_out)

    def total_msg_rate(self) -> float:
        """``msgRateIn + msgRateOut`` (msg/s)."""
        return self.msg_rate_in + self.msg_rate_out

    def total_msg_throughput(self) -> float:
        """``msgThroughputIn + msgThroughputOut`` (bytes/s)."""
        return self.msg_throughput_in + self.msg_throughput_out

    def copy(self) -> TimeAverageMessageData:
        return TimeAverageMessageData(
            self.max_samples,
            self.num_samples,
            self.msg_throughput_in,
            self.msg_throughput_out,
            self.msg_rate_in,
            self.msg_rate_out,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "maxSamples": self.max_samples,
            "numSamples": self.num_samples,
            "msgThroughputIn": self.msg_throughput_in,
            "msgThroughputOut": self.msg_throughput_out,
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
        }


@dataclass(slots=True)
class BundleData:
    """``BundleData``: a bundle's short-term (10-sample) and long-term (1000-sample) averages + topic count.

    JSON ``{"shortTermData": {...}, "longTermData": {...}, "topics": int}``; ``topics`` is optional
    (default 0; older Pulsar versions did not write it).
    """

    short_term_data: TimeAverageMessageData
    long_term_data: TimeAverageMessageData
    topics: int = 0

    @classmethod
    def new_default(cls) -> BundleData:
        """``new BundleData(10, 1000, defaultStats)``: both averages start at the 50 msg/s / 50000 B/s
        per-direction defaults with 0 samples, so the first real sample replaces them."""
        default_stats = NamespaceBundleStats.new_default()
        return cls(
            TimeAverageMessageData.with_default_stats(NUM_SHORT_SAMPLES, default_stats),
            TimeAverageMessageData.with_default_stats(NUM_LONG_SAMPLES, default_stats),
            0,
        )

    def update(self, stats: NamespaceBundleStats) -> None:
        """Fold one sample into both averages and set ``topics`` (Pulsar's ``(int) newSample.topics``)."""
        self.short_term_data.update_with_stats(stats)
        self.long_term_data.update_with_stats(stats)
        self.topics = int(stats.topics)

    def copy(self) -> BundleData:
        return BundleData(self.short_term_data.copy(), self.long_term_data.copy(), self.topics)

    def to_json(self) -> dict[str, Any]:
        return {
            "shortTermData": self.short_term_data.to_json(),
            "longTermData": self.long_term_data.to_json(),
            "topics": self.topics,
        }


@dataclass(slots=True)
class TimeAverageBrokerData:
    """``TimeAverageBrokerData``: a broker's short/long-term rates = sums over its bundles' averages."""

    short_term_msg_throughput_in: float = 0.0
    short_term_msg_throughput_out: float = 0.0
    short_term_msg_rate_in: float = 0.0
    short_term_msg_rate_out: float = 0.0
    long_term_msg_throughput_in: float = 0.0
    long_term_msg_throughput_out: float = 0.0
    long_term_msg_rate_in: float = 0.0
    long_term_msg_rate_out: float = 0.0

    @classmethod
    def from_bundles(
        cls,
        bundles: Iterable[str],
        bundle_data: Mapping[str, BundleData],
        default_stats: NamespaceBundleStats,
    ) -> TimeAverageBrokerData:
        """Pulsar's ``TimeAverageBrokerData(bundles, data, defaultStats)`` constructor."""
        result = cls()
        result.reset(bundles, bundle_data, default_stats)
        return result

    def reset(
        self,
        bundles: Iterable[str],
        bundle_data: Mapping[str, BundleData],
        default_stats: NamespaceBundleStats,
    ) -> None:
        """Recompute from scratch: for each bundle (in the given order) add its short- and long-term
        averages, or ``default_stats`` (to both) when the bundle has no BundleData."""
        sti = sto = sri = sro = lti = lto = lri = lro = 0.0
        for bundle in bundles:
            data = bundle_data.get(bundle)
            if data is None:
                sti += default_stats.msg_throughput_in
                sto += default_stats.msg_throughput_out
                sri += default_stats.msg_rate_in
                sro += default_stats.msg_rate_out
                lti += default_stats.msg_throughput_in
                lto += default_stats.msg_throughput_out
                lri += default_stats.msg_rate_in
                lro += default_stats.msg_rate_out
            else:
                s = data.short_term_data
                lt = data.long_term_data
                sti += s.msg_throughput_in
                sto += s.msg_throughput_out
                sri += s.msg_rate_in
                sro += s.msg_rate_out
                lti += lt.msg_throughput_in
                lto += lt.msg_throughput_out
                lri += lt.msg_rate_in
                lro += lt.msg_rate_out
        self.short_term_msg_throughput_in = sti
        self.short_term_msg_throughput_out = sto
        self.short_term_msg_rate_in = sri
        self.short_term_msg_rate_out = sro
        self.long_term_msg_throughput_in = lti
        self.long_term_msg_throughput_out = lto
        self.long_term_msg_rate_in = lri
        self.long_term_msg_rate_out = lro

    JSON_FIELDS = (
        ("shortTermMsgThroughputIn", "short_term_msg_throughput_in"),
        ("shortTermMsgThroughputOut", "short_term_msg_throughput_out"),
        ("shortTermMsgRateIn", "short_term_msg_rate_in"),
        ("shortTermMsgRateOut", "short_term_msg_rate_out"),
        ("longTermMsgThroughputIn", "long_term_msg_throughput_in"),
        ("longTermMsgThroughputOut", "long_term_msg_throughput_out"),
        ("longTermMsgRateIn", "long_term_msg_rate_in"),
        ("longTermMsgRateOut", "long_term_msg_rate_out"),
    )

    def to_json(self) -> dict[str, float]:
        return {key: getattr(self, attr) for key, attr in self.JSON_FIELDS}


# ---------------------------------------------------------------------------------------------
# BrokerLoadData (extensible load manager)
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class BrokerLoadData:
    """``BrokerLoadData`` (extensible load manager): resources, rates and the derived load features.

    * ``max_resource_usage`` = ``max(cpu%, directMemory%, bwIn%, bwOut%) / 100`` (memory skipped),
      in float32 like Java's ``LocalBrokerData.max(float...) / 100``.
    * ``weighted_max_ema`` = first update (``updatedAt == 0``): the weighted max; afterwards
      ``ema * h + (1 - h) * weightedMax`` with ``h = loadBalancerHistoryResourcePercentage``. The
      weighted max is the 5-resource one with the config weights (bandwidth weights via Pulsar's
      new-or-deprecated-key getter). No clamp at 1.0.
    * ``msg_throughput_ema``: the newest Pulsar keeps it for TransferShedder's under-load test; its
      exact formula could not be read. We use the same EMA rule on ``msgThroughputIn + Out``
      (= the sum on the first update, which is what Pulsar's tests show).
    * ``updated_at`` is explicit input (``now_ms``), not a hidden clock.

    JSON: ``cpu, bandwidthIn, bandwidthOut`` required (``memory, directMemory`` default 0%),
    ``msgThroughputIn/Out, msgRateIn/Out, bundleCount, weightedMaxEMA, updatedAt`` required;
    ``topics`` (0), ``reportedAt`` (0), ``maxResourceUsage`` (computed from the resources) and
    ``msgThroughputEMA`` (in+out) optional.
    """

    cpu: ResourceUsage = _ZERO_USAGE
    memory: ResourceUsage = _ZERO_USAGE
    direct_memory: ResourceUsage = _ZERO_USAGE
    bandwidth_in: ResourceUsage = _ZERO_USAGE
    bandwidth_out: ResourceUsage = _ZERO_USAGE
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    bundle_count: int = 0
    topics: int = 0
    max_resource_usage: float = DEFAULT_RESOURCE_USAGE
    weighted_max_ema: float = DEFAULT_RESOURCE_USAGE
    msg_throughput_ema: float = 0.0
    updated_at: int = 0
    reported_at: int = 0

    def update(
        self,
        usage: SystemResourceUsage,
        msg_throughput_in: float,
        msg_throughput_out: float,
        msg_rate_in: float,
        msg_rate_out: float,
        bundle_count: int,
        topics: int,
        config: LoadBalancerConfig,
        *,
        now_ms: int,
    ) -> None:
        """Pulsar's ``update(usage, thrIn, thrOut, rateIn, rateOut, bundleCount, topics, conf)``."""
        self.cpu = usage.cpu
        self.memory = usage.memory
        self.direct_memory = usage.direct_memory
        self.bandwidth_in = usage.bandwidth_in
        self.bandwidth_out = usage.bandwidth_out
        self.msg_throughput_in = msg_throughput_in
        self.msg_throughput_out = msg_throughput_out
        self.msg_rate_in = msg_rate_in
        self.msg_rate_out = msg_rate_out
        self.bundle_count = bundle_count
        self.topics = topics
        self.max_resource_usage = max_f32_percent(self.cpu, self.direct_memory, self.bandwidth_in, self.bandwidth_out)
        h = config.load_balancer_history_resource_percentage
        weighted_max = self.weighted_max(config)
        throughput = msg_throughput_in + msg_throughput_out
        if self.updated_at == 0:
            self.weighted_max_ema = weighted_max
            self.msg_throughput_ema = throughput
        else:
            self.weighted_max_ema = self.weighted_max_ema * h + (1 - h) * weighted_max
            self.msg_throughput_ema = self.msg_throughput_ema * h + (1 - h) * throughput
        self.updated_at = now_ms

    def weighted_max(self, config: LoadBalancerConfig) -> float:
        """``getMaxResourceUsageWithWeight`` (5 resources, config weights) as a fraction."""
        return (
            max(
                self.cpu._percent * config.load_balancer_cpu_resource_weight,
                self.memory._percent * config.load_balancer_memory_resource_weight,
                self.direct_memory._percent * config.load_balancer_direct_memory_resource_weight,
                self.bandwidth_in._percent * config.bandwidth_in_resource_weight,
                self.bandwidth_out._percent * config.bandwidth_out_resource_weight,
            )
            / 100
        )

    @property
    def total_msg_throughput(self) -> float:
        """``msgThroughputIn + msgThroughputOut`` (bytes/s)."""
        return self.msg_throughput_in + self.msg_throughput_out

    @property
    def total_msg_rate(self) -> float:
        """``msgRateIn + msgRateOut`` (msg/s)."""
        return self.msg_rate_in + self.msg_rate_out

    def copy(self) -> BrokerLoadData:
        return BrokerLoadData(
            self.cpu,
            self.memory,
            self.direct_memory,
            self.bandwidth_in,
            self.bandwidth_out,
            self.msg_throughput_in,
            self.msg_throughput_out,
            self.msg_rate_in,
            self.msg_rate_out,
            self.bundle_count,
            self.topics,
            self.max_resource_usage,
            self.weighted_max_ema,
            self.msg_throughput_ema,
            self.updated_at,
            self.reported_at,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu.to_json(),
            "memory": self.memory.to_json(),
            "directMemory": self.direct_memory.to_json(),
            "bandwidthIn": self.bandwidth_in.to_json(),
            "bandwidthOut": self.bandwidth_out.to_json(),
            "msgThroughputIn": self.msg_throughput_in,
            "msgThroughputOut": self.msg_throughput_out,
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "bundleCount": self.bundle_count,
            "topics": self.topics,
            "maxResourceUsage": self.max_resource_usage,
            "weightedMaxEMA": self.weighted_max_ema,
            "msgThroughputEMA": self.msg_throughput_ema,
            "updatedAt": self.updated_at,
            "reportedAt": self.reported_at,
        }


__all__ = [
    "DEFAULT_MESSAGE_RATE",
    "DEFAULT_MESSAGE_THROUGHPUT",
    "DEFAULT_RESOURCE_USAGE",
    "NUM_LONG_SAMPLES",
    "NUM_SHORT_SAMPLES",
    "BrokerLoadData",
    "BundleData",
    "LocalBrokerData",
    "NamespaceBundleStats",
    "ResourceUsage",
    "SystemResourceUsage",
    "TimeAverageBrokerData",
    "TimeAverageMessageData",
    "f32",
    "max_f32_percent",
]
