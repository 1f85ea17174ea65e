"""PulsarAdminClient: error mapping, retries, redirects and auth forwarding.

Transport failures and faults use the real simulator over HTTP; the status-code table and the
request-count assertions use httpx.MockTransport (no network).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator

import httpx
import pytest

from pulsar_rebalance.errors import (
    AdminConnectError,
    AdminTimeoutError,
    ConflictError,
    MalformedResponseError,
    NotAuthorizedError,
    NotFoundError,
    PreconditionFailedError,
    PulsarAdminError,
    ServerSideError,
)
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar

pytestmark = pytest.mark.timeout(60)

BASE = "http://broker-0.pulsar:8080"


@pytest.fixture
def sim() -> Iterator[SimulatedPulsar]:
    with SimulatedPulsar(generate_cluster(brokers=3), ephemeral=True) as s:
        yield s


def _mock_client(
    handler: Callable[[httpx.Request], httpx.Response], *, token: str | None = None, retries: int = 2
) -> tuple[PulsarAdminClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.Client(base_url=BASE, transport=httpx.MockTransport(record), headers=headers)
    return PulsarAdminClient(http, retries=retries, backoff_s=0.0), seen


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------- against the simulator


def test_unreachable_url_is_connect_error_naming_the_url() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with PulsarAdminClient.from_url(url, retries=1, timeout=2, backoff_s=0.0) as admin:
        with pytest.raises(AdminConnectError) as info:
            admin.brokers()
    assert url in str(info.value) and info.value.url == f"{url}/admin/v2/brokers"
    assert info.value.retryable and info.value.status_code is None


def test_broker_answering_500_is_server_side_error(sim: SimulatedPulsar) -> None:
    sim.inject_error(1, 500)
    with PulsarAdminClient.from_url(sim.admin_url, retries=1, timeout=5, backoff_s=0.0) as admin:
        with pytest.raises(ServerSideError) as info:
            admin.load_report(sim.broker_ids[1])
        assert info.value.status_code == 500 and sim.broker_ids[1] in str(info.value)
        assert "Injected fault" in str(info.value)
        assert admin.load_report(sim.broker_ids[2])["loadReportType"] == "LocalBrokerData"  # others unaffected


def test_get_is_retried_after_a_transient_500(sim: SimulatedPulsar) -> None:
    sim.inject_error(0, 503, times=2)
    with PulsarAdminClient.from_url(sim.admin_url, retries=2, timeout=5, backoff_s=0.0) as admin:
        assert admin.tenants() == ["public", "tenant-a", "tenant-b"]


def test_malformed_load_report(sim: SimulatedPulsar) -> None:
    sim.inject_malformed_load_report(sim.broker_ids[2])
    with PulsarAdminClient.from_url(sim.admin_url, retries=0, timeout=5) as admin:
        with pytest.raises(MalformedResponseError) as info:
            admin.load_report(sim.broker_ids[2])
    assert sim.broker_ids[2] in str(info.value) and "not JSON" in str(info.value)
    assert info.value.body  # truncated body kept for diagnosis


def test_unknown_namespace_is_not_found(sim: SimulatedPulsar) -> None:
    with PulsarAdminClient.from_url(sim.admin_url, retries=0) as admin:
        with pytest.raises(NotFoundError) as info:
            admin.bundles("tenant-x/none")
    assert info.value.status_code == 404 and "/admin/v2/namespaces/tenant-x/none/bundles" in str(info.value)


def test_slow_broker_is_timeout_error(sim: SimulatedPulsar) -> None:
    sim.inject_latency(0, 1.0)
    with PulsarAdminClient.from_url(sim.admin_url, retries=0, timeout=0.2) as admin:
        with pytest.raises(AdminTimeoutError) as info:
            admin.clusters()
    assert info.value.retryable and sim.admin_url in str(info.value)


def test_fault_spec_strings(sim: SimulatedPulsar) -> None:
    sim.apply_fault_spec(f"1:error=502,{sim.broker_ids[2]}:malformed-load-report")
    with PulsarAdminClient.from_url(sim.admin_url, retries=0, timeout=5) as admin:
        with pytest.raises(ServerSideError):
            admin.topic_stats(sim.broker_ids[1])
        with pytest.raises(MalformedResponseError):
            admin.load_report(sim.broker_ids[2])
        sim.clear_faults()
        assert admin.topic_stats(sim.broker_ids[1])
    with pytest.raises(ValueError, match="unknown kind"):
        sim.apply_fault_spec("0:explode")


# ---------------------------------------------------------------------- status mapping (MockTransport)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, NotAuthorizedError),
        (403, NotAuthorizedError),
        (404, NotFoundError),
        (409, ConflictError),
        (412, PreconditionFailedError),
        (500, ServerSideError),
        (503, ServerSideError),
    ],
)
def test_status_codes_map_to_errors(status: int, error: type[PulsarAdminError]) -> None:
    admin, _ = _mock_client(lambda r: httpx.Response(status, json={"reason": "Pulsar says no"}), retries=0)
    with pytest.raises(error) as info:
        admin.unload_bundle("t/ns", "0x00000000_0x40000000")
    assert info.value.status_code == status
    assert str(info.value).startswith(f"PUT {BASE}/admin/v2/namespaces/t/ns/0x00000000_0x40000000/unload -> {status}")
    assert "Pulsar says no" in str(info.value)


def test_other_4xx_is_the_base_error_and_not_retryable() -> None:
    admin, seen = _mock_client(lambda r: httpx.Response(400, text="bad"), retries=3)
    with pytest.raises(PulsarAdminError) as info:
        admin.tenants()
    assert type(info.value) is PulsarAdminError and len(seen) == 1


def test_get_retries_are_bounded() -> None:
    admin, seen = _mock_client(lambda r: httpx.Response(500, json={"reason": "down"}), retries=2)
    with pytest.raises(ServerSideError):
        admin.brokers()
    assert len(seen) == 3


def test_put_is_never_retried() -> None:
    admin, seen = _mock_client(lambda r: httpx.Response(503, json={"reason": "busy"}), retries=5)
    with pytest.raises(ServerSideError):
        admin.split_bundle("t/ns", "0x00000000_0x40000000")
    assert len(seen) == 1


def test_4xx_get_is_not_retried() -> None:
    admin, seen = _mock_client(lambda r: httpx.Response(404, json={"reason": "Namespace does not exist"}), retries=5)
    with pytest.raises(NotFoundError):
        admin.bundles("t/ns")
    assert len(seen) == 1


def test_split_request_shape() -> None:
    admin, seen = _mock_client(lambda r: httpx.Response(204))
    admin.split_bundle("t/ns", "0x00000000_0x40000000", unload=True, boundaries=[0x10, 0x20])
    admin.split_bundle("t/ns", "0x00000000_0x40000000")
    explicit, default = seen
    assert explicit.method == "PUT" and explicit.url.path == "/admin/v2/namespaces/t/ns/0x00000000_0x40000000/split"
    assert dict(explicit.url.params) == {"unload": "true", "splitAlgorithmName": "specified_positions_divide"}
    assert json.loads(explicit.content) == [16, 32]
    assert dict(default.url.params) == {"unload": "false"} and default.content == b""
    with pytest.raises(ValueError, match="specified_positions_divide"):
        admin.split_bundle("t/ns", "0x00000000_0x40000000", algorithm="range_equally_divide", boundaries=[1])


def test_unload_request_shape() -> None:
    admin, seen = _mock_client(lambda r: httpx.Response(204))
    admin.unload_bundle("t/ns", "0x00000000_0x40000000", destination_broker="10.0.0.7:8080")
    assert dict(seen[0].url.params) == {"destinationBroker": "10.0.0.7:8080"}


@pytest.mark.parametrize(
    ("method", "body", "fragment"),
    [
        ("brokers", {"not": "a list"}, "expected a JSON array of strings"),
        ("bundles", {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 4}, "numBundles=4"),
        ("load_report", {"loadReportType": "LoadReport"}, "loadReportType='LoadReport'"),
        ("load_report", {"cpu": {"usage": 1}}, "'cpu' must be"),
        ("leader_broker", {"brokerId": "x:1"}, "serviceUrl"),
    ],
)
def test_wrong_shapes_are_malformed(method: str, body: object, fragment: str) -> None:
    admin, _ = _mock_client(lambda r: httpx.Response(200, json=body), retries=0)
    args = {"brokers": (), "bundles": ("t/ns",), "load_report": ("broker-1.pulsar:8080",), "leader_broker": ()}[method]
    with pytest.raises(MalformedResponseError) as info:
        getattr(admin, method)(*args)
    assert fragment in str(info.value) and info.value.url and info.value.url in str(info.value)


def test_load_report_goes_to_that_broker_with_configured_scheme() -> None:
    admin, seen = _mock_client(lambda r: httpx.Response(200, json={}), retries=0)
    with pytest.raises(MalformedResponseError):
        admin.load_report("broker-3.pulsar:8080")
    assert str(seen[0].url) == "http://broker-3.pulsar:8080/admin/v2/broker-stats/load-report"


# ---------------------------------------------------------------------- redirects and credentials


def _redirecting(to: str) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        if (request.url.host, request.url.port) == ("broker-0.pulsar", 8080):
            return httpx.Response(307, headers={"Location": f"{to}{request.url.path}?authoritative=true"})
        return httpx.Response(204)

    return handler


def test_redirect_to_another_broker_keeps_method_body_and_token() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/admin/v2/brokers":  # fetched by the client to vet the redirect target
            return httpx.Response(200, json=["broker-0.pulsar:8080", "broker-0.pulsar:8081"])
        return _redirecting("http://broker-0.pulsar:8081")(request)

    admin, seen = _mock_client(handler, token="t0k3n")
    # same host, other port: a broker the cluster lists
    admin.split_bundle("t/ns", "0x00000000_0x40000000", boundaries=[5])
    first, listing, second = seen
    assert listing.url.path == "/admin/v2/brokers"
    assert second.method == "PUT" and second.url.port == 8081 and second.content == first.content
    assert second.url.params["authoritative"] == "true"
    assert second.headers["Authorization"] == "Bearer t0k3n"


def test_redirect_to_a_listed_broker_host_keeps_token() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/admin/v2/brokers":
            return httpx.Response(200, json=["broker-0.pulsar:8080", "broker-1.pulsar:8080"])
        return _redirecting("http://broker-1.pulsar:8080")(request)

    admin, seen = _mock_client(handler, token="t0k3n")
    admin.brokers()
    admin.unload_bundle("t/ns", "0x00000000_0x40000000")
    assert seen[-1].url.host == "broker-1.pulsar" and seen[-1].headers["Authorization"] == "Bearer t0k3n"


def test_redirect_to_a_foreign_host_drops_the_token() -> None:
    admin, seen = _mock_client(_redirecting("http://evil.example:8080"), token="t0k3n")
    admin.unload_bundle("t/ns", "0x00000000_0x40000000")
    assert seen[-1].url.host == "evil.example" and "Authorization" not in seen[-1].headers


def test_redirect_loop_is_bounded() -> None:
    admin, seen = _mock_client(lambda r: httpx.Response(307, headers={"Location": str(r.url)}), retries=0)
    with pytest.raises(PulsarAdminError, match="redirects"):
        admin.tenants()
    assert len(seen) == 6


def test_token_never_appears_in_errors() -> None:
    admin, _ = _mock_client(lambda r: httpx.Response(401, json={"reason": "Authentication required"}), token="t0k3n")
    with pytest.raises(NotAuthorizedError) as info:
        admin.tenants()
    assert "t0k3n" not in str(info.value) and "t0k3n" not in (info.value.body or "")
    assert "t0k3n" not in repr(admin)


def test_from_url_validates_input() -> None:
    with pytest.raises(ValueError, match="http"):
        PulsarAdminClient.from_url("broker:8080")
    with PulsarAdminClient.from_url("http://127.0.0.1:1") as admin:
        with pytest.raises(ValueError, match="tenant/namespace"):
            admin.bundles("just-one-part")
        with pytest.raises(ValueError, match="host:port"):
            admin.load_report("no-port")


def test_stopped_broker_is_connect_error_while_others_answer(sim: SimulatedPulsar) -> None:
    down = sim.broker_ids[1]
    sim.stop_broker(down)
    with PulsarAdminClient.from_url(sim.admin_url, retries=1, timeout=2, backoff_s=0.0) as admin:
        with pytest.raises(AdminConnectError, match=down):
            admin.load_report(down)
        assert admin.load_report(sim.broker_ids[2])["numBundles"] >= 1


# ---------------------------------------------------------------------- placement constraints (simulator)

_ISOLATION = "/admin/v2/clusters/sim-cluster/namespaceIsolationPolicies"


def _isolation_policy(primary: str) -> dict:
    return {
        "namespaces": ["tenant-b/.*"],
        "primary": [primary],
        "secondary": [],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": "1", "usage_threshold": "80"},
        },
    }


def test_placement_constraint_reads_carry_the_token_and_return_pulsars_shapes() -> None:
    state = generate_cluster(brokers=3)
    with SimulatedPulsar(state, ephemeral=True, token="s3cret") as sim:
        sim.state.set_namespace_isolation_policy("iso", _isolation_policy("127.0.0.1:.*"), unload=False)
        sim.state.set_failure_domain("rack-a", {"brokers": sim.broker_ids[:2]})
        sim.state.set_anti_affinity_group("tenant-a/orders", "spread")
        with PulsarAdminClient.from_url(sim.admin_url, token="s3cret", retries=0) as admin:
            assert admin.namespace_isolation_policies("sim-cluster") == {"iso": _isolation_policy("127.0.0.1:.*")}
            assert admin.failure_domains("sim-cluster") == {"rack-a": {"brokers": sim.broker_ids[:2]}}
            assert admin.namespace_anti_affinity_group("tenant-a/orders") == "spread"
            assert admin.namespace_anti_affinity_group("public/default") is None
        with PulsarAdminClient.from_url(sim.admin_url, retries=0) as anonymous:
            with pytest.raises(NotAuthorizedError):
                anonymous.namespace_isolation_policies("sim-cluster")
            with pytest.raises(NotAuthorizedError):
                anonymous.namespace_anti_affinity_group("tenant-a/orders")


def test_placement_constraint_gets_are_retried_like_every_get(sim: SimulatedPulsar) -> None:
    sim.state.set_anti_affinity_group("tenant-a/orders", "spread")
    sim.inject_request_error(503, method="GET", path_contains="/antiAffinity", times=1)
    sim.inject_request_error(500, method="GET", path_contains="/failureDomains", times=1)
    with PulsarAdminClient.from_url(sim.admin_url, retries=1, backoff_s=0.0) as admin:
        assert admin.namespace_anti_affinity_group("tenant-a/orders") == "spread"
        assert admin.failure_domains("sim-cluster") == {}
    statuses = [(r.path.rsplit("/", 1)[1], r.status) for r in sim.requests()]
    assert statuses == [("antiAffinity", 503), ("antiAffinity", 200), ("failureDomains", 500), ("failureDomains", 200)]


@pytest.mark.parametrize(
    ("method", "path", "answer", "fragment"),
    [
        ("namespace_isolation_policies", _ISOLATION, ["not", "a", "map"], "expected a JSON object"),
        (
            "namespace_isolation_policies",
            _ISOLATION,
            {"iso": "tenant-b"},
            "policy 'iso' is not a NamespaceIsolationData",
        ),
        ("failure_domains", "/admin/v2/clusters/sim-cluster/failureDomains", {"rack": []}, "failure domain 'rack'"),
        (
            "namespace_anti_affinity_group",
            "/admin/v2/namespaces/tenant-a/orders/antiAffinity",
            b"\xff\xfe",
            "not UTF-8",
        ),
    ],
)
def test_malformed_placement_constraint_answers(sim: SimulatedPulsar, method, path, answer, fragment) -> None:
    sim.state.set_namespace_isolation_policy("iso", _isolation_policy("nobody"), unload=False)
    sim.state.set_anti_affinity_group("tenant-a/orders", "spread")  # a 200 answer the fault can replace
    sim.inject_answer(path, answer)
    arg = "tenant-a/orders" if method == "namespace_anti_affinity_group" else "sim-cluster"
    with PulsarAdminClient.from_url(sim.admin_url, retries=0) as admin, pytest.raises(MalformedResponseError) as info:
        getattr(admin, method)(arg)
    assert fragment in str(info.value) and path in str(info.value)
