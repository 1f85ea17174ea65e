"""OAuth 2.0 client credentials for the admin API, as Pulsar's ``AuthenticationOAuth2`` does it.

Pulsar's Java client (``org.apache.pulsar.client.impl.auth.oauth2``) is followed step by step:

* **Metadata** (``DefaultMetadataResolver``): the token endpoint is read once, on first use, from
  ``<issuer_url>/.well-known/openid-configuration`` (``token_endpoint``).
* **Token request** (``TokenClient.exchangeClientCredentials``): ``POST`` to the token endpoint, form
  encoded, ``grant_type=client_credentials``, ``client_id``, ``client_secret``, and ``audience`` /
  ``scope`` only when they are not blank. 200 -> ``access_token`` / ``expires_in``; 400 or 401 -> the
  token endpoint's ``{"error", "error_description"}`` (``TokenError``), raised as :class:`OAuth2Error`
  naming the issuer, the client id and that error; anything else -> an error naming the status.
* **Caching** (``AuthenticationOAuth2.CachedToken``): the token is used until ``EXPIRY_ADJUSTMENT``
  (0.9, Pulsar's ``AuthenticationOAuth2.EXPIRY_ADJUSTMENT``) of its ``expires_in`` has passed, counted
  from just before the request was sent; the next request after that fetches a new one. A token
  without ``expires_in`` is kept until the admin API refuses it.
* **401 from the admin API**: :class:`~pulsar_rebalance.pulsar_admin.client.PulsarAdminClient` asks
  :meth:`ClientCredentialsFlow.refresh` for a new token once and sends that request once more (the
  token may have been revoked, or the clocks disagree). This is the only case a PUT is sent twice:
  a 401 means the broker did not act on it.

The client secret and every access token stay out of ``repr``, log lines and error messages (an
error body from the issuer is shown with the secret replaced by ``***``), and never reach argv.
The token POST does not follow redirects (the form carries the secret); the metadata GET does.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from pulsar_rebalance.errors import (
    AdminConnectError,
    AdminTimeoutError,
    ConfigError,
    NotAuthorizedError,
    ServerSideError,
)
from pulsar_rebalance.urls import redact_userinfo

logger = logging.getLogger(__name__)

EXPIRY_ADJUSTMENT = 0.9
"""Fraction of ``expires_in`` a token is used for: Pulsar's ``AuthenticationOAuth2.EXPIRY_ADJUSTMENT``."""
WELL_KNOWN_PATH = "/.well-known/openid-configuration"
_EXCERPT = 300


@dataclass(frozen=True)
class OAuth2Settings:
    """What the client credentials flow needs; picklable (a Spark task builds its own flow from it).

    ``client_secret`` is left out of ``repr``. ``audience`` and ``scope`` are sent only when set
    (Pulsar's ``TokenClient`` skips blank ones).
    """

    issuer_url: str
    client_id: str
    client_secret: str = field(repr=False)
    audience: str | None = None
    scope: str | None = None

    def __post_init__(self) -> None:
        if not self.issuer_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"OAuth2 issuer URL must start with http:// or https://, got {redact_userinfo(self.issuer_url)!r}",
                key="issuer_url",
            )
        if redact_userinfo(self.issuer_url) != self.issuer_url:
            raise ConfigError(
                f"OAuth2 issuer URL {redact_userinfo(self.issuer_url)} must not carry user:password; "
                "the client id and secret are given on their own",
                key="issuer_url",
            )
        if not self.client_id.strip():
            raise ConfigError("OAuth2 client id is empty", key="client_id")
        if not self.client_secret:
            raise ConfigError(f"OAuth2 client secret of client id {self.client_id!r} is empty", key="client_secret")

    @property
    def metadata_url(self) -> str:
        """``DefaultMetadataResolver.getWellKnownMetadataUrl``: the issuer URL + the well-known path."""
        return self.issuer_url.rstrip("/") + WELL_KNOWN_PATH

    def describe(self) -> str:
        return f"OAuth2 issuer {self.issuer_url} (client id {self.client_id!r})"


class OAuth2Error(NotAuthorizedError):
    """The issuer refused the client credentials (``error`` is its OAuth2 error code, e.g.
    ``invalid_client``), or its metadata or token answer is unusable. Never carries the secret."""

    def __init__(
        self,
        message: str,
        *,
        issuer_url: str,
        client_id: str,
        error: str | None = None,
        status_code: int | None = None,
        url: str | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, url=url, body=body)
        self.issuer_url = issuer_url
        self.client_id = client_id
        self.error = error


class ClientCredentialsFlow:
    """Fetches, caches and refreshes an access token for :class:`OAuth2Settings`; thread-safe.

    Args:
        verify: TLS verification for the issuer (the admin client's setting).
        timeout: seconds for each request to the issuer.
        clock: monotonic seconds (tests).
    """

    def __init__(
        self,
        settings: OAuth2Settings,
        *,
        verify: bool | ssl.SSLContext = True,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._http = httpx.Client(verify=verify, timeout=httpx.Timeout(timeout), headers={"Accept": "application/json"})
        self._clock = clock
        self._lock = threading.Lock()
        self._token_endpoint: str | None = None
        self._authorization: str | None = None  # "Bearer <access token>"
        self._expires_at: float | None = None
        self.fetched = 0  # tokens fetched so far (tests, diagnostics)

    def __repr__(self) -> str:
        return f"ClientCredentialsFlow(issuer_url={self.settings.issuer_url!r}, client_id={self.settings.client_id!r})"

    def close(self) -> None:
        self._http.close()

    def authorization(self) -> str:
        """The ``Authorization`` header value: the cached token, or a new one once it expired."""
        with self._lock:
            if self._authorization is None or self._expired():
                self._fetch()
            assert self._authorization is not None
            return self._authorization

    def refresh(self, rejected: str | None) -> str:
        """A new token after the admin API refused ``rejected`` (unless another thread already replaced it)."""
        with self._lock:
            if self._authorization is None or self._authorization == rejected:
                self._fetch()
            assert self._authorization is not None
            return self._authorization

    def _expired(self) -> bool:
        return self._expires_at is not None and self._clock() >= self._expires_at

    # ------------------------------------------------------------------ protocol

    def token_endpoint(self) -> str:
        """``token_endpoint`` of the issuer's metadata, fetched once."""
        if self._token_endpoint is None:
            s = self.settings
            url = s.metadata_url
            response = self._send("GET", url, what="authorization metadata", follow_redirects=True)
            if response.status_code != 200:
                raise self._error(
                    f"cannot obtain the authorization metadata from {url}: HTTP {response.status_code}",
                    response,
                )
            data = _json(response)
            endpoint = data.get("token_endpoint") if isinstance(data, dict) else None
            if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
                raise self._error(f"the authorization metadata at {url} has no http(s) 'token_endpoint'", response)
            if s.issuer_url.startswith("https://") and not endpoint.startswith("https://"):
                raise self._error(
                    f"the authorization metadata at {url} names a plain-http token endpoint {endpoint}; "
                    "the client secret is not sent there",
                    response,
                )
            self._token_endpoint = endpoint
        return self._token_endpoint

    def _fetch(self) -> None:
        s = self.settings
        endpoint = self.token_endpoint()
        form = {"grant_type": "client_credentials", "client_id": s.client_id, "client_secret": s.client_secret}
        if s.audience and s.audience.strip():
            form["audience"] = s.audience
        if s.scope and s.scope.strip():
            form["scope"] = s.scope
        started = self._clock()
        response = self._send("POST", endpoint, what="token endpoint", data=form)
        status = response.status_code
        if status == 200:
            data = _json(response)
            token = data.get("access_token") if isinstance(data, dict) else None
            if not isinstance(token, str) or not token:
                raise self._error(f"the token endpoint {endpoint} answered 200 without an access_token", response)
            expires_in = data.get("expires_in")
            if isinstance(expires_in, str) and expires_in.isdigit():
                expires_in = int(expires_in)
            if isinstance(expires_in, bool) or not isinstance(expires_in, (int, float)) or expires_in <= 0:
                expires_in = None
            self._authorization = f"Bearer {token}"
            self._expires_at = None if expires_in is None else started + expires_in * EXPIRY_ADJUSTMENT
            self.fetched += 1
            logger.info(
                "OAuth2: got an access token for client id %r from %s (expires in %s s; used for %s)",
                s.client_id,
                s.issuer_url,
                "?" if expires_in is None else f"{expires_in:g}",
                "until refused" if expires_in is None else f"{expires_in * EXPIRY_ADJUSTMENT:.1f} s",
            )
            return
        if status in (400, 401):  # TokenError
            data = _json(response, default={})
            error = data.get("error") if isinstance(data, dict) else None
            description = data.get("error_description") if isinstance(data, dict) else None
            error = error if isinstance(error, str) and error else "(no error code)"
            detail = f"{error}" + (f": {self._scrub(description)}" if isinstance(description, str) else "")
            raise self._error(
                f"{s.describe()} refused the client credentials: the token endpoint {endpoint} answered "
                f"{status} {self._scrub(detail)}",
                response,
                error=error,
            )
        if status >= 500:
            raise ServerSideError(
                f"{s.describe()}: the token endpoint {endpoint} answered {status}",
                status_code=status,
                url=endpoint,
                body=self._scrub(_excerpt(response.text)),
            )
        raise self._error(f"{s.describe()}: the token endpoint {endpoint} answered HTTP {status}", response)

    def _send(self, method: str, url: str, *, what: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, url, **kwargs)
            response.read()
            return response
        except httpx.TimeoutException as exc:
            raise AdminTimeoutError(
                f"{self.settings.describe()}: {what} {url} timed out ({type(exc).__name__})", url=url
            ) from None
        except httpx.TransportError as exc:
            raise AdminConnectError(
                f"{self.settings.describe()}: cannot reach the {what} {url} ({type(exc).__name__})", url=url
            ) from None

    def _error(self, message: str, response: httpx.Response, *, error: str | None = None) -> OAuth2Error:
        s = self.settings
        if not message.startswith("OAuth2 issuer"):
            message = f"{s.describe()}: {message}"
        return OAuth2Error(
            message,
            issuer_url=s.issuer_url,
            client_id=s.client_id,
            error=error,
            status_code=response.status_code,
            url=str(response.request.url),
            body=self._scrub(_excerpt(response.text)),
        )

    def _scrub(self, text: str) -> str:
        """``text`` with the client secret replaced (an issuer might echo the form back)."""
        return text.replace(self.settings.client_secret, "***")


def _json(response: httpx.Response, default: Any = None) -> Any:
    try:
        return response.json()
    except (ValueError, UnicodeDecodeError, RecursionError):
        return default


def _excerpt(text: str) -> str:
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + f"... ({len(text)} chars)"
