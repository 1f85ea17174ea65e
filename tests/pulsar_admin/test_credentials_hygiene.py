"""Credentials stay with the cluster: the token follows a redirect only to the admin URL's exact origin or
a listed broker, and user:password in the admin URL never shows up in errors, ``base_url`` or the store.

Real HTTP: two (or three) ``http.server`` servers on 127.0.0.1, each recording what it received.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pulsar_rebalance.errors import NotFoundError
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.urls import redact_userinfo

pytestmark = pytest.mark.timeout(60)

TOKEN = "t0k3n-never-leaves-the-cluster"


class _Server:
    """One HTTP server: answers ``routes`` (path prefix -> (status, headers, body)), records requests."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.seen: list[tuple[str, str, str | None]] = []  # (method, path, Authorization)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                server.seen.append((self.command, self.path, self.headers.get("Authorization")))
                status, headers, body = next(
                    (v for k, v in server.routes.items() if self.path.startswith(k)), (404, {}, b'{"reason": "nope"}')
                )
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.netloc = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.netloc}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def servers() -> Iterator[tuple[_Server, _Server]]:
    admin, other = _Server(), _Server()
    try:
        yield admin, other
    finally:
        admin.close()
        other.close()


def _redirect_unloads_to(admin: _Server, target: _Server, brokers: list[str]) -> None:
    admin.routes["/admin/v2/brokers"] = (200, {"Content-Type": "application/json"}, json.dumps(brokers).encode())
    admin.routes["/admin/v2/namespaces/"] = (
        307,
        {"Location": f"{target.url}/admin/v2/namespaces/t/ns/0x00000000_0xffffffff/unload"},
        b"",
    )
    target.routes["/admin/v2/namespaces/"] = (204, {}, b"")


def test_token_not_sent_to_another_port_of_the_same_host_that_is_no_broker(servers) -> None:
    admin, other = servers  # both on 127.0.0.1: same host, different ports
    _redirect_unloads_to(admin, other, brokers=[admin.netloc])
    with PulsarAdminClient.from_url(admin.url, token=TOKEN, retries=0) as client:
        client.unload_bundle("t/ns", "0x00000000_0xffffffff")
    assert other.seen == [("PUT", "/admin/v2/namespaces/t/ns/0x00000000_0xffffffff/unload", None)]
    assert [a for _, _, a in admin.seen] == [f"Bearer {TOKEN}", f"Bearer {TOKEN}"]  # the unload, the broker list


def test_token_follows_a_redirect_to_a_listed_broker(servers) -> None:
    admin, broker = servers
    _redirect_unloads_to(admin, broker, brokers=[admin.netloc, broker.netloc])
    with PulsarAdminClient.from_url(admin.url, token=TOKEN, retries=0) as client:
        client.unload_bundle("t/ns", "0x00000000_0xffffffff")
    assert broker.seen == [("PUT", "/admin/v2/namespaces/t/ns/0x00000000_0xffffffff/unload", f"Bearer {TOKEN}")]


def test_token_follows_a_redirect_back_to_the_admin_origin_without_listing(servers) -> None:
    admin, _ = servers
    admin.routes["/admin/v2/tenants"] = (200, {"Content-Type": "application/json"}, b'["t"]')
    admin.routes["/admin/v2/clusters"] = (307, {"Location": f"{admin.url}/admin/v2/tenants"}, b"")
    with PulsarAdminClient.from_url(admin.url, token=TOKEN, retries=0) as client:
        assert client.clusters() == ["t"]
    assert [(p, a) for _, p, a in admin.seen] == [
        ("/admin/v2/clusters", f"Bearer {TOKEN}"),
        ("/admin/v2/tenants", f"Bearer {TOKEN}"),
    ]


def test_userinfo_in_the_admin_url_becomes_basic_auth_and_never_appears_in_errors(servers) -> None:
    admin, other = servers
    url = f"http://alice:s3cr%40t@{admin.netloc}"
    _redirect_unloads_to(admin, other, brokers=[admin.netloc])
    with PulsarAdminClient.from_url(url, retries=0) as client:
        assert client.base_url == admin.url and "s3cr" not in repr(client)
        with pytest.raises(NotFoundError) as info:
            client.tenants()
        client.unload_bundle("t/ns", "0x00000000_0xffffffff")
    assert "s3cr" not in str(info.value) and "alice" not in str(info.value) and "s3cr" not in (info.value.url or "")
    expected = "Basic " + base64.b64encode(b"alice:s3cr@t").decode()
    assert admin.seen[0][2] == expected
    assert other.seen[0][2] is None  # basic credentials do not follow to a non-broker either


def test_userinfo_never_reaches_a_connect_error() -> None:
    with PulsarAdminClient.from_url("http://bob:hunter2@127.0.0.1:1", retries=0, timeout=2) as client:
        with pytest.raises(Exception) as info:
            client.tenants()
    assert "hunter2" not in str(info.value) and "127.0.0.1:1" in str(info.value)
    with pytest.raises(ValueError) as bad:
        PulsarAdminClient.from_url("ftp://bob:hunter2@host")
    assert "hunter2" not in str(bad.value)


def test_admin_url_userinfo_is_redacted_in_the_store(db_url) -> None:
    from sqlalchemy import select

    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope
    from pulsar_rebalance.store.tables import Cluster

    with session_scope(make_engine(db_url)) as s:
        repo.get_or_create_cluster(s, name="c1", admin_url="http://carol:pa55@pulsar:8080")
    with session_scope(make_engine(db_url)) as s:
        stored = s.execute(select(Cluster.admin_url).where(Cluster.name == "c1")).scalar_one()
    assert stored == "http://carol:***@pulsar:8080"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:p@h:1/x@y", "http://u:***@h:1/x@y"),
        ("http://h:1?q=a@b", "http://h:1?q=a@b"),
        ("https://:tok@h", "https://***@h"),
        ("no-scheme@host", "no-scheme@host"),
    ],
)
def test_redact_userinfo(url: str, shown: str) -> None:
    assert redact_userinfo(url) == shown
