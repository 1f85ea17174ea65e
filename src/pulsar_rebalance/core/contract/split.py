"""The ``split`` and ``bundles`` JSON contracts (``pulsar-rebalance split|bundles SCENARIO``).

``split_scenario`` - what Pulsar would do when asked to split one bundle::

    in:  {"algorithm": "flow_or_qps_equally_divide",          # optional: config's default algorithm
          "bundle": "0x00000000_0x80000000",                   # or "tenant/ns/0x.._0x.."
          "topics": {"persistent://t/ns/a": {"msgRateIn": 1, "msgRateOut": 2,
                                             "msgThroughputIn": 3, "msgThroughputOut": 4}, ...}
                    | ["persistent://t/ns/a", ...],            # optional, default []
          "positions": ["0x33000000", 123, ...],               # specified_positions_divide only
          "config": {"loadBalancerNamespaceBundleMaxMsgRate": 450, ...}}   # optional broker.conf keys
    out: {"algorithm": ..., "bundle": ..., "split": true|false,
          "boundaries": ["0x...", ...] | null,   # what the algorithm returned; null = "no split"
          "children": ["0x.._0x..", ...],       # the bundles covering the range afterwards
          "reason": "..."}

When there is no split, ``children`` is the input bundle alone - the namespace's bundles are
unchanged. When the algorithm returns boundaries that Pulsar's factory then rejects (e.g. a
boundary equal to the bundle's upper bound), ``split`` is false, ``children`` is the bundle alone,
``boundaries`` shows what the algorithm returned and ``reason`` says why the split fails. Children
are given in the same form as the input bundle (range only, or ``tenant/ns/range``).

``bundles_scenario`` - the topic -> bundle mapping of a namespace::

    in:  {"boundaries": ["0x00000000", ...] | "numBundles": N, "topics": ["persistent://...", ...]}
    out: {"boundaries": [...], "numBundles": N, "bundles": ["0x.._0x..", ...],
          "topics": {"<topic>": "0x.._0x.."}, "hashes": {"<topic>": "0x<crc32>"}}

Every input error is a :class:`ScenarioError` naming the field (``boundaries[2]``,
``topics.persistent://t/n/x.msgRateIn``, ``config.loadBalancerFoo``...). Topic names must be full
names (``persistent://tenant/ns/topic``): Pulsar hashes the full name. In ``split`` every topic must
hash into the bundle (Pulsar only passes the bundle's own topics to the algorithms) and, when the
bundle is given with its namespace, belong to that namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulsar_rebalance.core.contract.json_input import field_path, reject_unknown_keys, require_object
from pulsar_rebalance.core.contract.load_json import topic_rates_from_json
from pulsar_rebalance.core.pulsar.bundles import (
    BundleRange,
    NamespaceBundles,
    default_boundaries,
    format_boundary,
    parse_long,
    split_full_name,
    split_range,
    topic_hash,
    topic_namespace,
)
from pulsar_rebalance.core.pulsar.config import SPLIT_ALGORITHM_NAMES, LoadBalancerConfig
from pulsar_rebalance.core.pulsar.split_algorithms import TopicRates, explain_split
from pulsar_rebalance.errors import ConfigError, ScenarioError

SPLIT_KEYS = frozenset({"algorithm", "bundle", "topics", "positions", "config"})
BUNDLES_KEYS = frozenset({"boundaries", "numBundles", "topics"})
MAX_CONTRACT_BUNDLES = 1_000_000
"""``numBundles`` cap in the ``bundles`` contract (Pulsar allows up to 2^32; we refuse to build a
list of billions of boundaries)."""


def load_config(raw: object, path: str = "config") -> LoadBalancerConfig:
    """Parse an optional ``config`` member; ``ConfigError`` becomes ``ScenarioError("config.<key>")``."""
    if raw is None:
        return LoadBalancerConfig()
    obj = require_object(raw, path)
    try:
        return LoadBalancerConfig.from_mapping(obj)
    except ConfigError as exc:
        raise ScenarioError(field_path(path, exc.key) if exc.key else path, str(exc)) from None


def _check_topic_name(topic: object, field: str, namespace: str | None) -> str:
    if not isinstance(topic, str):
        raise ScenarioError(field, f"expected a topic name string, got {topic!r}")
    try:
        topic_ns = topic_namespace(topic)
    except ValueError as exc:
        raise ScenarioError(field, str(exc)) from None
    if namespace is not None and topic_ns != namespace:
        raise ScenarioError(
            field, f"topic belongs to namespace {topic_ns!r}, not to the bundle's namespace {namespace!r}"
        )
    return topic


def _parse_split_topics(
    raw: object, bundle: BundleRange, namespace: str | None
) -> Mapping[str, TopicRates] | list[str]:
    def _in_bundle(topic: str, field: str) -> None:
        h = topic_hash(topic)
        if not bundle.contains(h):
            raise ScenarioError(
                field,
                f"topic hash {format_boundary(h)} is outside bundle {bundle.name}; only the bundle's own "
                "topics take part in a split",
            )

    if isinstance(raw, Mapping):
        rates: dict[str, TopicRates] = {}
        for topic, value in raw.items():
            field = f"topics.{topic}"
            _check_topic_name(topic, field, namespace)
            _in_bundle(topic, field)
            rates[topic] = topic_rates_from_json(value, field)
        return rates
    if isinstance(raw, (list, tuple)):
        names: list[str] = []
        seen: set[str] = set()
        for i, topic in enumerate(raw):
            field = f"topics[{i}]"
            _check_topic_name(topic, field, namespace)
            if topic in seen:
                raise ScenarioError(field, f"duplicate topic {topic!r}")
            seen.add(topic)
            _in_bundle(topic, field)
            names.append(topic)
        return names
    raise ScenarioError("topics", "expected an object of topic -> rates, or an array of topic names")


def split_scenario(doc: dict[str, Any]) -> dict[str, Any]:
    """Run a split algorithm on one bundle and report boundaries, children and the reason."""
    doc_obj = require_object(doc, "")
    reject_unknown_keys(doc_obj, SPLIT_KEYS, "")
    config = load_config(doc_obj.get("config"))

    # bundle: "0x.._0x.." or "tenant/ns/0x.._0x.."
    raw_bundle = doc_obj.get("bundle")
    if raw_bundle is None:
        raise ScenarioError("bundle", "required: a bundle range like '0x00000000_0xffffffff' or 'tenant/ns/<range>'")
    if not isinstance(raw_bundle, str):
        raise ScenarioError("bundle", f"expected a string, got {raw_bundle!r}")
    namespace: str | None = None
    range_text = raw_bundle
    if "/" in raw_bundle:
        try:
            namespace, range_text = split_full_name(raw_bundle)
        except ValueError as exc:
            raise ScenarioError("bundle", str(exc)) from None
    bundle = BundleRange.parse(range_text, "bundle")

    # algorithm: Pulsar uses defaultNamespaceBundleSplitAlgorithm when none is given, and rejects
    # names outside supportedNamespaceBundleSplitAlgorithms.
    algorithm = doc_obj.get("algorithm", config.default_namespace_bundle_split_algorithm)
    if not isinstance(algorithm, str) or algorithm not in SPLIT_ALGORITHM_NAMES:
        raise ScenarioError(
            "algorithm", f"unknown split algorithm {algorithm!r}; supported: {', '.join(SPLIT_ALGORITHM_NAMES)}"
        )
    if algorithm not in config.supported_namespace_bundle_split_algorithms:
        raise ScenarioError(
            "algorithm",
            f"{algorithm!r} is not in supportedNamespaceBundleSplitAlgorithms "
            f"{list(config.supported_namespace_bundle_split_algorithms)}",
        )

    topics = _parse_split_topics(doc_obj.get("topics", []), bundle, namespace)
    if algorithm == "flow_or_qps_equally_divide" and not isinstance(topics, Mapping) and topics:
        raise ScenarioError(
            "topics",
            "flow_or_qps_equally_divide needs per-topic rates: give topics as an object "
            '{"<topic>": {"msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"}}',
        )

    positions: list[int] | None = None
    if "positions" in doc_obj:
        if algorithm != "specified_positions_divide":
            raise ScenarioError("positions", f"positions are only used by specified_positions_divide, not {algorithm}")
        raw_positions = doc_obj["positions"]
        if not isinstance(raw_positions, (list, tuple)):
            raise ScenarioError("positions", f"expected an array of positions, got {raw_positions!r}")
        positions = [parse_long(p, f"positions[{i}]") for i, p in enumerate(raw_positions)]

    outcome = explain_split(algorithm, bundle, topics=topics, positions=positions, config=config)
    prefix = f"{namespace}/" if namespace is not None else ""
    result: dict[str, Any] = {
        "algorithm": algorithm,
        "bundle": prefix + bundle.name,
        "split": False,
        "boundaries": None,
        "children": [prefix + bundle.name],
        "reason": outcome.reason,
    }
    if outcome.boundaries is None:
        return result
    result["boundaries"] = [_format_any(b) for b in outcome.boundaries]
    try:
        children = split_range(bundle, boundaries=outcome.boundaries)
    except ValueError as exc:
        # Pulsar's factory throws IllegalArgumentException (REST 412) and the bundle stays as is.
        result["reason"] = f"{outcome.reason}; but the split fails: {exc}"
        return result
    result["split"] = True
    result["children"] = [prefix + child.name for child in children]
    return result


def _format_any(value: int) -> str:
    return format_boundary(value) if 0 <= value <= 0xFFFFFFFF else str(value)


def bundles_scenario(doc: dict[str, Any]) -> dict[str, Any]:
    """Map topics to the bundles of a namespace given by its boundaries or its bundle count."""
    doc_obj = require_object(doc, "")
    reject_unknown_keys(doc_obj, BUNDLES_KEYS, "")
    has_boundaries = "boundaries" in doc_obj
    has_num = "numBundles" in doc_obj
    if not has_boundaries and not has_num:
        raise ScenarioError("boundaries", 'give "boundaries" (an array) or "numBundles" (an integer)')
    bundles: NamespaceBundles | None = None
    if has_boundaries:
        bundles = NamespaceBundles.parse(doc_obj["boundaries"], "boundaries")
    if has_num:
        num = doc_obj["numBundles"]
        if isinstance(num, bool) or not isinstance(num, int):
            raise ScenarioError("numBundles", f"expected an integer, got {num!r}")
        if bundles is not None:
            if num != len(bundles):
                raise ScenarioError(
                    "numBundles", f"{num} does not match the {len(bundles)} bundles the boundaries define"
                )
        else:
            if not 1 <= num <= MAX_CONTRACT_BUNDLES:
                raise ScenarioError("numBundles", f"must be in [1, {MAX_CONTRACT_BUNDLES}], got {num}")
            bundles = NamespaceBundles(default_boundaries(num))
    assert bundles is not None

    raw_topics = doc_obj.get("topics", [])
    if not isinstance(raw_topics, (list, tuple)):
        raise ScenarioError("topics", f"expected an array of topic names, got {type(raw_topics).__name__}")
    mapping: dict[str, str] = {}
    hashes: dict[str, str] = {}
    for i, topic in enumerate(raw_topics):
        field = f"topics[{i}]"
        _check_topic_name(topic, field, None)
        h = topic_hash(topic)
        try:
            found = bundles.find(h)
        except ValueError as exc:
            raise ScenarioError(field, f"{topic!r}: {exc}") from None
        mapping[topic] = found.name
        hashes[topic] = format_boundary(h)
    data = bundles.to_bundles_data()
    return {
        "boundaries": data["boundaries"],
        "numBundles": data["numBundles"],
        "bundles": [r.name for r in bundles.ranges],
        "topics": mapping,
        "hashes": hashes,
    }


__all__ = ["bundles_scenario", "load_config", "split_scenario"]
