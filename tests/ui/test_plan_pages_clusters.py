"""The plan pages with several clusters: each plan shows its cluster, links to its own DAG's run, and the
list filters by cluster (query parameter and selector). Real FastAPI mount, Airflow's auth, embedded Postgres."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pulsar_rebalance.orchestration.ui.app import URL_PREFIX, create_app
from tests.ui.test_plan_pages import _token

WEST_RUN = "scheduled__2026-11-23T10:00:00+00:00@west"  # the same Airflow run id as a default-DAG run


@pytest.fixture
def viewer(airflow_db, seeded_db):
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    with session_scope(make_engine(seeded_db.url)) as s:
        cid = repo.get_or_create_cluster(s, name="west", admin_url="http://west:8080")
        repo.start_run(s, run_id=WEST_RUN, cluster_id=cid, params={})
        west = repo.create_plan(
            s,
            run_id=WEST_RUN,
            cluster_id=cid,
            status="empty",
            expires_at=datetime.now(UTC) + timedelta(hours=1),
            dry_run=False,
            strategies={},
            config={},
            summary={"cluster": "west"},
            decision={"label": "Skip", "reason": "Balanced"},
            actions=[],
        )
    outer = FastAPI()
    outer.mount(URL_PREFIX, create_app())
    with TestClient(outer) as c:
        c.headers["Authorization"] = f"Bearer {_token('viewer', 'viewer')}"
        yield c, west


def test_the_list_filters_by_cluster_and_links_each_run_to_its_own_dag(viewer, seeded_db):
    client, west = viewer
    every = client.get(f"{URL_PREFIX}/").text
    assert west in every and seeded_db.pending in every
    assert 'id="cluster-select"' in every and '<option value="west">west</option>' in every
    run = quote("scheduled__2026-11-23T10:00:00+00:00", safe="")
    assert f'href="/dags/pulsar_rebalance_west/runs/{run}"' in every  # west's DAG, Airflow's run id
    assert f'href="/dags/pulsar_rebalance/runs/{run}"' in every  # the default DAG's run of the same id

    only_west = client.get(f"{URL_PREFIX}/", params={"cluster": "west"}).text
    assert west in only_west and seeded_db.pending not in only_west and seeded_db.executed not in only_west
    assert '<option value="west" selected>west</option>' in only_west and 'id="cluster-badge"' in only_west
    assert f'href="{URL_PREFIX}/?status=pending&amp;cluster=west"' in only_west  # status links keep the cluster

    only_sim = client.get(f"{URL_PREFIX}/", params={"cluster": "sim-cluster", "status": "pending"}).text
    assert seeded_db.pending in only_sim and west not in only_sim and seeded_db.executed not in only_sim
    unknown = client.get(f"{URL_PREFIX}/", params={"cluster": "nowhere"})
    assert unknown.status_code == 200 and "No plans of cluster nowhere yet" in unknown.text


def test_a_plan_page_names_its_cluster_and_its_dag(viewer):
    client, west = viewer
    html = client.get(f"{URL_PREFIX}/plans/{west}").text
    assert f'<a href="{URL_PREFIX}/?cluster=west"' in html
    assert 'id="dag-link" href="/dags/pulsar_rebalance_west"' in html
    run = quote("scheduled__2026-11-23T10:00:00+00:00", safe="")
    assert f'href="/dags/pulsar_rebalance_west/runs/{run}"' in html
