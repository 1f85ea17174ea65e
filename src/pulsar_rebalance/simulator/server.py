"""One real HTTP server per simulated broker, speaking Pulsar's admin REST API.

Every broker serves the cluster-wide endpoints; broker-specific ones (``broker-stats/load-report``,
``broker-stats/topics``) describe THAT broker. Requests about a bundle owned by another broker answer
``307 Temporary Redirect`` to the owner the way ``PulsarWebResource.validateBundleOwnership`` builds it
(same path and query, host/port of the owner, ``authoritative`` = "is the redirecting broker the
leader"). An unload with ``destinationBroker`` first goes to the leader (``validateLeaderBrokerAsync``,
``authoritative=false``), which records the bundle affinity and then redirects to the owner with
``destinationBroker`` removed — modular load manager behaviour.

Errors use Pulsar's ``ErrorData`` body ``{"reason": "..."}``. With a token configured, every request
needs ``Authorization: Bearer <token>`` (401 otherwise).

OAuth2 mode (``oauth2=OAuth2Issuer(...)``): every broker also serves an OAuth2 issuer at ``/oauth2``
(:attr:`SimulatedPulsar.issuer_url`): ``GET /oauth2/.well-known/openid-configuration`` names the token
endpoint ``POST /oauth2/token``, which takes the client credentials grant as a form
(``client_secret_post``) and issues opaque tokens living ``token_lifetime_s`` seconds; a wrong client
id or secret gets ``401 {"error": "invalid_client"}``. The admin API then accepts only unexpired tokens
it issued (401 otherwise); :meth:`SimulatedPulsar.revoke_tokens` makes every issued token invalid at once.

Fault injection (tests, demos) is NOT reachable through any HTTP path: use :meth:`SimulatedPulsar.inject_error`,
:meth:`~SimulatedPulsar.inject_malformed_load_report`, :meth:`~SimulatedPulsar.inject_latency`, or a
spec string (:meth:`~SimulatedPulsar.apply_fault_spec`, the CLI's ``--fault`` / env
``PULSAR_REBALANCE_SIM_FAULTS``). Brokers can be stopped, restarted or killed for good
(:meth:`~SimulatedPulsar.stop_broker`, :meth:`~SimulatedPulsar.restart_broker`,
:meth:`~SimulatedPulsar.kill_broker`).

Every request is counted (:meth:`SimulatedPulsar.requests`, :meth:`~SimulatedPulsar.executed`): a
split or unload that changed the cluster is recorded as *executed*, which is how the fault-injection
tests prove that no admin action ran twice. :meth:`~SimulatedPulsar.add_request_listener` calls a
function after each request was handled and before its answer is sent (to inject a fault at an exact
point of a client's run).
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from pulsar_rebalance.simulator.cluster import (
    SPECIFIED_POSITIONS_DIVIDE,
    SUPPORTED_SPLIT_ALGORITHMS,
    BrokerSpec,
    ClusterState,
    PulsarRestError,
    range_name,
)
from pulsar_rebalance.simulator.dynamics import Broker

logger = logging.getLogger(__name__)

FAULTS_ENV_VAR = "PULSAR_REBALANCE_SIM_FAULTS"


@dataclass
class _Response:
    status: int
    body: Any = None  # JSON-able, or bytes sent verbatim
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestRecord:
    """One request a simulated broker answered (see :meth:`SimulatedPulsar.requests`)."""

    seq: int  # 1-based, in the order the answers were decided
    broker_id: str
    method: str
    path: str
    status: int
    executed: tuple[str, str] | None = None  # ("split" | "unload", full bundle name) when it changed the cluster


@dataclass
class _BrokerFaults:
    error_status: int | None = None
    error_times: int | None = None  # None = until cleared
    malformed_load_report: bool = False
    latency_s: float = 0.0


@dataclass(frozen=True)
class OAuth2Issuer:
    """The simulator's OAuth2 issuer: the one client it knows, and how long its tokens live.

    ``audience``: if set, a token request must name it (else ``400 invalid_request``)."""

    client_id: str
    client_secret: str = field(repr=False)
    token_lifetime_s: int = 60
    audience: str | None = None

    def __post_init__(self) -> None:
        if not self.client_id or not self.client_secret:
            raise ValueError("the OAuth2 issuer needs a client id and a client secret")
        if not isinstance(self.token_lifetime_s, int) or self.token_lifetime_s < 1:
            raise ValueError(f"token_lifetime_s must be a whole number of seconds >= 1, got {self.token_lifetime_s!r}")


OAUTH2_PATH = "/oauth2"


class _Redirect(Exception):
    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


@dataclass
class _Request:
    broker_id: str
    method: str
    path: str
    query: list[tuple[str, str]]
    body: bytes
    authorization: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    malformed_load_report: bool = False  # fault injection, set by SimulatedPulsar.handle
    executed: tuple[str, str] | None = None  # set by the split/unload endpoints when the cluster changed

    def param(self, name: str) -> str | None:
        for key, value in self.query:
            if key == name:
                return value
        return None

    def params_all(self, name: str) -> list[str]:
        return [v for k, v in self.query if k == name]

    def flag(self, name: str) -> bool:
        """JAX-RS ``boolean`` query param: only "true" (any case) is true."""
        value = self.param(name)
        return value is not None and value.lower() == "true"


_Handler = Callable[["SimulatedPulsar", _Request], _Response]
_ROUTES: list[tuple[str, re.Pattern[str], _Handler]] = []
_SEG = r"([^/]+)"


def _route(method: str, pattern: str) -> Callable[[_Handler], _Handler]:
    def register(fn: _Handler) -> _Handler:
        regex = re.compile("^" + pattern.replace("{}", _SEG) + "/?$")
        _ROUTES.append((method, regex, fn))
        return fn

    return register


class SimulatedPulsar:
    """Serve a :class:`ClusterState` over HTTP, one listening socket per broker.

    Args:
        state: the cluster. Broker ids must be ``host:port``.
        host: interface to bind when ``ephemeral``.
        ephemeral: bind every broker on an OS-chosen port and rename the state's broker ids
            (in order) to the real addresses; otherwise bind exactly the host:port of each id.
        token: if set, requests need ``Authorization: Bearer <token>``.
        oauth2: if set, serve an OAuth2 issuer and require a token it issued (module docstring).

    Use as a context manager, or call :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        state: ClusterState,
        host: str = "127.0.0.1",
        *,
        ephemeral: bool = False,
        token: str | None = None,
        oauth2: OAuth2Issuer | None = None,
    ) -> None:
        if token is not None and oauth2 is not None:
            raise ValueError("give the simulator a token or an OAuth2 issuer, not both")
        self.state = state
        self.host = host
        self.ephemeral = ephemeral
        self._token = token
        self.oauth2 = oauth2
        self._issued: dict[str, float] = {}  # access token -> monotonic expiry
        self.tokens_issued = 0
        self._servers: dict[str, _BrokerServer] = {}
        self._threads: list[threading.Thread] = []
        self._faults: dict[str, _BrokerFaults] = {}
        # [method | None, path substring, value, times | None, kind, broker | None]; kind "error" /
        # "error-after" (value = status) or "latency" (value = seconds)
        self._request_faults: list[list] = []
        self._answers: list[tuple[str | None, str, Any]] = []  # (broker | None, exact GET path, answer)
        self._faults_lock = threading.Lock()
        # Pulsar's dynamic configuration overrides (what ``pulsar-admin brokers update-dynamic-config`` stores).
        # The simulated operator followed our README: Pulsar's own shedding is off, so the two balancers
        # do not fight. Tests turn it on with POST /admin/v2/brokers/configuration/loadBalancerSheddingEnabled/true.
        self.dynamic_config: dict[str, str] = {"loadBalancerSheddingEnabled": "false"}
        self._started = False
        self._log: list[RequestRecord] = []
        self._in_flight = 0
        self._listeners: list[Callable[[RequestRecord], None]] = []
        self._log_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> SimulatedPulsar:
        """Bind every broker's socket, then serve each in a daemon thread. Idempotent."""
        if self._started:
            return self
        ids = self.state.broker_ids()
        bound: list[_BrokerServer] = []
        try:
            for broker_id in ids:
                host, port = (self.host, 0) if self.ephemeral else _split_host_port(broker_id)
                try:
                    server = _BrokerServer((host, port), self)
                except OSError as exc:
                    message = f"cannot listen on {host}:{port} for broker {broker_id}: {exc.strerror}"
                    raise OSError(exc.errno, message) from exc
                bound.append(server)
        except BaseException:
            for server in bound:
                server.server_close()
            raise
        if self.ephemeral:
            mapping = {old: f"{self.host}:{srv.server_address[1]}" for old, srv in zip(ids, bound)}
            self.state.rename_brokers(mapping)
            ids = [mapping[b] for b in ids]
        for broker_id, server in zip(ids, bound):
            self._serve(broker_id, server)
        self._started = True
        logger.info("simulated Pulsar cluster %s serving brokers %s", self.state.cluster, ids)
        return self

    def stop(self) -> None:
        """Stop serving, close every listening socket and every open (keep-alive) connection."""
        stoppers = [threading.Thread(target=_stop_server, args=(srv,), daemon=True) for srv in self._servers.values()]
        for stopper in stoppers:  # in parallel: each shutdown waits up to one poll interval
            stopper.start()
        for stopper in [*stoppers, *self._threads]:
            stopper.join(timeout=5)
        self._servers.clear()
        self._threads.clear()
        self._started = False

    def stop_broker(self, broker: str | int) -> None:
        """Take one broker's HTTP server down (connections refused afterwards); state is unchanged."""
        broker_id = self._resolve(broker)
        _stop_server(self._servers.pop(broker_id))

    def restart_broker(self, broker: str | int) -> None:
        """Serve a broker stopped by :meth:`stop_broker` again, on the same address."""
        broker_id = self._resolve(broker)
        if broker_id in self._servers:
            raise ValueError(f"broker {broker_id} is running")
        deadline = time.monotonic() + 10
        while True:  # the port may be briefly held (a client socket took it while the broker was down)
            try:
                server = _BrokerServer(_split_host_port(broker_id), self)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                threading.Event().wait(0.1)
        self._serve(broker_id, server)

    def _serve(self, broker_id: str, server: _BrokerServer) -> None:
        server.broker_id = broker_id
        self._servers[broker_id] = server
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"sim-broker-{broker_id}", daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def kill_broker(self, broker: str | int) -> dict[str, str]:
        """A broker dies for good: its server stops and it leaves the cluster; its bundles are owned by
        the others at once (:meth:`ClusterState.remove_broker`). Returns bundle -> new owner."""
        broker_id = self._resolve(broker)
        server = self._servers.pop(broker_id, None)
        if server is not None:
            _stop_server(server)
        return self.state.remove_broker(broker_id)

    def add_broker(
        self, spec: BrokerSpec | None = None, *, machine_key: str | None = None, machine: Broker | None = None
    ) -> str:
        """A new, empty broker joins the running cluster (scale-out): it listens on an OS-chosen port
        of ``host`` and is listed by ``/admin/v2/brokers`` at once. ``spec`` gives its capacity (its
        ``broker_id`` is replaced by the listening address); default: the first broker's. ``machine_key`` /
        ``machine``: as :meth:`ClusterState.add_broker`. Returns its id."""
        if not self._started:
            raise RuntimeError("start the simulator before adding a broker")
        server = _BrokerServer((self.host, 0), self)
        broker_id = f"{self.host}:{server.server_address[1]}"
        like = spec or self.state.broker_spec(self.state.broker_ids()[0])
        try:
            self.state.add_broker(
                dataclasses.replace(like, broker_id=broker_id), machine_key=machine_key, machine=machine
            )
        except BaseException:
            server.server_close()
            raise
        self._serve(broker_id, server)
        logger.info("simulated broker %s joined cluster %s", broker_id, self.state.cluster)
        return broker_id

    def __enter__(self) -> SimulatedPulsar:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def broker_ids(self) -> list[str]:
        return self.state.broker_ids()

    @property
    def broker_urls(self) -> list[str]:
        return [f"http://{b}" for b in self.state.broker_ids()]

    @property
    def admin_url(self) -> str:
        """The first broker's web service URL (what an operator puts in the admin connection)."""
        return self.broker_urls[0]

    @property
    def issuer_url(self) -> str:
        """The OAuth2 issuer URL (on the first broker), when the simulator runs one."""
        if self.oauth2 is None:
            raise ValueError("this simulator has no OAuth2 issuer (start it with oauth2=OAuth2Issuer(...))")
        return self.admin_url + OAUTH2_PATH

    def revoke_tokens(self) -> None:
        """Every access token issued so far is refused from now on (an issuer that rotated its keys)."""
        with self._log_lock:
            self._issued.clear()

    # ------------------------------------------------------------------ fault injection

    def inject_error(self, broker: str | int, status: int = 500, *, times: int | None = None) -> None:
        """Make ``broker`` answer every request with ``status`` (``times`` requests, or until cleared)."""
        if not 400 <= status <= 599:
            raise ValueError(f"status must be an HTTP error code, got {status}")
        with self._faults_lock:
            f = self._faults.setdefault(self._resolve(broker), _BrokerFaults())
            f.error_status, f.error_times = status, times

    def inject_request_error(
        self,
        status: int = 500,
        *,
        method: str | None = None,
        path_contains: str = "",
        times: int | None = None,
        after_effect: bool = False,
        broker: str | int | None = None,
    ) -> None:
        """Make every broker answer matching requests (method and a path substring, e.g. one bundle's
        ``/unload``) with ``status``: ``times`` requests, or until cleared. Targets one admin operation
        where :meth:`inject_error` takes a whole broker down.

        ``after_effect=True``: the request is carried out first and only its answer is replaced by the
        error (a broker that applied an unload but failed while answering); only requests that would
        have succeeded count towards ``times``. ``broker``: only requests to that broker (default: any)."""
        if not 400 <= status <= 599:
            raise ValueError(f"status must be an HTTP error code, got {status}")
        with self._faults_lock:
            self._request_faults.append(
                [
                    method.upper() if method else None,
                    path_contains,
                    status,
                    times,
                    "error-after" if after_effect else "error",
                    None if broker is None else self._resolve(broker),
                ]
            )

    def inject_request_latency(
        self, seconds: float, *, method: str | None = None, path_contains: str = "", times: int | None = None
    ) -> None:
        """Hold matching requests (any broker) ``seconds`` before handling them: a client that times out
        first sees an error while the request still takes effect afterwards (:attr:`in_flight` tells when
        it has). ``times`` requests, or until cleared."""
        if seconds < 0:
            raise ValueError(f"latency must be >= 0, got {seconds}")
        with self._faults_lock:
            self._request_faults.append(
                [method.upper() if method else None, path_contains, seconds, times, "latency", None]
            )

    def inject_malformed_load_report(self, broker: str | int, enabled: bool = True) -> None:
        """Make ``broker``'s load report a truncated (invalid) JSON document with status 200."""
        with self._faults_lock:
            self._faults.setdefault(self._resolve(broker), _BrokerFaults()).malformed_load_report = enabled

    def inject_answer(self, path: str, answer: Any, *, broker: str | int | None = None) -> None:
        """Answer ``GET path`` (exact path, e.g. ``/admin/v2/broker-stats/topics``) on ``broker`` (or any
        broker) with status 200 and a hostile body: ``answer(body)`` if callable (it gets the JSON the
        simulator would have sent, a deep copy, and returns the new one), else ``answer`` itself.
        A body that is ``bytes`` is sent verbatim (e.g. JSON with ``NaN`` or 2**63 literals)."""
        with self._faults_lock:
            self._answers.append((None if broker is None else self._resolve(broker), path, answer))

    def _take_answer(self, req: _Request, resp: _Response) -> _Response:
        with self._faults_lock:
            hits = [a for b, p, a in self._answers if unquote(p) == unquote(req.path) and b in (None, req.broker_id)]
        for answer in hits:
            if resp.status != 200 or req.method != "GET":
                break
            body = answer(json.loads(json.dumps(resp.body))) if callable(answer) else answer
            resp = _Response(200, body, resp.headers)
        return resp

    def inject_latency(self, broker: str | int, seconds: float) -> None:
        """Delay every answer of ``broker`` by ``seconds``."""
        if seconds < 0:
            raise ValueError(f"latency must be >= 0, got {seconds}")
        with self._faults_lock:
            self._faults.setdefault(self._resolve(broker), _BrokerFaults()).latency_s = seconds

    def clear_faults(self, broker: str | int | None = None) -> None:
        with self._faults_lock:
            if broker is None:
                self._faults.clear()
                self._request_faults.clear()
                self._answers.clear()
            else:
                self._faults.pop(self._resolve(broker), None)

    def apply_fault_spec(self, spec: str) -> None:
        """Apply comma-separated faults ``<broker>:<kind>[=<value>]``.

        ``<broker>`` is a broker index (0-based), a broker id, or ``*`` for all; kinds:
        ``error=<status>``, ``malformed-load-report``, ``latency=<seconds>``.
        Example: ``"1:error=500,*:latency=0.2"``.
        """
        for item in filter(None, (s.strip() for s in spec.split(","))):
            target, sep, action = item.rpartition(":") if item.count(":") > 1 else item.partition(":")
            if not sep or not target or not action:
                raise ValueError(f"fault {item!r}: expected <broker>:<kind>[=<value>]")
            kind, _, value = action.partition("=")
            targets: Sequence[str | int] = (
                self.state.broker_ids() if target == "*" else [int(target) if target.isdigit() else target]
            )
            for t in targets:
                if kind == "error":
                    self.inject_error(t, int(value or 500))
                elif kind == "malformed-load-report":
                    self.inject_malformed_load_report(t)
                elif kind == "latency":
                    self.inject_latency(t, float(value))
                else:
                    raise ValueError(f"fault {item!r}: unknown kind {kind!r} (error, malformed-load-report, latency)")

    def _resolve(self, broker: str | int) -> str:
        ids = self.state.broker_ids()
        if isinstance(broker, int):
            if not 0 <= broker < len(ids):
                raise ValueError(f"broker index {broker} out of range 0..{len(ids) - 1}")
            return ids[broker]
        if broker not in ids:
            raise ValueError(f"unknown broker {broker!r}; brokers are {ids}")
        return broker

    def _take_fault(self, broker_id: str) -> tuple[float, int | None, bool]:
        with self._faults_lock:
            f = self._faults.get(broker_id)
            if f is None:
                return 0.0, None, False
            status = f.error_status
            if status is not None and f.error_times is not None:
                f.error_times -= 1
                if f.error_times <= 0:
                    f.error_status = f.error_times = None
            return f.latency_s, status, f.malformed_load_report

    # ------------------------------------------------------------------ request handling

    def _take_request_fault(self, req: _Request, kind: str) -> Any:
        with self._faults_lock:
            for fault in self._request_faults:
                method, needle, value, times, fault_kind, broker = fault
                if (
                    fault_kind == kind
                    and (method is None or method == req.method)
                    and needle in req.path
                    and broker in (None, req.broker_id)
                ):
                    if times is not None:
                        fault[3] = times - 1
                        if fault[3] <= 0:
                            self._request_faults.remove(fault)
                    return value
        return None

    # ------------------------------------------------------------------ request accounting

    def requests(self) -> list[RequestRecord]:
        """Every request answered so far, in order (redirects and errors included)."""
        with self._log_lock:
            return list(self._log)

    def executed(self) -> list[tuple[str, str]]:
        """The splits and unloads that changed the cluster, in order: ``("unload", "t/ns/0x.._0x..")``.
        An action executed twice appears twice."""
        with self._log_lock:
            return [r.executed for r in self._log if r.executed is not None]

    @property
    def in_flight(self) -> int:
        """Requests being handled right now (e.g. held by injected latency)."""
        with self._log_lock:
            return self._in_flight

    def reset_request_log(self) -> None:
        with self._log_lock:
            self._log.clear()

    def add_request_listener(self, listener: Callable[[RequestRecord], None]) -> None:
        """Call ``listener(record)`` after each request was handled and BEFORE its answer is sent, in
        the handling thread (an exception in it is logged and ignored)."""
        with self._log_lock:
            self._listeners.append(listener)

    def remove_request_listener(self, listener: Callable[[RequestRecord], None]) -> None:
        with self._log_lock:
            self._listeners.remove(listener)

    def handle(self, req: _Request) -> _Response:
        with self._log_lock:
            self._in_flight += 1
        resp = _Response(500, {"reason": "Internal simulator error"})  # what _dispatch answers if we raise
        try:
            resp = self._after_effect_fault(req, self._handle(req))
        finally:
            with self._log_lock:
                self._in_flight -= 1
                record = RequestRecord(
                    len(self._log) + 1, req.broker_id, req.method, req.path, resp.status, req.executed
                )
                self._log.append(record)
                listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(record)
            except Exception:
                logger.exception("request listener failed")
        return resp

    def _after_effect_fault(self, req: _Request, resp: _Response) -> _Response:
        if resp.status >= 300:
            return resp
        status = self._take_request_fault(req, "error-after")
        if status is None:
            return resp
        return _Response(
            status, {"reason": f"Injected fault on broker {req.broker_id} (after the request took effect)"}
        )

    def _handle(self, req: _Request) -> _Response:
        latency, error_status, req.malformed_load_report = self._take_fault(req.broker_id)
        if error_status is None:
            error_status = self._take_request_fault(req, "error")
        latency += self._take_request_fault(req, "latency") or 0.0
        if latency:
            time.sleep(latency)
        if error_status is not None:
            return _Response(error_status, {"reason": f"Injected fault on broker {req.broker_id}"})
        if self.oauth2 is not None and req.path.startswith(OAUTH2_PATH + "/"):
            return self._issuer(req, self.oauth2)
        if (self._token is not None or self.oauth2 is not None) and not self._authorized(req):
            return _Response(401, {"reason": "Authentication required"})
        allowed: list[str] = []
        for method, regex, fn in _ROUTES:
            match = regex.match(req.path)
            if not match:
                continue
            if method != req.method:
                allowed.append(method)
                continue
            req.params = {str(i): unquote(g) for i, g in enumerate(match.groups())}
            try:
                return self._take_answer(req, fn(self, req)) if self._answers else fn(self, req)
            except _Redirect as redirect:
                return _Response(307, None, {"Location": redirect.location})
            except PulsarRestError as exc:
                return _Response(exc.status, {"reason": exc.reason})
        if allowed:
            return _Response(405, {"reason": "HTTP 405 Method Not Allowed"}, {"Allow": ", ".join(sorted(set(allowed)))})
        return _Response(404, {"reason": f"HTTP 404 Not Found: {req.path}"})

    def _authorized(self, req: _Request) -> bool:
        header = req.authorization
        if not header or not header.startswith("Bearer "):
            return False
        presented = header[len("Bearer ") :]
        if self.oauth2 is not None:
            with self._log_lock:
                expiry = self._issued.get(presented)
            return expiry is not None and time.monotonic() < expiry
        return hmac.compare_digest(presented.encode(), (self._token or "").encode())

    def _issuer(self, req: _Request, issuer: OAuth2Issuer) -> _Response:
        """The OAuth2 issuer's two endpoints (RFC 8414 metadata, RFC 6749 section 4.4 token endpoint)."""
        base = f"http://{req.broker_id}{OAUTH2_PATH}"
        if req.path.rstrip("/") == OAUTH2_PATH + "/.well-known/openid-configuration":
            if req.method != "GET":
                return _Response(405, {"error": "invalid_request"}, {"Allow": "GET"})
            return _Response(
                200,
                {
                    "issuer": base,
                    "token_endpoint": f"{base}/token",
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["client_secret_post"],
                },
            )
        if req.path.rstrip("/") != OAUTH2_PATH + "/token":
            return _Response(404, {"error": "not_found"})
        if req.method != "POST":
            return _Response(405, {"error": "invalid_request"}, {"Allow": "POST"})
        form = dict(parse_qsl(req.body.decode("utf-8", "replace"), keep_blank_values=True))
        if form.get("grant_type") != "client_credentials":
            return _Response(400, {"error": "unsupported_grant_type"})
        if not (
            hmac.compare_digest(form.get("client_id", "").encode(), issuer.client_id.encode())
            and hmac.compare_digest(form.get("client_secret", "").encode(), issuer.client_secret.encode())
        ):
            return _Response(401, {"error": "invalid_client", "error_description": "Client authentication failed"})
        if issuer.audience is not None and form.get("audience") != issuer.audience:
            return _Response(400, {"error": "invalid_request", "error_description": "unknown audience"})
        token = secrets.token_urlsafe(24)
        with self._log_lock:
            now = time.monotonic()
            self._issued = {t: e for t, e in self._issued.items() if e > now}
            self._issued[token] = now + issuer.token_lifetime_s
            self.tokens_issued += 1
        body = {"access_token": token, "token_type": "Bearer", "expires_in": issuer.token_lifetime_s}
        if form.get("scope"):
            body["scope"] = form["scope"]
        return _Response(200, body, {"Cache-Control": "no-store"})

    def _redirect(self, req: _Request, target: str, *, authoritative: bool, drop: Sequence[str] = ()) -> _Redirect:
        """``UriBuilder.fromUri(requestUri).host(..).port(..).replaceQueryParam("authoritative", ..)``."""
        query = [(k, v) for k, v in req.query if k != "authoritative" and k not in drop]
        query.append(("authoritative", "true" if authoritative else "false"))
        return _Redirect(f"http://{target}{quote(req.path)}?{urlencode(query)}")

    def _check_bundle_owner(self, req: _Request, bundle: str, *, drop: Sequence[str] = ()) -> None:
        owner = self.state.owner(bundle)
        if owner != req.broker_id:
            raise self._redirect(req, owner, authoritative=req.broker_id == self.state.leader, drop=drop)


# ---------------------------------------------------------------------- endpoints


@_route("GET", "/admin/v2/clusters")
def _clusters(sim: SimulatedPulsar, req: _Request) -> _Response:
    return _Response(200, [sim.state.cluster])


@_route("GET", "/admin/v2/brokers")
def _active_brokers(sim: SimulatedPulsar, req: _Request) -> _Response:
    return _Response(200, sim.state.broker_ids())


@_route("GET", "/admin/v2/brokers/leaderBroker")
def _leader(sim: SimulatedPulsar, req: _Request) -> _Response:
    leader = sim.state.leader
    return _Response(200, {"serviceUrl": f"http://{leader}", "brokerId": leader})


@_route("GET", "/admin/v2/brokers/configuration/values")
def _dynamic_config_values(sim: SimulatedPulsar, req: _Request) -> _Response:
    return _Response(200, dict(sim.dynamic_config))


@_route("POST", "/admin/v2/brokers/configuration/{}/{}")
def _update_dynamic_config(sim: SimulatedPulsar, req: _Request) -> _Response:
    name, value = req.params["0"], req.params["1"]
    if not name.startswith(("loadBalancer", "loadManager")):  # enough of Pulsar's dynamic keys for our use
        raise PulsarRestError(412, f"Can't update non-dynamic configuration {name}")
    sim.dynamic_config[name] = value
    return _Response(204)


@_route("GET", "/admin/v2/brokers/{}")
def _cluster_brokers(sim: SimulatedPulsar, req: _Request) -> _Response:
    _require_cluster(sim, req.params["0"])
    return _Response(200, sim.state.broker_ids())


@_route("GET", "/admin/v2/brokers/{}/{}/ownedNamespaces")
def _owned_namespaces(sim: SimulatedPulsar, req: _Request) -> _Response:
    _require_cluster(sim, req.params["0"])
    broker = req.params["1"]
    if not sim.state.has_broker(broker):
        raise PulsarRestError(404, f"Broker {broker} not found")
    if broker != req.broker_id:  # validateBrokerName: redirect to the broker asked about
        raise _Redirect(f"http://{broker}{quote(req.path)}" + (f"?{urlencode(req.query)}" if req.query else ""))
    return _Response(200, sim.state.owned_namespaces(broker))


@_route("GET", "/admin/v2/broker-stats/load-report")
def _load_report(sim: SimulatedPulsar, req: _Request) -> _Response:
    if req.malformed_load_report:
        text = json.dumps(sim.state.load_report(req.broker_id))
        return _Response(200, text[: len(text) // 2].encode())
    return _Response(200, sim.state.load_report(req.broker_id))


@_route("GET", "/admin/v2/broker-stats/topics")
def _topic_stats(sim: SimulatedPulsar, req: _Request) -> _Response:
    return _Response(200, sim.state.topic_stats(req.broker_id))


@_route("GET", "/admin/v2/tenants")
def _tenants(sim: SimulatedPulsar, req: _Request) -> _Response:
    return _Response(200, sim.state.tenants())


@_route("GET", "/admin/v2/namespaces/{}")
def _namespaces(sim: SimulatedPulsar, req: _Request) -> _Response:
    return _Response(200, sim.state.namespaces(req.params["0"]))


@_route("GET", "/admin/v2/namespaces/{}/{}/bundles")
def _bundles(sim: SimulatedPulsar, req: _Request) -> _Response:
    return _Response(200, sim.state.bundles_data(f"{req.params['0']}/{req.params['1']}"))


@_route("PUT", "/admin/v2/namespaces/{}/{}/{}/split")
def _split(sim: SimulatedPulsar, req: _Request) -> _Response:
    namespace, bundle_range = f"{req.params['0']}/{req.params['1']}", req.params["2"]
    algorithm = req.param("splitAlgorithmName") or None
    boundaries = _parse_boundaries(req.body)
    # Order as internalSplitNamespaceBundleAsync: algorithm checks, namespace, range, ownership, split.
    _precheck_split_algorithm(algorithm, boundaries)
    lo, hi = sim.state.validate_bundle(namespace, bundle_range)
    sim._check_bundle_owner(req, f"{namespace}/{range_name(lo, hi)}")
    children = sim.state.split_bundle(
        namespace, bundle_range, unload=req.flag("unload"), algorithm=algorithm, boundaries=boundaries
    )
    if children:
        req.executed = ("split", f"{namespace}/{range_name(lo, hi)}")
    return _Response(204)


@_route("PUT", "/admin/v2/namespaces/{}/{}/{}/unload")
def _unload(sim: SimulatedPulsar, req: _Request) -> _Response:
    namespace, bundle_range = f"{req.params['0']}/{req.params['1']}", req.params["2"]
    destination = (req.param("destinationBroker") or "").strip() or None
    if destination is not None:
        destination = re.sub(r"^https?://", "", destination)
        if not sim.state.has_broker(destination):
            raise PulsarRestError(409, "Not allowed unload namespace bundle to inactive destination broker")
        if req.broker_id != sim.state.leader:  # validateLeaderBrokerAsync
            raise sim._redirect(req, sim.state.leader, authoritative=False)
    lo, hi = sim.state.validate_bundle(namespace, bundle_range)
    bundle = f"{namespace}/{range_name(lo, hi)}"
    if destination is not None:  # the leader's ModularLoadManagerImpl.setNamespaceBundleAffinity
        sim.state.set_bundle_affinity(bundle, destination)
    sim._check_bundle_owner(req, bundle, drop=("destinationBroker",))
    sim.state.unload_bundle(namespace, bundle_range)
    req.executed = ("unload", bundle)
    return _Response(204)


@_route("GET", "/admin/v2/namespaces/{}/{}/{}/topicHashPositions")
def _topic_hash_positions(sim: SimulatedPulsar, req: _Request) -> _Response:
    namespace, bundle_range = f"{req.params['0']}/{req.params['1']}", req.params["2"]
    lo, hi = sim.state.validate_bundle(namespace, bundle_range)
    sim._check_bundle_owner(req, f"{namespace}/{range_name(lo, hi)}")
    return _Response(200, sim.state.topic_hash_positions(namespace, bundle_range, req.params_all("topics")))


# ---------------------------------------------------------------------- placement constraints
# ClustersBase (namespaceIsolationPolicies, failureDomains) and Namespaces v2 (antiAffinity): paths,
# status codes and bodies as Pulsar answers them (docs/simulator.md quotes the sources).


@_route("GET", "/admin/v2/clusters/{}/namespaceIsolationPolicies")
def _isolation_policies(sim: SimulatedPulsar, req: _Request) -> _Response:
    _require_cluster(sim, req.params["0"], status=404)  # validateClusterExistAsync(cluster, NOT_FOUND)
    return _Response(200, sim.state.namespace_isolation_policies())


@_route("GET", "/admin/v2/clusters/{}/namespaceIsolationPolicies/{}")
def _isolation_policy(sim: SimulatedPulsar, req: _Request) -> _Response:
    _require_cluster(sim, req.params["0"], status=412)
    return _Response(200, sim.state.namespace_isolation_policy(req.params["1"]))


@_route("POST", "/admin/v2/clusters/{}/namespaceIsolationPolicies/{}")
def _set_isolation_policy(sim: SimulatedPulsar, req: _Request) -> _Response:
    _require_cluster(sim, req.params["0"], status=412)
    unload = (req.param("unloadBundles") or "true").lower() == "true"  # @DefaultValue("true")
    sim.state.set_namespace_isolation_policy(req.params["1"], _json_body(req), unload=unload)
    return _Response(204)


@_route("DELETE", "/admin/v2/clusters/{}/namespaceIsolationPolicies/{}")
def _delete_isolation_policy(sim: SimulatedPulsar, req: _Request) -> _Response:
    _require_cluster(sim, req.params["0"], status=412)
    sim.state.delete_namespace_isolation_policy(req.params["1"])
    return _Response(204)


@_route("GET", "/admin/v2/clusters/{}/failureDomains")
def _failure_domains(sim: SimulatedPulsar, req: _Request) -> _Response:
    # getFailureDomains checks no cluster: a cluster without domains (or unknown) answers {}
    if req.params["0"] != sim.state.cluster:
        return _Response(200, {})
    return _Response(200, sim.state.failure_domains())


@_route("GET", "/admin/v2/clusters/{}/failureDomains/{}")
def _failure_domain(sim: SimulatedPulsar, req: _Request) -> _Response:
    _require_cluster(sim, req.params["0"], status=412)
    return _Response(200, sim.state.failure_domain(req.params["1"]))


@_route("POST", "/admin/v2/clusters/{}/failureDomains/{}")
def _set_failure_domain(sim: SimulatedPulsar, req: _Request) -> _Response:
    _require_cluster(sim, req.params["0"], status=412)
    sim.state.set_failure_domain(req.params["1"], _json_body(req))
    return _Response(204)


@_route("DELETE", "/admin/v2/clusters/{}/failureDomains/{}")
def _delete_failure_domain(sim: SimulatedPulsar, req: _Request) -> _Response:
    _require_cluster(sim, req.params["0"], status=412)
    sim.state.delete_failure_domain(req.params["1"])
    return _Response(200)  # Response.ok()


@_route("GET", "/admin/v2/namespaces/{}/{}/antiAffinity")
def _anti_affinity(sim: SimulatedPulsar, req: _Request) -> _Response:
    group = sim.state.anti_affinity_group(f"{req.params['0']}/{req.params['1']}")
    if group is None:  # a resource method returning null: JAX-RS answers 204 No Content
        return _Response(204)
    return _Response(200, group.encode("utf-8"))  # a String entity: Jersey writes it as is, unquoted


@_route("POST", "/admin/v2/namespaces/{}/{}/antiAffinity")
def _set_anti_affinity(sim: SimulatedPulsar, req: _Request) -> _Response:
    # the body is the group itself (PulsarAdmin posts Entity.entity(group, APPLICATION_JSON): a raw string)
    group = req.body.decode("utf-8", errors="replace")
    sim.state.set_anti_affinity_group(f"{req.params['0']}/{req.params['1']}", group)
    return _Response(204)


@_route("DELETE", "/admin/v2/namespaces/{}/{}/antiAffinity")
def _remove_anti_affinity(sim: SimulatedPulsar, req: _Request) -> _Response:
    sim.state.remove_anti_affinity_group(f"{req.params['0']}/{req.params['1']}")
    return _Response(204)


def _json_body(req: _Request) -> Any:
    try:
        return json.loads(req.body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PulsarRestError(400, f"Request body is not valid JSON: {exc}") from None


@_route("GET", "/lookup/v2/topic/{}/{}/{}/{}")
def _lookup(sim: SimulatedPulsar, req: _Request) -> _Response:
    domain, tenant, ns, local = (req.params[str(i)] for i in range(4))
    if domain not in ("persistent", "non-persistent"):
        raise PulsarRestError(412, f"Invalid topic domain {domain}")
    return _Response(200, sim.state.lookup(f"{domain}://{tenant}/{ns}/{local}"))


def _require_cluster(sim: SimulatedPulsar, cluster: str, *, status: int | None = None) -> None:
    """The brokers endpoints' 404 "Cluster does not exist: cluster=X"; with ``status``, ClustersBase's
    ``validateClusterExistAsync(cluster, status)``: "Cluster X does not exist."."""
    if cluster == sim.state.cluster:
        return
    if status is None:
        raise PulsarRestError(404, f"Cluster does not exist: cluster={cluster}")
    raise PulsarRestError(status, f"Cluster {cluster} does not exist.")


def _precheck_split_algorithm(algorithm: str | None, boundaries: list[int] | None) -> None:
    if algorithm is None:
        return
    if algorithm not in SUPPORTED_SPLIT_ALGORITHMS:
        raise PulsarRestError(
            412,
            "Unsupported namespace bundle split algorithm, supported algorithms are "
            f"[{', '.join(SUPPORTED_SPLIT_ALGORITHMS)}]",
        )
    if algorithm.lower() == SPECIFIED_POSITIONS_DIVIDE and not boundaries:
        raise PulsarRestError(412, "With specified_positions_divide split algorithm, splitBoundaries must not be empty")


def _parse_boundaries(body: bytes) -> list[int] | None:
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise PulsarRestError(400, "splitBoundaries body is not valid JSON") from None
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise PulsarRestError(400, "splitBoundaries body must be a JSON array of longs")
    return value


def _split_host_port(broker_id: str) -> tuple[str, int]:
    host, sep, port = broker_id.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"broker id must be host:port, got {broker_id!r}")
    return host, int(port)


# ---------------------------------------------------------------------- HTTP plumbing


def _stop_server(server: _BrokerServer) -> None:
    server.shutdown()
    server.server_close()  # the port is free before any client can see its connection drop
    server.close_connections()


class _BrokerServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive connections must not block shutdown
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], sim: SimulatedPulsar) -> None:
        super().__init__(address, _RequestHandler)
        self.sim = sim
        self.broker_id = ""
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()

    def track(self, conn: socket.socket, add: bool) -> None:
        with self._conns_lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def close_connections(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
            self._conns.clear()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "PulsarSimulator/1.0"
    timeout = 120  # idle keep-alive connections are dropped after this many seconds
    server: _BrokerServer

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        parts = urlsplit(self.path)
        req = _Request(
            broker_id=self.server.broker_id,
            method=method,
            path=parts.path,
            query=parse_qsl(parts.query, keep_blank_values=True),
            body=body,
            authorization=self.headers.get("Authorization"),
        )
        try:
            resp = self.server.sim.handle(req)
        except Exception:  # a simulator bug must look like a broker's 500, not a dropped socket
            logger.exception("simulator error handling %s %s", method, self.path)
            resp = _Response(500, {"reason": "Internal simulator error"})
        self._send(resp)

    def _send(self, resp: _Response) -> None:
        if resp.body is None:
            payload = b""
        elif isinstance(resp.body, bytes):
            payload = resp.body
        else:
            payload = json.dumps(resp.body).encode("utf-8")
        self.send_response(resp.status)
        for key, value in resp.headers.items():
            self.send_header(key, value)
        if payload or resp.status not in (204, 304):
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if payload:
            self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("[%s] %s", self.server.broker_id, format % args)
