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
