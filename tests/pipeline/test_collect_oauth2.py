"""collect_load against an OAuth2-protected simulator: the driver and every Spark task (a client rebuilt
from the ClientSpec) fetch their own tokens; a wrong client secret fails before anything is written."""

from __future__ import annotations

import pytest

from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.pulsar_admin.oauth2 import OAuth2Error, OAuth2Settings
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import OAuth2Issuer, SimulatedPulsar
from pulsar_rebalance.store.engine import make_engine
from tests.pipeline.test_hostile_admin import table_counts

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

CLIENT_ID = "rebalancer-svc"
SECRET = "cl13nt-S3cr3t-collect-77aa"


@pytest.fixture
def sim():
    issuer = OAuth2Issuer(CLIENT_ID, SECRET, token_lifetime_s=2)
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True, oauth2=issuer) as s:
        yield s


def test_collect_load_with_oauth2_and_with_a_wrong_secret(spark, sim, db_url, tmp_path, caplog):
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    before = table_counts(db_url)
    wrong = OAuth2Settings(sim.issuer_url, CLIENT_ID, "wr0ng-S3cr3t")
    work = tmp_path / "work"

    def collect(run_id: str, settings: OAuth2Settings) -> None:
        client = PulsarAdminClient.from_url(sim.admin_url, oauth2=settings, retries=0)
        stages.stage_collect(spark, JobContext(run_id, str(work)), params_doc={}, engine=engine, client=client)

    with pytest.raises(OAuth2Error) as info:
        collect("r-wrong", wrong)
    message = str(info.value)
    assert sim.issuer_url in message and repr(CLIENT_ID) in message and "invalid_client" in message
    assert "wr0ng-S3cr3t" not in message and "wr0ng-S3cr3t" not in caplog.text
    assert table_counts(db_url) == before
    assert not work.exists(), "no Parquet may be written"

    good = OAuth2Settings(sim.issuer_url, CLIENT_ID, SECRET)
    collect("r-oauth2", good)
    counts = table_counts(db_url)
    assert counts != before and work.exists()
    assert sim.tokens_issued >= 2, "the Spark tasks fetch their own token from the ClientSpec's settings"
    assert SECRET not in caplog.text
    engine.dispose()
