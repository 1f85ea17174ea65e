"""A simulated Pulsar cluster that speaks Pulsar's admin REST API (one HTTP server per broker).

* :func:`generate_cluster` — a deterministic cluster whose first rebalance has real work.
* :class:`ClusterState` — the thread-safe state with Pulsar's bundle/split/unload semantics.
* :class:`SimulatedPulsar` — the HTTP servers, with fault injection for tests.
"""

from __future__ import annotations

from pulsar_rebalance.simulator.cluster import (
    SUPPORTED_SPLIT_ALGORITHMS,
    BrokerSpec,
    ClusterState,
    PulsarRestError,
    TopicLoad,
    creation_boundaries,
    range_name,
    topic_hash,
)
from pulsar_rebalance.simulator.generator import DEFAULT_NAMESPACES, generate_cluster
from pulsar_rebalance.simulator.server import FAULTS_ENV_VAR, OAuth2Issuer, RequestRecord, SimulatedPulsar

__all__ = [
    "DEFAULT_NAMESPACES",
    "FAULTS_ENV_VAR",
    "OAuth2Issuer",
    "SUPPORTED_SPLIT_ALGORITHMS",
    "BrokerSpec",
    "ClusterState",
    "PulsarRestError",
    "RequestRecord",
    "SimulatedPulsar",
    "TopicLoad",
    "creation_boundaries",
    "generate_cluster",
    "range_name",
    "topic_hash",
]
