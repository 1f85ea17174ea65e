"""A thin httpx client for the parts of Pulsar's admin REST API (v2) the rebalancer uses.

Methods return Pulsar's JSON as plain dicts/lists, keyed by Pulsar's own JSON names; each response is
checked for the shape Pulsar documents, and anything else raises :class:`MalformedResponseError`.

Behaviour worth knowing:

* **Redirects** are followed by hand (at most ``MAX_REDIRECTS``): Pulsar answers 307 to send a request
  to the broker owning a bundle, or to the leader. The method and body are kept (307 semantics). The
  ``Authorization`` header is kept only when the target has exactly the scheme, host and port of the
  configured admin URL, or the admin URL's scheme and a ``host:port`` the cluster lists as a broker
  (``GET /admin/v2/brokers``, fetched once when a redirect needs it). Any other target - another port
  of the same host included, and any https -> http downgrade - gets the request without credentials.
  httpx's own redirect handling would drop the header on any port change, which breaks every
  cross-broker redirect of a secured cluster.
* **Credentials in the admin URL** (``http://user:password@host:8080``) become an HTTP Basic
  ``Authorization`` header (Pulsar's basic authentication provider) and are removed from the URL, so
  no error message, log line, ``base_url`` or stored URL carries them (:func:`redact_userinfo`).
* **Broker-specific calls** (:meth:`PulsarAdminClient.load_report`, :meth:`~PulsarAdminClient.topic_stats`)
  go to ``<scheme>://<broker_id>`` directly, the scheme taken from the configured admin URL.
* **Errors** map to :mod:`pulsar_rebalance.errors`: connect failure -> ``AdminConnectError``,
  timeout -> ``AdminTimeoutError``, 401/403 -> ``NotAuthorizedError``, 404 -> ``NotFoundError``,
  409 -> ``ConflictError``, 412 -> ``PreconditionFailedError``, 5xx -> ``ServerSideError``, other
  statuses -> ``PulsarAdminError``. Messages carry method, URL, status and a truncated body, never
  the token.
* **OAuth2 client credentials** (``oauth2=``, :mod:`pulsar_rebalance.pulsar_admin.oauth2`): each request
  carries the flow's current access token, fetched on first use and again once it expired (90 % of
  its ``expires_in``, as Pulsar's ``AuthenticationOAuth2``). A 401 to a request that carried a token
  fetches a new token once and sends that request once more - a PUT included, since a 401 means the
  broker did not act on it; a second 401 is raised.
* **Retries** are bounded (``retries``), only for retryable errors (connect, timeout, 5xx) and ONLY for
  GETs. A PUT (split, unload) is never repeated blindly: the caller reconciles against Pulsar instead.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from pulsar_rebalance.errors import (
    AdminConnectError,
    AdminTimeoutError,
    ConfigError,
    ConflictError,
    MalformedResponseError,
    NotAuthorizedError,
    NotFoundError,
    PreconditionFailedError,
    PulsarAdminError,
    ServerSideError,
)
from pulsar_rebalance.pulsar_admin.oauth2 import ClientCredentialsFlow, OAuth2Settings
from pulsar_rebalance.urls import redact_userinfo

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 5
_BODY_EXCERPT = 300
_REDIRECT_STATUSES = (301, 302, 303, 307, 308)
_LOAD_REPORT_USAGE_KEYS = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
_LOAD_REPORT_NUMBER_KEYS = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")


@dataclass(frozen=True)
class ClientSpec:
    """What :meth:`PulsarAdminClient.from_url` was given, picklable, to build the same client elsewhere
    (in a Spark task). ``authorization`` is the ``Authorization`` header (token or Basic credentials):
    it is left out of ``repr`` and never logged; TLS file paths must exist where it is built.
    ``oauth2`` carries the client credentials settings (the secret out of ``repr``), never a fetched
    token: the client built from it fetches and refreshes its own, however long the task runs."""

    url: str
    tls_verify: bool | str = True
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    timeout: float = 10.0
    retries: int = 2
    backoff_s: float = 0.2
    authorization: str | None = field(default=None, repr=False)
    oauth2: OAuth2Settings | None = None

    def build(self) -> PulsarAdminClient:
        client = PulsarAdminClient.from_url(
            self.url,
            oauth2=self.oauth2,
            tls_verify=self.tls_verify,
            tls_cert_file=self.tls_cert_file,
            tls_key_file=self.tls_key_file,
            timeout=self.timeout,
            retries=self.retries,
            backoff_s=self.backoff_s,
        )
        if self.authorization:
            client._http.headers["Authorization"] = self.authorization
        client._spec = self
        return client


class PulsarAdminClient:
    """Pulsar admin REST client over a ready ``httpx.Client``.

    Args:
        http: a client whose ``base_url`` is the admin service URL (``http(s)://host:port``) and which
            already carries auth headers, TLS settings and timeouts. The client takes ownership only
            in the sense that :meth:`close` closes it.
        retries: extra attempts for a GET that failed with a retryable error (connect, timeout, 5xx).
        backoff_s: first retry delay in seconds; doubles per attempt, capped at 2 s.
        oauth2: an OAuth2 client credentials flow whose token each request carries (then ``http``
            carries no ``Authorization`` header); :meth:`close` closes it.
    """

    def __init__(
        self,
        http: httpx.Client,
        *,
        retries: int = 2,
        backoff_s: float = 0.2,
        oauth2: ClientCredentialsFlow | None = None,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if not str(http.base_url).strip("/"):
            raise ValueError("the httpx client needs a base_url (the Pulsar admin service URL)")
        self._http = http
        self._retries = retries
        self._backoff_s = backoff_s
        base = http.base_url
        self._scheme = base.scheme
        self._base_origin = _origin(base)
        self._cluster_brokers: set[str] = set()
        self._brokers_fetched = False
        self._oauth2 = oauth2
        if oauth2 is not None and "Authorization" in http.headers:
            raise ConfigError(
                f"{oauth2.settings.describe()} and an Authorization header are both configured; give one of them",
                key="oauth2",
            )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        token: str | None = None,
        oauth2: OAuth2Settings | None = None,
        tls_verify: bool | str = True,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
        timeout: float = 10.0,
        retries: int = 2,
        backoff_s: float = 0.2,
    ) -> PulsarAdminClient:
        """Build a client for the admin service at ``url``.

        Args:
            url: ``http(s)://host:port`` of a broker (or proxy) web service.
            token: JWT sent as ``Authorization: Bearer <token>``; never logged.
            oauth2: OAuth2 client credentials (issuer, client id/secret, audience, scope): the token is
                fetched from the issuer and refreshed (module docstring); not with ``token`` or user:password.
            tls_verify: True (system CAs), False (no verification), or a CA bundle path.
            tls_cert_file / tls_key_file: client certificate for mTLS.
            timeout: seconds for connect, read, write and pool waits.
            retries / backoff_s: see the class docstring.
        """
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"admin URL must start with http:// or https://, got {redact_userinfo(url)!r}")
        url, basic = _split_userinfo(url)
        headers = {"Accept": "application/json"}
        if token and basic:
            raise ConfigError(
                f"the admin URL {redact_userinfo(url)} carries user:password and a token is set too; give one of them",
                key="PULSAR_ADMIN_URL",
            )
        if oauth2 is not None and (token or basic):
            other = (
                "a token (PULSAR_ADMIN_TOKEN)" if token else f"user:password in the admin URL {redact_userinfo(url)}"
            )
            raise ConfigError(
                f"both {other} and OAuth2 client credentials ({oauth2.describe()}, PULSAR_ADMIN_OAUTH2_*) "
                "are configured; give one of them",
                key="PULSAR_ADMIN_TOKEN" if token else "PULSAR_ADMIN_URL",
            )
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif basic:
            headers["Authorization"] = basic
        verify: bool | ssl.SSLContext = tls_verify if isinstance(tls_verify, bool) else True
        if isinstance(tls_verify, str) or tls_cert_file:
            context = ssl.create_default_context(cafile=tls_verify if isinstance(tls_verify, str) else None)
            if tls_verify is False:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if tls_cert_file:
                context.load_cert_chain(tls_cert_file, tls_key_file)
            verify = context
        http = httpx.Client(
            base_url=url.rstrip("/"),
            headers=headers,
            verify=verify,
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
        )
        flow = ClientCredentialsFlow(oauth2, verify=verify, timeout=timeout) if oauth2 is not None else None
        client = cls(http, retries=retries, backoff_s=backoff_s, oauth2=flow)
        client._spec = ClientSpec(
            url=url,
            tls_verify=tls_verify,
            tls_cert_file=tls_cert_file,
            tls_key_file=tls_key_file,
            timeout=timeout,
            retries=retries,
            backoff_s=backoff_s,
            authorization=headers.get("Authorization"),
            oauth2=oauth2,
        )
        return client

    _spec: ClientSpec | None = None

    def spec(self) -> ClientSpec:
        """How to build another client like this one (a Spark task builds its own): URL, TLS, timeout,
        retries and the credential (as its ``Authorization`` header, kept out of ``repr``, or the OAuth2
        settings, never a fetched token)."""
        if self._spec is not None:
            return self._spec
        return ClientSpec(
            url=self.base_url,
            retries=self._retries,
            backoff_s=self._backoff_s,
            authorization=self._http.headers.get("Authorization"),
            oauth2=self._oauth2.settings if self._oauth2 is not None else None,
        )

    def close(self) -> None:
        self._http.close()
        if self._oauth2 is not None:
            self._oauth2.close()

    def __enter__(self) -> PulsarAdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PulsarAdminClient(base_url={str(self._http.base_url)!r})"

    @property
    def base_url(self) -> str:
        """The admin service URL this client talks to (no credentials in it)."""
        return str(self._http.base_url).rstrip("/")

    def broker_url(self, broker_id: str) -> str:
        """The web service URL of a broker id (``host:port``), with the admin URL's scheme."""
        return self._broker_url(broker_id, "").rstrip("/")

    # ------------------------------------------------------------------ clusters / brokers

    def clusters(self) -> list[str]:
        """``GET /admin/v2/clusters``: cluster names."""
        return _str_list(*self._get_json("/admin/v2/clusters"))

    def brokers(self, cluster: str | None = None) -> list[str]:
        """Active broker ids (``host:port``) of the local cluster, or of ``cluster``."""
        path = "/admin/v2/brokers" if cluster is None else f"/admin/v2/brokers/{_seg(cluster)}"
        brokers = _str_list(*self._get_json(path))
        self._cluster_brokers.update(b.lower() for b in brokers)
        return brokers

    def leader_broker(self) -> dict[str, Any]:
        """``BrokerInfo`` of the leader: ``{"serviceUrl": ..., "brokerId": ...}`` (brokerId on newer Pulsar)."""
        data, url = self._get_json("/admin/v2/brokers/leaderBroker")
        data = _require_dict(data, url)
        if not isinstance(data.get("serviceUrl"), str):
            raise _malformed(url, "'serviceUrl' missing or not a string", data)
        return data

    def dynamic_config(self) -> dict[str, str]:
        """``GET /admin/v2/brokers/configuration/values``: the dynamic configuration overrides (strings).

        A key that is absent has its ``broker.conf`` value, which this API does not show.
        """
        data, url = self._get_json("/admin/v2/brokers/configuration/values")
        data = _require_dict(data, url)
        return {str(k): str(v) for k, v in data.items()}

    def owned_namespaces(self, cluster: str, broker_id: str) -> dict[str, Any]:
        """Bundles owned by ``broker_id``: full bundle name -> ``NamespaceOwnershipStatus``."""
        path = f"/admin/v2/brokers/{_seg(cluster)}/{_seg(broker_id)}/ownedNamespaces"
        data, url = self._get_json(path)
        data = _require_dict(data, url)
        for bundle, status in data.items():
            if not isinstance(status, dict):
                raise _malformed(url, f"entry {bundle!r} is not a NamespaceOwnershipStatus object", data)
        return data

    # ------------------------------------------------------------------ placement constraints

    def namespace_isolation_policies(self, cluster: str) -> dict[str, Any]:
        """``GET /admin/v2/clusters/{cluster}/namespaceIsolationPolicies``: ``{policyName: NamespaceIsolationData}``.

        Pulsar answers 404 both for an unknown cluster and for a cluster whose policies were never set
        ("NamespaceIsolationPolicies for cluster X does not exist"); the second is no policy, ``{}``: a
        404 is read as that when ``GET /admin/v2/clusters`` lists ``cluster``, else raised. The entries
        are checked for their shape here; their content (regexes, ``auto_failover_policy``) by the caller
        (:func:`pulsar_rebalance.core.pulsar.policies.parse_isolation_policies`).
        """
        try:
            data, url = self._get_json(f"/admin/v2/clusters/{_seg(cluster)}/namespaceIsolationPolicies")
        except NotFoundError:
            if cluster in self.clusters():
                return {}
            raise
        data = _require_dict(data, url)
        for name, policy in data.items():
            if not isinstance(policy, dict):
                raise _malformed(url, f"policy {name!r} is not a NamespaceIsolationData object", data)
        return data

    def failure_domains(self, cluster: str) -> dict[str, Any]:
        """``GET /admin/v2/clusters/{cluster}/failureDomains``: ``{domainName: {"brokers": [brokerId]}}``
        (``{}`` when none is configured)."""
        data, url = self._get_json(f"/admin/v2/clusters/{_seg(cluster)}/failureDomains")
        data = _require_dict(data, url)
        for name, domain in data.items():
            if not isinstance(domain, dict):
                raise _malformed(url, f"failure domain {name!r} is not a FailureDomain object", data)
        return data

    def namespace_anti_affinity_group(self, namespace: str) -> str | None:
        """``GET /admin/v2/namespaces/{tenant}/{namespace}/antiAffinity``: the namespace's anti-affinity group,
        or None when it has none.

        Pulsar's resource returns a Java ``String``: Jersey writes it unquoted (``orders``, not
        ``"orders"``) with ``Content-Type: application/json``, and a namespace without a group answers
        ``204 No Content``. A blank group is no group (``StringUtils.isBlank``, as the load manager reads it).
        """
        tenant, ns = _split_namespace(namespace)
        response = self._get(f"/admin/v2/namespaces/{_seg(tenant)}/{_seg(ns)}/antiAffinity")
        try:
            text = response.content.decode("utf-8")
        except UnicodeDecodeError as exc:
            url = str(response.request.url)
            raise MalformedResponseError(
                f"GET {url}: the anti-affinity group is not UTF-8 text ({exc})", url=url, body=_excerpt(response.text)
            ) from None
        return text if text.strip() else None

    # ------------------------------------------------------------------ broker stats (per broker)

    def load_report(self, broker_id: str) -> dict[str, Any]:
        """``GET /admin/v2/broker-stats/load-report`` on ``broker_id`` itself: its ``LocalBrokerData``."""
        data, url = self._get_json(self._broker_url(broker_id, "/admin/v2/broker-stats/load-report"))
        data = _require_dict(data, url)
        _check_local_broker_data(data, url)
        return data

    def topic_stats(self, broker_id: str) -> dict[str, Any]:
        """``GET /admin/v2/broker-stats/topics`` on ``broker_id``: ns -> bundle -> domain -> topic -> stats."""
        data, url = self._get_json(self._broker_url(broker_id, "/admin/v2/broker-stats/topics"))
        data = _require_dict(data, url)
        for ns, bundles in data.items():
            if not isinstance(bundles, dict) or not all(isinstance(v, dict) for v in bundles.values()):
                raise _malformed(url, f"namespace {ns!r} is not a map of bundle -> domain -> topic stats", data)
        return data

    # ------------------------------------------------------------------ tenants / namespaces

    def tenants(self) -> list[str]:
        return _str_list(*self._get_json("/admin/v2/tenants"))

    def namespaces(self, tenant: str) -> list[str]:
        """Namespaces of ``tenant`` as ``"tenant/ns"``."""
        return _str_list(*self._get_json(f"/admin/v2/namespaces/{_seg(tenant)}"))

    def bundles(self, namespace: str) -> dict[str, Any]:
        """Live ``BundlesData``: ``{"boundaries": ["0x00000000", ...], "numBundles": n}``."""
        tenant, ns = _split_namespace(namespace)
        data, url = self._get_json(f"/admin/v2/namespaces/{_seg(tenant)}/{_seg(ns)}/bundles")
        data = _require_dict(data, url)
        boundaries, num = data.get("boundaries"), data.get("numBundles")
        if not isinstance(boundaries, list) or len(boundaries) < 2 or not all(isinstance(b, str) for b in boundaries):
            raise _malformed(url, "'boundaries' is not a list of at least 2 strings", data)
        if not isinstance(num, int) or num != len(boundaries) - 1:
            raise _malformed(url, f"numBundles={num!r} does not match {len(boundaries)} boundaries", data)
        return data

    def split_bundle(
        self,
        namespace: str,
        bundle: str,
        *,
        unload: bool = False,
        algorithm: str | None = None,
        boundaries: Sequence[int] | None = None,
    ) -> None:
        """``PUT .../{tenant}/{ns}/{bundle}/split`` (never retried).

        Args:
            bundle: range string ``0x..._0x...``.
            unload: unload the children after the split (Pulsar re-places them).
            algorithm: ``splitAlgorithmName``; None = the broker's default (range_equally_divide).
            boundaries: explicit split points (JSON body); requires ``specified_positions_divide``,
                which is chosen automatically when ``algorithm`` is None.
        """
        tenant, ns = _split_namespace(namespace)
        if boundaries:
            if algorithm is None:
                algorithm = "specified_positions_divide"
            elif algorithm != "specified_positions_divide":
                raise ValueError(
                    f"boundaries are only used by specified_positions_divide; algorithm={algorithm!r} would ignore them"
                )
            body: list[int] | None = [int(b) for b in boundaries]
        else:
            body = None
        params = {"unload": "true" if unload else "false"}
        if algorithm:
            params["splitAlgorithmName"] = algorithm
        path = f"/admin/v2/namespaces/{_seg(tenant)}/{_seg(ns)}/{_seg(bundle)}/split"
        self._request("PUT", path, params=params, json_body=body)

    def unload_bundle(self, namespace: str, bundle: str, *, destination_broker: str | None = None) -> None:
        """``PUT .../{tenant}/{ns}/{bundle}/unload[?destinationBroker=]`` (never retried)."""
        tenant, ns = _split_namespace(namespace)
        params = {"destinationBroker": destination_broker} if destination_broker else None
        path = f"/admin/v2/namespaces/{_seg(tenant)}/{_seg(ns)}/{_seg(bundle)}/unload"
        self._request("PUT", path, params=params)

    def topic_hash_positions(self, namespace: str, bundle: str, topics: Sequence[str] = ()) -> dict[str, Any]:
        """``TopicHashPositions`` ``{"namespace", "bundle", "topicHashPositions": {topic: hash}}``.

        An empty ``topics`` asks for every topic of the bundle.
        """
        tenant, ns = _split_namespace(namespace)
        path = f"/admin/v2/namespaces/{_seg(tenant)}/{_seg(ns)}/{_seg(bundle)}/topicHashPositions"
        params = [("topics", t) for t in topics]
        data, url = self._get_json(path, params=params)
        data = _require_dict(data, url)
        positions = data.get("topicHashPositions")
        if not isinstance(positions, dict) or not all(isinstance(v, int) for v in positions.values()):
            raise _malformed(url, "'topicHashPositions' is not a map of topic -> hash", data)
        return data

    def lookup_topic(self, topic: str) -> dict[str, Any]:
        """``GET /lookup/v2/topic/{domain}/{tenant}/{ns}/{topic}``: ``LookupData`` of the owner."""
        domain, sep, rest = topic.partition("://")
        parts = rest.split("/")
        if not sep or domain not in ("persistent", "non-persistent") or len(parts) != 3 or not all(parts):
            raise ValueError(f"topic must be 'persistent://tenant/namespace/topic', got {topic!r}")
        path = "/lookup/v2/topic/" + "/".join(_seg(p) for p in (domain, *parts))
        data, url = self._get_json(path)
        data = _require_dict(data, url)
        if not isinstance(data.get("brokerUrl"), str) and not isinstance(data.get("httpUrl"), str):
            raise _malformed(url, "LookupData has neither brokerUrl nor httpUrl", data)
        return data

    # ------------------------------------------------------------------ transport

    def _broker_url(self, broker_id: str, path: str) -> str:
        host, sep, port = broker_id.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"broker id must be 'host:port', got {broker_id!r}")
        self._cluster_brokers.add(broker_id.lower())
        return f"{self._scheme}://{broker_id}{path}"

    def _get_json(self, url: str, *, params: Any = None) -> tuple[Any, str]:
        """GET with bounded retries; returns the parsed JSON and the URL that finally answered."""
        response = self._get(url, params=params)
        final_url = str(response.request.url)
        try:
            return response.json(), final_url
        except (
            ValueError,
            RecursionError,
            UnicodeDecodeError,
        ) as exc:  # ValueError: bad JSON, or an int of > 4300 digits
            raise MalformedResponseError(
                f"GET {final_url}: body is not JSON ({exc})",
                status_code=response.status_code,
                url=final_url,
                body=_excerpt(response.text),
            ) from None

    def _get(self, url: str, *, params: Any = None) -> httpx.Response:
        """GET with bounded retries (connect, timeout, 5xx); the final 2xx response."""
        attempt = 0
        while True:
            try:
                response = self._request("GET", url, params=params)
                break
            except (AdminConnectError, AdminTimeoutError, ServerSideError) as exc:
                if attempt >= self._retries:
                    raise
                delay = min(self._backoff_s * (2**attempt), 2.0)
                logger.warning(
                    "GET %s failed (%s); retry %d/%d in %.2fs",
                    exc.url,
                    type(exc).__name__,
                    attempt + 1,
                    self._retries,
                    delay,
                )
                time.sleep(delay)
                attempt += 1
        return response

    def _request(
        self, method: str, url: str, *, params: Any = None, json_body: list[int] | None = None
    ) -> httpx.Response:
        """One logical request: send, follow redirects by hand, map failures to our errors.

        With OAuth2, a 401 to a request that carried the access token fetches a new token and sends
        the request once more (the broker did not act on a request it refused to authenticate)."""
        content = json.dumps(json_body).encode() if json_body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        refreshed = False
        while True:
            request = self._http.build_request(method, url, params=params, content=content, headers=headers)
            sent = None
            if self._oauth2 is not None:
                sent = self._oauth2.authorization()
                request.headers["Authorization"] = sent
            response = self._follow(request)
            if (
                response.status_code == 401
                and self._oauth2 is not None
                and not refreshed
                and "Authorization" in response.request.headers
            ):
                logger.warning(
                    "%s %s -> 401 with the OAuth2 access token of %s; fetching a new token and sending it once more",
                    method,
                    response.request.url,
                    self._oauth2.settings.describe(),
                )
                self._oauth2.refresh(sent)
                refreshed = True
                continue
            _raise_for_status(response)
            return response

    def _follow(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and follow redirects by hand; the first answer that is not a redirect."""
        method = request.method
        first_url = request.url
        for _ in range(MAX_REDIRECTS + 1):
            response = self._send(request)
            if response.status_code not in _REDIRECT_STATUSES:
                return response
            location = response.headers.get("Location")
            if not location:
                raise PulsarAdminError(
                    f"{method} {request.url} -> {response.status_code} without a Location header",
                    status_code=response.status_code,
                    url=str(request.url),
                    body=_excerpt(response.text),
                )
            target = request.url.join(location)
            logger.debug("%s %s redirected to %s", method, request.url, target)
            request = self._redirected(request, target)
        raise PulsarAdminError(
            f"{method} {first_url}: more than {MAX_REDIRECTS} redirects (last to {request.url})", url=str(request.url)
        )

    def _redirected(self, previous: httpx.Request, target: httpx.URL) -> httpx.Request:
        headers = httpx.Headers(previous.headers)
        headers.pop("Host", None)
        if "Authorization" in headers and not self._trusted(previous.url, target):
            logger.warning(
                "not forwarding credentials on redirect to %s (not a broker of this cluster)", target.netloc.decode()
            )
            headers.pop("Authorization")
        return httpx.Request(
            previous.method, target, headers=headers, content=previous.content, extensions=previous.extensions
        )

    def _trusted(self, source: httpx.URL, target: httpx.URL) -> bool:
        """May ``target`` see our credentials? Exactly the admin URL's origin, or a listed broker's."""
        if source.scheme == "https" and target.scheme != "https":
            return False
        origin = _origin(target)
        if origin == self._base_origin:
            return True
        if target.scheme != self._scheme:
            return False
        host = f"[{origin[1]}]" if ":" in origin[1] else origin[1]  # IPv6 broker ids are bracketed
        netloc = f"{host}:{origin[2]}"
        if netloc not in self._cluster_brokers and not self._brokers_fetched:
            self._brokers_fetched = True  # once: the listing itself may redirect (to the leader)
            try:
                self.brokers()
            except PulsarAdminError as exc:
                logger.warning("cannot list the cluster's brokers to vet a redirect (%s)", type(exc).__name__)
        return netloc in self._cluster_brokers

    def _send(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        try:
            response = self._http.send(request)
            response.read()
            return response
        except httpx.TimeoutException as exc:
            raise AdminTimeoutError(f"{request.method} {url}: timed out ({type(exc).__name__})", url=url) from exc
        except httpx.TransportError as exc:
            raise AdminConnectError(
                f"{request.method} {url}: cannot reach the Pulsar admin service at {url} ({type(exc).__name__}: {exc})",
                url=url,
            ) from exc


# ---------------------------------------------------------------------- helpers

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """(scheme, lower-case host, port with the scheme's default filled in)."""
    return url.scheme, (url.host or "").lower(), url.port or _DEFAULT_PORTS.get(url.scheme)


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """(``url`` without userinfo, a Basic ``Authorization`` value for it or None)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"admin URL {redact_userinfo(url)!r} is not a valid URL ({exc})") from None
    if not parsed.userinfo:
        return url, None
    credentials = f"{parsed.username}:{parsed.password}".encode()
    return str(parsed.copy_with(username=None, password=None)), "Basic " + base64.b64encode(credentials).decode()


_STATUS_ERRORS: Mapping[int, type[PulsarAdminError]] = {
    401: NotAuthorizedError,
    403: NotAuthorizedError,
    404: NotFoundError,
    409: ConflictError,
    412: PreconditionFailedError,
}


def _raise_for_status(response: httpx.Response) -> None:
    status = response.status_code
    if 200 <= status < 300:
        return
    request = response.request
    url = str(request.url)
    text = response.text
    reason = _reason(text)
    cls = _STATUS_ERRORS.get(status) or (ServerSideError if status >= 500 else PulsarAdminError)
    message = f"{request.method} {url} -> {status}: {reason}"
    if status == 401 and "Authorization" not in request.headers:
        message += " (no credentials were sent with this request)"
    raise cls(message, status_code=status, url=url, body=_excerpt(text))


def _reason(text: str) -> str:
    """Pulsar's ``ErrorData.reason`` if the body has one, else the truncated body."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return _excerpt(text) or "(empty body)"
    if isinstance(data, dict) and isinstance(data.get("reason"), str):
        return _excerpt(data["reason"])
    return _excerpt(text)


def _excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= _BODY_EXCERPT else text[:_BODY_EXCERPT] + f"... ({len(text)} chars)"


def _seg(value: str) -> str:
    """One URL path segment, percent-encoded (``host:port`` keeps its colon)."""
    if not value:
        raise ValueError("empty path segment")
    return quote(value, safe=":")


def _split_namespace(namespace: str) -> tuple[str, str]:
    parts = namespace.split("/")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"namespace must be 'tenant/namespace', got {namespace!r}")
    return parts[0], parts[1]


def _malformed(url: str, what: str, data: Any) -> MalformedResponseError:
    return MalformedResponseError(f"GET {url}: unexpected response shape: {what}", url=url, body=_excerpt(data))


def _require_dict(data: Any, url: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _malformed(url, f"expected a JSON object, got {type(data).__name__}", data)
    return data


def _str_list(data: Any, url: str) -> list[str]:
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise _malformed(url, "expected a JSON array of strings", data)
    return data


def _check_local_broker_data(data: dict[str, Any], url: str) -> None:
    """The fields the rebalancer reads from a ``LocalBrokerData`` (ModularLoadManagerImpl report)."""
    kind = data.get("loadReportType", "LocalBrokerData")
    if kind != "LocalBrokerData":
        raise _malformed(
            url, f"loadReportType={kind!r}; only ModularLoadManagerImpl's LocalBrokerData is supported", data
        )
    for key in _LOAD_REPORT_USAGE_KEYS:
        usage = data.get(key)
        if not isinstance(usage, dict) or not all(
            isinstance(usage.get(f), (int, float)) and not isinstance(usage.get(f), bool) for f in ("usage", "limit")
        ):
            raise _malformed(url, f'\'{key}\' must be {{"usage": number, "limit": number}}', data)
    for key in _LOAD_REPORT_NUMBER_KEYS:
        if not isinstance(data.get(key), (int, float)) or isinstance(data.get(key), bool):
            raise _malformed(url, f"'{key}' missing or not a number", data)
    stats = data.get("lastStats")
    if not isinstance(stats, dict) or not all(isinstance(s, dict) for s in stats.values()):
        raise _malformed(url, "'lastStats' must map bundle -> NamespaceBundleStats", data)
