"""Plan pages of the README's operator workflows in a real browser: a plan approved outside its cluster's
maintenance window, and the plans list of two clusters filtered to one.

Headless Chromium against a real ``airflow api-server`` (the plugin finds the state DB through its
Connection). No DAG runs: the plans are made by the real planning code (``build_plan``, see
``conftest.store_planned_move``) and stored and approved with the store's own functions, as planning and the
CLI store them. Screenshots go to ``docs/img/`` when ``PULSAR_REBALANCE_UPDATE_SCREENSHOTS=1`` (as in
``test_browser.py``), else to a temp directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from pulsar_rebalance.orchestration.ui.app import URL_PREFIX
from tests.ui.conftest import store_planned_move
from tests.ui.test_browser import IMG, _login, _wait_image_loaded

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@dataclass(frozen=True)
class TwoClusters:
    east_rejected: str  # east's older plan, rejected
    east_waiting: str  # east's newer plan, approved, waiting for east's maintenance window
    west_pending: str  # west's plan at its gate
    opens: datetime  # when east's window next opens (UTC, whole minute)


def _store(engine, cluster: str, run_id: str, *, expires_in: timedelta) -> str:
    """A plan of ``cluster``'s run ``run_id`` as planning stores it: one unload of the real planner's draft."""
    from pulsar_rebalance.core.clusters import run_key
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    with session_scope(engine) as s:
        cid = repo.get_or_create_cluster(s, name=cluster, admin_url=f"http://pulsar-{cluster}:8080")
        return store_planned_move(
            s, run_id=run_key(run_id, cluster), cluster_id=cid, expires_at=datetime.now(UTC) + expires_in
        )


@pytest.fixture(scope="module")
def two_clusters(state_db) -> TwoClusters:
    """East (a daily 60-minute window opening three hours from now): a rejected plan, then an approved one
    that waits for the window; west (no window): a plan waiting at its gate."""
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store import windows as store_windows
    from pulsar_rebalance.store.engine import make_engine, session_scope

    engine = make_engine(state_db)
    rejected = _store(engine, "east", "scheduled__2026-11-26T06:00:00+00:00", expires_in=timedelta(hours=1))
    with session_scope(engine) as s:
        repo.decide_plan(s, plan_id=rejected, decision="rejected", decided_by="carol", comment="peak traffic")
    waiting = _store(engine, "east", "scheduled__2026-11-26T09:00:00+00:00", expires_in=timedelta(hours=6))
    west = _store(engine, "west", "scheduled__2026-11-26T09:00:00+00:00", expires_in=timedelta(hours=1))
    opens = (datetime.now(UTC) + timedelta(hours=3)).replace(second=0, microsecond=0)
    with session_scope(engine) as s:
        cid = repo.get_or_create_cluster(s, name="east", admin_url="http://pulsar-east:8080")
        setting = {
            "timezone": "UTC",
            "windows": [{"cron": f"{opens.minute} {opens.hour} * * *", "duration_minutes": 60}],
        }
        store_windows.set_windows(s, cluster_id=cid, setting=setting, by="alice")
        repo.decide_plan(s, plan_id=waiting, decision="approved", decided_by="alice", comment="in tonight's window")
    return TwoClusters(rejected, waiting, west, opens)


def test_an_approved_plan_waits_for_its_maintenance_window_in_the_browser(airflow_stack, two_clusters, browser):
    _login(browser, airflow_stack, "admin")
    browser.get(f"{airflow_stack.url}{URL_PREFIX}/plans/{two_clusters.east_waiting}")
    callout = WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.ID, "window-callout"))).text
    opens = f"{two_clusters.opens:%Y-%m-%d %H:%M:%S} UTC"
    assert browser.find_element(By.ID, "plan-status").text == "approved"
    wait = browser.find_element(By.ID, "window-wait").text
    assert wait == f"Approved; waiting for the maintenance window, opens at {opens}.", wait
    assert f"{two_clusters.opens.minute} {two_clusters.opens.hour} * * * for 60 min" in callout, callout
    assert "Nothing moves before" in callout and "the plan expires and changes nothing" in callout, callout
    assert "in tonight's window" in browser.find_element(By.ID, "approval").text
    assert _wait_image_loaded(browser, "chart") > 300
    browser.save_screenshot(str(IMG / "plan-waiting-for-window.png"))  # the page's top: header, callout, summary


def test_the_plans_of_two_clusters_filtered_to_one_in_the_browser(airflow_stack, two_clusters, browser):
    _login(browser, airflow_stack, "admin")
    browser.get(f"{airflow_stack.url}{URL_PREFIX}/")
    select = Select(WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.ID, "cluster-select"))))
    assert [o.text for o in select.options] == ["every cluster", "east", "west"]
    every = browser.find_element(By.ID, "plans").text
    assert all(p in every for p in (two_clusters.east_rejected, two_clusters.east_waiting, two_clusters.west_pending))

    select.select_by_value("east")  # the selector submits its form: the list of east's plans
    WebDriverWait(browser, 60).until(lambda b: "cluster=east" in b.current_url)
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.ID, "cluster-badge")))
    rows = browser.find_elements(By.CSS_SELECTOR, "#plans tbody tr")
    shown = {r.find_element(By.CSS_SELECTOR, "td.mono a").text: r for r in rows}
    assert set(shown) == {two_clusters.east_rejected, two_clusters.east_waiting}, list(shown)
    assert all(r.find_element(By.CSS_SELECTOR, "td.cluster").text == "east" for r in rows)
    assert Select(browser.find_element(By.ID, "cluster-select")).first_selected_option.text == "east"
    assert "carol rejected" in shown[two_clusters.east_rejected].text
    assert "approved" in shown[two_clusters.east_waiting].text
    browser.set_window_size(1440, 560)  # the selector and east's two rows (the window frame takes ~140 px)
    browser.save_screenshot(str(IMG / "plans-two-clusters.png"))


def test_the_waiting_email_of_a_plan_as_received_and_its_link_to_the_plan_page(
    airflow_stack, two_clusters, state_db, airflow_db, browser, monkeypatch, tmp_path
):
    """The ``waiting`` notification of west's plan, sent by the notifier's own ``send`` to a real local SMTP
    server: the received HTML body (verbatim, under the received From/To/Subject) in the browser, and its
    link opens the plan page on the api-server (``[api] base_url``)."""
    import html
    import json

    from pulsar_rebalance.core import notifications as compose
    from pulsar_rebalance.core.clusters import run_key
    from pulsar_rebalance.orchestration.notify import plan_link, run_plan_facts, send
    from tests.notify_receivers import SmtpServer

    monkeypatch.setenv(
        "AIRFLOW_CONN_PULSAR_REBALANCE_DB", json.dumps({"conn_type": "postgres", "extra": {"url": state_db}})
    )
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", airflow_stack.url)
    facts = run_plan_facts(run_key("scheduled__2026-11-26T09:00:00+00:00", "west"))
    assert facts is not None and facts.plan_id == two_clusters.west_pending and facts.status == "pending"
    with SmtpServer() as smtp:
        monkeypatch.setenv("AIRFLOW_CONN_PULSAR_REBALANCE_SMTP", json.dumps(smtp.connection()))
        assert send(compose.waiting(facts, link=plan_link(facts.plan_id)))["email"] == "sent"
        [mail] = smtp.received()
    assert mail.subject == (
        f"[pulsar-rebalance] Approval needed: rebalance plan {facts.plan_id} on cluster west: 1 unload(s), 0 split(s)"
    )
    for line in (
        "Cluster: west",
        "Busiest broker's usage: 85.0% -> 63.7% (predicted)",
        "Actions: 1 unload(s), 0 split(s)",
    ):
        assert line in mail.text, mail.text

    head = "".join(f"<div><b>{k}:</b> {html.escape(mail.headers[k])}</div>" for k in ("From", "To", "Subject"))
    page = tmp_path / "waiting-email.html"
    page.write_text(
        '<!doctype html><meta charset="utf-8"><body style="font-family: sans-serif; margin: 24px">'
        f'<div style="border-bottom: 1px solid #ccc; padding-bottom: 8px; margin-bottom: 8px">{head}</div>'
        f"{mail.body}</body>"
    )
    _login(browser, airflow_stack, "admin")
    browser.set_window_size(1000, 500)
    browser.get(page.as_uri())
    link = WebDriverWait(browser, 30).until(EC.element_to_be_clickable((By.LINK_TEXT, "Open the plan page")))
    assert (
        f"Plan page: {airflow_stack.url}/pulsar-rebalance/plans/{facts.plan_id}"
        in browser.find_element(By.TAG_NAME, "pre").text
    )
    browser.save_screenshot(str(IMG / "waiting-email.png"))
    link.click()
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.ID, "plan-status")))
    assert browser.current_url == f"{airflow_stack.url}{URL_PREFIX}/plans/{facts.plan_id}"
    assert browser.find_element(By.ID, "plan-status").text == "pending"
    browser.set_window_size(1440, 1000)
