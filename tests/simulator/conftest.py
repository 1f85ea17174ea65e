"""Fixtures of the simulator tests: a default cluster on ephemeral ports and a client of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar


@pytest.fixture
def sim() -> Iterator[SimulatedPulsar]:
    with SimulatedPulsar(generate_cluster(), ephemeral=True) as s:
        yield s


@pytest.fixture
def admin(sim: SimulatedPulsar) -> Iterator[PulsarAdminClient]:
    # talk to broker 2: neither the leader nor the owner of the hot bundles, so requests redirect
    with PulsarAdminClient.from_url(sim.broker_urls[2], timeout=5, retries=0) as client:
        yield client
