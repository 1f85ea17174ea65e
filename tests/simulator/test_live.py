"""The HTTP simulator as a view of the closed-loop model with its clock running (``simulator.live``): what a
client reads over real HTTP is what the closed loop reports at the same minute, what it does over HTTP (split,
unload) moves the model, and the model's brokers joining, failing and restarting change who listens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pulsar_rebalance.pulsar_admin.client import PulsarAdminClient
from pulsar_rebalance.simulator.cluster import ClusterState
from pulsar_rebalance.simulator.live import LiveCluster
from pulsar_rebalance.simulator.scenarios import build
from pulsar_rebalance.simulator.server import SimulatedPulsar
from tests.simulator.commands import refusal, start_simulator, stop
from tests.waiting import wait_for

FIELDS = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")


class Served:
    """A scenario served live, next to a twin of its model stepped directly (the reference)."""

    def __init__(self, scenario: str, seed: int = 1, load_model: str = "linear") -> None:
        self.reference = build(scenario, seed, load_model=load_model, noise=0.0).model
        model = build(scenario, seed, load_model=load_model, noise=0.0).model
        self.sim = SimulatedPulsar(ClusterState.from_model(model, cluster="live"), ephemeral=True).start()
        self.live = LiveCluster(self.sim, model)
        self.admin = PulsarAdminClient.from_url(
            self.sim.broker_urls[-1], timeout=5, retries=0
        )  # rolling-restart: not a restarting one

    def http_id(self, model_id: str) -> str:
        return next(b for b in self.sim.state.broker_ids() if self.sim.state.machine_key(b) == model_id)

    def assert_reports_match(self) -> None:
        """Every live broker's load report, read over HTTP from that broker, is the reference's."""
        want = self.reference.load_reports()
        served = self.admin.brokers("live")
        assert sorted(self.sim.state.machine_key(b) for b in served) == sorted(want)
        for b in served:
            with PulsarAdminClient.from_url(f"http://{b}", timeout=5, retries=0) as own:
                report = own.load_report(b)
            ref = want[self.sim.state.machine_key(b)]
            assert set(report["lastStats"]) == set(ref["lastStats"]), b
            for bundle, s in report["lastStats"].items():
                for f in FIELDS:
                    assert s[f] == pytest.approx(ref["lastStats"][bundle][f], rel=1e-9), (b, bundle, f)
            for res in ("cpu", "bandwidthIn", "bandwidthOut"):
                assert report[res]["usage"] == pytest.approx(ref[res]["usage"], rel=1e-6), (b, res)
                assert report[res]["limit"] == pytest.approx(ref[res]["limit"], rel=1e-6), (b, res)

    def advance(self, minutes: int) -> Any:
        self.reference.advance(minutes)
        return self.live.advance(minutes)

    def close(self) -> None:
        self.admin.close()
        self.live.stop()
        self.sim.stop()


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    s = Served(*request.param)
    try:
        yield s
    finally:
        s.close()


@pytest.mark.parametrize("served", [("periodic-jitter", 1, "convex-cpu")], indirect=True)
def test_the_served_cluster_moves_with_the_model_minute_by_minute(served: Served) -> None:
    toggled = next(t for t in served.reference.topics if t.toggle_period)  # the on/off consumer's topic
    bundle = served.reference.bundle_of_topic(toggled.name)
    owner = served.http_id(served.reference.owners[bundle])
    seen = []
    for _ in range(3):
        served.assert_reports_match()
        seen.append(served.admin.load_report(owner)["lastStats"][bundle]["msgRateOut"])
        tick = served.advance(toggled.toggle_period)
        assert tick.minute == served.reference.cycle
    # the on/off consumer's bundle is read on and off: the clock runs, not a frozen first cycle
    assert max(seen) > 1.2 * min(seen), seen


@pytest.mark.parametrize("served", [("one-hot-broker", 2, "linear")], indirect=True)
def test_what_a_client_does_over_http_moves_the_model(served: Served) -> None:
    ref = served.reference
    stats = ref.bundle_stats()
    hot = max(ref.live_brokers(), key=lambda b: ref.true_usage()[b])
    cold = min(ref.live_brokers(), key=lambda b: ref.true_usage()[b])
    owned = sorted((b for b, o in ref.owners.items() if o == hot and b in stats), key=lambda b: -stats[b]["msgRateIn"])
    moved, split = owned[0], owned[1]
    # an unload to a destination and a split at explicit boundaries, over HTTP ...
    ns, rng = moved.rsplit("/", 1)
    served.admin.unload_bundle(ns, rng, destination_broker=served.http_id(cold))
    sns, srng = split.rsplit("/", 1)
    lo, hi = (int(x, 16) for x in srng.split("_"))
    mid = (lo + hi) // 2
    served.admin.split_bundle(sns, srng, boundaries=[mid])
    # ... and the same on the reference, as the closed loop applies a plan
    ref.apply(
        {
            "splits": [{"bundle": split, "boundaries": [mid], "unloadChildren": False}],
            "unloads": [{"bundle": moved, "broker": hot, "destination": cold}],
        }
    )
    tick = served.advance(5)
    assert served.live.model.owners[moved] == cold
    assert served.live.model.namespaces[sns].boundaries == ref.namespaces[sns].boundaries
    assert tick.joined == tick.left == () and tick.moved == 0
    served.assert_reports_match()  # the hot broker reads lighter, the cold one heavier, over HTTP


@pytest.mark.parametrize("served", [("scale-up", 1, "heterogeneous-capacity")], indirect=True)
def test_a_broker_the_model_adds_listens_and_reports_as_the_same_machine(served: Served) -> None:
    before = set(served.admin.brokers("live"))
    tick = served.advance(3)  # the two joins happen at minute 2
    after = set(served.admin.brokers("live"))
    assert len(tick.joined) == 2 and after == before | set(tick.joined)
    for b in tick.joined:
        assert httpx.get(f"http://{b}/admin/v2/brokers/live", timeout=5).status_code == 200
        assert served.sim.state.machine_key(b) in served.reference.live_brokers()
    served.assert_reports_match()  # their limits are the model's machines (heterogeneous cores)


@pytest.mark.parametrize("served", [("rolling-restart", 1, "linear")], indirect=True)
def test_a_restarting_broker_stops_answering_and_comes_back_on_its_address(served: Served) -> None:
    first = served.http_id("broker-0:8080")
    tick = served.advance(2)  # broker-0 restarts at minute 2, for 2 minutes
    assert tick.left == (first,) and tick.moved > 0
    assert first not in served.admin.brokers("live")
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://{first}/admin/v2/clusters", timeout=2)
    assert first not in served.sim.state.owners().values()  # its bundles are where the model's lookup put them
    served.assert_reports_match()
    tick = served.advance(2)
    assert tick.joined == (first,) and first in served.admin.brokers("live")
    assert httpx.get(f"http://{first}/admin/v2/clusters", timeout=5).status_code == 200
    served.assert_reports_match()


@pytest.mark.parametrize("served", [("periodic-jitter", 1, "linear")], indirect=True)
def test_the_clock_thread_runs_the_model_at_its_speed(served: Served) -> None:
    served.live.start(speed=60 * 20)  # 20 simulated minutes a second
    wait_for(lambda: served.live.minute >= 2, 10, "the clock thread to pass minute 2")
    served.live.stop()
    assert served.live.minute >= 2
    for _ in range(served.live.minute):  # the thread steps minute by minute
        served.reference.advance(1)
    served.assert_reports_match()
    with pytest.raises(ValueError, match="speed must be > 0"):
        served.live.start(speed=0)


@pytest.mark.timeout(120)
def test_the_simulator_command_runs_a_scenarios_clock(tmp_path: Path) -> None:
    # scale-up: two brokers join at minute 2; 600 simulated minutes a minute is one every 0.1 s
    proc = start_simulator(["--scenario", "scale-up", "--clock", "600"])
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        assert info["clock"] == 600 and len(info["brokers"]) == 8
        with PulsarAdminClient.from_url(info["admin_url"], retries=0) as admin:
            wait_for(lambda: len(admin.brokers(info["cluster"])) == 10, 30, "the clock to pass minute 2 (two joins)")
    finally:
        out, err = stop(proc)
    assert proc.returncode == 0, err
    assert "brokers joined" in err  # the operator's log says what the clock did
    for args, message in (
        (["--clock", "60"], "--clock runs a scenario's clock: give --scenario NAME too"),
        (["--scenario", "scale-up", "--clock", "0"], "--clock must be above 0 and at most 1440"),
        (
            ["--scenario", "scale-up", "--clock", "60", "--state-file", str(tmp_path / "s.json")],
            "--clock and --state-file exclude each other",
        ),
    ):
        assert message in refusal(args)
