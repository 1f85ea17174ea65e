"""The simulator's fault modes used by tests/faults: request accounting, request listeners, errors
after the effect, per-request latency, and brokers stopped, restarted or killed for good."""

from __future__ import annotations

import threading
import time

import pytest

from pulsar_rebalance.errors import AdminConnectError, AdminTimeoutError, ServerSideError
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.server import SimulatedPulsar

pytestmark = pytest.mark.timeout(60)

HOT = "tenant-b/events"  # all its bundles start on broker 0 (the leader)


def _hot_bundle(sim: SimulatedPulsar, i: int = 0) -> tuple[str, str]:
    rng = sim.state.bundle_ranges(HOT)[i]
    return rng, f"{HOT}/{rng}"


def test_requests_are_counted_and_only_changes_count_as_executed(sim, admin) -> None:
    rng, bundle = _hot_bundle(sim)
    dest = sim.broker_ids[3]
    admin.unload_bundle(HOT, rng, destination_broker=dest)  # broker 2 -> leader (307) -> owner = leader
    log = sim.requests()
    assert [(r.broker_id, r.method, r.status) for r in log] == [
        (sim.broker_ids[2], "PUT", 307),
        (sim.broker_ids[0], "PUT", 204),
    ]
    assert [r.seq for r in log] == [1, 2] and log[-1].executed == ("unload", bundle)
    assert sim.executed() == [("unload", bundle)] and sim.in_flight == 0
    second = sim.state.bundle_ranges(HOT)[1]
    admin.split_bundle(HOT, second, unload=False)
    assert sim.executed()[-1] == ("split", f"{HOT}/{second}")
    admin.bundles(HOT)  # reads are counted, never executed
    assert len(sim.executed()) == 2 and sim.requests()[-1].method == "GET"
    sim.reset_request_log()
    assert sim.requests() == [] and sim.executed() == []


def test_listener_runs_before_the_answer_is_sent(sim, admin) -> None:
    rng, bundle = _hot_bundle(sim)
    seen = []

    def hang_up(record):
        if record.executed:
            seen.append(record)
            sim.stop_broker(record.broker_id)  # dies before answering

    sim.add_request_listener(hang_up)
    with pytest.raises(AdminConnectError):
        admin.unload_bundle(HOT, rng)
    assert seen and seen[0].executed == ("unload", bundle)
    assert sim.state.owner(bundle) != sim.broker_ids[0]  # it took effect all the same
    sim.remove_request_listener(hang_up)
    sim.restart_broker(seen[0].broker_id)
    assert bundle in admin.owned_namespaces(sim.state.cluster, sim.state.owner(bundle))
    with pytest.raises(ValueError, match="is running"):
        sim.restart_broker(0)


def test_error_after_the_effect(sim, admin) -> None:
    rng, bundle = _hot_bundle(sim)
    sim.inject_request_error(500, method="PUT", path_contains=f"{rng}/unload", times=1, after_effect=True)
    with pytest.raises(ServerSideError, match="after the request took effect"):
        admin.unload_bundle(HOT, rng, destination_broker=sim.broker_ids[4])
    assert sim.state.owner(bundle) == sim.broker_ids[4] and sim.executed() == [("unload", bundle)]
    admin.unload_bundle(HOT, rng)  # used up: the next one answers normally
    assert len(sim.executed()) == 2


def test_request_latency_lets_the_client_time_out_while_the_request_lands(sim) -> None:
    rng, bundle = _hot_bundle(sim)
    sim.inject_request_latency(1.0, method="PUT", path_contains=f"{rng}/unload", times=1)
    with PulsarAdminClient.from_url(sim.admin_url, timeout=0.3, retries=0) as quick:
        with pytest.raises(AdminTimeoutError):
            quick.unload_bundle(HOT, rng, destination_broker=sim.broker_ids[1])
        assert quick.bundles(HOT)  # other requests are not delayed
    deadline = time.monotonic() + 10
    while sim.in_flight and time.monotonic() < deadline:  # the held request finishes on its own
        threading.Event().wait(0.02)
    assert sim.in_flight == 0 and sim.state.owner(bundle) == sim.broker_ids[1]


def test_kill_broker_reassigns_its_bundles_and_moves_leadership(sim) -> None:
    leader = sim.broker_ids[0]
    owned = set(sim.state.owned_bundles(leader))
    moved = sim.kill_broker(0)
    assert set(moved) == owned and leader not in moved.values()
    assert leader not in sim.broker_ids and sim.state.leader == sim.broker_ids[0]
    with PulsarAdminClient.from_url(sim.admin_url, timeout=5, retries=0) as client:
        assert leader not in client.brokers()
        assert all(sim.state.owner(b) in client.brokers() for b in owned)
    for _ in range(len(sim.broker_ids) - 1):
        sim.kill_broker(0)
    with pytest.raises(ValueError, match="last broker"):
        sim.state.remove_broker(sim.broker_ids[0])
