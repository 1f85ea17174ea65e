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
    # the window's height includes the browser's own frame (about 150 px in headless Chromium): add it
    browser.set_window_size(width, min(max(height + 200, 800), 4000))
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
            viewer = httpx.request(method, url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
            assert viewer.status_code == (403 if method == "POST" else 200), (method, url, viewer.status_code)


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


def _gate_page(browser, stack, run_id: str, *, option: str | None = "Approve", timeout: float = 180):
    """Open the run's gate (the task's Required Actions page) and return its text once it offers ``option``
    and takes an answer (reloading: Airflow shows a request that opened again only after a reload);
    ``option=None``: as it is."""
    from urllib.parse import quote

    url = f"{stack.url}/dags/pulsar_rebalance/runs/{quote(run_id, safe='')}/tasks/await_approval/required_actions"
    deadline = time.monotonic() + timeout
    while True:
        browser.get(url)
        try:
            WebDriverWait(browser, 20).until(lambda b: "Plan" in b.find_element(By.TAG_NAME, "body").text)
            if option is None:
                return browser.find_element(By.TAG_NAME, "body").text
            WebDriverWait(browser, 20).until(  # present; enabled once the required comment is filled in
                EC.presence_of_element_located((By.CSS_SELECTOR, f"button[data-testid='hitl-option-{option}']"))
            )
            # and open for an answer: a page loaded just before the request opened again (the next approver's
            # turn, under load) shows the answered request, its option buttons present but its form read-only
            WebDriverWait(browser, 20).until(EC.element_to_be_clickable((By.ID, "element_comment")))
            return browser.find_element(By.TAG_NAME, "body").text
        except TimeoutException as exc:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the gate of {run_id} did not offer {option}; see {_dump(browser, stack.home, 'gate')}"
                ) from exc


def _answer(browser, option: str, comment: str) -> None:
    """Fill the gate's comment and click ``option``, as the operator does."""
    # clickable, not just present: under load the reopened request's form renders its box before it is enabled
    box = WebDriverWait(browser, 60).until(EC.element_to_be_clickable((By.ID, "element_comment")))
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", box)
    box.clear()
    box.send_keys(comment)
    button = WebDriverWait(browser, 60).until(
        EC.element_to_be_clickable((By.CSS_SELECTOR, f"button[data-testid='hitl-option-{option}']"))
    )
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
    button.click()


def test_superseded_gate_closes_two_approvers_and_a_dry_run_in_the_browser(
    airflow_stack, dag_workers, state_db, browser
):
    """An operator's first hour, by clicks: a newer run's plan supersedes the plan under review (its gate
    closes, saying by which plan); a plan needing two approvers refuses the same person twice and the gate
    says why; the second person approves; the dry run executes and every action says what it would have
    done; an empty plan's page says why nothing was planned; a logged-out plan URL lands on the login page."""
    from datetime import UTC, datetime, timedelta
    from urllib.parse import quote

    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    api = f"{airflow_stack.url}/api/v2"
    admin = {"Authorization": f"Bearer {airflow_stack.token('admin')}"}
    _until(
        lambda: httpx.get(f"{api}/dags/pulsar_rebalance", headers=admin, timeout=30).status_code == 200,
        300,
        "the dag-processor to register pulsar_rebalance",
    )
    httpx.patch(f"{api}/dags/pulsar_rebalance", json={"is_paused": False}, headers=admin, timeout=30)

    def trigger(conf: dict) -> str:
        r = httpx.post(
            f"{api}/dags/pulsar_rebalance/dagRuns",
            json={"logical_date": None, "conf": conf},
            headers=admin,
            timeout=30,
        )
        assert r.status_code == 200, r.text
        return r.json()["dag_run_id"]

    def states(run_id: str) -> dict[str, str | None]:
        items = httpx.get(
            f"{api}/dags/pulsar_rebalance/dagRuns/{quote(run_id, safe='')}/taskInstances", headers=admin, timeout=30
        ).json()["task_instances"]
        found = {ti["task_id"]: ti["state"] for ti in items}
        failed = [t for t, s in found.items() if s in ("failed", "upstream_failed")]
        assert not failed, f"{run_id}: {failed} failed: {found}\n{airflow_stack.log('scheduler')[-4000:]}"
        return found

    def plan_of(run_id: str):
        with session_scope(make_engine(state_db)) as s:
            return repo.plan_for_run(s, run_id=run_id)

    def pending_gates() -> list[str]:
        listed = httpx.get(
            f"{api}/dags/~/dagRuns/~/hitlDetails", params={"response_received": False}, headers=admin, timeout=30
        ).json()["hitl_details"]
        return [d["task_instance"]["dag_run_id"] for d in listed]

    base = {"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 60}
    first = trigger(base)
    _until(lambda: states(first).get("await_approval") == "awaiting_input", 900, "the first run's gate", poll=3)
    under_review = plan_of(first)

    # a newer manual run (two approvers, dry run) supersedes the plan under review
    second = trigger({**base, "required_approvals": 2, "dry_run": True})
    _until(lambda: states(second).get("await_approval") == "awaiting_input", 900, "the second run's gate", poll=3)
    newer = plan_of(second)
    assert plan_of(first).status == "superseded" and plan_of(first).superseded_by == newer.plan_id

    # the superseded plan's gate leaves Required Actions (the UI's list and counter read this) and says why
    _login(browser, airflow_stack, "admin")
    _gate_page(browser, airflow_stack, first, option=None)  # the UI reading gates closes stale ones
    _until(lambda: first not in pending_gates(), 60, "the superseded gate to leave Required Actions", poll=2)
    closed = _gate_page(browser, airflow_stack, first, option=None)
    assert "Closed by pulsar-rebalance" in closed and f"superseded by plan {newer.plan_id}" in closed, closed
    _until(lambda: states(first).get("await_approval") == "skipped", 300, "the first run's gate to end", poll=3)
    browser.get(f"{airflow_stack.url}{URL_PREFIX}/plans/{under_review.plan_id}")
    header = WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.CLASS_NAME, "sub"))).text
    assert f"superseded by {newer.plan_id}" in header, header

    # two approvers: admin approves; the same request opens again; admin again is refused, and the gate says why
    text = _gate_page(browser, airflow_stack, second)
    assert newer.plan_id in text and "Needs 2 approvals" in text, text
    _answer(browser, "Approve", "first pair of eyes")
    _until(lambda: len(plan_of(second).votes) == 1, 120, "admin's vote", poll=2)
    _gate_page(browser, airflow_stack, second)  # opened again for the next approver
    _answer(browser, "Approve", "me again")
    refused = _until(
        lambda: "Answer refused" in (t := _gate_page(browser, airflow_stack, second)) and t,
        120,
        "the refusal in the gate's text",
        poll=2,
    )
    assert "already has your approval (admin)" in refused and "Approved so far: 1 of 2" in refused, refused
    browser.save_screenshot(str(IMG / "gate-refused.png"))
    assert [v.voter for v in plan_of(second).votes] == ["admin"]

    # bob, the second person, approves; the dry run executes without touching the cluster
    _login(browser, airflow_stack, "bob")
    _gate_page(browser, airflow_stack, second)
    _answer(browser, "Approve", "second pair of eyes")
    run = _until(
        lambda: (
            (r := httpx.get(f"{api}/dags/pulsar_rebalance/dagRuns/{quote(second, safe='')}", headers=admin).json())[
                "state"
            ]
            in ("success", "failed")
            and r
        ),
        600,
        "the dry run to finish",
        poll=3,
    )
    assert run["state"] == "success", states(second)
    browser.get(f"{airflow_stack.url}{URL_PREFIX}/plans/{newer.plan_id}")
    actions = WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.ID, "actions"))).text
    assert browser.find_element(By.ID, "plan-status").text == "executed"
    assert "dry run" in browser.find_element(By.TAG_NAME, "h1").text
    assert actions.count("dry run: would") == len(newer.actions), actions
    assert "admin + bob" in browser.find_element(By.ID, "approval").text

    # an empty plan says why nothing was planned, and offers no approval
    with session_scope(make_engine(state_db)) as s:
        cid = repo.get_or_create_cluster(s, name="sim-cluster", admin_url="http://pulsar:8080")
        repo.start_run(s, run_id="manual__empty", cluster_id=cid, params={}, work_dir="/tmp/w")
        empty = repo.create_plan(
            s,
            run_id="manual__empty",
            cluster_id=cid,
            status="empty",
            expires_at=datetime.now(UTC) + timedelta(hours=1),
            dry_run=False,
            strategies={},
            config={},
            summary={
                "decision": {
                    "label": "Skip",
                    "reason": "CoolDown",
                    "detail": "the set of brokers changed 4 min ago: waiting until it has been stable for 10 min",
                }
            },
            decision={},
            actions=[],
        )
    browser.get(f"{airflow_stack.url}{URL_PREFIX}/plans/{empty}")
    why = WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.ID, "why-nothing"))).text
    assert "Nothing to do" in why and "waiting until it has been stable for 10 min" in why, why
    assert not browser.find_elements(By.ID, "gate-link") and not browser.find_elements(By.ID, "approval")

    # logged out, a plan URL leads to the login page (and back to the plan after it)
    browser.delete_all_cookies()
    browser.get(f"{airflow_stack.url}{URL_PREFIX}/plans/{empty}")
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.NAME, "username")))
    assert "/auth/login" in browser.current_url and quote(f"{URL_PREFIX}/plans/{empty}", safe="") in browser.current_url
