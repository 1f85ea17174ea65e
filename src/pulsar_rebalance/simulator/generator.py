"""Deterministic generation of a simulated cluster that gives the rebalancer real work.

The default cluster (``generate_cluster()``) is built so that a first rebalance cycle under Pulsar's
DEFAULT configuration has something to do:

* one namespace (``hot_namespace``, default ``tenant-b/events``) carries ``skew`` times the traffic of
  the others and all of its bundles sit on the first broker ("every hot bundle landed on one broker
  after a rolling restart"). With ThresholdShedder's defaults (threshold 10 %, EMA = current usage on
  the first cycle, 10 MB/s minimum to offload) that broker is overloaded versus the average by far
  more than 10 points and has several bundles;
* the hot namespace's bundles exceed ``loadBalancerNamespaceBundleMaxMsgRate`` (30,000 msg/s in+out),
  so the modular split check fires on at least one of them.

Topics are ``persistent://<ns>/topic-<i>`` plus partitioned topics ``persistent://<ns>/stream-<j>``
with partitions ``...-partition-<k>``, each hashed to a bundle by crc32 exactly as Pulsar does.
Namespaces start with Pulsar's creation boundaries (4 bundles by default). Everything derives from a
``random.Random(seed)``, so a seed always yields the same cluster.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.simulator.cluster import (
    BrokerSpec,
    ClusterState,
    TopicLoad,
    creation_boundaries,
    range_name,
    resolve_load_model,
)
from pulsar_rebalance.simulator.dynamics import ClusterModel

DEFAULT_NAMESPACES: tuple[str, ...] = ("public/default", "tenant-a/orders", "tenant-b/events")
DEFAULT_HOT_NAMESPACE = "tenant-b/events"
DEFAULT_CLUSTER_NAME = "sim-cluster"
DEFAULT_PORT_BASE = 18080

_MEDIAN_MSG_RATE = 300.0  # msg/s per topic (log-normal median)
_MSG_RATE_SIGMA = 0.8
_MSG_SIZES = (256, 512, 1024, 1024, 2048)  # bytes; 1 KiB is the most common


def generate_cluster(
    *,
    seed: int = 42,
    brokers: int = 5,
    namespaces: Sequence[str] = DEFAULT_NAMESPACES,
    topics_per_namespace: int = 24,
    partitioned_topics_per_namespace: int = 1,
    partitions: int = 4,
    bundles_per_namespace: int = 4,
    skew: float = 5.0,
    hot_namespace: str | None = DEFAULT_HOT_NAMESPACE,
    cluster: str = DEFAULT_CLUSTER_NAME,
    host: str = "127.0.0.1",
    port_base: int = DEFAULT_PORT_BASE,
    cores: int = 8,
    nic_speed_mbps: float = 1000.0,
    heap_mb: float = 4096.0,
    direct_memory_mb: float = 4096.0,
    load_model: str | None = None,
    cpu_noise: float = 0.0,
    rate_noise: float = 0.0,
) -> ClusterState:
    """Build a deterministic :class:`ClusterState`.

    Args:
        seed: everything random derives from ``random.Random(seed)``.
        brokers: number of brokers; ids are ``f"{host}:{port_base + i}"``. ``port_base=0`` gives
            placeholder ids ``host:0 .. host:N-1`` meant for ``SimulatedPulsar(..., ephemeral=True)``,
            which renames every broker to its real listening address.
        namespaces: ``tenant/ns`` names, each created with ``bundles_per_namespace`` bundles.
        topics_per_namespace: non-partitioned topics per namespace.
        partitioned_topics_per_namespace / partitions: partitioned topics and their partition count.
        skew: traffic multiplier of ``hot_namespace``. With ``skew > 1`` all hot bundles start on the
            first broker; with ``skew <= 1`` (or no hot namespace) every bundle is spread round-robin.
        cores / nic_speed_mbps / heap_mb / direct_memory_mb: per-broker capacity (cpu limit is
            ``cores * 100``; NIC in Mbit/s; memory in MiB).
        load_model: how the brokers' traffic turns into the usage they report (``ClusterState``'s
            ``load_model``: ``linear`` by default, any of the closed loop's models, ``random-<k>``); its
            per-broker draws use ``seed``. A model may scale the NICs or cores it is given.
        cpu_noise: noise on the reported CPU (``ClusterState``'s ``cpu_noise``; 0 to 1).
        rate_noise: noise on the reported rates (``ClusterState``'s ``rate_noise``; 0 to 1).

    Raises:
        ConfigError: a parameter is out of range or an unknown load model (``key`` names it).
    """
    _require(brokers >= 1, "brokers", f"brokers must be >= 1, got {brokers}")
    _require(len(set(namespaces)) == len(namespaces) > 0, "namespaces", "namespaces must be non-empty and unique")
    for ns in namespaces:
        parts = ns.split("/")
        _require(len(parts) == 2 and all(parts), "namespaces", f"namespace must be 'tenant/ns', got {ns!r}")
    _require(topics_per_namespace >= 0, "topics_per_namespace", "topics_per_namespace must be >= 0")
    _require(partitioned_topics_per_namespace >= 0, "partitioned_topics_per_namespace", "must be >= 0")
    _require(partitions >= 1, "partitions", f"partitions must be >= 1, got {partitions}")
    _require(bundles_per_namespace >= 1, "bundles_per_namespace", "bundles_per_namespace must be >= 1")
    _require(math.isfinite(skew) and skew > 0, "skew", f"skew must be a positive number, got {skew}")
    _require(0 <= cpu_noise <= 1, "cpu_noise", f"cpu_noise must be from 0 to 1, got {cpu_noise}")
    _require(0 <= rate_noise <= 1, "rate_noise", f"rate_noise must be from 0 to 1, got {rate_noise}")
    if load_model is not None:
        try:
            resolve_load_model(load_model)
        except ValueError as exc:
            raise ConfigError(str(exc), key="load_model") from None
    _require(
        hot_namespace is None or hot_namespace in namespaces,
        "hot_namespace",
        f"hot_namespace {hot_namespace!r} is not one of {list(namespaces)}",
    )
    _require(
        port_base == 0 or 0 < port_base and port_base + brokers - 1 <= 65535,
        "port_base",
        f"ports {port_base}..{port_base + brokers - 1} are not valid TCP ports",
    )

    rng = random.Random(seed)
    specs = [
        BrokerSpec(
            broker_id=f"{host}:{port_base + i if port_base else i}",
            cores=cores,
            nic_speed_mbps=nic_speed_mbps,
            heap_mb=heap_mb,
            direct_memory_mb=direct_memory_mb,
        )
        for i in range(brokers)
    ]
    boundaries = {ns: creation_boundaries(bundles_per_namespace) for ns in namespaces}

    topics: list[TopicLoad] = []
    for ns in namespaces:
        factor = skew if ns == hot_namespace else 1.0
        for i in range(topics_per_namespace):
            topics.append(_topic(rng, f"persistent://{ns}/topic-{i}", factor))
        for j in range(partitioned_topics_per_namespace):
            base_rate = _draw_rate(rng)
            for k in range(partitions):
                name = f"persistent://{ns}/stream-{j}-partition-{k}"
                topics.append(_topic(rng, name, factor, rate=base_rate * rng.uniform(0.8, 1.2)))

    owners: dict[str, str] = {}
    concentrate = hot_namespace is not None and skew > 1.0
    cursor = 1 % brokers if concentrate else 0
    for ns in namespaces:
        bounds = boundaries[ns]
        for lo, hi in zip(bounds, bounds[1:]):
            bundle = f"{ns}/{range_name(lo, hi)}"
            if concentrate and ns == hot_namespace:
                owners[bundle] = specs[0].broker_id
            else:
                owners[bundle] = specs[cursor].broker_id
                cursor = (cursor + 1) % brokers
    return ClusterState(
        cluster=cluster,
        brokers=specs,
        namespaces=boundaries,
        topics=topics,
        owners=owners,
        load_model=load_model,
        load_model_seed=seed,
        cpu_noise=cpu_noise,
        rate_noise=rate_noise,
    )


def _draw_rate(rng: random.Random) -> float:
    rate = rng.lognormvariate(math.log(_MEDIAN_MSG_RATE), _MSG_RATE_SIGMA)
    return min(max(rate, 10.0), 5000.0)


def _topic(rng: random.Random, name: str, factor: float, *, rate: float | None = None) -> TopicLoad:
    """One topic: every subscription reads every message, so out = in x #subscriptions."""
    rate_in = (rate if rate is not None else _draw_rate(rng)) * factor
    size = rng.choice(_MSG_SIZES)
    subscriptions = {f"sub-{s}": rng.randint(1, 3) for s in range(rng.randint(1, 3))}
    return TopicLoad(
        name=name,
        msg_rate_in=round(rate_in, 3),
        msg_rate_out=round(rate_in * len(subscriptions), 3),
        msg_throughput_in=round(rate_in * size, 3),
        msg_throughput_out=round(rate_in * size * len(subscriptions), 3),
        producers=rng.randint(1, 3),
        subscriptions=subscriptions,
    )


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(message, key=key)


def scenario_cluster(name: str, **options: Any) -> ClusterState:
    """The closed-loop benchmark's scenario ``name`` (``simulator.scenarios``) at its first cycle, as a
    :class:`ClusterState` to serve over HTTP (:meth:`ClusterState.from_model`): the same brokers, bundles,
    ownership and traffic, and the same load reports. ``options``: those of :func:`scenario_model_and_cluster`.

    Raises:
        ConfigError: an unknown scenario or load model (``key`` names it), or one the HTTP side cannot serve.
    """
    return scenario_model_and_cluster(name, **options)[1]


def scenario_model_and_cluster(
    name: str,
    *,
    seed: int = 1,
    load_model: str | None = None,
    cluster: str = DEFAULT_CLUSTER_NAME,
    host: str = "127.0.0.1",
    port_base: int = DEFAULT_PORT_BASE,
    cpu_noise: float | None = None,
    rate_noise: float = 0.0,
) -> tuple[ClusterModel, ClusterState]:
    """The closed-loop benchmark's scenario ``name`` for ``seed`` under ``load_model``, and the same cluster at
    its first cycle as a :class:`ClusterState` to serve over HTTP, a view of that model (to run its clock:
    :class:`pulsar_rebalance.simulator.live.LiveCluster`); CPU noise ``cpu_noise``, by default the scenario's
    own (2-3 %); noise on the reported rates ``rate_noise`` (the model's, so the closed loop's reports have it too).

    Raises:
        ConfigError: an unknown scenario or load model (``key`` names it), or one the HTTP side cannot serve.
    """
    from pulsar_rebalance.simulator.scenarios import SCENARIOS, build

    _require(cpu_noise is None or 0 <= cpu_noise <= 1, "cpu_noise", f"cpu_noise must be from 0 to 1, got {cpu_noise}")
    _require(0 <= rate_noise <= 1, "rate_noise", f"rate_noise must be from 0 to 1, got {rate_noise}")
    _require(name in SCENARIOS, "scenario", f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    try:
        model = resolve_load_model(load_model or "linear")
    except ValueError as exc:
        raise ConfigError(str(exc), key="load_model") from None
    try:
        run = build(name, seed, load_model=model, rate_noise=rate_noise)
        state = ClusterState.from_model(run.model, cluster=cluster, host=host, port_base=port_base, cpu_noise=cpu_noise)
    except ValueError as exc:
        raise ConfigError(f"scenario {name}: {exc}", key="scenario") from None
    return run.model, state
