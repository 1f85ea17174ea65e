"""The plan pages in a real browser: headless Chromium against a real ``airflow api-server``.

The plan is made by the real pipeline stages (Spark, the HTTP simulator, the embedded Postgres);
the api-server loads this repo's plugin and finds the state DB through the ``pulsar_rebalance_db``
Connection, as in production. Screenshots go to ``docs/img/`` (the README shows them) when
``PULSAR_REBALANCE_UPDATE_SCREENSHOTS=1``, else to a temp directory.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from pulsar_rebalance.orchestration.ui.app import URL_PREFIX, create_app

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]

# The README's screenshots are refreshed only on request (PULSAR_REBALANCE_UPDATE_SCREENSHOTS=1), so a test
# run (CI) never modifies tracked files; otherwise they go to a temp directory and are still taken.
IMG = (
    Path(__file__).resolve().parents[2] / "docs" / "img"
    if os.environ.get("PULSAR_REBALANCE_UPDATE_SCREENSHOTS")
    else Path(tempfile.mkdtemp(prefix="pr-screenshots-"))
)


def _login(browser, stack, user: str) -> None:
    browser.delete_all_cookies()
    browser.get(f"{stack.url}/")
    wait = WebDriverWait(browser, 60)
    wait.until(EC.presence_of_element_located((By.NAME, "username"))).send_keys(user)
    browser.find_element(By.NAME, "password").send_keys(user)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda b: "/auth/login" not in b.current_url and b.get_cookie("_token"))


def _wait_image_loaded(browser, element_id: str) -> int:
    """The <img>'s natural width once the browser decoded it (0 = broken image)."""
    WebDriverWait(browser, 60).until(
        lambda b: b.execute_script(f"const i = document.getElementById('{element_id}'); return i && i.complete;")
    )
    return browser.execute_script(f"return document.getElementById('{element_id}').naturalWidth;")


def _dump(browser, where: Path, name: str) -> Path:
    """Save what the browser shows (HTML and PNG) for a failure message."""
    (where / f"{name}.html").write_text(browser.page_source)
    browser.save_screenshot(str(where / f"{name}.png"))
    return where / f"{name}.png"


def _full_page_screenshot(browser, path: Path, width: int = 1440) -> None:
    height = browser.execute_script(
        "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight);"
    )
    browser.set_window_size(width, min(max(height + 40, 800), 4000))
    path.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(path))
    browser.set_window_size(width, 1000)


def _open_nav_entry(browser, label: str, url_part: str, deadline_s: float = 90) -> None:
    """Browse -> ``label``. The menu opens with an animation and can swallow a click made while it
    moves, so the two clicks are repeated until the page is there (bounded by ``deadline_s``)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            WebDriverWait(browser, 15).until(
                EC.element_to_be_clickable((By.CSS_SELECTOR, "button[aria-label=Browse]"))
            ).click()
            WebDriverWait(browser, 15).until(
                EC.element_to_be_clickable((By.CSS_SELECTOR, f"a[data-value='{label}']"))
            ).click()
            WebDriverWait(browser, 15).until(lambda b: url_part in b.current_url)
            return
        except TimeoutException:
            if time.monotonic() > deadline:
                raise
            browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)  # close a half-open menu


def test_every_plugin_route_answers_401_over_http_without_credentials(airflow_stack, pipeline_plan):
    token = airflow_stack.token("viewer")
    for route in create_app().routes:
        url = airflow_stack.url + URL_PREFIX + route.path.replace("{plan_id}", pipeline_plan)
        for method in route.methods:
            anonymous = httpx.request(method, url, timeout=60)
            assert anonymous.status_code == 401, (method, url, anonymous.status_code)
            assert pipeline_plan not in anonymous.text
            assert (
                httpx.request(method, url, headers={"Authorization": f"Bearer {token}"}, timeout=60).status_code == 200
            )


def test_login_open_the_plan_from_the_nav_entry_and_directly_and_see_the_chart(airflow_stack, pipeline_plan, browser):
    _login(browser, airflow_stack, "admin")
    wait = WebDriverWait(browser, 60)

    # Browse -> Rebalance plans: the plugin's page inside the Airflow UI (an iframe of /pulsar-rebalance/)
    _open_nav_entry(browser, "Rebalance plans", "/plugin/pulsar-rebalance")
    wait.until(EC.frame_to_be_available_and_switch_to_it((By.TAG_NAME, "iframe")))
    row_link = wait.until(EC.element_to_be_clickable((By.LINK_TEXT, pipeline_plan)))
    assert "pending" in browser.find_element(By.ID, "plans").text
    row_link.click()
    wait.until(EC.presence_of_element_located((By.ID, "actions")))
    assert browser.find_element(By.ID, "plan-status").text == "pending"
    assert _wait_image_loaded(browser, "chart") > 300
    gate = browser.find_element(By.ID, "gate-link").get_attribute("href")
    assert (
        "/dags/pulsar_rebalance/runs/manual__2026-11-23T12%3A00%3A00%2B00%3A00/tasks/await_approval/required_actions"
        in gate
    )
    browser.switch_to.default_content()
    browser.save_screenshot(str(IMG / "plan-page-in-airflow.png"))

    # the plan page directly
    browser.get(f"{airflow_stack.url}{URL_PREFIX}/plans/{pipeline_plan}")
    wait.until(EC.presence_of_element_located((By.ID, "actions")))
    assert _wait_image_loaded(browser, "chart") > 300
    cards = browser.find_element(By.ID, "summary-cards").text
    assert "Bundle unloads" in cards and "msg/s" in cards and "MiB/s" in cards
    unloads = [r for r in browser.find_elements(By.CSS_SELECTOR, "#actions tbody tr") if "unload" in r.text]
    assert unloads and all("→" in r.text and "reconnect" in r.text for r in unloads)
    assert "Review & approve at the gate" in browser.find_element(By.ID, "gate-callout").text
    _full_page_screenshot(browser, IMG / "plan-page.png")


def test_a_viewer_reads_the_plan_page(airflow_stack, pipeline_plan, browser):
    _login(browser, airflow_stack, "viewer")
    browser.get(f"{airflow_stack.url}{URL_PREFIX}/")
    WebDriverWait(browser, 60).until(EC.element_to_be_clickable((By.LINK_TEXT, pipeline_plan))).click()
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.ID, "actions")))
    assert browser.find_element(By.ID, "plan-status").text == "pending"


def _until(condition, timeout: float, what: str, poll: float = 1.0):
    """Poll ``condition`` until it returns a truthy value (returned) or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def test_approve_at_the_gate_in_the_browser_and_the_run_executes(airflow_stack, dag_workers, state_db, browser):
    """Last, because the DAG run's plan supersedes the pending plan the tests above look at."""
    from urllib.parse import quote

    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    api = f"{airflow_stack.url}/api/v2"
    admin = {"Authorization": f"Bearer {airflow_stack.token('admin')}"}
    viewer = {"Authorization": f"Bearer {airflow_stack.token('viewer')}"}
    _until(
        lambda: httpx.get(f"{api}/dags/pulsar_rebalance", headers=admin, timeout=30).status_code == 200,
        300,
        "the dag-processor to register pulsar_rebalance",
    )
    # the operator triggers from the DAG page's form (it unpauses the DAG), choosing Pulsar's ThresholdShedder
    _login(browser, airflow_stack, "admin")
    wait = WebDriverWait(browser, 60)
    browser.get(f"{airflow_stack.url}/dags/pulsar_rebalance")
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "button[data-testid=trigger-dag-button]"))).click()
    strategy = wait.until(
        EC.presence_of_element_located(
            (By.XPATH, "//input[@name='element_shedding_strategy']/preceding::input[@role='combobox'][1]")
        )
    )
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", strategy)
    strategy.click()
    strategy.send_keys("ThresholdShedder", Keys.ENTER)
    wait.until(
        lambda b: b.find_element(By.NAME, "element_shedding_strategy").get_attribute("value") == "ThresholdShedder"
    )
    submit = browser.find_element(By.CSS_SELECTOR, "button[data-testid=trigger-dag-submit]")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", submit)
    submit.click()

    def manual_run():
        runs = httpx.get(f"{api}/dags/pulsar_rebalance/dagRuns", headers=admin, timeout=30).json()["dag_runs"]
        return next((r for r in runs if r["run_type"] == "manual"), None)

    created = _until(manual_run, 60, "the run triggered from the form")
    assert created["conf"].get("shedding_strategy") == "ThresholdShedder", created["conf"]
    run_id = created["dag_run_id"]
    run_api = f"{api}/dags/pulsar_rebalance/dagRuns/{quote(run_id, safe='')}"

    def tis() -> dict[str, str | None]:
        items = httpx.get(f"{run_api}/taskInstances", headers=admin, timeout=30).json()["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in items}

    def gate_waiting():
        states = tis()
        failed = [t for t, s in states.items() if s in ("failed", "upstream_failed")]
        assert not failed, f"{failed} failed: {states}\n{airflow_stack.log('scheduler')[-4000:]}"
        if states.get("await_approval") != "awaiting_input":  # parked, not just the request written
            return None
        pending = httpx.get(f"{run_api}/hitlDetails", params={"response_received": False}, headers=admin, timeout=30)
        return pending.json()["hitl_details"] if pending.status_code == 200 else None

    _until(gate_waiting, 900, "the run to reach its approval gate", poll=3)
    with session_scope(make_engine(state_db)) as s:
        plan = repo.plan_for_run(s, run_id=run_id)
    assert plan is not None and plan.status == "pending" and plan.gate, plan

    # a viewer may read the plan but not decide it (Airflow's HITL permission), and nothing is recorded
    hitl = f"{run_api}/taskInstances/await_approval/-1/hitlDetails"
    refused = httpx.patch(
        hitl, json={"chosen_options": ["Approve"], "params_input": {"comment": "viewer"}}, headers=viewer, timeout=30
    )
    assert refused.status_code == 403, refused.text
    with session_scope(make_engine(state_db)) as s:
        assert repo.get_plan(s, plan_id=plan.plan_id).status == "pending"

    # the operator, inside the Airflow UI: Browse -> Rebalance plans -> the plan -> "Review & approve at the
    # gate" (a link out of the plugin's sandboxed iframe) -> Required Actions -> Approve with a comment
    browser.get(f"{airflow_stack.url}/dags/pulsar_rebalance")
    _open_nav_entry(browser, "Rebalance plans", "/plugin/pulsar-rebalance")
    wait.until(EC.frame_to_be_available_and_switch_to_it((By.TAG_NAME, "iframe")))
    wait.until(EC.element_to_be_clickable((By.LINK_TEXT, plan.plan_id))).click()
    wait.until(EC.element_to_be_clickable((By.ID, "gate-link"))).click()
    browser.switch_to.default_content()
    browser.set_window_size(1440, 1900)  # the Airflow UI fits the viewport: a tall one shows the whole form
    try:
        wait.until(lambda b: "/required_actions" in b.current_url)
        comment = wait.until(EC.presence_of_element_located((By.ID, "element_comment")))  # Airflow's param form
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", comment)
        comment.send_keys("off-peak, looks right")  # required by the gate: Approve is disabled until then
        approve = wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "button[data-testid='hitl-option-Approve']")))
        assert plan.plan_id in browser.find_element(By.TAG_NAME, "body").text
    except TimeoutException as exc:
        raise AssertionError(
            f"the gate page did not show as expected; see {_dump(browser, airflow_stack.home, 'gate')}"
        ) from exc
    browser.execute_script("arguments[0].scrollIntoView({block: 'end'});", approve)
    browser.save_screenshot(str(IMG / "gate.png"))
    browser.set_window_size(1440, 1000)

    def answered() -> bool:
        detail = httpx.get(hitl, headers=admin, timeout=30)
        return detail.status_code == 200 and bool(detail.json().get("response_received"))

    approve.click()
    try:  # a click made while the page still moves can be lost: click again once, bounded
        _until(answered, 60, "Airflow to store the answer", poll=2)
    except AssertionError:
        again = WebDriverWait(browser, 30).until(
            EC.element_to_be_clickable((By.CSS_SELECTOR, "button[data-testid='hitl-option-Approve']"))
        )
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", again)
        again.click()
        _until(answered, 120, "Airflow to store the answer", poll=2)

    try:
        _until(lambda: tis().get("execute_unload") in ("running", "success"), 300, "execute_unload to start", poll=2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {tis()}\n{airflow_stack.log('scheduler')[-3000:]}") from exc
    run = _until(
        lambda: (r := httpx.get(run_api, headers=admin, timeout=30).json())["state"] in ("success", "failed") and r,
        600,
        "the run to finish",
        poll=3,
    )
    assert run["state"] == "success", tis()
    with session_scope(make_engine(state_db)) as s:
        done = repo.get_plan(s, plan_id=plan.plan_id)
    assert done.status == "executed", done.status
    a = done.approval
    assert (a.decision, a.decided_by, a.comment, a.via, a.plan_hash) == (
        "approved",
        "admin",
        "off-peak, looks right",
        "airflow-gate",
        plan.content_hash,
    )
    assert sum(x.state == "completed" for x in done.actions) == len(done.actions)
    # the executed plan: measured usage, approval and action states on its page
    browser.get(f"{airflow_stack.url}{URL_PREFIX}/plans/{plan.plan_id}")
    wait.until(EC.presence_of_element_located((By.ID, "actions")))
    assert browser.find_element(By.ID, "plan-status").text == "executed"
    assert "off-peak, looks right" in browser.find_element(By.ID, "approval").text
    assert _wait_image_loaded(browser, "chart") > 300
    _full_page_screenshot(browser, IMG / "plan-page-executed.png")
