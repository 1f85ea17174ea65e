"""The plugin's plan pages: closed to anonymous callers, and showing what planning stored.

The app is served through a real FastAPI mount at ``/pulsar-rebalance`` (as Airflow's api-server
mounts it) with Airflow's real SimpleAuthManager issuing the tokens; the state DB is the embedded
Postgres. The real api-server and a real browser are in ``test_browser.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from pulsar_rebalance.orchestration.ui.app import URL_PREFIX, create_app


def _token(username: str, role: str | None) -> str:
    from airflow.api_fastapi.app import create_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return create_auth_manager().generate_jwt(SimpleAuthManagerUser(username=username, role=role))


@pytest.fixture
def client(airflow_db):
    outer = FastAPI()
    outer.mount(URL_PREFIX, create_app())
    with TestClient(outer) as c:
        yield c


def _routes(plan_id: str) -> list[tuple[str, str]]:
    """Every route of the app as (method, concrete URL), path parameters filled in."""
    app = create_app()
    out = []
    for route in app.routes:
        assert isinstance(route, APIRoute), f"unexpected non-API route {route!r} (static files? docs?)"
        path = re.sub(r"\{plan_id\}", plan_id, route.path)
        assert "{" not in path, f"route {route.path} has a path parameter this test does not fill"
        out += [(m, URL_PREFIX + path) for m in sorted(route.methods)]
    return out


def test_the_app_has_the_pages_and_nothing_else():
    routes = {(m, r.path) for r in create_app().routes for m in r.methods}
    assert routes == {  # no /docs, /redoc, /openapi.json; POSTs: the Plan to fix, Uncordon and Cordon buttons
        ("GET", "/"),
        ("GET", "/plans/{plan_id}"),
        ("GET", "/plans/{plan_id}/chart.png"),
        ("POST", "/plans/{plan_id}/fix"),
        ("GET", "/brokers"),
        ("POST", "/brokers/uncordon"),
        ("POST", "/brokers/cordon"),
    }


def _with_ui_cookie(client, method: str, url: str, token: str):
    """One request carrying the UI's ``_token`` cookie (set on the client: per-request cookies are deprecated)."""
    client.cookies.set("_token", token)
    try:
        return client.request(method, url)
    finally:
        client.cookies.clear()


def test_every_route_answers_401_without_a_token(client, seeded_db):
    routes = _routes(seeded_db.pending)
    assert len(routes) >= 3
    for method, url in routes:
        r = client.request(method, url)
        assert r.status_code == 401, (method, url, r.status_code, r.text[:200])
        assert seeded_db.pending not in r.text
        bad = _with_ui_cookie(client, method, url, "not-a-jwt")
        assert bad.status_code in (401, 403), (method, url, bad.status_code)
        assert seeded_db.pending not in bad.text


def test_a_user_without_read_access_to_the_dag_gets_403(client, seeded_db):
    for method, url in _routes(seeded_db.pending):
        r = client.request(method, url, headers={"Authorization": f"Bearer {_token('nobody', None)}"})
        assert r.status_code == 403, (method, url, r.status_code)


def test_a_viewer_reads_every_page_with_a_bearer_token_or_the_ui_cookie_and_may_not_trigger(client, seeded_db):
    token = _token("viewer", "viewer")
    for method, url in _routes(seeded_db.pending):
        expected = 403 if method == "POST" else 200  # a viewer may not create DAG runs
        assert client.request(method, url, headers={"Authorization": f"Bearer {token}"}).status_code == expected, url
        assert _with_ui_cookie(client, method, url, token).status_code == expected, url


@pytest.fixture
def viewer(client):
    client.headers["Authorization"] = f"Bearer {_token('viewer', 'viewer')}"
    return client


def test_plans_list_shows_run_cluster_status_moves_usage_and_who_decided(viewer, seeded_db):
    html = viewer.get(f"{URL_PREFIX}/").text
    for expected in (
        seeded_db.pending,
        seeded_db.executed,
        "manual__2026-11-23T11:00:00+00:00",
        "sim-cluster",
        ">pending<",
        ">executed<",
        "1 unload",
        "alice",
        "52.0%",
        f'href="{URL_PREFIX}/plans/{seeded_db.pending}"',
        "1 of 2 approvals: carol",  # the pending plan needs a second approver
    ):
        assert expected in html, expected
    assert html.index(seeded_db.pending) < html.index(seeded_db.executed)  # newest first
    only_pending = viewer.get(f"{URL_PREFIX}/", params={"status": "pending"}).text
    assert seeded_db.pending in only_pending and seeded_db.executed not in only_pending


def test_pending_plan_page_summarises_the_move_and_links_to_the_gate(viewer, seeded_db):
    html = viewer.get(f"{URL_PREFIX}/plans/{seeded_db.pending}").text
    run = quote("manual__2026-11-23T11:00:00+00:00", safe="")
    assert f'id="gate-link" href="/dags/pulsar_rebalance/runs/{run}/tasks/await_approval/required_actions"' in html
    assert f'href="/dags/pulsar_rebalance/runs/{run}"' in html
    # the unload, with destination and the traffic/clients of the bundle (12 topics, 12 producers, 24 consumers)
    assert "t/ns/0x00000000_0x40000000" in html and 'broker-1:8080<span class="arrow">→</span>broker-2:8080' in html
    assert "900.0 msg/s" in html and "9.00 MiB/s" in html
    assert "12 topics, 12 producers, 24 consumers reconnect" in html
    assert "Overloaded: broker-1:8080 usage 0.85" in html  # the reason
    # the move's own effect on its two brokers, with a signed change (not the plan's end state)
    assert re.search(r"this move: source broker-1:8080 85\.0% → \d+\.\d% \(−\d+\.\d pts\)", html), html
    assert re.search(r"destination broker-2:8080 \d+\.\d% → \d+\.\d% \(\+\d+\.\d pts\)", html), html
    # balance before/predicted, data quality, warnings, chart
    assert "85.0%" in html and "Measured after: shown once the plan has executed." in html
    assert "4 of 4 owned" in html
    assert "2 topics were reported under a bundle their hash does not fall into" in html
    assert f'src="{URL_PREFIX}/plans/{seeded_db.pending}/chart.png"' in html
    assert "not decided yet" in html
    assert 'id="approvers"' in html and "1 of 2 (different people)" in html and "carol" in html
    assert "first of two" in html


def test_executed_plan_page_shows_measured_balance_states_and_the_approval(viewer, seeded_db):
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    with session_scope(make_engine(seeded_db.url)) as s:
        plan = repo.get_plan(s, plan_id=seeded_db.executed)
    html = viewer.get(f"{URL_PREFIX}/plans/{seeded_db.executed}").text
    assert 'id="gate-callout"' not in html
    assert "52.0%" in html and "25.0%" in html  # measured max and min
    assert '<span class="badge ok">completed</span>' in html
    assert "alice" in html and "off-peak, &lt;script&gt;alert(1)&lt;/script&gt; go" in html
    assert plan.content_hash in html


def test_chart_is_a_png_of_the_plan(viewer, seeded_db):
    r = viewer.get(f"{URL_PREFIX}/plans/{seeded_db.executed}/chart.png")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    assert r.content.startswith(b"\x89PNG\r\n\x1a\n") and len(r.content) > 5000


def test_unknown_plan_is_a_clear_404(viewer, seeded_db):
    r = viewer.get(f"{URL_PREFIX}/plans/p-nope")
    assert r.status_code == 404 and "There is no plan with id <code>p-nope</code>" in r.text
    assert viewer.get(f"{URL_PREFIX}/plans/p-nope/chart.png").status_code == 404


def test_user_input_is_escaped(viewer, seeded_db):
    """The approval comment is user input: it renders as text, never as markup."""
    html = viewer.get(f"{URL_PREFIX}/plans/{seeded_db.executed}").text
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script") == 1  # only the page's own link helper (base.html)


def test_airflow_mounts_the_plugin_and_lists_its_nav_entry(airflow_db, seeded_db):
    """Airflow's own api-server app (plugins folder from tests/conftest.py) serves the pages at the prefix."""
    from airflow import plugins_manager
    from airflow.api_fastapi.app import create_app as airflow_app

    app = airflow_app(apps="core")
    assert URL_PREFIX in {getattr(r, "path", None) for r in app.routes}
    with TestClient(app) as c:  # tests run with simple_auth_manager_all_admins: Airflow's middleware signs in
        plugins = c.get("/api/v2/plugins").json()["plugins"]
        page = c.get(f"{URL_PREFIX}/plans/{seeded_db.pending}")
    assert plugins_manager.get_import_errors() == {}
    (ours,) = [p for p in plugins if p["name"] == "pulsar_rebalance"]
    (view,) = ours["external_views"]
    assert {k: view[k] for k in ("name", "href", "url_route", "destination", "category")} == {
        "name": "Rebalance plans",
        "href": "pulsar-rebalance/",
        "url_route": "pulsar-rebalance",
        "destination": "nav",
        "category": "browse",
    }
    assert page.status_code == 200 and seeded_db.pending in page.text


def test_without_a_state_database_the_pages_say_what_to_configure(client, monkeypatch):
    for var in ("PULSAR_REBALANCE_DATABASE_URL", "DATABASE_URL", "AIRFLOW_CONN_PULSAR_REBALANCE_DB"):
        monkeypatch.delenv(var, raising=False)
    r = client.get(f"{URL_PREFIX}/", headers={"Authorization": f"Bearer {_token('viewer', 'viewer')}"})
    assert r.status_code == 503 and "pulsar_rebalance_db" in r.text
    assert client.get(f"{URL_PREFIX}/").status_code == 401  # auth comes first


def _plans_cli(db_url: str, *args: str) -> subprocess.CompletedProcess:
    """``pulsar-rebalance plans ARGS`` against the state DB ``db_url``."""
    return subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", "plans", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PULSAR_REBALANCE_DATABASE_URL=db_url),
        timeout=120,
    )


UNLOAD = {
    "kind": "unload",
    "bundle": "public/default/0x00000000_0x40000000",
    "source_broker": "b1:8080",
    "destination_broker": "b2:8080",
    "reason": "test",
}


def _store_plan(
    db_url: str, run_id: str, *, status: str = "pending", dry_run: bool = False, params: dict | None = None, **fields
) -> str:
    """A plan of one run of cluster c1 stored as given (one unload unless ``actions=``; run ``params``
    besides dry_run); returns its id."""
    from datetime import UTC, datetime, timedelta

    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    with session_scope(make_engine(db_url)) as s:
        cid = repo.get_or_create_cluster(s, name="c1", admin_url="http://pulsar:8080")
        run_params = {"dry_run": dry_run, **(params or {})}
        repo.start_run(s, run_id=run_id, cluster_id=cid, params=run_params, work_dir="/tmp/w")
        plan = {"strategies": {}, "config": {}, "summary": {}, "decision": {}, "actions": [UNLOAD], **fields}
        return repo.create_plan(
            s,
            run_id=run_id,
            cluster_id=cid,
            status=status,
            expires_at=datetime.now(UTC) + timedelta(hours=1),
            dry_run=dry_run,
            **plan,
        )


def test_an_interrupted_plan_offers_resume_and_abort(viewer, db_url, monkeypatch):
    """The plan page offers what the operator can do with a dead execution."""
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    engine = make_engine(db_url)
    plan_id = _store_plan(db_url, "run-x")
    with session_scope(engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
        repo.set_plan_status(s, plan_id=plan_id, status="interrupted")
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    r = viewer.get(f"{URL_PREFIX}/plans/{plan_id}")
    assert r.status_code == 200, r.text
    assert f"pulsar-rebalance plans resume {plan_id}" in r.text and f"pulsar-rebalance plans abort {plan_id}" in r.text
    # aborted where Pulsar cannot be read: the page says why nothing was measured after
    from pulsar_rebalance.pipeline.execute import abort_plan

    abort_plan(engine, plan_id=plan_id, by="bob", no_client_reason="PULSAR_ADMIN_URL is not set")
    html = viewer.get(f"{URL_PREFIX}/plans/{plan_id}").text
    assert (
        "Measured after: not measured — the cluster was not re-read after the abort: PULSAR_ADMIN_URL is not set"
        in html
    )


def test_an_executed_dry_run_is_labelled_and_shows_what_each_action_would_have_done(viewer, db_url, monkeypatch):
    """A dry-run plan executed by the real executor (with no admin client at all: a dry run makes no
    call) is marked as a dry run in the list and on its page, with each action's "would" reason."""
    from pulsar_rebalance.pipeline.execute import execute_plan
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    engine = make_engine(db_url)
    plan_id = _store_plan(db_url, "run-dry", dry_run=True)
    with session_scope(engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
    assert execute_plan(engine, None, plan_id=plan_id).dry_run is True
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    html = viewer.get(f"{URL_PREFIX}/plans/{plan_id}").text
    assert 'id="plan-status">executed<' in html and '<span class="badge muted">dry run</span>' in html
    assert 'id="dry-run-callout"' in html and "executed without touching the cluster" in html
    assert 'id="stop-callout"' not in html
    assert "dry run: would unload public/default/0x00000000_0x40000000 from b1:8080 to b2:8080" in html
    listed = viewer.get(f"{URL_PREFIX}/").text
    row = listed[listed.index(plan_id) : listed.index("</tr>", listed.index(plan_id))]
    assert "dry run" in row and ">executed<" in row


def test_an_empty_plan_says_why_nothing_was_planned_and_offers_no_approval(viewer, db_url, monkeypatch):
    """An empty plan made by the real planning code from a cool-down verdict with a dropped unload."""
    from pulsar_rebalance.pipeline.params import RunParams
    from pulsar_rebalance.pipeline.planning import build_plan

    from .conftest import REPORTS

    cool_down = "the set of brokers changed 5 min ago (+broker-3:8080): waiting until it has been stable for 10 min"
    decision = {
        "cycle": {
            "label": "Skip",
            "reason": "CoolDown",
            "detail": cool_down,
            "splits": [],
            "unloads": [],
            "executed": {
                "unloads": [],
                "dropped": [
                    {
                        "broker": "broker-1:8080",
                        "bundle": "t/ns/0x00000000_0x40000000",
                        "dropped": "NoBroker",
                        "detail": "no broker can take it without overloading",
                        "reason": "Overloaded",
                    }
                ],
            },
        }
    }
    draft = build_plan(
        decision=decision,
        params=RunParams.from_json({}),
        reports=REPORTS,
        topics_by_bundle={},
        ownership={b: br for br, r in REPORTS.items() for b in r["lastStats"]},
    )
    assert draft.empty
    plan_id = _store_plan(
        db_url,
        "run-empty",
        status="empty",
        strategies=draft.summary["strategies"],
        summary=draft.summary,
        decision=decision["cycle"],
        actions=[],
    )
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    page = viewer.get(f"{URL_PREFIX}/plans/{plan_id}").text
    why = page.split('id="why-nothing"', 1)[1].split("</div>", 2)[0]
    assert "Nothing to do" in why and f"Skip (CoolDown): {cool_down}" in why
    assert "unload of t/ns/0x00000000_0x40000000 from broker-1:8080 not executed (NoBroker)" in why
    assert "no broker can take it without overloading" in why
    for absent in ("not decided yet", "approval window ends", 'id="gate-link"', 'id="approval"'):
        assert absent not in page, absent


def test_a_logged_out_browser_is_sent_to_the_login_page_and_back(client, seeded_db):
    url = f"{URL_PREFIX}/plans/{seeded_db.pending}"
    r = client.get(url, headers={"Accept": "text/html,application/xhtml+xml"}, follow_redirects=False)
    assert r.status_code == 303, r.text
    location = r.headers["location"]
    assert "/auth/" in location and "login" in location and quote(url, safe="") in location
    assert seeded_db.pending not in r.text
    assert client.get(url).status_code == 401  # an API caller keeps the plain 401


def test_a_threshold_shedder_move_the_guard_cuts_is_reported_on_the_page_and_by_plans_show(viewer, db_url, monkeypatch):
    """Pulsar's ThresholdShedder (the real strategy, through the pipeline's decide) sheds broker-1's hot
    bundle, and LeastLongTermMessageRate sends it to broker-2 (the least message rate, below the overload
    threshold). The bundle carries 70 % of broker-1's traffic: by the load reports broker-2 would go from
    55 % to about 122 %. The guard cuts the move; the stored plan is empty and says so, on its page and in
    ``pulsar-rebalance plans show`` - not silently changed."""
    from datetime import UTC, datetime, timedelta

    from pulsar_rebalance.pipeline.detect import build_scenario, decide
    from pulsar_rebalance.pipeline.params import RunParams
    from pulsar_rebalance.pipeline.planning import build_plan
    from pulsar_rebalance.pipeline.usage import latest, parse_reports, update_time_averages
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    from .conftest import _report

    hot = "t/g/0x00000000_0x40000000"
    reports = {
        "broker-1:8080": _report(
            95.0, 30.0, {hot: (7000.0, 70 * 2**20, 20), "t/g/0x40000000_0x80000000": (3000.0, 30 * 2**20, 8)}
        ),
        "broker-2:8080": _report(55.0, 20.0, {"t/g/0x80000000_0xc0000000": (2000.0, 20 * 2**20, 5)}),
        "broker-3:8080": _report(60.0, 20.0, {"t/g/0xc0000000_0xffffffff": (2500.0, 25 * 2**20, 5)}),
    }
    params = RunParams.from_json({"shedding_strategy": "ThresholdShedder"})
    averages = update_time_averages(parse_reports(reports), {}, "run-guard")
    scenario = build_scenario(
        params=params,
        reports=reports,
        bundle_data={b: latest(e) for b, e in averages.items()},
        namespace_boundaries={"t/g": [0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]},
        recently_unloaded={},
        state=None,
        now_ms=1_800_000_000_000,
    )
    decision = decide(scenario)
    cycle = decision["cycle"]
    # Pulsar's own choice: the hot bundle, to broker-2
    assert [(u["bundle"], u["destination"]) for u in cycle["executed"]["unloads"]] == [(hot, "broker-2:8080")]
    ownership = {b: br for br, r in reports.items() for b in r["lastStats"]}
    draft = build_plan(decision=decision, params=params, reports=reports, topics_by_bundle={}, ownership=ownership)
    assert draft.empty
    (cut,) = draft.summary["guard"]["failed"]
    assert cut["bundle"] == hot and "overload-threshold" in cut["rules"]
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        cid = repo.get_or_create_cluster(s, name="c-guard", admin_url="http://pulsar:8080")
        repo.start_run(s, run_id="run-guard", cluster_id=cid, params=params.to_json(), work_dir="/tmp/w")
        plan_id = repo.create_plan(
            s,
            run_id="run-guard",
            cluster_id=cid,
            status="empty",
            expires_at=datetime.now(UTC) + timedelta(hours=1),
            dry_run=False,
            strategies=draft.summary["strategies"],
            config={},
            summary=draft.summary,
            decision=cycle,
            actions=[],
        )
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    page = viewer.get(f"{URL_PREFIX}/plans/{plan_id}").text
    why = page.split('id="why-nothing"', 1)[1].split("</div>", 2)[0]
    assert "the do-no-harm guard removed every planned action (1)" in why
    assert f"guard dropped unload {hot} broker-1:8080 -&gt; broker-2:8080: " in why
    assert "the strategy proposed them: Success (Overloaded)" in why
    guard = page.split("<h2>Do-no-harm guard</h2>", 1)[1].split("<h2>", 1)[0]
    assert (
        'id="guard-warning"' in guard and "removed 1 of 1 planned action" in guard and "nothing is left to run" in guard
    )
    row = guard.split('id="guard-dropped"', 1)[1]
    assert hot in row and 'broker-1:8080<span class="arrow">→</span>broker-2:8080' in row
    assert "above Pulsar&#39;s overload threshold 85%" in row or "above Pulsar's overload threshold 85%" in row
    assert "85.0% (overload threshold)" in guard and "50.0% of its free capacity" in guard
    assert "do-no-harm guard: 1 of 1 planned action(s) removed" in page.split('id="warnings"', 1)[1]
    shown = _plans_cli(db_url, "show", plan_id)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "do-no-harm guard: WARNING: 1 of 1 planned action(s) dropped, 0 kept:" in out
    assert f"  - dropped unload {hot} broker-1:8080 -> broker-2:8080 [worst-broker, overload-threshold" in out
    assert "why nothing was planned:\n  - the do-no-harm guard removed every planned action (1)" in out


def test_the_plan_page_and_the_cli_show_each_moves_constraints_and_the_runs_policy_violations(
    viewer, db_url, monkeypatch
):
    """Two plans of one cluster whose pay/a sits off its isolation policy's broker and whose o/x and o/y
    (anti-affinity group 'orders') share a broker: a ThresholdShedder-style plan shows the compliance
    section with the way to plan the fix, and the fix_policy_violations plan (made by the real planning
    code) shows its moves, what each was checked against, on the page, in ``plans show`` and in
    ``plans violations``."""
    import json

    from pulsar_rebalance.pipeline.params import RunParams
    from pulsar_rebalance.pipeline.planning import build_fix_plan, build_plan
    from tests.pipeline.test_planning import CONSTRAINTS, O_X, PAY_A, VIOLATING, _owners, decision

    ownership = _owners(VIOLATING)
    params = RunParams.from_json({"shedding_strategy": "ThresholdShedder"})
    shed = build_plan(
        decision=decision(unloads=[{"broker": "b1:8080", "bundle": PAY_A, "destination": "b3:8080", "reason": "x"}]),
        params=params,
        reports=VIOLATING,
        topics_by_bundle={},
        ownership=ownership,
        placement_policies=CONSTRAINTS,
    )
    fix, cycle = build_fix_plan(
        params=RunParams.from_json({"fix_policy_violations": True}),
        reports=VIOLATING,
        ownership=ownership,
        placement_policies=CONSTRAINTS,
    )
    stored = {}
    for run_id, draft, cyc in (("run-shed", shed, {}), ("run-fix", fix, cycle)):
        stored[run_id] = _store_plan(
            db_url,
            run_id,
            strategies=draft.summary["strategies"],
            summary=draft.summary,
            decision=cyc,
            actions=[a.to_row() for a in draft.actions],
        )
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)

    page = viewer.get(f"{URL_PREFIX}/plans/{stored['run-shed']}").text
    compliance = page.split("<h2>Compliance with placement policies</h2>", 1)[1].split("<h2>", 1)[0]
    assert "4 bundles break their namespace's placement policies" in compliance
    rows = compliance.split('id="violations"', 1)[1]
    assert f'<td class="mono">{PAY_A}</td><td class="mono">b1:8080</td><td>isolation-policy</td>' in rows
    assert "b1:8080 is neither primary nor secondary in policy &#39;pay-on-b3&#39; for pay/a" in rows
    assert "o/x shares broker b2:8080 with o/y of anti-affinity group &#39;orders&#39;" in rows
    fix_url = f"{URL_PREFIX}/plans/{stored['run-shed']}/fix"
    assert f'<form method="post" action="{fix_url}" target="_top"' in compliance and 'id="fix-button"' in compliance
    assert "{&#34;fix_policy_violations&#34;: true}" in compliance or '{"fix_policy_violations": true}' in compliance
    actions = page.split('id="actions"', 1)[1]
    assert "checked against: isolation policy &#39;pay-on-b3&#39;: primary b3" in actions

    page = viewer.get(f"{URL_PREFIX}/plans/{stored['run-fix']}").text
    actions = page.split('id="actions"', 1)[1].split("</table>", 1)[0]
    assert actions.count("policy violation: ") == 2
    assert f"{O_X}</td>" in actions and 'b2:8080<span class="arrow">→</span>b1:8080' in actions
    assert (
        "checked against: no isolation policy for o/x: shared brokers only (not a primary of &#39;pay-on-b3&#39;); "
        "anti-affinity group &#39;orders&#39; (with o/y)" in actions
    )
    assert 'id="fix-button"' not in page  # this plan is the fix

    def cli(*args: str) -> subprocess.CompletedProcess:
        return _plans_cli(db_url, *args)

    shown = cli("show", stored["run-fix"])
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "compliance: WARNING: 4 bundle(s) break their namespace's placement policies:" in out
    assert f"  - {PAY_A} on b1:8080 [isolation-policy]: b1:8080 is neither primary nor secondary" in out
    assert f"unload {PAY_A}  b1:8080 -> b3:8080" in out
    assert "        checked against: isolation policy 'pay-on-b3': primary b3\n" in out
    assert "trigger the pulsar_rebalance DAG" not in out  # already the fix
    listed = cli("violations", stored["run-shed"])
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"Plan {stored['run-shed']}  run=run-shed\ncompliance: WARNING: 4 bundle(s)")
    assert 'trigger the pulsar_rebalance DAG with {"fix_policy_violations": true}' in listed.stdout
    doc = json.loads(cli("violations", stored["run-shed"], "--json").stdout)
    assert doc["recorded"] is True and len(doc["violations"]) == 4 and doc["unfixable"] == []
    assert {v["rule"] for v in doc["violations"]} == {"isolation-policy", "anti-affinity-group"}
    # a plan stored without the placement section (a run from before constraints were collected)
    old = _store_plan(db_url, "run-old")
    assert "compliance: not recorded" in cli("violations", old).stdout
    assert json.loads(cli("violations", old, "--json").stdout)["violations"] is None
    assert 'id="compliance">Not recorded' in viewer.get(f"{URL_PREFIX}/plans/{old}").text
    missing = cli("violations", "no-such-plan")
    assert missing.returncode != 0 and "no-such-plan" in missing.stderr and "Traceback" not in missing.stderr


def test_plan_to_fix_triggers_one_gated_fix_run_for_a_user_who_may_and_no_one_else(client, seeded_db):
    """The compliance section's button: POST /plans/{id}/fix creates a manual run of the DAG with
    {"fix_policy_violations": true} for a user Airflow lets create runs (the DAG as the dag-processor
    stores it), and redirects to that run in Airflow; a viewer gets 403, a cross-site form 403, an
    unknown plan 404, and none of them creates a run."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    from tests.orchestration.test_dag_integrity import _trigger_api

    _trigger_api()  # the DAG in Airflow's DB, as the dag-processor leaves it
    fix = f"{URL_PREFIX}/plans/{seeded_db.pending}/fix"

    def runs() -> list[DagRun]:
        with create_session() as session:
            found = session.query(DagRun).filter(DagRun.dag_id == "pulsar_rebalance").all()
            session.expunge_all()
            return found

    before = {r.run_id for r in runs()}
    op = {"Authorization": f"Bearer {_token('op', 'op')}"}
    assert client.post(fix, headers={"Authorization": f"Bearer {_token('viewer', 'viewer')}"}).status_code == 403
    cross = client.post(fix, headers={**op, "Origin": "https://evil.example"}, follow_redirects=False)
    assert cross.status_code == 403
    assert client.post(f"{URL_PREFIX}/plans/p-nope/fix", headers=op, follow_redirects=False).status_code == 404
    assert {r.run_id for r in runs()} == before

    r = client.post(fix, headers={**op, "Origin": "http://testserver"}, follow_redirects=False)
    assert r.status_code == 303, r.text
    [new] = [run for run in runs() if run.run_id not in before]
    assert r.headers["location"] == f"/dags/pulsar_rebalance/runs/{quote(new.run_id, safe='')}"
    assert new.conf == {"fix_policy_violations": True} and new.run_type == "manual"
    assert new.triggering_user_name == "op"


def test_the_progress_of_an_executing_plan_and_how_long_an_executed_one_took_on_the_page_and_in_plans_show(
    viewer, db_url, monkeypatch, tmp_path
):
    """Four unloads (each 1,000 msg/s and 4 MiB/s, from its own broker), 2 at a time with a 1 s pause.
    Two done in 2 s each: the other two run in one wave of 2 s + 1 s -> ETA 3.0 s. Then all done: the
    page and ``plans show`` say how long it took (first start to last end). Each page is also written
    to ``tmp_path`` (to look at in a browser: ``--basetemp``)."""
    from datetime import UTC, datetime, timedelta

    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    load = {"msgRateIn": 500.0, "msgRateOut": 500.0, "msgThroughputIn": 2.0 * 2**20, "msgThroughputOut": 2.0 * 2**20}
    actions = [
        {
            **UNLOAD,
            "bundle": f"public/default/0x{i:x}0000000_0x{i + 1:x}0000000",
            "source_broker": f"b{i}:8080",
            "destination_broker": "b9:8080",
            "predicted": {"bundleLoad": load},
        }
        for i in range(4)
    ]
    plan_id = _store_plan(
        db_url, "run-progress", actions=actions, params={"max_parallel_unloads": 2, "unload_pacing_seconds": 1}
    )
    engine = make_engine(db_url)
    t0 = datetime.now(UTC) - timedelta(minutes=3)
    with session_scope(engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
        ids = [a.id for a in repo.get_plan(s, plan_id=plan_id).actions]
        for n, action_id in enumerate(ids[:2]):
            repo.transition_action(s, action_id=action_id, to="in_progress", now=t0 + timedelta(seconds=3 * n))
            repo.transition_action(s, action_id=action_id, to="completed", now=t0 + timedelta(seconds=3 * n + 2))
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)

    def show() -> str:
        shown = _plans_cli(db_url, "show", plan_id)
        assert shown.returncode == 0, shown.stderr
        return shown.stdout

    html = viewer.get(f"{URL_PREFIX}/plans/{plan_id}").text
    (tmp_path / "plan-executing.html").write_text(html)
    section = html.split("<h2>Progress</h2>", 1)[1].split("<h2>", 1)[0]
    assert 'aria-label="2 of 4 actions done"' in section and 'class="seg ok" style="width:50.00%"' in section
    assert '<div class="progress-eta" id="progress-eta">ETA 3.0 s</div>' in section
    for line in (
        "2/4 actions done, 2 pending",
        "moved 2,000 msg/s, 8.0 MiB/s of 4,000 msg/s, 16 MiB/s planned",
        "median time per action: unload 2.0 s (2 measured)",
        "pacing: 2 unload(s) at a time, at most 2 per broker, 1.0 s pause after each action",
    ):
        assert f"<li>{line}</li>" in section, line
    assert '<meta http-equiv="refresh" content="15">' in html  # an executing plan's page reloads itself
    out = show()
    assert (
        "progress:\n  2/4 actions done, 2 pending\n  moved 2,000 msg/s, 8.0 MiB/s of 4,000 msg/s, 16 MiB/s planned\n"
        "  median time per action: unload 2.0 s (2 measured)\n  ETA 3.0 s\n"
    ) in out

    with session_scope(engine) as s:
        for n, action_id in enumerate(ids[2:], start=2):
            repo.transition_action(s, action_id=action_id, to="in_progress", now=t0 + timedelta(seconds=3 * n))
            repo.transition_action(s, action_id=action_id, to="completed", now=t0 + timedelta(seconds=3 * n + 2))
        repo.set_plan_status(s, plan_id=plan_id, status="executed")
    html = viewer.get(f"{URL_PREFIX}/plans/{plan_id}").text
    (tmp_path / "plan-executed.html").write_text(html)
    section = html.split("<h2>Progress</h2>", 1)[1].split("<h2>", 1)[0]
    assert 'id="progress-eta">finished in 11 s</div>' in section  # t0 to t0 + 11 s
    assert "<li>4/4 actions done</li>" in section and "16 MiB/s of 4,000 msg/s, 16 MiB/s planned" in section
    assert "pacing:" not in section and 'http-equiv="refresh"' not in html
    assert "  4/4 actions done\n" in show() and "  finished in 11 s\n" in show()


def test_a_pending_plan_has_no_progress_section(viewer, seeded_db):
    html = viewer.get(f"{URL_PREFIX}/plans/{seeded_db.pending}").text
    assert "<h2>Progress</h2>" not in html and 'id="progress"' not in html


def test_a_drain_plan_says_what_it_drains_and_how_to_uncordon(viewer, db_url, monkeypatch):
    """The summary's ``mode`` section (build_mode_plan) on the page: which brokers, the moves, the cordon."""
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    summary = {"mode": {"mode": "drain", "brokers": ["b1:8080"], "moves": 3, "left": [], "cordoned": ["b1:8080"]}}
    plan = _store_plan(db_url, "run-drain", summary=summary, strategies={"shedding": "drain"})
    page = viewer.get(f"{URL_PREFIX}/plans/{plan}").text
    callout = page.split('id="mode-callout"', 1)[1].split("</div>", 1)[0]
    assert "<b>Drain of b1:8080</b>" in callout and "(3 moves)" in callout
    assert "pulsar-rebalance brokers uncordon b1:8080" in callout
    fill = _store_plan(
        db_url, "run-fill", summary={"mode": {"mode": "fill", "brokers": ["new:8080"], "moves": 1, "left": []}}
    )
    callout = viewer.get(f"{URL_PREFIX}/plans/{fill}").text.split('id="mode-callout"', 1)[1].split("</div>", 1)[0]
    assert "<b>Fill of new:8080</b>" in callout and "(1 move)" in callout and "uncordon" not in callout
    assert 'id="mode-callout"' not in viewer.get(f"{URL_PREFIX}/plans/{_store_plan(db_url, 'run-plain')}").text


def test_an_approved_plan_outside_its_window_says_it_waits_and_when_the_window_opens(viewer, db_url, monkeypatch):
    """The plan page shows the cluster's maintenance window, that an approved plan waits for it (and
    until when), and, once its expiry passed before the window opened, that it expired waiting."""
    from datetime import UTC, datetime, timedelta

    from pulsar_rebalance.orchestration.windows import window_gate
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store import windows as store_windows
    from pulsar_rebalance.store.engine import make_engine, session_scope

    engine = make_engine(db_url)
    plan_id = _store_plan(db_url, "run-w")
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    assert 'id="window-callout"' not in viewer.get(f"{URL_PREFIX}/plans/{plan_id}").text  # no windows: no callout
    opens = (datetime.now(UTC) + timedelta(hours=3)).replace(second=0, microsecond=0)
    with session_scope(engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
        cid = repo.plan_for_run(s, run_id="run-w").cluster_id
        setting = {
            "timezone": "UTC",
            "windows": [{"cron": f"{opens.minute} {opens.hour} * * *", "duration_minutes": 30}],
        }
        store_windows.set_windows(s, cluster_id=cid, setting=setting, by="alice")
    html = viewer.get(f"{URL_PREFIX}/plans/{plan_id}").text
    assert f"UTC: {opens.minute} {opens.hour} * * * for 30 min" in html
    assert "waiting for the maintenance window, opens at" in html
    assert f"opens at\n  {opens:%Y-%m-%d %H:%M:%S} UTC" in html
    assert '<meta http-equiv="refresh"' in html  # it reloads itself while it waits

    state = window_gate(db_url, "run-w", datetime.now(UTC) + timedelta(hours=1, minutes=1))  # past its expiry
    assert state["status"] == "expired"
    html = viewer.get(f"{URL_PREFIX}/plans/{plan_id}").text
    assert 'id="plan-status">expired<' in html and "waiting for the maintenance window, opens at" not in html
    assert "Expired while waiting for the maintenance window" in html and "did not open before it expired" in html
