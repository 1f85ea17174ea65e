"""The in-memory state of a simulated Pulsar cluster, with Pulsar's semantics.

What is modelled (and what each piece mirrors in Pulsar):

* **Bundles** — per namespace, a sorted list of hash boundaries ``p0 < p1 < ... < pn`` (Pulsar's
  ``LocalPolicies.bundles``); bundle ``i`` is ``[p_i, p_{i+1})`` and the last one is closed
  ``[p_{n-1}, p_n]``. Range strings are ``0x%08x_0x%08x``; full names ``tenant/ns/<range>``.
* **Topics** — full names (``persistent://tenant/ns/topic``, partitions hashed one by one as
  ``...-partition-N``) mapped to bundles by ``zlib.crc32(name)`` (= Guava ``Hashing.crc32()``) and
  "largest boundary <= hash" (``NamespaceBundles.getBundle``). A hash equal to ``0xffffffff`` goes to
  the last bundle (``NamespaceBundle.includes`` semantics; Pulsar's ``getBundle`` would throw there).
* **Ownership** — every bundle has exactly one owner broker. Real Pulsar leaves an unloaded bundle
  unowned until the next lookup; here clients "reconnect" instantly, so unload re-places the bundle
  at once (see :meth:`ClusterState.unload_bundle`).
* **Placement constraints** — namespace isolation policies, failure domains and anti-affinity groups,
  held as the admin API returns them (``NamespaceIsolationData``, ``FailureDomain``, the group string)
  and set through the constructor, the state file or the admin endpoints. Every placement of a bundle
  (unload, split with unload, a dead broker's bundles) starts from
  :func:`pulsar_rebalance.core.pulsar.policies.apply_namespace_policies` and keeps the brokers owning the
  fewest namespaces of the bundle's anti-affinity group, as ``ModularLoadManagerImpl.selectBroker`` does.
* **Load** — DERIVED from ownership every time a report is produced; nothing is cached. Broker rates
  are sums over owned bundles (``LocalBrokerData.updateBundleData``), and system usage follows the
  model below. Bundles without topics are absent from ``lastStats`` exactly as in Pulsar (bundle
  stats are built by iterating loaded topics).

Load model (units as Pulsar reports them, see ``LinuxBrokerHostUsageImpl`` / ``LoadManagerShared``): the
closed-loop model's, one of :mod:`pulsar_rebalance.simulator.load_models` (``load_model``, default
``linear``; the held-out models and the random family ``random-<k>`` too), applied to the broker's summed
bundle stats exactly as the closed loop applies it, so both simulators report the same usage for the same
traffic (``tests/simulator/test_http_load_models.py``):

* ``cpu`` and ``bandwidthIn/Out``: the load model's. Under ``linear``: limit = ``cores * 100`` (percent of one
  core per core), usage = ``10 + 100 * (msgRateIn + msgRateOut) / 40000 + 100 * (throughputIn + Out) / 200 MiB``
  (10 % of a core idle, one full core per 40,000 msg/s and one per 200 MiB/s); NIC usage in Kbit/s =
  ``bytes/s * 8 / 1024``, limit = NIC speed in Mbit/s ``* 1024``.
* The machine the model sees is the broker's spec (``cores``, ``nic_speed_mbps``) as the model configures
  it, as the closed loop does: a model may scale the NIC (``in-out-fanout``, ``convex-cpu``: 10 Gbit/s;
  ``nic-bound``: 0.4x) or the cores (``heterogeneous-capacity``), or give a broker a hidden speed (the
  random family), keyed on the broker's *machine key* (``broker-<i>`` for the i-th broker at creation,
  its closed-loop id for a scenario's broker, :meth:`ClusterState.from_model`; persisted with the machine's
  limits, kept across renames), so a broker stays the same machine across restarts.
* ``memory`` (JVM heap, MiB) and ``directMemory`` (MiB): the load model's where it models them
  (``memory-bound``); otherwise heap usage = ``512 + 2 * topics + 0.002 * msg/s``, limit = heap size, and
  direct memory = ``256 + 2 s of (throughputIn + Out)``, limit = max direct memory.
* Measurement noise as the closed loop's CPU noise: ``cpu_noise`` multiplies each report's CPU usage by
  ``1 + N(0, cpu_noise)`` (a fresh draw per report, from a stream seeded by ``load_model_seed``); 0 by
  default. ``rate_noise`` is the closed loop's noise on measured rates: each reported rate and throughput
  (a bundle's in a load report, a topic's in ``broker-stats/topics``) times ``1 + N(0, rate_noise)``, a fresh
  draw per field and report from its own stream; the usage a report shows and the message counters come
  from the true rates (a measurement is noisy, the load it measures is not). The rates are the topics' as
  given: a model that calibrates a cluster's rates (the closed loop's scenarios scale them to a target) only
  sets its per-cluster costs here.

Mutations raise :class:`PulsarRestError` with the HTTP status and ``reason`` Pulsar would answer
(``RestException``); ownership redirects (307) are the HTTP server's job, not this module's.
"""

from __future__ import annotations

import bisect
import copy
import json
import os
import random
import struct
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pulsar_rebalance.core.contract.policies_json import (
    namespace_isolation_policy_from_json,
    parse_anti_affinity_groups,
    parse_failure_domains,
    parse_isolation_policies,
)
from pulsar_rebalance.core.pulsar.bundles import BundleRange, default_boundaries
from pulsar_rebalance.core.pulsar.bundles import topic_hash as _core_topic_hash
from pulsar_rebalance.core.pulsar.config import SPLIT_ALGORITHM_NAMES, LoadBalancerConfig
from pulsar_rebalance.core.pulsar.policies import (
    NO_POLICIES,
    PlacementPolicies,
    anti_affinity_namespace_counts,
    apply_namespace_policies,
    filter_anti_affinity_group_owned_brokers,
)
from pulsar_rebalance.core.pulsar.split_algorithms import TopicRates, get_split_boundaries
from pulsar_rebalance.errors import ScenarioError
from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel
from pulsar_rebalance.simulator.load_models import LOAD_MODELS, Load, LoadModel, get_load_model

FULL_LOWER_BOUND = 0x00000000
FULL_UPPER_BOUND = 0xFFFFFFFF
MIB = 1024 * 1024

SPECIFIED_POSITIONS_DIVIDE = "specified_positions_divide"
#: ``supportedNamespaceBundleSplitAlgorithms`` default, in Pulsar's order (the core's algorithms).
SUPPORTED_SPLIT_ALGORITHMS = SPLIT_ALGORITHM_NAMES
#: ``defaultNamespaceBundleSplitAlgorithm``.
DEFAULT_SPLIT_ALGORITHM = "range_equally_divide"
_SPLIT_CONFIG = LoadBalancerConfig()
"""The broker.conf the split algorithms read (flow_or_qps_equally_divide's bundle limits): Pulsar's defaults."""

DEFAULT_LOAD_MODEL = "linear"

# Memory when the load model does not model it (see module docstring).
HEAP_BASE_MB = 512.0
HEAP_MB_PER_TOPIC = 2.0
HEAP_MB_PER_MSG = 0.002
DIRECT_BASE_MB = 256.0
DIRECT_BUFFERED_SECONDS = 2.0

STATE_FILE_VERSION = 1
BROKER_VERSION_STRING = "4.0.0-simulated"


class PulsarRestError(Exception):
    """An error answer, as Pulsar's ``RestException``: HTTP ``status`` + ``ErrorData.reason``."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


# --------------------------------------------------------------------------- naming helpers


topic_hash = _core_topic_hash
"""Pulsar's bundle hash of a full topic name (the core's: Guava crc32 ``padToLong`` = unsigned zlib crc32)."""

creation_boundaries = default_boundaries
"""Boundaries Pulsar writes when a namespace is created with ``n`` bundles (the core's ``NamespacesBase.getBundles``)."""


def resolve_load_model(name: str) -> LoadModel:
    """The load model named ``name``: one of the balance benchmark's (``linear`` ...), a held-out one (the third
    set's too), or ``random-<k>`` of the random family. ``ValueError`` names the known ones."""
    from pulsar_rebalance.simulator.random_models import random_model

    model = random_model(name)  # ValueError for an index out of range
    if model is not None:
        return model
    from pulsar_rebalance.simulator.held_out_models_3 import HELD_OUT_LOAD_MODELS_3

    if name in HELD_OUT_LOAD_MODELS_3:
        return HELD_OUT_LOAD_MODELS_3[name]()
    try:
        return get_load_model(name)
    except KeyError:
        raise ValueError(f"unknown load model {name!r}; known: {', '.join(known_load_models())}") from None


def known_load_models() -> list[str]:
    """Every name :func:`resolve_load_model` takes (the random family as ``random-<k>``)."""
    from pulsar_rebalance.simulator.held_out_models import HELD_OUT_LOAD_MODELS
    from pulsar_rebalance.simulator.held_out_models_3 import HELD_OUT_LOAD_MODELS_3

    return [*LOAD_MODELS, *HELD_OUT_LOAD_MODELS, *HELD_OUT_LOAD_MODELS_3, "random-<k>"]


def range_name(lower: int, upper: int) -> str:
    """``String.format("0x%08x_0x%08x", lower, upper)``."""
    return f"0x{lower:08x}_0x{upper:08x}"


def java_long_decode(text: str) -> int:
    """``java.lang.Long.decode``: optional sign, then ``0x``/``0X``/``#`` hex, leading ``0`` octal, or decimal."""
    s = text.strip()
    if not s:
        raise ValueError("Zero length string")
    sign = 1
    if s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s.startswith(("0x", "0X")):
        digits, base = s[2:], 16
    elif s.startswith("#"):
        digits, base = s[1:], 16
    elif s.startswith("0") and len(s) > 1:
        digits, base = s[1:], 8
    else:
        digits, base = s, 10
    if not digits or digits[0] in "+-":
        raise ValueError(f"Sign character in wrong position or no digits: {text}")
    value = int(digits, base)
    return sign * value


def split_topic_name(topic: str) -> tuple[str, str, str]:
    """``persistent://tenant/ns/local`` -> ``("persistent", "tenant/ns", "local")`` (v2 names only)."""
    domain, sep, rest = topic.partition("://")
    parts = rest.split("/")
    if not sep or domain not in ("persistent", "non-persistent") or len(parts) != 3 or not all(parts):
        raise ValueError(f"not a v2 topic name (domain://tenant/namespace/topic): {topic!r}")
    return domain, f"{parts[0]}/{parts[1]}", parts[2]


def normalize_topic_name(topic: str) -> str:
    """``TopicName.get``: short names default to ``persistent://public/default/...``."""
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3:
        return f"persistent://{topic}"
    raise ValueError(f"invalid short topic name {topic!r}")


def partitioned_topic_name(topic: str) -> str:
    """``TopicName.getPartitionedTopicName``: strip a trailing ``-partition-N``."""
    base, sep, index = topic.rpartition("-partition-")
    if sep and index.isdigit():
        return base
    return topic


def _f32(value: float) -> float:
    """Round to IEEE float32, as Java's ``(float)`` cast in ``ResourceUsage.percentUsage``."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _percent_usage(usage: float, limit: float) -> float:
    """``ResourceUsage.percentUsage()``: float32 ``usage/limit*100``, 0 when limit <= 0."""
    if limit <= 0:
        return 0.0
    return _f32(_f32(_f32(usage) / _f32(limit)) * 100.0)


# --------------------------------------------------------------------------- value types


@dataclass
class TopicLoad:
    """One topic (or one partition) and its steady rates.

    Rates are per second: ``msg_rate_*`` in messages, ``msg_throughput_*`` in bytes. ``subscriptions``
    maps subscription name -> number of connected consumers.
    """

    name: str
    msg_rate_in: float
    msg_rate_out: float
    msg_throughput_in: float
    msg_throughput_out: float
    producers: int = 1
    subscriptions: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        split_topic_name(self.name)  # raises ValueError naming the topic
        for attr in ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out"):
            value = getattr(self, attr)
            if not value >= 0:  # also rejects NaN
                raise ValueError(f"topic {self.name}: {attr} must be >= 0, got {value}")

    @property
    def namespace(self) -> str:
        return split_topic_name(self.name)[1]

    @property
    def domain(self) -> str:
        return split_topic_name(self.name)[0]

    @property
    def consumers(self) -> int:
        return sum(self.subscriptions.values())


@dataclass
class BrokerSpec:
    """A broker's id (``host:port`` of its web service) and machine capacity.

    ``nic_speed_mbps`` is Mbit/s as in ``/sys/class/net/*/speed``; memory sizes are MiB.
    """

    broker_id: str
    cores: int = 8
    nic_speed_mbps: float = 1000.0
    heap_mb: float = 4096.0
    direct_memory_mb: float = 4096.0


def machine_of(spec: BrokerSpec, model: LoadModel, key: str, seed: int) -> Broker:
    """The machine ``model`` sees for ``spec``: its cores and NIC as the model configures them (as the closed
    loop configures its brokers), keyed on ``key`` (what a model's per-broker draws depend on)."""
    machine = Broker(key, cores=float(spec.cores), nic_mbps=float(spec.nic_speed_mbps))
    model.configure(machine, seed)
    return machine


def spec_of_machine(
    broker_id: str, machine: Broker, model: LoadModel, heap_mb: float = 4096.0, direct_memory_mb: float = 4096.0
) -> BrokerSpec:
    """The spec a closed-loop ``machine`` is declared with: its cores, and its NIC before the model's
    cluster-wide NIC factor (a broker added later from this spec is configured like any other); per-broker
    differences the model drew are the machine's (``ClusterState``'s ``machines``)."""
    nic_factor = getattr(model, "NIC_FACTOR", 1.0) or 1.0
    return BrokerSpec(broker_id, max(1, round(machine.cores)), machine.nic_mbps / nic_factor, heap_mb, direct_memory_mb)


def system_usage(
    spec: BrokerSpec, load: Load, model: LoadModel | None = None, machine: Broker | None = None
) -> dict[str, dict[str, float]]:
    """SystemResourceUsage per the module-docstring model (cpu in core-%, Kbit/s, MiB): ``model``'s (default
    ``linear``) on ``machine`` (default: ``spec`` as the model configures it, seed 0) carrying ``load``."""
    model = model if model is not None else get_load_model(DEFAULT_LOAD_MODEL)
    machine = machine if machine is not None else machine_of(spec, model, spec.broker_id, 0)
    modelled = model.usage(machine, load)
    throughput = load.thr_in + load.thr_out
    return {
        "cpu": modelled["cpu"],
        "memory": modelled.get("memory")
        or {
            "usage": HEAP_BASE_MB + HEAP_MB_PER_TOPIC * load.topics + HEAP_MB_PER_MSG * load.msg,
            "limit": float(spec.heap_mb),
        },
        "directMemory": modelled.get("directMemory")
        or {
            "usage": DIRECT_BASE_MB + DIRECT_BUFFERED_SECONDS * throughput / MIB,
            "limit": float(spec.direct_memory_mb),
        },
        "bandwidthIn": modelled["bandwidthIn"],
        "bandwidthOut": modelled["bandwidthOut"],
    }


def load_report_json(
    spec: BrokerSpec,
    bundle_stats: Mapping[str, Mapping[str, Any]],
    *,
    previous_bundles: set[str],
    now_ms: int,
    model: LoadModel | None = None,
    machine: Broker | None = None,
    cpu_factor: float = 1.0,
    reported_stats: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """``GET /admin/v2/broker-stats/load-report``: LocalBrokerData JSON of a broker with these bundle stats
    (its usage: :func:`system_usage` of ``model`` on ``machine``, the CPU times ``cpu_factor``: noise); the
    rates it reports: ``reported_stats`` (the same bundles as measured, with rate noise), by default the true ones."""
    broker_id = spec.broker_id
    usage = system_usage(spec, Load.of(bundle_stats.values()), model, machine)
    bundle_stats = bundle_stats if reported_stats is None else reported_stats
    load = Load.of(bundle_stats.values())
    if cpu_factor != 1.0:
        usage["cpu"] = {**usage["cpu"], "usage": usage["cpu"]["usage"] * cpu_factor}
    bundles = set(bundle_stats)
    max_usage = max(_percent_usage(u["usage"], u["limit"]) for u in usage.values()) / 100
    return {
        "webServiceUrl": f"http://{broker_id}",
        "webServiceUrlTls": None,
        "pulsarServiceUrl": f"pulsar://{broker_id}",
        "pulsarServiceUrlTls": None,
        "persistentTopicsEnabled": True,
        "nonPersistentTopicsEnabled": True,
        **usage,
        "msgThroughputIn": load.thr_in,
        "msgThroughputOut": load.thr_out,
        "msgRateIn": load.msg_in,
        "msgRateOut": load.msg_out,
        "lastUpdate": now_ms,
        "lastStats": {b: dict(st) for b, st in bundle_stats.items()},
        "numTopics": int(load.topics),
        "numBundles": len(bundle_stats),
        "numConsumers": int(load.consumers),
        "numProducers": int(load.producers),
        "bundles": sorted(bundles),
        "lastBundleGains": sorted(bundles - previous_bundles),
        "lastBundleLosses": sorted(previous_bundles - bundles),
        "brokerVersionString": BROKER_VERSION_STRING,
        "protocols": {},
        "advertisedListeners": {},
        "loadReportType": "LocalBrokerData",
        "maxResourceUsage": max_usage,
        "bundleStats": {b: dict(st) for b, st in bundle_stats.items()},
    }


# --------------------------------------------------------------------------- the state


class ClusterState:
    """Thread-safe simulated cluster. Every public method takes the lock; mutations persist.

    Args:
        cluster: the cluster name (``GET /admin/v2/clusters``).
        brokers: broker specs, in a stable order (order breaks placement ties).
        namespaces: ``"tenant/ns"`` -> boundaries (ints, ascending, first 0, last 0xffffffff).
        topics: the topics; each must belong to one of ``namespaces``.
        owners: full bundle name -> broker id; must cover every bundle exactly.
        leader: the leader broker id (default: the first broker).
        state_file: if set, the state is written there (atomically) after every mutation.
        heartbeat_namespaces: if true, ``ownedNamespaces`` also lists each broker's heartbeat
            namespaces (``pulsar/<cluster>/<broker>`` and ``pulsar/<broker>``) as real brokers do.
        namespace_isolation_policies: ``{policyName: NamespaceIsolationData}`` as
            ``GET .../namespaceIsolationPolicies`` returns it; None = never set (that GET answers 404,
            as Pulsar does for a cluster whose policies node does not exist).
        failure_domains: ``{domainName: {"brokers": [brokerId]}}``.
        anti_affinity_groups: ``{"tenant/namespace": group}``.
        load_model: the load model, by name (module docstring; default ``linear``; ``ValueError`` for an
            unknown one) or an instance (the closed loop's, :meth:`from_model`).
        load_model_seed: what the model's per-broker draws depend on besides the machine key (the closed
            loop's scenario seed).
        machines: broker id -> ``{"key": machine key, "cores": ..., "nicMbps": ...}``, the machine as the
            load model already configured it (a state file keeps them, so a broker renamed or reloaded stays
            the same machine; the model still sees each key once, for its per-broker draws); brokers not
            named get ``broker-<i>`` for the i-th broker and their spec as the model configures it.
        cpu_noise: the reported CPU's measurement noise (module docstring), 0 to 1.
        rate_noise: the reported rates' measurement noise (module docstring), 0 to 1.
    """

    def __init__(
        self,
        *,
        cluster: str,
        brokers: Sequence[BrokerSpec],
        namespaces: Mapping[str, Sequence[int]],
        topics: Iterable[TopicLoad],
        owners: Mapping[str, str],
        leader: str | None = None,
        state_file: str | os.PathLike[str] | None = None,
        heartbeat_namespaces: bool = True,
        started_at_ms: int | None = None,
        namespace_isolation_policies: Mapping[str, Any] | None = None,
        failure_domains: Mapping[str, Any] | None = None,
        anti_affinity_groups: Mapping[str, str] | None = None,
        load_model: str | LoadModel | None = None,
        load_model_seed: int = 0,
        machines: Mapping[str, Mapping[str, Any]] | None = None,
        cpu_noise: float = 0.0,
        rate_noise: float = 0.0,
    ) -> None:
        self._lock = threading.RLock()
        self.cluster = cluster
        if not brokers:
            raise ValueError("a cluster needs at least one broker")
        self._brokers: dict[str, BrokerSpec] = {}
        for spec in brokers:
            if spec.broker_id in self._brokers:
                raise ValueError(f"duplicate broker id {spec.broker_id!r}")
            self._brokers[spec.broker_id] = spec
        self.leader = leader if leader is not None else brokers[0].broker_id
        if self.leader not in self._brokers:
            raise ValueError(f"leader {self.leader!r} is not one of the brokers")
        self._boundaries: dict[str, list[int]] = {}
        for ns, bounds in namespaces.items():
            _check_namespace_name(ns)
            self._boundaries[ns] = _check_boundaries(ns, list(bounds))
        self._topics: dict[str, TopicLoad] = {}
        for topic in topics:
            if topic.namespace not in self._boundaries:
                raise ValueError(f"topic {topic.name} belongs to unknown namespace {topic.namespace}")
            if topic.name in self._topics:
                raise ValueError(f"duplicate topic {topic.name}")
            self._topics[topic.name] = topic
        self._owners: dict[str, str] = dict(owners)
        expected = {b for ns in self._boundaries for b in self._bundle_names(ns)}
        missing = sorted(expected - set(self._owners))
        extra = sorted(set(self._owners) - expected)
        if missing or extra:
            raise ValueError(f"owners must cover every bundle exactly; missing={missing} unknown={extra}")
        for bundle, broker in self._owners.items():
            if broker not in self._brokers:
                raise ValueError(f"bundle {bundle} is owned by unknown broker {broker!r}")
        self._affinity: dict[str, str] = {}
        self._by_bundle: dict[str, list[TopicLoad]] | None = None  # topic -> bundle index; reset on split
        self._last_reported: dict[str, set[str]] = {}
        self.heartbeat_namespaces = heartbeat_namespaces
        self._isolation: dict[str, dict[str, Any]] | None = None
        self._domains: dict[str, list[str]] = {}
        self._anti_affinity: dict[str, str] = {}
        self._policies: PlacementPolicies | None = None  # parsed from the three above; None = stale
        self.failure_domains_enabled = False  # broker.conf failureDomainsEnabled (Pulsar's default)
        try:
            if namespace_isolation_policies is not None:
                self._isolation = {
                    p.name: p.to_json()
                    for p in parse_isolation_policies(
                        dict(namespace_isolation_policies), "namespaceIsolationPolicies", allow_negative_min_limit=True
                    )
                }
            self._domains = {
                d: list(b) for d, b in parse_failure_domains(dict(failure_domains or {}), "failureDomains").items()
            }
            self._anti_affinity = parse_anti_affinity_groups(dict(anti_affinity_groups or {}), "antiAffinityGroups")
        except ScenarioError as exc:
            raise ValueError(str(exc)) from None
        self.started_at_ms = started_at_ms if started_at_ms is not None else int(time.time() * 1000)
        if isinstance(load_model, LoadModel):
            self.load_model, self.load_model_name = load_model, load_model.name
        else:
            self.load_model_name = DEFAULT_LOAD_MODEL if load_model is None else str(load_model)
            self.load_model = resolve_load_model(self.load_model_name)
        if isinstance(load_model_seed, bool) or not isinstance(load_model_seed, int):
            raise ValueError(f"load_model_seed must be an integer, got {load_model_seed!r}")
        self.load_model_seed = load_model_seed
        given = dict(machines or {})
        unknown_machines = sorted(set(given) - set(self._brokers))
        if unknown_machines:
            raise ValueError(f"machines names unknown brokers {unknown_machines}")
        self._machine_keys: dict[str, str] = {}
        self._machines: dict[str, Broker] = {}
        for b, m in given.items():
            try:
                key, cores, nic = str(m["key"]), float(m["cores"]), float(m["nicMbps"])
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"machines[{b!r}] must be {{'key', 'cores', 'nicMbps'}}, got {m!r}") from None
            self._add_machine(b, key, (cores, nic))
        for i, b in enumerate(self._brokers):
            if b not in self._machines:
                self._add_machine(b, self._free_key(i))
        if len(set(self._machine_keys.values())) != len(self._machine_keys):
            raise ValueError("machines must give every broker its own key")
        for key, value in (("cpu_noise", cpu_noise), ("rate_noise", rate_noise)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"{key} must be a number from 0 to 1, got {value!r}")
        self.cpu_noise = float(cpu_noise)
        self._noise_rng = random.Random(f"{load_model_seed}:cpu-noise")
        self.rate_noise = float(rate_noise)
        self._rate_rng = random.Random(f"{load_model_seed}:rate-noise")
        fit_costs = getattr(self.load_model, "fit_costs", None)
        if fit_costs is not None:  # costs per cluster (per-topic-cost): set once, from the topics as given
            fit_costs(_CostView(self), 0.0)
        self.state_file = Path(state_file) if state_file is not None else None

    @property
    def lock(self) -> threading.RLock:
        """The state's re-entrant lock, which every public method takes: hold it to make several calls one step
        no request sees halfway (:mod:`pulsar_rebalance.simulator.live`)."""
        return self._lock

    # ------------------------------------------------------------------ read side

    def broker_ids(self) -> list[str]:
        with self._lock:
            return list(self._brokers)

    def broker_spec(self, broker_id: str) -> BrokerSpec:
        with self._lock:
            return copy.copy(self._require_broker(broker_id))

    def has_broker(self, broker_id: str) -> bool:
        with self._lock:
            return broker_id in self._brokers

    def tenants(self) -> list[str]:
        with self._lock:
            return sorted({ns.split("/")[0] for ns in self._boundaries})

    def namespaces(self, tenant: str | None = None) -> list[str]:
        """All namespaces, or those of ``tenant`` (404 if the tenant does not exist)."""
        with self._lock:
            if tenant is None:
                return sorted(self._boundaries)
            result = sorted(ns for ns in self._boundaries if ns.split("/")[0] == tenant)
            if not result:
                raise PulsarRestError(404, "Tenant does not exist")
            return result

    def has_namespace(self, namespace: str) -> bool:
        with self._lock:
            return namespace in self._boundaries

    def bundles_data(self, namespace: str) -> dict[str, Any]:
        """``BundlesData`` JSON: ``{"boundaries": ["0x00000000", ...], "numBundles": n}`` (live)."""
        with self._lock:
            bounds = self._require_namespace(namespace)
            return {"boundaries": [f"0x{b:08x}" for b in bounds], "numBundles": len(bounds) - 1}

    def bundle_ranges(self, namespace: str) -> list[str]:
        with self._lock:
            bounds = self._require_namespace(namespace)
            return [range_name(lo, hi) for lo, hi in zip(bounds, bounds[1:])]

    def owner(self, bundle: str) -> str:
        """Owner of a full bundle name ``tenant/ns/0x.._0x..`` (KeyError if no such bundle)."""
        with self._lock:
            return self._owners[bundle]

    def owners(self) -> dict[str, str]:
        with self._lock:
            return dict(self._owners)

    def owned_bundles(self, broker_id: str) -> list[str]:
        with self._lock:
            self._require_broker(broker_id)
            return sorted(b for b, o in self._owners.items() if o == broker_id)

    def topics(self) -> list[TopicLoad]:
        with self._lock:
            return [copy.deepcopy(t) for t in self._topics.values()]

    def bundle_for_topic(self, topic: str) -> str:
        """Full name of the bundle a topic hashes into (404 if its namespace does not exist)."""
        with self._lock:
            _, namespace, _ = split_topic_name(topic)
            bounds = self._require_namespace(namespace)
            return f"{namespace}/{self._range_for_hash(bounds, topic_hash(topic))}"

    def topics_in_bundle(self, bundle: str) -> list[TopicLoad]:
        with self._lock:
            return [copy.deepcopy(t) for t in self._topics_by_bundle().get(bundle, [])]

    def validate_bundle(self, namespace: str, bundle_range: str) -> tuple[int, int]:
        """Pulsar's ``validateNamespaceBundleRange``: 404 unknown namespace, 412 not a current bundle."""
        with self._lock:
            bounds = self._require_namespace(namespace)
            if "_" not in bundle_range:
                raise PulsarRestError(412, f"Invalid bundle range: {bundle_range}")
            lo_text, _, hi_text = bundle_range.partition("_")
            try:
                lo, hi = java_long_decode(lo_text), java_long_decode(hi_text.split("_")[0])
            except ValueError as exc:
                raise PulsarRestError(412, f"Invalid bundle range: {bundle_range} ({exc})") from None
            idx = bisect.bisect_left(bounds, lo)
            if idx >= len(bounds) - 1 or bounds[idx] != lo:
                raise PulsarRestError(412, "Cannot find bundle in the bundles list")
            if bounds[idx + 1] != hi:
                raise PulsarRestError(412, "Bundle is not part of the bundles list")
            return lo, hi

    # ------------------------------------------------------------------ reports

    def load_report(self, broker_id: str) -> dict[str, Any]:
        """``GET /admin/v2/broker-stats/load-report`` of ``broker_id``: LocalBrokerData JSON."""
        with self._lock:
            spec = self._require_broker(broker_id)
            bundle_stats = self._bundle_stats_of(broker_id)
            bundles = set(bundle_stats)
            previous = self._last_reported.get(broker_id, set())
            self._last_reported[broker_id] = bundles
            return load_report_json(
                spec,
                bundle_stats,
                reported_stats={b: {**st, **self._measured(st)} for b, st in bundle_stats.items()}
                if self.rate_noise
                else None,
                previous_bundles=previous,
                now_ms=int(time.time() * 1000),
                model=self.load_model,
                machine=self._machines[broker_id],
                cpu_factor=max(0.0, 1.0 + self._noise_rng.gauss(0.0, self.cpu_noise)) if self.cpu_noise else 1.0,
            )

    def machine(self, broker_id: str) -> Broker:
        """The machine the load model sees for ``broker_id`` (a copy): its cores and NIC as the model set them."""
        with self._lock:
            self._require_broker(broker_id)
            return copy.copy(self._machines[broker_id])

    def machine_key(self, broker_id: str) -> str:
        """``broker_id``'s machine key (module docstring)."""
        with self._lock:
            self._require_broker(broker_id)
            return self._machine_keys[broker_id]

    def topic_stats(self, broker_id: str) -> dict[str, Any]:
        """``GET /admin/v2/broker-stats/topics`` of ``broker_id``.

        Shape: ``namespace -> bundle range -> "persistent"|"non-persistent" -> topic -> stats``, the
        per-topic fields written by ``PersistentTopic.updateRates``.
        """
        with self._lock:
            self._require_broker(broker_id)
            uptime_s = max(0.0, time.time() - self.started_at_ms / 1000)
            out: dict[str, Any] = {}
            for bundle, topics in sorted(self._topics_by_bundle().items()):
                if self._owners[bundle] != broker_id or not topics:
                    continue
                namespace, _, rng = bundle.rpartition("/")
                by_domain = out.setdefault(namespace, {}).setdefault(rng, {})
                for t in sorted(topics, key=lambda x: x.name):
                    measured = self._measured(_topic_rates(t)) if self.rate_noise else None
                    by_domain.setdefault(t.domain, {})[t.name] = _topic_stats_json(t, uptime_s, measured)
            return out

    def _measured(self, rates: Mapping[str, Any]) -> dict[str, float]:
        """The rates and throughputs of ``rates`` (a bundle's stats, a topic's) as measured: each times
        ``1 + N(0, rate_noise)``, a fresh draw per field (the fields ``ClusterModel._noisy`` draws)."""
        gauss, sigma = self._rate_rng.gauss, self.rate_noise
        return {f: rates[f] * max(0.0, 1.0 + gauss(0.0, sigma)) for f in ClusterModel._RATE_FIELDS}

    def owned_namespaces(self, broker_id: str) -> dict[str, Any]:
        """``GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces``: bundle -> NamespaceOwnershipStatus."""
        with self._lock:
            self._require_broker(broker_id)
            status = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
            result = {b: dict(status) for b in self.owned_bundles(broker_id)}
            if self.heartbeat_namespaces:
                full = range_name(FULL_LOWER_BOUND, FULL_UPPER_BOUND)
                result[f"pulsar/{self.cluster}/{broker_id}/{full}"] = dict(status)
                result[f"pulsar/{broker_id}/{full}"] = dict(status)
            return result

    def lookup(self, topic: str) -> dict[str, Any]:
        """``LookupData`` of the broker owning ``topic``'s bundle (404 unknown namespace)."""
        with self._lock:
            owner = self._owners[self.bundle_for_topic(topic)]
            return {
                "brokerUrl": f"pulsar://{owner}",
                "brokerUrlTls": None,
                "httpUrl": f"http://{owner}",
                "httpUrlTls": None,
                "nativeUrl": f"pulsar://{owner}",
                "brokerUrlSsl": "",
            }

    def topic_hash_positions(self, namespace: str, bundle_range: str, topics: Sequence[str]) -> dict[str, Any]:
        """``TopicHashPositions`` as ``NamespacesBase.internalGetTopicHashPositionsAsync`` builds it.

        Empty ``topics`` -> every topic of the bundle. A name without ``-partition-N`` selects all its
        partitions in this bundle; a partition name is returned only if it is in this bundle. Keys are
        the names as given for partitions (Pulsar's quirk) and full names otherwise.
        """
        with self._lock:
            lo, hi = self.validate_bundle(namespace, bundle_range)
            bundle = f"{namespace}/{range_name(lo, hi)}"
            in_bundle = [t.name for t in self._topics_by_bundle().get(bundle, [])]
            positions: dict[str, int] = {}
            if not topics:
                positions = {t: topic_hash(t) for t in in_bundle}
            else:
                for given in topics:
                    try:
                        full = normalize_topic_name(given)
                    except ValueError as exc:
                        raise PulsarRestError(412, str(exc)) from None
                    if partitioned_topic_name(full) == full:  # partition index -1
                        for t in in_bundle:
                            if partitioned_topic_name(t) == full:
                                positions[t] = topic_hash(t)
                    elif full in in_bundle:
                        positions[given] = topic_hash(given)
            return {"namespace": namespace, "bundle": range_name(lo, hi), "topicHashPositions": positions}

    # ------------------------------------------------------------------ placement constraints

    def placement_policies(self) -> PlacementPolicies:
        """The three constraints parsed by the decision core (what every placement here applies)."""
        with self._lock:
            if self._policies is None:
                isolation = (
                    parse_isolation_policies(
                        self._isolation, "namespaceIsolationPolicies", allow_negative_min_limit=True
                    )
                    if self._isolation
                    else ()
                )
                self._policies = PlacementPolicies(
                    isolation,
                    {d: tuple(b) for d, b in self._domains.items()},
                    dict(self._anti_affinity),
                )
            return self._policies

    def namespace_isolation_policies(self) -> dict[str, Any]:
        """``GET /admin/v2/clusters/{cluster}/namespaceIsolationPolicies``: ``{policyName:
        NamespaceIsolationData}``; 404 when none was ever set (``internalGetNamespaceIsolationPolicies``:
        "NamespaceIsolationPolicies for cluster X does not exist")."""
        with self._lock:
            if self._isolation is None:
                raise PulsarRestError(404, f"NamespaceIsolationPolicies for cluster {self.cluster} does not exist")
            return copy.deepcopy(self._isolation)

    def namespace_isolation_policy(self, name: str) -> dict[str, Any]:
        """``GET .../namespaceIsolationPolicies/{policyName}`` (404 unknown policy)."""
        with self._lock:
            policies = self.namespace_isolation_policies()
            if name not in policies:
                raise PulsarRestError(404, f"Cannot find NamespaceIsolationPolicy {name} for cluster {self.cluster}")
            return policies[name]

    def set_namespace_isolation_policy(self, name: str, data: Any, *, unload: bool = True) -> list[str]:
        """``POST .../namespaceIsolationPolicies/{policyName}``: validated as ``NamespaceIsolationDataImpl.validate``
        (400 "Invalid format of input policy data" otherwise), stored, and - ``unloadBundles``, default
        true - every bundle of the namespaces its regexes match unloaded (re-placed under the new policy,
        ``filterAndUnloadMatchedNamespaceAsync``). Returns the bundles unloaded."""
        with self._lock:
            try:
                # Pulsar accepts a negative min_limit (it never fails over then); the contract does not
                policy = namespace_isolation_policy_from_json(name, data, name, allow_negative_min_limit=True)
            except ScenarioError as exc:
                raise PulsarRestError(
                    400, f"Invalid format of input policy data. policy: {name}; data: {json.dumps(data)} ({exc})"
                ) from None
            isolation = dict(self._isolation or {})
            isolation[name] = policy.to_json()
            self._isolation = isolation
            self._policies = None
            moved: list[str] = []
            if unload:
                for ns in sorted(ns for ns in self._boundaries if policy.matches_namespace(ns)):
                    for bundle in self._bundle_names(ns):
                        self._owners[bundle] = self._place(bundle, previous_owner=self._owners[bundle])
                        moved.append(bundle)
            self._persist()
            return moved

    def delete_namespace_isolation_policy(self, name: str) -> None:
        """``DELETE .../namespaceIsolationPolicies/{policyName}`` (an unknown name is no error, as in Pulsar)."""
        with self._lock:
            isolation = dict(self._isolation or {})
            isolation.pop(name, None)
            self._isolation = isolation
            self._policies = None
            self._persist()

    def failure_domains(self) -> dict[str, Any]:
        """``GET /admin/v2/clusters/{cluster}/failureDomains``: ``{domainName: {"brokers": [brokerId]}}``
        (``{}`` when none is configured)."""
        with self._lock:
            return {d: {"brokers": list(b)} for d, b in self._domains.items()}

    def failure_domain(self, name: str) -> dict[str, Any]:
        with self._lock:
            if name not in self._domains:
                raise PulsarRestError(404, f"Domain {name} for cluster {self.cluster} does not exist")
            return {"brokers": list(self._domains[name])}

    def set_failure_domain(self, name: str, data: Any) -> None:
        """``POST .../failureDomains/{domainName}`` with a ``FailureDomain`` body; 409 when one of its
        brokers is in another domain (``validateBrokerExistsInOtherDomain``)."""
        with self._lock:
            try:
                brokers = list(dict.fromkeys(parse_failure_domains({name: data}, "FailureDomain")[name]))
            except ScenarioError as exc:
                raise PulsarRestError(400, f"Invalid failure domain data: {exc}") from None
            for other, members in self._domains.items():
                duplicates = [b for b in members if b in brokers]
                if other != name and duplicates:
                    raise PulsarRestError(409, f"[{', '.join(duplicates)}] already exists in {other}")
            self._domains[name] = brokers
            self._policies = None
            self._persist()

    def delete_failure_domain(self, name: str) -> None:
        with self._lock:
            if self._domains.pop(name, None) is None:
                raise PulsarRestError(404, f"Domain-name {name} or cluster {self.cluster} does not exist")
            self._policies = None
            self._persist()

    def anti_affinity_group(self, namespace: str) -> str | None:
        """``GET /admin/v2/namespaces/{tenant}/{namespace}/antiAffinity``: the group, None when unset (Pulsar
        answers 204 then, for any namespace name: ``getLocalPolicies(..).orElse(new LocalPolicies())``)."""
        with self._lock:
            return self._anti_affinity.get(namespace)

    def set_anti_affinity_group(self, namespace: str, group: str) -> None:
        """``POST .../antiAffinity`` (the body is the group): 412 "antiAffinityGroup can't be empty" when blank."""
        with self._lock:
            _check_namespace_name(namespace)
            if not group.strip():
                raise PulsarRestError(412, "antiAffinityGroup can't be empty")
            self._anti_affinity[namespace] = group
            self._policies = None
            self._persist()

    def remove_anti_affinity_group(self, namespace: str) -> None:
        with self._lock:
            self._anti_affinity.pop(namespace, None)
            self._policies = None
            self._persist()

    # ------------------------------------------------------------------ mutations

    def split_bundle(
        self,
        namespace: str,
        bundle_range: str,
        *,
        unload: bool = False,
        algorithm: str | None = None,
        boundaries: Sequence[int] | None = None,
    ) -> list[str]:
        """Split like ``NamespaceService.splitAndOwnBundle``; returns the children (``[]`` = no split).

        Raises:
            PulsarRestError: 412 unsupported algorithm, empty boundaries with
                ``specified_positions_divide``, a range that is not a current bundle, a bundle that
                cannot be split further, or split points outside/duplicated; 404 unknown namespace.
        """
        with self._lock:
            if algorithm:
                if algorithm not in SUPPORTED_SPLIT_ALGORITHMS:
                    raise PulsarRestError(
                        412,
                        "Unsupported namespace bundle split algorithm, supported algorithms are "
                        f"[{', '.join(SUPPORTED_SPLIT_ALGORITHMS)}]",
                    )
                if algorithm.lower() == SPECIFIED_POSITIONS_DIVIDE and not boundaries:
                    raise PulsarRestError(
                        412, "With specified_positions_divide split algorithm, splitBoundaries must not be empty"
                    )
            lo, hi = self.validate_bundle(namespace, bundle_range)
            parent = f"{namespace}/{range_name(lo, hi)}"
            if hi - lo <= 1:  # canSplitBundle -> IllegalArgumentException
                raise PulsarRestError(412, "Split bundle failed due to invalid request")
            topics = self._topics_by_bundle().get(parent, [])
            points = _split_points(algorithm or DEFAULT_SPLIT_ALGORITHM, lo, hi, topics, boundaries)
            if not points:  # "No valid boundary found ... to split bundle": completes without splitting
                return []
            if any(not lo < p < hi for p in points) or len(set(points)) != len(points):
                raise PulsarRestError(412, "Split bundle failed due to invalid request")
            points = sorted(points)
            bounds = self._boundaries[namespace]
            idx = bounds.index(lo)
            bounds[idx + 1 : idx + 1] = points
            self._by_bundle = None
            edges = [lo, *points, hi]
            children = [f"{namespace}/{range_name(a, b)}" for a, b in zip(edges, edges[1:])]
            owner = self._owners.pop(parent)
            self._affinity.pop(parent, None)
            for child in children:
                self._owners[child] = owner
            if unload:
                for child in children:
                    self._owners[child] = self._place(child, previous_owner=owner)
            self._persist()
            return children

    def set_bundle_affinity(self, bundle: str, broker_id: str | None) -> None:
        """``ModularLoadManagerImpl.setNamespaceBundleAffinity``: the next placement of ``bundle`` goes there."""
        with self._lock:
            if broker_id:
                self._affinity[bundle] = broker_id
            else:
                self._affinity.pop(bundle, None)

    def unload_bundle(self, namespace: str, bundle_range: str) -> str:
        """Unload a bundle and place it again at once; returns the new owner.

        Placement: the affinity broker set by an unload with ``destinationBroker`` if it is active;
        otherwise Pulsar's modular placement reduced to its deterministic core — the brokers the
        placement constraints allow (isolation policies, then anti-affinity group), drop the previous
        owner (pulsar#20822), keep the brokers owning the fewest bundles of this namespace
        (``removeMostServicingBrokersForNamespace``), then the lowest msgRateIn+Out
        (``LeastLongTermMessageRate`` with current rates), ties -> broker order.
        """
        with self._lock:
            lo, hi = self.validate_bundle(namespace, bundle_range)
            bundle = f"{namespace}/{range_name(lo, hi)}"
            previous = self._owners[bundle]
            self._owners[bundle] = self._place(bundle, previous_owner=previous)
            self._persist()
            return self._owners[bundle]

    def remove_broker(self, broker_id: str) -> dict[str, str]:
        """A broker dies (its session expires): it leaves the active list and every bundle it owned is
        placed again on the others, as Pulsar's lookups re-assign orphaned bundles (here at once, like
        :meth:`unload_bundle`). A dead leader is replaced by the first remaining broker. Returns
        bundle -> new owner. Fault injection for tests; raises ``ValueError`` for the last broker."""
        with self._lock:
            self._require_broker(broker_id)
            if len(self._brokers) == 1:
                raise ValueError("cannot remove the last broker of the cluster")
            del self._brokers[broker_id]
            del self._machines[broker_id], self._machine_keys[broker_id]
            self._affinity = {b: o for b, o in self._affinity.items() if o != broker_id}
            self._last_reported.pop(broker_id, None)
            if self.leader == broker_id:
                self.leader = next(iter(self._brokers))
            moved = {}
            for bundle in sorted(b for b, o in self._owners.items() if o == broker_id):
                self._owners[bundle] = moved[bundle] = self._place(bundle, previous_owner=broker_id)
            self._persist()
            return moved

    def add_broker(self, spec: BrokerSpec, *, machine_key: str | None = None, machine: Broker | None = None) -> None:
        """A new broker joins the cluster (scale-out): it is active at once and owns nothing until a
        placement or an unload gives it bundles. ``machine_key`` / ``machine``: the machine it is (its key,
        and its cores and NIC as the load model configured them: a closed-loop broker joining,
        :mod:`pulsar_rebalance.simulator.live`); default the next free key and the spec as the model
        configures it. Raises ``ValueError`` for a broker id or machine key already present."""
        with self._lock:
            if spec.broker_id in self._brokers:
                raise ValueError(f"broker {spec.broker_id!r} is already in the cluster")
            if machine_key is not None and machine_key in self._machine_keys.values():
                raise ValueError(f"machine key {machine_key!r} is already a broker's")
            self._brokers[spec.broker_id] = copy.copy(spec)
            limits = (machine.cores, machine.nic_mbps) if machine is not None else None
            self._add_machine(spec.broker_id, machine_key or self._free_key(0), limits)
            self._policies = None
            self._persist()

    def boundaries(self) -> dict[str, list[int]]:
        """Every namespace's bundle boundaries now (a copy)."""
        with self._lock:
            return {ns: list(bounds) for ns, bounds in self._boundaries.items()}

    def follow(self, owners: Mapping[str, str], rates: Mapping[str, Sequence[float]]) -> None:
        """Take ownership and topic rates from the model this state is a view of (the running clock,
        :mod:`pulsar_rebalance.simulator.live`): ``owners`` must name every bundle, each owned by a broker
        of this state; ``rates``: topic -> (msgRateIn, msgRateOut, msgThroughputIn, msgThroughputOut) for
        any of the topics (``ValueError`` naming the first problem, and nothing changed)."""
        with self._lock:
            expected = {b for ns in self._boundaries for b in self._bundle_names(ns)}
            if set(owners) != expected:
                missing, extra = sorted(expected - set(owners)), sorted(set(owners) - expected)
                raise ValueError(f"owners must cover every bundle exactly; missing={missing} unknown={extra}")
            stranger = next((o for o in owners.values() if o not in self._brokers), None)
            if stranger is not None:
                raise ValueError(f"owners name unknown broker {stranger!r}")
            unknown = next((t for t in rates if t not in self._topics), None)
            if unknown is not None:
                raise ValueError(f"rates name unknown topic {unknown!r}")
            for name, values in rates.items():
                if len(values) != 4 or not all(v >= 0 for v in values):
                    raise ValueError(f"topic {name}: rates must be 4 numbers >= 0, got {values!r}")
            self._owners = dict(owners)
            self._affinity = {b: o for b, o in self._affinity.items() if b in expected}
            for name, (rate_in, rate_out, thr_in, thr_out) in rates.items():
                t = self._topics[name]
                t.msg_rate_in, t.msg_rate_out = float(rate_in), float(rate_out)
                t.msg_throughput_in, t.msg_throughput_out = float(thr_in), float(thr_out)
            self._persist()

    def rename_brokers(self, mapping: Mapping[str, str]) -> None:
        """Rename broker ids (e.g. to the real ephemeral listening addresses); ownership follows."""
        with self._lock:
            unknown = sorted(set(mapping) - set(self._brokers))
            if unknown:
                raise ValueError(f"unknown broker ids {unknown}")
            new_ids = [mapping.get(b, b) for b in self._brokers]
            if len(set(new_ids)) != len(new_ids):
                raise ValueError(f"renaming would duplicate broker ids: {new_ids}")
            self._brokers = {
                mapping.get(b, b): BrokerSpec(**{**asdict(s), "broker_id": mapping.get(b, b)})
                for b, s in self._brokers.items()
            }
            self._owners = {bundle: mapping.get(o, o) for bundle, o in self._owners.items()}
            self._affinity = {bundle: mapping.get(o, o) for bundle, o in self._affinity.items()}
            self._last_reported = {mapping.get(b, b): s for b, s in self._last_reported.items()}
            self._machines = {mapping.get(b, b): m for b, m in self._machines.items()}
            self._machine_keys = {mapping.get(b, b): k for b, k in self._machine_keys.items()}
            self._domains = {d: [mapping.get(b, b) for b in bs] for d, bs in self._domains.items()}
            self._policies = None
            self.leader = mapping.get(self.leader, self.leader)
            self._persist()

    # ------------------------------------------------------------------ snapshot / persistence

    def snapshot(self) -> dict[str, Any]:
        """A deep, JSON-able copy of the whole state (the state-file format)."""
        with self._lock:
            return {
                "version": STATE_FILE_VERSION,
                "cluster": self.cluster,
                "leader": self.leader,
                "startedAtMs": self.started_at_ms,
                "heartbeatNamespaces": self.heartbeat_namespaces,
                "brokers": [asdict(s) for s in self._brokers.values()],
                "namespaces": {ns: [f"0x{b:08x}" for b in bounds] for ns, bounds in self._boundaries.items()},
                "owners": dict(sorted(self._owners.items())),
                "affinity": dict(self._affinity),
                "topics": [asdict(t) for t in self._topics.values()],
                "namespaceIsolationPolicies": copy.deepcopy(self._isolation),
                "failureDomains": self.failure_domains(),
                "antiAffinityGroups": dict(self._anti_affinity),
                "loadModel": self.load_model_name,
                "loadModelSeed": self.load_model_seed,
                "cpuNoise": self.cpu_noise,
                "rateNoise": self.rate_noise,
                "machines": {
                    b: {"key": self._machine_keys[b], "cores": m.cores, "nicMbps": m.nic_mbps}
                    for b, m in self._machines.items()
                },
            }

    @classmethod
    def from_snapshot(
        cls, data: Mapping[str, Any], *, state_file: str | os.PathLike[str] | None = None
    ) -> ClusterState:
        """Rebuild a state from :meth:`snapshot` output (raises ValueError naming a bad field)."""
        if data.get("version") != STATE_FILE_VERSION:
            raise ValueError(f"state version must be {STATE_FILE_VERSION}, got {data.get('version')!r}")
        try:
            state = cls(
                cluster=str(data["cluster"]),
                brokers=[BrokerSpec(**b) for b in data["brokers"]],
                namespaces={ns: [int(b, 16) for b in bounds] for ns, bounds in data["namespaces"].items()},
                topics=[TopicLoad(**t) for t in data["topics"]],
                owners=data["owners"],
                leader=data.get("leader"),
                state_file=state_file,
                heartbeat_namespaces=bool(data.get("heartbeatNamespaces", True)),
                started_at_ms=data.get("startedAtMs"),
                namespace_isolation_policies=data.get("namespaceIsolationPolicies"),
                failure_domains=data.get("failureDomains"),
                anti_affinity_groups=data.get("antiAffinityGroups"),
                load_model=data.get("loadModel"),
                load_model_seed=data.get("loadModelSeed", 0),
                machines=data.get("machines"),
                cpu_noise=data.get("cpuNoise", 0.0),
                rate_noise=data.get("rateNoise", 0.0),
            )
        except KeyError as exc:
            raise ValueError(f"state is missing field {exc.args[0]!r}") from None
        except TypeError as exc:
            raise ValueError(f"state has a malformed entry: {exc}") from None
        state._affinity = dict(data.get("affinity", {}))
        return state

    @classmethod
    def from_model(
        cls,
        model: ClusterModel,
        *,
        cluster: str,
        host: str = "127.0.0.1",
        port_base: int = 0,
        heap_mb: float = 4096.0,
        direct_memory_mb: float = 4096.0,
        cpu_noise: float | None = None,
        rate_noise: float | None = None,
    ) -> ClusterState:
        """The closed-loop model's cluster as it is now, served steady (CPU noise: ``cpu_noise``, rate noise:
        ``rate_noise``, by default the model's own): its live brokers (the i-th as ``host:port_base+i``,
        ``host:i`` for ``port_base`` 0, its machine as the model configured it, its closed-loop id the machine
        key), namespaces and bundle boundaries, ownership, topics at their current rates (each with its
        closed-loop consumer count as one subscription), the same load model instance and seed. Without noise
        its load reports are then the closed loop's noise-free ones, number for number.
        ``ValueError`` for a model with placement constraints (their broker regexes name the closed loop's
        ids)."""
        if not model.placement.empty:
            raise ValueError("a closed-loop model with placement constraints cannot be served over HTTP yet")
        live = model.live_brokers()
        ids = {b: f"{host}:{port_base + i if port_base else i}" for i, b in enumerate(live)}
        specs = []
        machines: dict[str, dict[str, Any]] = {}
        for b in live:
            m = model.brokers[b]
            specs.append(spec_of_machine(ids[b], m, model.load_model, heap_mb, direct_memory_mb))
            machines[ids[b]] = {"key": b, "cores": m.cores, "nicMbps": m.nic_mbps}
        topics = [
            TopicLoad(
                name=tp.name,
                msg_rate_in=tp.rate_in,
                msg_rate_out=tp.rate_out,
                msg_throughput_in=tp.rate_in * tp.msg_size,
                msg_throughput_out=tp.rate_out * tp.msg_size,
                producers=tp.producers,
                subscriptions={"sub-0": tp.clients - tp.producers},
            )
            for tp in sorted(model.topics, key=lambda tp: tp.hash)  # a bundle's topics in the closed loop's order
        ]
        return cls(
            cluster=cluster,
            brokers=specs,
            namespaces={ns: list(nb.boundaries) for ns, nb in model.namespaces.items()},
            topics=topics,
            owners={bundle: ids[o] for bundle, o in model.owners.items()},
            load_model=model.load_model,
            load_model_seed=model.seed,
            machines=machines,
            cpu_noise=model.noise if cpu_noise is None else cpu_noise,
            rate_noise=model.rate_noise if rate_noise is None else rate_noise,
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ClusterState:
        """Load a state file written by a previous run; later mutations persist to the same file."""
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return cls.from_snapshot(data, state_file=path)

    def save(self, path: str | os.PathLike[str] | None = None) -> None:
        """Write the state atomically (tmp file + rename) to ``path`` or the configured state file."""
        target = Path(path) if path is not None else self.state_file
        if target is None:
            raise ValueError("no state file configured")
        with self._lock:
            payload = json.dumps(self.snapshot(), indent=1, sort_keys=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_text(payload, encoding="utf-8")
            os.replace(tmp, target)

    # ------------------------------------------------------------------ internals

    def _persist(self) -> None:
        if self.state_file is not None:
            self.save()

    def _add_machine(self, broker_id: str, key: str, limits: tuple[float, float] | None = None) -> None:
        """``broker_id``'s machine: its spec as the load model configures it, or, with ``limits`` (cores, NIC
        Mbit/s as configured before), those (the model still configures the key, for its per-broker draws)."""
        machine = machine_of(self._brokers[broker_id], self.load_model, key, self.load_model_seed)
        if limits is not None:
            machine.cores, machine.nic_mbps = limits
        self._machine_keys[broker_id] = key
        self._machines[broker_id] = machine

    def _free_key(self, start: int) -> str:
        """The first machine key ``broker-<i>``, ``i >= start``, no broker has."""
        used = set(self._machine_keys.values())
        return next(f"broker-{i}" for i in range(start, start + len(used) + 1) if f"broker-{i}" not in used)

    def _require_broker(self, broker_id: str) -> BrokerSpec:
        try:
            return self._brokers[broker_id]
        except KeyError:
            raise PulsarRestError(404, f"Broker {broker_id} not found") from None

    def _require_namespace(self, namespace: str) -> list[int]:
        try:
            return self._boundaries[namespace]
        except KeyError:
            raise PulsarRestError(404, "Namespace does not exist") from None

    def _bundle_names(self, namespace: str) -> list[str]:
        bounds = self._boundaries[namespace]
        return [f"{namespace}/{range_name(lo, hi)}" for lo, hi in zip(bounds, bounds[1:])]

    @staticmethod
    def _range_for_hash(bounds: list[int], h: int) -> str:
        idx = bisect.bisect_right(bounds, h) - 1
        idx = min(max(idx, 0), len(bounds) - 2)  # hash == last boundary -> last (closed) bundle
        return range_name(bounds[idx], bounds[idx + 1])

    def _topics_by_bundle(self) -> dict[str, list[TopicLoad]]:
        """Bundle -> its topics. Cached: only a split changes the mapping (ownership does not)."""
        if self._by_bundle is None:
            result: dict[str, list[TopicLoad]] = {}
            for t in self._topics.values():
                ns = t.namespace
                bundle = f"{ns}/{self._range_for_hash(self._boundaries[ns], topic_hash(t.name))}"
                result.setdefault(bundle, []).append(t)
            self._by_bundle = result
        return self._by_bundle

    def _bundle_stats_of(self, broker_id: str) -> dict[str, dict[str, Any]]:
        """NamespaceBundleStats of every bundle of ``broker_id`` that has at least one topic."""
        stats: dict[str, dict[str, Any]] = {}
        for bundle, topics in sorted(self._topics_by_bundle().items()):
            if self._owners[bundle] != broker_id or not topics:
                continue
            thr_in = sum(t.msg_throughput_in for t in topics)
            stats[bundle] = {
                "msgRateIn": sum(t.msg_rate_in for t in topics),
                "msgThroughputIn": thr_in,
                "msgRateOut": sum(t.msg_rate_out for t in topics),
                "msgThroughputOut": sum(t.msg_throughput_out for t in topics),
                "consumerCount": sum(t.consumers for t in topics),
                "producerCount": sum(t.producers for t in topics),
                "topics": len(topics),
                "cacheSize": int(thr_in),  # ~one second of ingest held in the managed-ledger cache
            }
        return stats

    def _place(self, bundle: str, *, previous_owner: str | None) -> str:
        affinity = self._affinity.pop(bundle, None)
        if affinity is not None and affinity in self._brokers:
            return affinity
        namespace = bundle.rpartition("/")[0]
        candidates = self._policy_candidates(bundle, namespace)
        candidates = [b for b in candidates if b != previous_owner] or candidates
        per_ns = {b: 0 for b in candidates}
        for other, owner in self._owners.items():
            if other != bundle and owner in per_ns and other.rpartition("/")[0] == namespace:
                per_ns[owner] += 1
        fewest = min(per_ns.values())
        candidates = [b for b in candidates if per_ns[b] == fewest]
        rates = {b: 0.0 for b in candidates}
        for other, topics in self._topics_by_bundle().items():
            holder = self._owners.get(other)
            if other != bundle and holder in rates:
                rates[holder] += sum(t.msg_rate_in + t.msg_rate_out for t in topics)
        return min(candidates, key=lambda b: rates[b])  # min() keeps the first of equals

    def _policy_candidates(self, bundle: str, namespace: str) -> list[str]:
        """``selectBroker``'s policy steps over the active brokers: ``applyNamespacePolicies``, then
        ``filterAntiAffinityGroupOwnedBrokers`` (counting the group's namespaces each broker owns, this
        bundle left out). No broker allowed: the bundle cannot be placed in Pulsar (lookups fail until
        the policies change); the simulator keeps every bundle owned, so it falls back to all brokers."""
        brokers = list(self._brokers)
        policies = self.placement_policies()
        if policies is NO_POLICIES or policies.empty:
            return brokers
        allowed = apply_namespace_policies(bundle, policies, brokers)
        if not allowed:
            return brokers
        counts = anti_affinity_namespace_counts(namespace, policies, lambda ns: self._bundles_by_broker(ns, bundle))
        return filter_anti_affinity_group_owned_brokers(
            allowed, counts, policies.broker_to_domain, self.failure_domains_enabled
        )

    def _bundles_by_broker(self, namespace: str, leaving: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for other in self._bundle_names(namespace) if namespace in self._boundaries else []:
            if other != leaving:
                out.setdefault(self._owners[other], []).append(other)
        return out


def _topic_rates(t: TopicLoad) -> dict[str, float]:
    return {
        "msgRateIn": t.msg_rate_in,
        "msgRateOut": t.msg_rate_out,
        "msgThroughputIn": t.msg_throughput_in,
        "msgThroughputOut": t.msg_throughput_out,
    }


def _topic_stats_json(t: TopicLoad, uptime_s: float, measured: Mapping[str, float] | None = None) -> dict[str, Any]:
    """A topic's stats as ``broker-stats/topics`` shows them; ``measured``: its four rates as measured (rate
    noise), which its publishers and consumers share out; the counters and average size are the true rates'."""
    m = measured or _topic_rates(t)
    rate_in, rate_out, thr_in, thr_out = m["msgRateIn"], m["msgRateOut"], m["msgThroughputIn"], m["msgThroughputOut"]
    avg_size = t.msg_throughput_in / t.msg_rate_in if t.msg_rate_in else 0.0
    producers = max(t.producers, 0)
    publishers = [
        {
            "producerId": i,
            "producerName": f"sim-producer-{i}",
            "msgRateIn": rate_in / producers,
            "msgThroughputIn": thr_in / producers,
            "averageMsgSize": avg_size,
        }
        for i in range(producers)
    ]
    subs: dict[str, Any] = {}
    n_subs = len(t.subscriptions)
    for name, consumers in sorted(t.subscriptions.items()):
        sub_rate = rate_out / n_subs
        sub_thr = thr_out / n_subs
        subs[name] = {
            "consumers": [
                {
                    "consumerName": f"{name}-consumer-{i}",
                    "msgRateOut": sub_rate / consumers,
                    "msgThroughputOut": sub_thr / consumers,
                    "msgRateRedeliver": 0.0,
                    "availablePermits": 1000,
                    "unackedMessages": 0,
                    "blockedConsumerOnUnackedMsgs": False,
                }
                for i in range(consumers)
            ],
            "msgBacklog": 0,
            "msgRateExpired": 0.0,
            "msgRateOut": sub_rate,
            "msgThroughputOut": sub_thr,
            "msgRateRedeliver": 0.0,
            "numberOfEntriesSinceFirstNotAckedMessage": 1,
            "totalNonContiguousDeletedMessagesRange": 0,
            "type": "Shared",
        }
    return {
        "publishers": publishers,
        "replication": {},
        "subscriptions": subs,
        "producerCount": producers,
        "averageMsgSize": avg_size,
        "msgRateIn": rate_in,
        "msgRateOut": rate_out,
        "msgInCount": int(t.msg_rate_in * uptime_s),
        "bytesInCount": int(t.msg_throughput_in * uptime_s),
        "msgOutCount": int(t.msg_rate_out * uptime_s),
        "bytesOutCount": int(t.msg_throughput_out * uptime_s),
        "msgThroughputIn": thr_in,
        "msgThroughputOut": thr_out,
        "storageSize": 0,
        "backlogSize": 0,
        "pendingAddEntriesCount": 0,
    }


def _split_points(
    algorithm: str, lo: int, hi: int, topics: Sequence[TopicLoad], positions: Sequence[int] | None
) -> list[int] | None:
    """The split boundaries Pulsar's ``NamespaceBundleSplitAlgorithm`` named ``algorithm`` returns (None = no
    split): the core's algorithms (:mod:`pulsar_rebalance.core.pulsar.split_algorithms`), the ones the
    closed loop and the planner use, on the bundle's topics with their rates."""
    if algorithm not in SPLIT_ALGORITHM_NAMES:
        raise PulsarRestError(412, f"Unsupported namespace bundle split algorithm {algorithm}")
    rates = {
        t.name: TopicRates(t.msg_rate_in, t.msg_rate_out, t.msg_throughput_in, t.msg_throughput_out) for t in topics
    }
    try:
        return get_split_boundaries(
            algorithm,
            BundleRange(lo, hi, hi == FULL_UPPER_BOUND),
            topics=rates,
            positions=positions,
            config=_SPLIT_CONFIG,
        )
    except ScenarioError:  # specified_positions_divide without positions: "SplitBoundaries can't be empty"
        raise PulsarRestError(412, "Split bundle failed due to invalid request") from None


class _CostView:
    """What a load model's per-cluster costs read of the closed loop's cluster (``fit_costs``), of a state."""

    def __init__(self, state: ClusterState) -> None:
        self.brokers = dict(state._machines)
        self._stats: dict[str, dict[str, Any]] = {}
        for b in state._brokers:
            self._stats.update(state._bundle_stats_of(b))

    def live_brokers(self) -> list[str]:
        return list(self.brokers)

    def bundle_stats(self) -> dict[str, dict[str, Any]]:
        return self._stats


def _check_namespace_name(ns: str) -> None:
    parts = ns.split("/")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"namespace must be 'tenant/namespace', got {ns!r}")


def _check_boundaries(ns: str, bounds: list[int]) -> list[int]:
    if len(bounds) < 2:
        raise ValueError(f"namespace {ns}: need at least 2 boundaries, got {bounds}")
    if bounds[0] != FULL_LOWER_BOUND or bounds[-1] != FULL_UPPER_BOUND:
        raise ValueError(f"namespace {ns}: boundaries must start at 0x00000000 and end at 0xffffffff")
    if any(a >= b for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f"namespace {ns}: boundaries must be strictly increasing")
    return bounds
