"""OAuth2 client credentials against the simulator's issuer, over real HTTP (no mocks).

The simulator serves ``/oauth2/.well-known/openid-configuration`` and ``/oauth2/token`` and then accepts
only unexpired tokens it issued. Lifetimes of 1-2 s make expiry observable; every wait is for a condition.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator

import pytest

from pulsar_rebalance.errors import ConfigError, NotAuthorizedError
from pulsar_rebalance.pipeline.context import admin_client_from_env
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.pulsar_admin.oauth2 import EXPIRY_ADJUSTMENT, OAuth2Error, OAuth2Settings
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import OAuth2Issuer, SimulatedPulsar
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

CLIENT_ID = "rebalancer-svc"
SECRET = "cl13nt-S3cr3t-never-logged-4e1d"
AUDIENCE = "urn:pulsar:sim-cluster"


def _sim(lifetime: int = 60) -> SimulatedPulsar:
    issuer = OAuth2Issuer(CLIENT_ID, SECRET, token_lifetime_s=lifetime, audience=AUDIENCE)
    return SimulatedPulsar(generate_cluster(), ephemeral=True, oauth2=issuer)


@pytest.fixture
def sim() -> Iterator[SimulatedPulsar]:
    with _sim() as s:
        yield s


@pytest.fixture
def short_sim() -> Iterator[SimulatedPulsar]:
    with _sim(lifetime=1) as s:
        yield s


def settings(sim: SimulatedPulsar, secret: str = SECRET, **kw) -> OAuth2Settings:
    return OAuth2Settings(sim.issuer_url, CLIENT_ID, secret, audience=kw.pop("audience", AUDIENCE), **kw)


def issued_tokens(sim: SimulatedPulsar) -> list[str]:
    with sim._log_lock:
        return list(sim._issued)


def test_client_credentials_reach_an_oauth2_protected_simulator(sim):
    # broker 2: neither leader nor owner of everything, so requests redirect and the token must follow
    with PulsarAdminClient.from_url(sim.broker_urls[2], oauth2=settings(sim, scope="admin"), retries=0) as admin:
        assert admin.brokers() == sim.broker_ids
        assert admin.clusters() == ["sim-cluster"]
        ns = sim.state.namespaces()[0]
        assert admin.bundles(ns)["numBundles"] >= 1
        bundle = sim.state.bundle_ranges(ns)[0]
        admin.unload_bundle(ns, bundle)  # a PUT that redirects to the owner
    assert sim.tokens_issued == 1  # one token for the whole run (60 s lifetime)
    assert any(e == ("unload", f"{ns}/{bundle}") for e in sim.executed())
    # without a token, with a made-up one, or with one for another audience: refused
    with PulsarAdminClient.from_url(sim.admin_url, retries=0) as anonymous, pytest.raises(NotAuthorizedError):
        anonymous.clusters()
    with PulsarAdminClient.from_url(sim.admin_url, token="forged", retries=0) as forged:
        with pytest.raises(NotAuthorizedError, match="401"):
            forged.clusters()
    with PulsarAdminClient.from_url(sim.admin_url, oauth2=settings(sim, audience="other"), retries=0) as other:
        with pytest.raises(OAuth2Error, match="invalid_request") as info:
            other.clusters()
    assert info.value.error == "invalid_request"


def test_the_issuer_url_may_end_with_a_slash_and_the_metadata_is_read_once(sim):
    s = OAuth2Settings(sim.issuer_url + "/", CLIENT_ID, SECRET, audience=AUDIENCE)
    with PulsarAdminClient.from_url(sim.admin_url, oauth2=s, retries=0) as admin:
        admin.clusters()
        admin._oauth2.refresh(admin._oauth2.authorization())  # as after a 401
        admin.clusters()
    well_known = [r for r in sim.requests() if r.path.endswith("/.well-known/openid-configuration")]
    assert len(well_known) == 1 and sim.tokens_issued == 2


def test_a_wrong_secret_is_refused_with_a_clear_error_and_no_secret(sim, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "wr0ng-S3cr3t-also-never-logged"
    with PulsarAdminClient.from_url(sim.admin_url, oauth2=settings(sim, secret=wrong), retries=0) as admin:
        with pytest.raises(OAuth2Error) as info:
            admin.clusters()
    exc = info.value
    message = str(exc)
    assert sim.issuer_url in message and repr(CLIENT_ID) in message and "invalid_client" in message
    assert isinstance(exc, NotAuthorizedError) and exc.error == "invalid_client" and exc.status_code == 401
    assert exc.issuer_url == sim.issuer_url and exc.client_id == CLIENT_ID
    for text in (message, repr(exc), str(vars(exc)), caplog.text):
        assert wrong not in text and SECRET not in text
    assert sim.tokens_issued == 0
    assert not [r for r in sim.requests() if r.path.startswith("/admin/")], "no admin request without a token"


def test_an_expired_token_is_refreshed_before_the_next_request(short_sim):
    sim = short_sim
    with PulsarAdminClient.from_url(sim.admin_url, oauth2=settings(sim), retries=0) as admin:
        admin.clusters()
        flow = admin._oauth2
        first = issued_tokens(sim)
        assert flow.fetched == 1 and len(first) == 1
        # Pulsar's margin: the token is used for EXPIRY_ADJUSTMENT x expires_in, then replaced
        wait_for(flow._expired, 5, "the cached token to reach 90 % of its 1 s lifetime")
        assert admin.brokers() == sim.broker_ids
        assert flow.fetched == 2 and sim.tokens_issued == 2
        assert [r.status for r in sim.requests() if r.path.startswith("/admin/")] == [200, 200], "no 401"
    assert EXPIRY_ADJUSTMENT == 0.9


def test_a_401_mid_run_fetches_one_new_token_and_retries_the_put_once(sim):
    ns = sim.state.namespaces()[0]
    bundle = sim.state.bundle_ranges(ns)[0]
    with PulsarAdminClient.from_url(sim.admin_url, oauth2=settings(sim), retries=0) as admin:
        admin.clusters()
        sim.revoke_tokens()  # the issuer rotated its keys: the cached, unexpired token is refused
        sim.reset_request_log()
        admin.unload_bundle(ns, bundle)
    unloads = [r for r in sim.requests() if r.path.endswith("/unload")]
    first_401 = next(i for i, r in enumerate(unloads) if r.status == 401)
    assert [r.status for r in unloads[: first_401 + 1]] == [401], "the first attempt is refused"
    assert all(r.status != 401 for r in unloads[first_401 + 1 :]), "the retry carries the new token"
    assert sim.tokens_issued == 2
    assert [e for e in sim.executed() if e[0] == "unload"] == [("unload", f"{ns}/{bundle}")], "executed once"


def test_a_second_401_is_raised_after_exactly_one_refresh_and_retry(sim):
    with PulsarAdminClient.from_url(sim.admin_url, oauth2=settings(sim), retries=3, backoff_s=0.0) as admin:
        admin.clusters()
        sim.reset_request_log()
        sim.inject_request_error(401, path_contains="/admin/v2/tenants", times=5)
        with pytest.raises(NotAuthorizedError, match="401"):
            admin.tenants()
    assert [r.status for r in sim.requests() if r.path == "/admin/v2/tenants"] == [401, 401]
    assert sim.tokens_issued == 2


def test_no_token_or_secret_in_logs_errors_or_repr(sim, caplog):
    caplog.set_level(logging.DEBUG)
    s = settings(sim)
    with PulsarAdminClient.from_url(sim.broker_urls[1], oauth2=s, retries=0) as admin:
        admin.brokers()
        admin.load_report(sim.broker_ids[3])
        sim.revoke_tokens()
        admin.clusters()  # 401, refresh, retry: logged as a warning
        sim.inject_request_error(401, path_contains="/admin/v2/clusters", times=2)
        with pytest.raises(NotAuthorizedError) as info:
            admin.clusters()
        texts = [caplog.text, str(info.value), repr(info.value), repr(admin), repr(admin.spec()), repr(s)]
        texts += [repr(admin._oauth2), str(vars(info.value))]
    tokens = issued_tokens(sim)
    assert len(tokens) == 2 and "fetching a new token" in caplog.text
    for text in texts:
        assert SECRET not in text
        for token in tokens:
            assert token not in text


def test_a_token_and_oauth2_together_are_a_configuration_error(sim):
    with pytest.raises(ConfigError, match="PULSAR_ADMIN_TOKEN") as info:
        PulsarAdminClient.from_url(sim.admin_url, token="t", oauth2=settings(sim))
    assert "OAuth2" in str(info.value) and SECRET not in str(info.value)
    with pytest.raises(ConfigError, match="user:password"):
        PulsarAdminClient.from_url("http://u:p@127.0.0.1:1", oauth2=settings(sim))
    env = {
        "PULSAR_ADMIN_URL": sim.admin_url,
        "PULSAR_ADMIN_TOKEN": "t",
        "PULSAR_ADMIN_OAUTH2_ISSUER_URL": sim.issuer_url,
        "PULSAR_ADMIN_OAUTH2_CLIENT_ID": CLIENT_ID,
        "PULSAR_ADMIN_OAUTH2_CLIENT_SECRET": SECRET,
    }
    with pytest.raises(ConfigError) as info:
        admin_client_from_env(env)
    assert "PULSAR_ADMIN_TOKEN" in str(info.value) and "PULSAR_ADMIN_OAUTH2_CLIENT_ID" in str(info.value)
    assert SECRET not in str(info.value)
    del env["PULSAR_ADMIN_TOKEN"], env["PULSAR_ADMIN_OAUTH2_CLIENT_SECRET"]
    with pytest.raises(ConfigError, match="PULSAR_ADMIN_OAUTH2_CLIENT_SECRET not set"):
        admin_client_from_env(env)
    with pytest.raises(ConfigError, match="PULSAR_ADMIN_OAUTH2_ISSUER_URL: OAuth2 issuer URL must start"):
        admin_client_from_env(
            {**env, "PULSAR_ADMIN_OAUTH2_ISSUER_URL": "idp", "PULSAR_ADMIN_OAUTH2_CLIENT_SECRET": "x"}
        )


def test_the_environment_builds_an_oauth2_client(sim):
    env = {
        "PULSAR_ADMIN_URL": sim.admin_url,
        "PULSAR_ADMIN_OAUTH2_ISSUER_URL": sim.issuer_url,
        "PULSAR_ADMIN_OAUTH2_AUDIENCE": AUDIENCE,
        "PULSAR_ADMIN_OAUTH2_SCOPE": "",
        "PULSAR_ADMIN_OAUTH2_CLIENT_ID": CLIENT_ID,
        "PULSAR_ADMIN_OAUTH2_CLIENT_SECRET": SECRET,
    }
    with admin_client_from_env(env) as admin:
        assert admin.clusters() == ["sim-cluster"]
        assert admin.spec().oauth2 == OAuth2Settings(sim.issuer_url, CLIENT_ID, SECRET, audience=AUDIENCE)
        assert admin.spec().authorization is None


def test_a_spark_side_rebuild_through_client_spec_refreshes_on_its_own(short_sim):
    """What a Spark task gets is the pickled ClientSpec: settings, never a fetched token; the client it
    builds fetches its own token and replaces it when it expires."""
    sim = short_sim
    with PulsarAdminClient.from_url(sim.admin_url, oauth2=settings(sim), retries=0) as driver:
        driver.clusters()
        shipped = pickle.dumps(driver.spec())
    driver_token = issued_tokens(sim)[0]
    assert driver_token.encode() not in shipped and b"Bearer" not in shipped
    spec = pickle.loads(shipped)
    assert spec.authorization is None and spec.oauth2.client_id == CLIENT_ID and SECRET not in repr(spec)
    with spec.build() as task:
        task.topic_stats(sim.broker_ids[1])
        flow = task._oauth2
        assert flow.fetched == 1
        wait_for(flow._expired, 5, "the task's token to expire")
        task.topic_stats(sim.broker_ids[2])
        assert flow.fetched == 2
    assert sim.tokens_issued == 3
    assert all(r.status == 200 for r in sim.requests() if r.path.startswith("/admin/"))


def test_the_token_endpoints_other_errors_name_the_issuer(sim):
    with PulsarAdminClient.from_url(sim.admin_url, oauth2=settings(sim), retries=0) as admin:
        sim.inject_request_error(503, path_contains="/oauth2/token", times=1)
        with pytest.raises(Exception) as info:
            admin.clusters()
        assert sim.issuer_url in str(info.value) and "503" in str(info.value) and info.value.retryable
        assert admin.clusters() == ["sim-cluster"]  # the next request fetches a token
    closed = OAuth2Settings("http://127.0.0.1:9/idp", CLIENT_ID, SECRET)
    with PulsarAdminClient.from_url(sim.admin_url, oauth2=closed, retries=0, timeout=2) as admin:
        with pytest.raises(Exception, match="cannot reach the authorization metadata") as info:
            admin.clusters()
        assert "127.0.0.1:9/idp" in str(info.value) and SECRET not in str(info.value)
