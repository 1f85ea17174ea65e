"""The plugin's Brokers page: each broker with what it owns and its cordon, and the Uncordon / Cordon buttons.

Served through a real FastAPI mount with Airflow's real SimpleAuthManager issuing the tokens (the
``client`` fixture of ``test_plan_pages.py``); the state DB is the embedded Postgres, filled with the
repository's own writers (brokers, load reports, bundle ranges, ownership, cordons) as a collect run
leaves it. The browser test drives the same buttons on a real api-server (``test_browser_drain_fill.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pulsar_rebalance.orchestration.ui.app import URL_PREFIX
from tests.ui.test_plan_pages import _token, client  # noqa: F401 (the fixture)

NS = "t/ns"
QUARTERS = [0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]
BUNDLES = [f"{NS}/0x{lo:08x}_0x{hi:08x}" for lo, hi in zip(QUARTERS, QUARTERS[1:])]
BROKERS = "/pulsar-rebalance/brokers"


@pytest.fixture
def cluster(db_url, monkeypatch):
    """Cluster c1 as its latest collect run left it: b1 and b2 own two bundles each (with load reports),
    b3 owns nothing and is cordoned by alice; old:8080 was seen by an earlier run only."""
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import dispose_engines, make_engine, session_scope

    t0 = datetime.now(UTC) - timedelta(hours=2)
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        cid = repo.get_or_create_cluster(s, name="c1", admin_url="http://pulsar:8080")
        repo.start_run(s, run_id="run-0", cluster_id=cid, params={})
        repo.upsert_brokers(s, cluster_id=cid, run_id="run-0", brokers={"old:8080": "http://old:8080"})
    with session_scope(engine) as s:
        repo.start_run(s, run_id="run-1", cluster_id=cid, params={})
        repo.upsert_brokers(
            s, cluster_id=cid, run_id="run-1", brokers={b: f"http://{b}" for b in ("b1:8080", "b2:8080", "b3:8080")}
        )
        repo.record_broker_load(
            s,
            run_id="run-1",
            rows=[
                {
                    "broker_id": "b1:8080",
                    "raw_report": {},
                    "weighted_max_usage": 0.62,
                    "msg_rate_in": 1000.0,
                    "msg_rate_out": 500.0,
                },
                {
                    "broker_id": "b2:8080",
                    "raw_report": {},
                    "weighted_max_usage": 0.41,
                    "msg_rate_in": 300.0,
                    "msg_rate_out": 100.0,
                },
            ],
        )
        repo.sync_bundle_ranges(s, cluster_id=cid, run_id="run-1", namespace=NS, boundaries=QUARTERS, at=t0)
        repo.sync_ownership(
            s,
            cluster_id=cid,
            run_id="run-1",
            ownership=dict(zip(BUNDLES, ["b1:8080", "b1:8080", "b2:8080", "b2:8080"])),
            cause="observed at collect",
            at=t0,
        )
        repo.cordon(
            s, cluster_id=cid, brokers=["b3:8080"], by="alice", reason="disk swap <b>tonight</b>", run_id="run-1"
        )
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    yield engine
    dispose_engines(db_url)


def _row(html: str, broker: str) -> str:
    return html.split(f'id="broker-{broker}"', 1)[1].split("</tr>", 1)[0]


def _cordons(engine) -> dict[str, tuple[str, str]]:
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    with session_scope(engine) as s:
        return {c.broker: (c.cordoned_by, c.reason) for c in repo.cordoned(s)}


def _audit(engine) -> list[tuple[str, str, str]]:
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    with session_scope(engine) as s:
        return [
            (e["event"], e["actor"], e["details"]["broker"]) for e in repo.audit_events(s) if "broker" in e["event"]
        ]


def test_the_brokers_page_shows_what_each_broker_owns_and_who_cordoned_it_and_why(client, cluster):  # noqa: F811
    viewer = {"Authorization": f"Bearer {_token('viewer', 'viewer')}"}
    html = client.get(BROKERS, headers=viewer).text
    b1, b2, b3, old = (_row(html, b) for b in ("b1:8080", "b2:8080", "b3:8080", "old:8080"))
    assert ">2<" in b1 and "62.0%" in b1 and "1,500.0 msg/s" in b1 and "schedulable" in b1 and ">Cordon</button>" in b1
    assert ">2<" in b2 and "41.0%" in b2 and "not in latest collection" not in b2
    assert 'data-cordoned="yes"' in b3 and ">0<" in b3 and "by <b>alice</b>" in b3 and ">Uncordon</button>" in b3
    assert "disk swap &lt;b&gt;tonight&lt;/b&gt;" in b3 and "/dags/pulsar_rebalance/runs/run-1" in b3  # escaped
    assert "not in latest collection" in old and ">0<" in old
    assert html.index("b1:8080") < html.index("b2:8080") < html.index("b3:8080")
    assert f'href="{URL_PREFIX}/brokers"' in client.get(f"{URL_PREFIX}/", headers=viewer).text  # linked from the plans


def test_uncordon_and_cordon_buttons_for_a_user_who_may_trigger_the_dag_and_no_one_else(client, cluster):  # noqa: F811
    """The same permission as the Plan to fix button (create runs of the DAG) and the same origin check;
    each change is audited with the user's name, as ``pulsar-rebalance brokers uncordon --by`` is."""
    uncordon = {"cluster": "c1", "broker": "b3:8080"}
    viewer = {"Authorization": f"Bearer {_token('viewer', 'viewer')}"}
    op = {"Authorization": f"Bearer {_token('op', 'op')}"}
    assert client.post(f"{BROKERS}/uncordon", data=uncordon, headers=viewer).status_code == 403
    cross = client.post(f"{BROKERS}/uncordon", data=uncordon, headers={**op, "Origin": "https://evil.example"})
    assert cross.status_code == 403
    assert client.post(f"{BROKERS}/uncordon", data=uncordon, follow_redirects=False).status_code == 401
    assert list(_cordons(cluster)) == ["b3:8080"] and _audit(cluster) == [("broker_cordoned", "alice", "b3:8080")]

    r = client.post(
        f"{BROKERS}/uncordon", data=uncordon, headers={**op, "Origin": "http://testserver"}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"] == BROKERS
    assert _cordons(cluster) == {}
    assert _audit(cluster)[-1] == ("broker_uncordoned", "op", "b3:8080")
    page = client.get(BROKERS, headers=op).text
    assert 'data-cordoned="no"' in _row(page, "b3:8080") and ">Uncordon</button>" not in page
    again = client.post(f"{BROKERS}/uncordon", data=uncordon, headers=op, follow_redirects=False)
    assert again.status_code == 303 and len(_audit(cluster)) == 2  # not cordoned: nothing to do, nothing audited

    cordon = {"cluster": "c1", "broker": "b1:8080", "reason": "kernel upgrade"}
    assert client.post(f"{BROKERS}/cordon", data=cordon, headers=viewer).status_code == 403
    r = client.post(f"{BROKERS}/cordon", data=cordon, headers=op, follow_redirects=False)
    assert r.status_code == 303 and _cordons(cluster) == {"b1:8080": ("op", "kernel upgrade")}
    assert _audit(cluster)[-1] == ("broker_cordoned", "op", "b1:8080")
    default = client.post(f"{BROKERS}/cordon", data={"cluster": "c1", "broker": "b2:8080"}, headers=op)
    assert default.status_code == 200 and _cordons(cluster)["b2:8080"] == ("op", "cordoned on the Brokers page")

    for data, message in (
        ({"cluster": "c1", "broker": "nope:8080"}, "unknown broker &#39;nope:8080&#39; in cluster &#39;c1&#39;"),
        ({"cluster": "c9", "broker": "b1:8080"}, "unknown cluster &#39;c9&#39;; known: c1"),
    ):
        bad = client.post(f"{BROKERS}/cordon", data=data, headers=op)
        assert bad.status_code == 400 and message in bad.text, bad.text
    assert set(_cordons(cluster)) == {"b1:8080", "b2:8080"}
