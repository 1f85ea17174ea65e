"""The simulator over real HTTP (ephemeral ports), driven through PulsarAdminClient."""

from __future__ import annotations

import bisect
import json
import os
import signal
import subprocess
import sys
import threading
import zlib
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from pulsar_rebalance.errors import ConflictError, NotAuthorizedError, NotFoundError, PreconditionFailedError
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.cluster import ClusterState
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar

pytestmark = pytest.mark.timeout(60)

HOT = "tenant-b/events"  # all its bundles start on broker 0 (the leader)


def _range_of(topic: str, boundaries: list[str]) -> str:
    bounds = [int(b, 16) for b in boundaries]
    h = zlib.crc32(topic.encode()) & 0xFFFFFFFF
    i = bisect.bisect_right(bounds, h) - 1
    return f"0x{bounds[i]:08x}_0x{bounds[i + 1]:08x}"


def _owner_via_api(admin: PulsarAdminClient, cluster: str, bundle: str) -> str:
    owners = [b for b in admin.brokers() if bundle in admin.owned_namespaces(cluster, b)]
    assert len(owners) == 1, owners
    return owners[0]


def test_cluster_wide_shapes(sim: SimulatedPulsar, admin: PulsarAdminClient) -> None:
    assert admin.clusters() == ["sim-cluster"]
    assert admin.brokers() == sim.broker_ids == admin.brokers("sim-cluster")
    assert all(b.startswith("127.0.0.1:") and f"http://{b}" in sim.broker_urls for b in sim.broker_ids)
    assert admin.leader_broker() == {"serviceUrl": sim.admin_url, "brokerId": sim.broker_ids[0]}
    assert admin.tenants() == ["public", "tenant-a", "tenant-b"]
    assert admin.namespaces("tenant-a") == ["tenant-a/orders"]
    owned = admin.owned_namespaces("sim-cluster", sim.broker_ids[1])  # redirected to broker 1
    assert set(owned) == set(sim.state.owned_bundles(sim.broker_ids[1])) | {
        f"pulsar/sim-cluster/{sim.broker_ids[1]}/0x00000000_0xffffffff",  # heartbeat namespaces, as real brokers
        f"pulsar/{sim.broker_ids[1]}/0x00000000_0xffffffff",
    }
    assert all(v == {"broker_assignment": "shared", "is_controlled": False, "is_active": True} for v in owned.values())
    assert admin.bundles("public/default") == {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
        "numBundles": 4,
    }


def test_unknown_things_are_404(admin: PulsarAdminClient) -> None:
    with pytest.raises(NotFoundError) as info:
        admin.bundles("tenant-a/missing")
    assert info.value.status_code == 404 and "Namespace does not exist" in str(info.value)
    with pytest.raises(NotFoundError):
        admin.namespaces("no-such-tenant")
    with pytest.raises(NotFoundError):
        admin.brokers("other-cluster")
    with pytest.raises(NotFoundError):
        admin.owned_namespaces("sim-cluster", "127.0.0.1:1")


def test_raw_http_unknown_path_and_wrong_method(sim: SimulatedPulsar) -> None:
    with httpx.Client(base_url=sim.admin_url, timeout=5) as http:
        missing = http.get("/admin/v2/nope")
        assert missing.status_code == 404 and "reason" in missing.json()
        wrong = http.post("/admin/v2/brokers")
        assert wrong.status_code == 405 and "reason" in wrong.json()


def test_load_report_is_local_broker_data_and_sums_match_topic_stats(
    sim: SimulatedPulsar, admin: PulsarAdminClient
) -> None:
    for broker in sim.broker_ids:
        report = admin.load_report(broker)
        assert report["loadReportType"] == "LocalBrokerData"
        assert report["webServiceUrl"] == f"http://{broker}"
        for key in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut"):
            assert set(report[key]) == {"usage", "limit"} and report[key]["limit"] > 0
        topics = admin.topic_stats(broker)
        per_bundle: dict[str, list[dict]] = {}
        for ns, bundles in topics.items():
            for rng, domains in bundles.items():
                for stats_by_topic in domains.values():
                    per_bundle.setdefault(f"{ns}/{rng}", []).extend(stats_by_topic.values())
        assert set(report["lastStats"]) == set(per_bundle) == set(report["bundles"])
        for bundle, stats in report["lastStats"].items():
            assert set(stats) == {
                "msgRateIn",
                "msgThroughputIn",
                "msgRateOut",
                "msgThroughputOut",
                "consumerCount",
                "producerCount",
                "topics",
                "cacheSize",
            }
            assert stats["topics"] == len(per_bundle[bundle])
            assert stats["msgRateIn"] == pytest.approx(sum(t["msgRateIn"] for t in per_bundle[bundle]))
            assert stats["msgThroughputOut"] == pytest.approx(sum(t["msgThroughputOut"] for t in per_bundle[bundle]))
            assert stats["producerCount"] == sum(t["producerCount"] for t in per_bundle[bundle])
        assert report["msgRateOut"] == pytest.approx(sum(s["msgRateOut"] for s in report["lastStats"].values()))
        assert report["numBundles"] == len(report["lastStats"])


def test_topics_sit_in_their_crc32_bundle(admin: PulsarAdminClient, sim: SimulatedPulsar) -> None:
    seen = 0
    for broker in sim.broker_ids:
        for ns, bundles in admin.topic_stats(broker).items():
            boundaries = admin.bundles(ns)["boundaries"]
            for rng, domains in bundles.items():
                for topic in domains["persistent"]:
                    assert _range_of(topic, boundaries) == rng
                    seen += 1
    assert seen == len(sim.state.topics())


def test_lookup_and_hash_positions_agree_with_crc32(admin: PulsarAdminClient) -> None:
    topic = "persistent://tenant-a/orders/topic-5"
    rng = _range_of(topic, admin.bundles("tenant-a/orders")["boundaries"])
    owner = _owner_via_api(admin, "sim-cluster", f"tenant-a/orders/{rng}")
    lookup = admin.lookup_topic(topic)
    assert lookup["httpUrl"] == f"http://{owner}" and lookup["brokerUrl"] == f"pulsar://{owner}"
    positions = admin.topic_hash_positions("tenant-a/orders", rng, [topic])  # redirected to the owner
    assert positions == {
        "namespace": "tenant-a/orders",
        "bundle": rng,
        "topicHashPositions": {topic: zlib.crc32(topic.encode()) & 0xFFFFFFFF},
    }
    everything = admin.topic_hash_positions("tenant-a/orders", rng)
    assert topic in everything["topicHashPositions"] and len(everything["topicHashPositions"]) > 1


def test_default_split_follows_redirect_and_changes_bundles_exactly(
    sim: SimulatedPulsar, admin: PulsarAdminClient
) -> None:
    owner = sim.broker_ids[0]
    assert sim.state.owner(f"{HOT}/0xc0000000_0xffffffff") == owner != sim.broker_ids[2]
    admin.split_bundle(HOT, "0xc0000000_0xffffffff")
    # range_equally_divide: 0xc0000000 + (0xffffffff - 0xc0000000) // 2 = 0xdfffffff
    assert admin.bundles(HOT) == {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xdfffffff", "0xffffffff"],
        "numBundles": 5,
    }
    owned = admin.owned_namespaces("sim-cluster", owner)
    assert f"{HOT}/0xc0000000_0xdfffffff" in owned and f"{HOT}/0xdfffffff_0xffffffff" in owned


def test_split_with_explicit_boundaries(admin: PulsarAdminClient) -> None:
    admin.split_bundle(HOT, "0x00000000_0x40000000", boundaries=[0x30000000, 0x10000000])
    assert admin.bundles(HOT)["boundaries"][:5] == [
        "0x00000000",
        "0x10000000",
        "0x30000000",
        "0x40000000",
        "0x80000000",
    ]


def test_invalid_splits_answer_412_and_change_nothing(admin: PulsarAdminClient) -> None:
    before = admin.bundles(HOT)
    with pytest.raises(PreconditionFailedError) as info:
        admin.split_bundle(HOT, "0x00000000_0x40000000", algorithm="specified_positions_divide")
    assert info.value.status_code == 412 and "splitBoundaries must not be empty" in str(info.value)
    with pytest.raises(PreconditionFailedError, match="Unsupported namespace bundle split algorithm"):
        admin.split_bundle(HOT, "0x00000000_0x40000000", algorithm="no_such_algorithm")
    with pytest.raises(PreconditionFailedError):
        admin.split_bundle(HOT, "0x00000000_0x20000000")  # not a current bundle
    # Pulsar quirk: out-of-range positions are filtered out -> completes WITHOUT splitting (204)
    admin.split_bundle(HOT, "0x00000000_0x40000000", boundaries=[0x50000000])
    assert admin.bundles(HOT) == before


def test_split_with_unload_replaces_children(sim: SimulatedPulsar, admin: PulsarAdminClient) -> None:
    admin.split_bundle(HOT, "0x40000000_0x80000000", unload=True)
    for child in (f"{HOT}/0x40000000_0x60000000", f"{HOT}/0x60000000_0x80000000"):
        assert _owner_via_api(admin, "sim-cluster", child) != sim.broker_ids[0]


def test_unload_with_destination_moves_ownership_and_load(sim: SimulatedPulsar, admin: PulsarAdminClient) -> None:
    source, dest = sim.broker_ids[0], sim.broker_ids[4]
    bundle = f"{HOT}/0x00000000_0x40000000"
    moved = admin.load_report(source)["lastStats"][bundle]
    before_src, before_dst = admin.load_report(source), admin.load_report(dest)
    admin.unload_bundle(HOT, "0x00000000_0x40000000", destination_broker=dest)
    assert _owner_via_api(admin, "sim-cluster", bundle) == dest
    after_src, after_dst = admin.load_report(source), admin.load_report(dest)
    assert bundle in after_dst["lastStats"] and bundle not in after_src["lastStats"]
    assert after_dst["msgRateIn"] == pytest.approx(before_dst["msgRateIn"] + moved["msgRateIn"])
    assert after_src["msgThroughputOut"] == pytest.approx(before_src["msgThroughputOut"] - moved["msgThroughputOut"])
    assert after_dst["bandwidthOut"]["usage"] > before_dst["bandwidthOut"]["usage"]
    assert after_dst["lastBundleGains"] == [bundle] and after_src["lastBundleLosses"] == [bundle]


def test_unload_to_inactive_destination_is_409(admin: PulsarAdminClient) -> None:
    with pytest.raises(ConflictError, match="inactive destination broker"):
        admin.unload_bundle(HOT, "0x00000000_0x40000000", destination_broker="127.0.0.1:1")


def test_unload_without_destination_replaces_elsewhere(sim: SimulatedPulsar, admin: PulsarAdminClient) -> None:
    admin.unload_bundle(HOT, "0x80000000_0xc0000000")
    assert _owner_via_api(admin, "sim-cluster", f"{HOT}/0x80000000_0xc0000000") != sim.broker_ids[0]


def test_redirect_location_is_pulsar_shaped(sim: SimulatedPulsar) -> None:
    owner_of_hot = sim.broker_ids[0]  # also the leader
    with httpx.Client(timeout=5) as http:
        # from a non-leader broker: authoritative=false, same path, owner's host:port
        r = http.put(f"{sim.broker_urls[3]}/admin/v2/namespaces/{HOT}/0x00000000_0x40000000/unload")
        assert r.status_code == 307
        loc = urlsplit(r.headers["Location"])
        assert loc.netloc == owner_of_hot
        assert loc.path == f"/admin/v2/namespaces/{HOT}/0x00000000_0x40000000/unload"
        assert parse_qs(loc.query) == {"authoritative": ["false"]}
        # from the leader about a bundle it does not own: authoritative=true
        bundle = next(b for b, o in sim.state.owners().items() if o != sim.broker_ids[0])
        other = sim.state.owner(bundle)
        r = http.put(f"{sim.admin_url}/admin/v2/namespaces/{bundle}/split?unload=false")
        assert r.status_code == 307
        loc = urlsplit(r.headers["Location"])
        assert loc.netloc == other and parse_qs(loc.query) == {"unload": ["false"], "authoritative": ["true"]}
        # destinationBroker on a non-leader goes to the leader first (modular load manager)
        r = http.put(
            f"{sim.broker_urls[3]}/admin/v2/namespaces/tenant-a/orders/0x00000000_0x40000000/unload",
            params={"destinationBroker": sim.broker_ids[1]},
        )
        assert r.status_code == 307 and urlsplit(r.headers["Location"]).netloc == sim.broker_ids[0]


def test_token_auth(tmp_path) -> None:
    with SimulatedPulsar(generate_cluster(), ephemeral=True, token="s3cret-token") as sim:
        with PulsarAdminClient.from_url(sim.broker_urls[2], retries=0, timeout=5) as anonymous:
            with pytest.raises(NotAuthorizedError) as info:
                anonymous.brokers()
            assert info.value.status_code == 401
        with PulsarAdminClient.from_url(sim.broker_urls[2], token="wrong", retries=0, timeout=5) as wrong:
            with pytest.raises(NotAuthorizedError):
                wrong.tenants()
        with PulsarAdminClient.from_url(sim.broker_urls[2], token="s3cret-token", retries=0, timeout=5) as admin:
            assert admin.brokers() == sim.broker_ids
            # a PUT redirected to another broker (another port) still carries the token
            admin.split_bundle(HOT, "0x00000000_0x40000000")
            assert admin.bundles(HOT)["numBundles"] == 5
            assert admin.load_report(sim.broker_ids[4])["loadReportType"] == "LocalBrokerData"


def test_state_file_survives_restart(tmp_path) -> None:
    path = tmp_path / "sim-state.json"
    state = generate_cluster()
    state.state_file = path
    with SimulatedPulsar(state, ephemeral=True) as sim, PulsarAdminClient.from_url(sim.admin_url, retries=0) as admin:
        admin.split_bundle("tenant-a/orders", "0x00000000_0x40000000")
        admin.unload_bundle(HOT, "0x00000000_0x40000000", destination_broker=sim.broker_ids[3])
    restored = ClusterState.load(path)
    with (
        SimulatedPulsar(restored, ephemeral=True) as sim2,
        PulsarAdminClient.from_url(sim2.admin_url, retries=0) as admin2,
    ):
        assert admin2.bundles("tenant-a/orders")["numBundles"] == 5
        # ownership kept by broker position although the ephemeral ports changed
        assert _owner_via_api(admin2, "sim-cluster", f"{HOT}/0x00000000_0x40000000") == sim2.broker_ids[3]


@pytest.mark.parametrize("auth", ["token", "oauth2"])
def test_cli_prints_ready_line_and_stops_on_sigterm(tmp_path, auth) -> None:
    """Token or OAuth2 issuer (``--oauth2-client-id`` + ``--oauth2-secret-env``): secrets only from the environment."""
    ready_file = tmp_path / "ready.json"
    code = (
        "import argparse, sys\n"
        "from pulsar_rebalance.cli import simulator_command as m\n"
        "p = argparse.ArgumentParser(); sub = p.add_subparsers(); m.register(sub)\n"
        "a = p.parse_args(sys.argv[1:]); raise SystemExit(a.func(a))\n"
    )
    env = {**os.environ, "SIM_TEST_TOKEN": "tok-123"}
    auth_args = (
        ["--token-env", "SIM_TEST_TOKEN"]
        if auth == "token"
        else ["--oauth2-client-id", "svc", "--oauth2-secret-env", "SIM_TEST_TOKEN", "--oauth2-token-lifetime", "30"]
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "simulator",
            "--brokers",
            "2",
            "--port-base",
            "0",
            *auth_args,
            "--ready-file",
            str(ready_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=30)
        stderr = proc.stderr.read() if proc.poll() is not None else "(still running)"
        assert line and line[0].strip(), f"no ready line; stderr={stderr}"
        ready = json.loads(line[0])
        assert ready == json.loads(ready_file.read_text())
        assert len(ready["brokers"]) == 2 and ready["admin_url"] == f"http://{ready['brokers'][0]}"
        assert "tok-123" not in " ".join(proc.args)
        if auth == "token":
            credentials: dict = {"token": "tok-123"}
        else:
            from pulsar_rebalance.pulsar_admin.oauth2 import OAuth2Settings

            assert ready["issuer_url"] == ready["admin_url"] + "/oauth2"
            credentials = {"oauth2": OAuth2Settings(ready["issuer_url"], "svc", "tok-123")}
        with PulsarAdminClient.from_url(ready["admin_url"], retries=0, timeout=5, **credentials) as admin:
            assert admin.brokers() == ready["brokers"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--brokers", "0"], "--brokers must be from 1 to 2000"),
        (["--brokers", "100000"], "--brokers must be from 1 to 2000"),
        (["--brokers", "50", "--port-base", "65500"], "runs past TCP port 65535"),
    ],
)
def test_cli_refuses_an_unbounded_or_impossible_cluster_in_one_line(args, message) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", "simulator", *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------------- placement constraints


def _policy(namespaces: list[str], primary: list[str], secondary: list[str] = (), min_limit: str = "1") -> dict:
    return {
        "namespaces": namespaces,
        "primary": primary,
        "secondary": list(secondary),
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": min_limit, "usage_threshold": "80"},
        },
    }


def _id_regex(broker_id: str) -> str:
    return broker_id.replace(".", r"\.")


def test_isolation_policy_endpoints_answer_as_pulsar(sim: SimulatedPulsar, admin: PulsarAdminClient) -> None:
    base = "/admin/v2/clusters/sim-cluster/namespaceIsolationPolicies"
    with httpx.Client(base_url=sim.admin_url, timeout=5) as http:
        # never set: ClustersBase.internalGetNamespaceIsolationPolicies answers 404, the client reads "none"
        never = http.get(base)
        assert never.status_code == 404
        assert never.json() == {"reason": "NamespaceIsolationPolicies for cluster sim-cluster does not exist"}
        assert admin.namespace_isolation_policies("sim-cluster") == {}
        unknown = http.get("/admin/v2/clusters/other/namespaceIsolationPolicies")
        assert unknown.status_code == 404 and unknown.json()["reason"] == "Cluster other does not exist."
        with pytest.raises(NotFoundError):  # an unknown cluster is not "no policies"
            admin.namespace_isolation_policies("other")

        policy = _policy(["tenant-b/.*"], [_id_regex(sim.broker_ids[3])])
        created = http.post(f"{base}/iso-b", params={"unloadBundles": "false"}, json=policy)
        assert created.status_code == 204 and created.content == b""
        assert admin.namespace_isolation_policies("sim-cluster") == {"iso-b": policy}
        assert http.get(f"{base}/iso-b").json() == policy
        missing = http.get(f"{base}/nope")
        assert missing.status_code == 404
        assert missing.json()["reason"] == "Cannot find NamespaceIsolationPolicy nope for cluster sim-cluster"
        assert http.get("/admin/v2/clusters/other/namespaceIsolationPolicies/iso-b").status_code == 412

        # NamespaceIsolationDataImpl.validate: 400, nothing stored
        for bad in (_policy(["tenant-b/.*"], ["("]), _policy([], ["x"]), {**policy, "auto_failover_policy": None}):
            refused = http.post(f"{base}/bad", json=bad)
            assert refused.status_code == 400, refused.text
            assert refused.json()["reason"].startswith("Invalid format of input policy data. policy: bad; data: ")
        assert set(admin.namespace_isolation_policies("sim-cluster")) == {"iso-b"}

        assert http.delete(f"{base}/iso-b").status_code == 204
        assert admin.namespace_isolation_policies("sim-cluster") == {}  # the node exists now: {} (200)
        assert http.get(base).status_code == 200


def test_failure_domain_and_anti_affinity_endpoints_answer_as_pulsar(
    sim: SimulatedPulsar, admin: PulsarAdminClient
) -> None:
    b = sim.broker_ids
    with httpx.Client(base_url=sim.admin_url, timeout=5) as http:
        assert admin.failure_domains("sim-cluster") == {}
        assert http.get("/admin/v2/clusters/other/failureDomains").json() == {}  # getFailureDomains checks no cluster
        assert (
            http.post("/admin/v2/clusters/sim-cluster/failureDomains/rack-a", json={"brokers": b[:2]}).status_code
            == 204
        )
        clash = http.post("/admin/v2/clusters/sim-cluster/failureDomains/rack-b", json={"brokers": [b[1], b[2]]})
        assert clash.status_code == 409 and clash.json()["reason"] == f"[{b[1]}] already exists in rack-a"
        assert (
            http.post("/admin/v2/clusters/sim-cluster/failureDomains/rack-b", json={"brokers": b[2:4]}).status_code
            == 204
        )
        assert admin.failure_domains("sim-cluster") == {"rack-a": {"brokers": b[:2]}, "rack-b": {"brokers": b[2:4]}}
        assert http.get("/admin/v2/clusters/sim-cluster/failureDomains/rack-b").json() == {"brokers": b[2:4]}
        assert http.delete("/admin/v2/clusters/sim-cluster/failureDomains/rack-b").status_code == 200
        assert http.delete("/admin/v2/clusters/sim-cluster/failureDomains/rack-b").status_code == 404
        assert http.post("/admin/v2/clusters/other/failureDomains/x", json={"brokers": []}).status_code == 412

        path = "/admin/v2/namespaces/tenant-a/orders/antiAffinity"
        unset = http.get(path)  # internalGetNamespaceAntiAffinityGroup returns null: 204, no body
        assert unset.status_code == 204 and unset.content == b""
        assert admin.namespace_anti_affinity_group("tenant-a/orders") is None
        # PulsarAdmin posts the group as a raw string entity; Jersey answers the String unquoted
        assert http.post(path, content=b"orders-group", headers={"Content-Type": "application/json"}).status_code == 204
        got = http.get(path)
        assert got.status_code == 200 and got.content == b"orders-group"
        assert got.headers["content-type"] == "application/json"
        assert admin.namespace_anti_affinity_group("tenant-a/orders") == "orders-group"
        blank = http.post(path, content=b"  ")
        assert blank.status_code == 412 and blank.json()["reason"] == "antiAffinityGroup can't be empty"
        assert http.delete(path).status_code == 204
        assert admin.namespace_anti_affinity_group("tenant-a/orders") is None


def test_isolation_policy_decides_where_unloaded_bundles_land(sim: SimulatedPulsar, admin: PulsarAdminClient) -> None:
    """Setting a policy unloads the namespaces it matches (``unloadBundles`` defaults to true) and every later
    placement starts from applyNamespacePolicies: the primaries, the secondaries when fewer than min_limit
    primaries are up, and never a primary of some policy for a namespace without one."""
    b = sim.broker_ids
    with httpx.Client(base_url=sim.admin_url, timeout=5) as http:
        policy = _policy([HOT], [_id_regex(b[3])], [_id_regex(b[4])], min_limit="1")
        assert (
            http.post("/admin/v2/clusters/sim-cluster/namespaceIsolationPolicies/hot", json=policy).status_code == 204
        )
    hot = [x for x in sim.state.owners() if x.startswith(f"{HOT}/")]
    assert {sim.state.owner(x) for x in hot} == {b[3]}  # moved off broker 0 by the policy's unload
    admin.unload_bundle(HOT, "0x00000000_0x40000000")
    assert _owner_via_api(admin, "sim-cluster", f"{HOT}/0x00000000_0x40000000") == b[3]  # the only primary
    for rng in sim.state.bundle_ranges("tenant-a/orders"):
        admin.unload_bundle("tenant-a/orders", rng)
    assert b[3] not in {sim.state.owner(f"tenant-a/orders/{r}") for r in sim.state.bundle_ranges("tenant-a/orders")}

    sim.kill_broker(b[3])  # fewer primaries than min_limit: the secondaries take over
    assert {sim.state.owner(x) for x in hot} == {b[4]}


def test_anti_affinity_group_spreads_namespaces_over_brokers(sim: SimulatedPulsar, admin: PulsarAdminClient) -> None:
    """filterAntiAffinityGroupOwnedBrokers: a bundle goes to a broker owning no namespace of its group
    (while there is one), even one busier than a broker the group already uses."""
    group = ("tenant-a/orders", HOT, "public/default")
    with httpx.Client(base_url=sim.admin_url, timeout=5) as http:
        for ns in group[:2]:
            assert http.post(f"/admin/v2/namespaces/{ns}/antiAffinity", content=b"g").status_code == 204
    for rng in sim.state.bundle_ranges("tenant-a/orders")[1:]:  # orders' other bundles onto broker 1
        admin.unload_bundle("tenant-a/orders", rng, destination_broker=sim.broker_ids[1])
    moving = f"tenant-a/orders/{sim.state.bundle_ranges('tenant-a/orders')[0]}"
    used = {o for x, o in sim.state.owners().items() if x.rpartition("/")[0] in group[:2] and x != moving}
    assert used == {sim.broker_ids[0], sim.broker_ids[1]}  # HOT on broker 0 (the leader), orders on 1
    admin.unload_bundle("tenant-a/orders", moving.rpartition("/")[2])
    assert sim.state.owner(moving) not in used
    assert sim.state.anti_affinity_group(group[2]) is None


def test_placement_constraints_survive_the_state_file(tmp_path) -> None:
    path = tmp_path / "sim-state.json"
    state = generate_cluster()
    state.state_file = path
    with SimulatedPulsar(state, ephemeral=True) as sim, httpx.Client(base_url=sim.admin_url, timeout=5) as http:
        policy = _policy(["tenant-a/.*"], ["127\\.0\\.0\\.1:.*"])
        http.post(
            "/admin/v2/clusters/sim-cluster/namespaceIsolationPolicies/p",
            params={"unloadBundles": "false"},
            json=policy,
        )
        http.post("/admin/v2/clusters/sim-cluster/failureDomains/rack", json={"brokers": [sim.broker_ids[1]]})
        http.post("/admin/v2/namespaces/public/default/antiAffinity", content=b"grp")
    restored = ClusterState.load(path)
    with SimulatedPulsar(restored, ephemeral=True) as sim2, PulsarAdminClient.from_url(sim2.admin_url) as admin2:
        assert admin2.namespace_isolation_policies("sim-cluster") == {"p": policy}
        # the failure domain's broker follows its position when the ephemeral ports change
        assert admin2.failure_domains("sim-cluster") == {"rack": {"brokers": [sim2.broker_ids[1]]}}
        assert admin2.namespace_anti_affinity_group("public/default") == "grp"
    with pytest.raises(ValueError, match=r"namespaceIsolationPolicies\.p\.primary\[0\]: invalid policy regex"):
        ClusterState.from_snapshot(
            {**restored.snapshot(), "namespaceIsolationPolicies": {"p": _policy(["a/b"], ["("])}}
        )


def test_a_broker_added_to_a_running_cluster_is_listed_empty_and_takes_an_unload(
    sim: SimulatedPulsar, admin: PulsarAdminClient
) -> None:
    """Scale-out: the new broker listens on its own port, every broker lists it, it owns nothing and
    reports no load until an unload with ``destinationBroker`` moves a bundle onto it."""
    before = sim.state.owners()
    new = sim.add_broker()
    assert new not in before.values() and new == sim.broker_ids[-1]
    assert new in admin.brokers(sim.state.cluster)

    def owned(broker: str) -> list[str]:  # answered by the broker itself; without its heartbeat namespaces
        return [b for b in admin.owned_namespaces(sim.state.cluster, broker) if not b.startswith("pulsar/")]

    assert owned(new) == []
    assert admin.load_report(new)["numBundles"] == 0
    bundle = next(iter(before))
    namespace, bundle_range = bundle.rsplit("/", 1)
    admin.unload_bundle(namespace, bundle_range, destination_broker=new)
    assert sim.state.owner(bundle) == new
    assert owned(new) == [bundle]
    assert {b: o for b, o in sim.state.owners().items() if b != bundle} == {
        b: o for b, o in before.items() if b != bundle
    }
    with pytest.raises(ValueError, match="already in the cluster"):
        sim.state.add_broker(sim.state.broker_spec(new))
