"""Pulsar's four bundle-split algorithms as pure functions, plus a registry by Pulsar name.

Sources (apache/pulsar ``pulsar-broker/src/main/java/org/apache/pulsar/common/naming/``):
``RangeEquallyDivideBundleSplitAlgorithm``, ``TopicCountEquallyDivideBundleSplitAlgorithm``,
``SpecifiedPositionsBundleSplitAlgorithm``, ``FlowOrQpsEquallyDivideBundleSplitAlgorithm`` and their
tests. Each computes the *split boundaries* of one bundle; the children are then made by
:func:`pulsar_rebalance.core.pulsar.bundles.split_range` (``NamespaceBundleFactory.splitBundles``).

Common signature::

    algorithm(bundle, *, topics, positions, config) -> list[int] | None

* ``topics`` are the bundle's own topics (Pulsar's ``getOwnedTopicListForNamespaceBundle``), full
  names, hashed with crc32: either a sequence of names or a mapping name -> :class:`TopicRates`
  (only ``flow_or_qps_equally_divide`` reads the rates; a ``None`` value means the topic has no
  stats, which Pulsar skips).
* ``None`` means Pulsar's "no split": ``NamespaceService`` logs "No valid boundary found" and leaves
  the bundle alone. Pulsar's flow/qps algorithm can also return an *empty* list, which
  ``NamespaceService`` treats exactly like ``null``; we return ``None`` for both.
* Arithmetic is Java ``long`` arithmetic on non-negative values (``//`` = Java ``/``).

:func:`explain_split` returns the same boundaries with a human-readable reason (numbers included),
which the ``split`` JSON contract and plan reviewers use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pulsar_rebalance.core.pulsar.bundles import BundleRange, format_boundary, topic_hash
from pulsar_rebalance.core.pulsar.config import MIBI, SPLIT_ALGORITHM_NAMES
from pulsar_rebalance.errors import ScenarioError

if TYPE_CHECKING:
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig


@dataclass(frozen=True, slots=True)
class TopicRates:
    """The per-topic stats flow_or_qps reads (``TopicStatsImpl``): msg/s and bytes/s, in and out."""

    msg_rate_in: float
    msg_rate_out: float
    msg_throughput_in: float
    msg_throughput_out: float

    @property
    def msg_rate(self) -> float:
        """``msgRateIn + msgRateOut`` (msg/s)."""
        return self.msg_rate_in + self.msg_rate_out

    @property
    def throughput(self) -> float:
        """``msgThroughputIn + msgThroughputOut`` (bytes/s)."""
        return self.msg_throughput_in + self.msg_throughput_out

    def to_json(self) -> dict[str, float]:
        return {
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "msgThroughputIn": self.msg_throughput_in,
            "msgThroughputOut": self.msg_throughput_out,
        }


Topics = Mapping[str, TopicRates | None] | Sequence[str]


@dataclass(frozen=True, slots=True)
class SplitOutcome:
    """An algorithm's answer: ``boundaries`` (``None`` = no split) and why, with the numbers."""

    boundaries: list[int] | None
    reason: str


class SplitAlgorithm(Protocol):
    def __call__(
        self,
        bundle: BundleRange,
        *,
        topics: Topics = (),
        positions: Sequence[int] | None = None,
        config: LoadBalancerConfig,
    ) -> list[int] | None: ...


def _num(x: float) -> str:
    """A number for a reason string: integral values without a fraction, others exactly (repr)."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def _fmt_list(values: Sequence[int]) -> str:
    return "[" + ", ".join(format_boundary(v) if 0 <= v <= 0xFFFFFFFF else str(v) for v in values) + "]"


# ---------------------------------------------------------------------------------------------
# range_equally_divide
# ---------------------------------------------------------------------------------------------
def explain_range_equally_divide(
    bundle: BundleRange, *, topics: Topics = (), positions: Sequence[int] | None = None, config: LoadBalancerConfig
) -> SplitOutcome:
    """``[lower + (upper - lower) / 2]``; ignores topics. Full range -> ``0x7fffffff`` (not 0x80000000)."""
    boundary = bundle.lower + (bundle.upper - bundle.lower) // 2
    return SplitOutcome(
        [boundary],
        f"range_equally_divide: midpoint of {bundle.name} = {format_boundary(boundary)} "
        "(lower + (upper - lower) / 2, integer division)",
    )


# ---------------------------------------------------------------------------------------------
# topic_count_equally_divide
# ---------------------------------------------------------------------------------------------
def explain_topic_count_equally_divide(
    bundle: BundleRange, *, topics: Topics = (), positions: Sequence[int] | None = None, config: LoadBalancerConfig
) -> SplitOutcome:
    """Midpoint between the two middle topic hashes (``splitStart = h[max(n/2-1, 0)]``,
    ``splitEnd = h[n/2]``, ``start + (end - start) / 2``, no +1). ``n <= 1`` topics -> no split.
    Duplicate hashes are kept (Pulsar sorts a list, not a set)."""
    names = list(topics)
    n = len(names)
    if n <= 1:
        return SplitOutcome(None, f"topic_count_equally_divide: {n} topic(s) in the bundle; Pulsar needs at least 2")
    hashes = sorted(topic_hash(t) for t in names)
    start = hashes[max(n // 2 - 1, 0)]
    end = hashes[n // 2]
    middle = start + (end - start) // 2
    return SplitOutcome(
        [middle],
        f"topic_count_equally_divide: {n} topics; midpoint of hashes {format_boundary(start)} and "
        f"{format_boundary(end)} = {format_boundary(middle)} ({n // 2} topic(s) below it in hash order)",
    )


# ---------------------------------------------------------------------------------------------
# specified_positions_divide
# ---------------------------------------------------------------------------------------------
def explain_specified_positions_divide(
    bundle: BundleRange, *, topics: Topics = (), positions: Sequence[int] | None = None, config: LoadBalancerConfig
) -> SplitOutcome:
    """The caller's positions, sorted, keeping those strictly inside the bundle.

    Empty or missing positions -> ``ScenarioError("positions")`` (Pulsar throws
    ``IllegalArgumentException("SplitBoundaries can't be empty")`` before looking at topics).
    ``<= 1`` topic, or no position strictly inside ``(lower, upper)`` -> no split. Duplicates are
    kept, as in Pulsar (the split itself then fails; see ``split_range``).
    """
    if not positions:
        raise ScenarioError("positions", "SplitBoundaries can't be empty (specified_positions_divide needs positions)")
    ordered = sorted(positions)
    n = len(list(topics))
    if n <= 1:
        return SplitOutcome(None, f"specified_positions_divide: {n} topic(s) in the bundle; Pulsar needs at least 2")
    inside = [p for p in ordered if bundle.lower < p < bundle.upper]
    if not inside:
        return SplitOutcome(
            None,
            f"specified_positions_divide: none of the positions {_fmt_list(ordered)} lies strictly inside {bundle.name}",
        )
    dropped = len(ordered) - len(inside)
    note = f"; {dropped} position(s) outside the bundle ignored" if dropped else ""
    return SplitOutcome(inside, f"specified_positions_divide: positions {_fmt_list(inside)}{note}")


# ---------------------------------------------------------------------------------------------
# flow_or_qps_equally_divide
# ---------------------------------------------------------------------------------------------
def explain_flow_or_qps_equally_divide(
    bundle: BundleRange, *, topics: Topics = (), positions: Sequence[int] | None = None, config: LoadBalancerConfig
) -> SplitOutcome:
    """Greedy first-fit along hash order so each child stays within the bundle msg-rate/bandwidth limits.

    Pulsar's ``FlowOrQpsEquallyDivideBundleSplitAlgorithm``, step by step:

    * ``topics.size() <= 1`` -> no split. Topics without stats, and topics with
      ``msgRate <= 0 && throughput <= 0``, are skipped. Stats are keyed by hash in a ``HashMap``:
      two topics with the same hash collapse to the later one, while the hash *list* keeps both.
    * No split if fewer than 2 distinct hashes remain, or if the bundle's totals are below both
      ``maxMsgRate * (1 + d)`` and ``maxBandwidthMbytes * MiB * (1 + d)``, with
      ``d = flowOrQpsDifferenceThresholdPercentage / 100``.
    * Walk the sorted hashes with a running (rate, throughput) starting at the first topic; at topic
      ``i``, if the running total already exceeds a limit, or adding topic ``i`` would exceed one
      (strict ``>``), emit ``h[i-1] + (h[i] - h[i-1]) / 2 + 1`` (note the **+1**, unlike
      topic_count) and restart the running total at topic ``i``; otherwise add it.
    """
    if not isinstance(topics, Mapping):
        names = list(topics)
        if len(names) <= 1:
            return SplitOutcome(
                None, f"flow_or_qps_equally_divide: {len(names)} topic(s) in the bundle; Pulsar needs at least 2"
            )
        return SplitOutcome(None, "flow_or_qps_equally_divide: no topic has stats (topics given without rates)")
    if len(topics) <= 1:
        return SplitOutcome(
            None, f"flow_or_qps_equally_divide: {len(topics)} topic(s) in the bundle; Pulsar needs at least 2"
        )
    max_rate = config.load_balancer_namespace_bundle_max_msg_rate
    max_bw = config.load_balancer_namespace_bundle_max_bandwidth_mbytes * MIBI
    diff = config.flow_or_qps_difference_threshold_percentage / 100.0

    bundle_rate = 0.0
    bundle_thr = 0.0
    info: dict[int, tuple[float, float]] = {}
    hash_list: list[int] = []
    for topic, rates in topics.items():
        if rates is None:
            continue
        rate = rates.msg_rate_in + rates.msg_rate_out
        thr = rates.msg_throughput_in + rates.msg_throughput_out
        if rate <= 0 and thr <= 0:
            continue  # empty topic
        h = topic_hash(topic)
        hash_list.append(h)
        info[h] = (rate, thr)
        bundle_thr += thr
        bundle_rate += rate

    if len(info) < 2:
        return SplitOutcome(
            None,
            f"flow_or_qps_equally_divide: {len(info)} topic(s) with traffic (distinct hashes); Pulsar needs at least 2",
        )
    rate_limit = max_rate * (1 + diff)
    thr_limit = max_bw * (1 + diff)
    if bundle_rate < rate_limit and bundle_thr < thr_limit:
        return SplitOutcome(
            None,
            f"flow_or_qps_equally_divide: bundle msg rate {_num(bundle_rate)} msg/s < {_num(rate_limit)} "
            f"(loadBalancerNamespaceBundleMaxMsgRate {max_rate} x {1 + diff:g}) and throughput {_num(bundle_thr)} B/s < "
            f"{_num(thr_limit)} (loadBalancerNamespaceBundleMaxBandwidthMbytes "
            f"{config.load_balancer_namespace_bundle_max_bandwidth_mbytes} MiB x {1 + diff:g})",
        )
    hash_list.sort()
    rate_tmp, thr_tmp = info[hash_list[0]]
    results: list[int] = []
    for i in range(1, len(hash_list)):
        h = hash_list[i]
        rate, thr = info[h]
        if rate_tmp > max_rate or thr_tmp > max_bw or rate_tmp + rate > max_rate or thr_tmp + thr > max_bw:
            start = hash_list[i - 1]
            results.append(start + (h - start) // 2 + 1)
            rate_tmp, thr_tmp = rate, thr
        else:
            rate_tmp += rate
            thr_tmp += thr
    limits = (
        f"limits {max_rate} msg/s and {config.load_balancer_namespace_bundle_max_bandwidth_mbytes} MiB/s "
        f"({max_bw} B/s) per child; bundle totals {_num(bundle_rate)} msg/s, {_num(bundle_thr)} B/s"
    )
    if not results:
        # Pulsar returns an empty list here; NamespaceService treats it like null (no split).
        return SplitOutcome(None, f"flow_or_qps_equally_divide: no child boundary needed ({limits})")
    return SplitOutcome(
        results,
        f"flow_or_qps_equally_divide: {len(results)} boundar{'y' if len(results) == 1 else 'ies'} "
        f"{_fmt_list(results)} ({limits}; each boundary = previous hash + half the gap + 1)",
    )


# ---------------------------------------------------------------------------------------------
# public functions and registry
# ---------------------------------------------------------------------------------------------
def range_equally_divide(
    bundle: BundleRange, *, topics: Topics = (), positions: Sequence[int] | None = None, config: LoadBalancerConfig
) -> list[int] | None:
    """See :func:`explain_range_equally_divide`."""
    return explain_range_equally_divide(bundle, topics=topics, positions=positions, config=config).boundaries


def topic_count_equally_divide(
    bundle: BundleRange, *, topics: Topics = (), positions: Sequence[int] | None = None, config: LoadBalancerConfig
) -> list[int] | None:
    """See :func:`explain_topic_count_equally_divide`."""
    return explain_topic_count_equally_divide(bundle, topics=topics, positions=positions, config=config).boundaries


def specified_positions_divide(
    bundle: BundleRange, *, topics: Topics = (), positions: Sequence[int] | None = None, config: LoadBalancerConfig
) -> list[int] | None:
    """See :func:`explain_specified_positions_divide`."""
    return explain_specified_positions_divide(bundle, topics=topics, positions=positions, config=config).boundaries


def flow_or_qps_equally_divide(
    bundle: BundleRange, *, topics: Topics = (), positions: Sequence[int] | None = None, config: LoadBalancerConfig
) -> list[int] | None:
    """See :func:`explain_flow_or_qps_equally_divide`."""
    return explain_flow_or_qps_equally_divide(bundle, topics=topics, positions=positions, config=config).boundaries


SPLIT_ALGORITHMS: Mapping[str, SplitAlgorithm] = {
    "range_equally_divide": range_equally_divide,
    "topic_count_equally_divide": topic_count_equally_divide,
    "specified_positions_divide": specified_positions_divide,
    "flow_or_qps_equally_divide": flow_or_qps_equally_divide,
}
"""Pulsar name -> algorithm (``NamespaceBundleSplitAlgorithm.of(name)``)."""

_EXPLAINERS: Mapping[str, Callable[..., SplitOutcome]] = {
    "range_equally_divide": explain_range_equally_divide,
    "topic_count_equally_divide": explain_topic_count_equally_divide,
    "specified_positions_divide": explain_specified_positions_divide,
    "flow_or_qps_equally_divide": explain_flow_or_qps_equally_divide,
}
assert tuple(SPLIT_ALGORITHMS) == SPLIT_ALGORITHM_NAMES == tuple(_EXPLAINERS)


def explain_split(
    algorithm: str,
    bundle: BundleRange,
    *,
    topics: Topics = (),
    positions: Sequence[int] | None = None,
    config: LoadBalancerConfig,
) -> SplitOutcome:
    """Run the named algorithm and return its boundaries with a reason. Unknown name -> ``ValueError``."""
    try:
        explainer = _EXPLAINERS[algorithm]
    except KeyError:
        raise ValueError(
            f"unknown split algorithm {algorithm!r}; supported: {', '.join(SPLIT_ALGORITHM_NAMES)}"
        ) from None
    return explainer(bundle, topics=topics, positions=positions, config=config)


def get_split_boundaries(
    algorithm: str,
    bundle: BundleRange,
    *,
    topics: Topics = (),
    positions: Sequence[int] | None = None,
    config: LoadBalancerConfig,
) -> list[int] | None:
    """Boundaries from the named algorithm (``None`` = no split)."""
    return explain_split(algorithm, bundle, topics=topics, positions=positions, config=config).boundaries
