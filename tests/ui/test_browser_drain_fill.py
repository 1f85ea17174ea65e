"""Drain, fill and uncordon by clicks: headless Chromium against a real Airflow (api-server, scheduler,
dag-processor, LocalExecutor, spark-submit per task) and a 10-broker simulated cluster.

What an operator does before a maintenance and after a scale-out (issue 19): trigger the DAG from
Airflow's trigger form with ``mode=drain`` and one broker, approve at the gate (Required Actions),
watch the plan page's Progress with an ETA, find the broker owning nothing (asked of the simulator's
admin API), see a later rebalance run leave it alone, and Uncordon it on the Brokers page; then add an
empty broker to the cluster and ``mode=fill`` it to the cluster's average without moving bundles
between the other brokers. Three DAG runs in all (drain, rebalance planned then rejected, fill).
Screenshots go to ``docs/img/`` when ``PULSAR_REBALANCE_UPDATE_SCREENSHOTS=1`` (as in ``test_browser.py``).
"""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from pulsar_rebalance.orchestration.ui.app import URL_PREFIX
from tests.ui.test_browser import (
    IMG,
    _answer,
    _dump,
    _full_page_screenshot,
    _gate_page,
    _login,
    _until,
    _wait_image_loaded,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(2400)]

DAG = "pulsar_rebalance"
PACING_SECONDS = 15  # the drain's pause after each unload: long enough to watch its progress and ETA


@pytest.fixture(scope="module")
def simulated_cluster():
    """Ten brokers, three namespaces of 16 bundles; the first broker carries the hot namespace."""
    from pulsar_rebalance.simulator.generator import generate_cluster

    return generate_cluster(seed=42, brokers=10, bundles_per_namespace=16)


_CENTRE_BETWEEN = """
const [a, b] = arguments;
let box = a.parentElement;
while (box && !(box.scrollHeight > box.clientHeight + 1 && /(auto|scroll)/.test(getComputedStyle(box).overflowY))) {
  box = box.parentElement;
}
const middle = (a.getBoundingClientRect().top + b.getBoundingClientRect().bottom) / 2;
(box || document.scrollingElement).scrollBy(0, middle - window.innerHeight / 2);
"""


class Operator:
    """The operator's browser and, for the test's own checks, Airflow's REST API and the state DB."""

    def __init__(self, stack, sim, state_db, browser) -> None:
        self.stack, self.sim, self.state_db, self.browser = stack, sim, state_db, browser
        self.api = f"{stack.url}/api/v2"
        self.admin = {"Authorization": f"Bearer {stack.token('admin')}"}
        _until(
            lambda: httpx.get(f"{self.api}/dags/{DAG}", headers=self.admin, timeout=30).status_code == 200,
            300,
            "the dag-processor to register the DAG",
        )
        _login(browser, stack, "admin")

    # ---------------------------------------------------------------- Airflow

    def runs(self) -> dict[str, dict]:
        listed = httpx.get(f"{self.api}/dags/{DAG}/dagRuns", headers=self.admin, timeout=30).json()["dag_runs"]
        return {r["dag_run_id"]: r for r in listed}

    def states(self, run_id: str) -> dict[str, str | None]:
        url = f"{self.api}/dags/{DAG}/dagRuns/{quote(run_id, safe='')}/taskInstances"
        found = {
            t["task_id"]: t["state"] for t in httpx.get(url, headers=self.admin, timeout=30).json()["task_instances"]
        }
        failed = [t for t, s in found.items() if s in ("failed", "upstream_failed")]
        assert not failed, f"{run_id}: {failed} failed: {found}\n{self.stack.log('scheduler')[-4000:]}"
        return found

    def run_state(self, run_id: str) -> str:
        return httpx.get(
            f"{self.api}/dags/{DAG}/dagRuns/{quote(run_id, safe='')}", headers=self.admin, timeout=30
        ).json()["state"]

    def trigger(self, *, screenshot: str | None = None, **fields) -> str:
        """Fill Airflow's trigger form (combobox, textarea or number input, as the param's type renders)
        and click Trigger; returns the new run's id."""
        browser = self.browser
        wait = WebDriverWait(browser, 60)
        before = set(self.runs())
        browser.set_window_size(1440, 1700)
        browser.get(f"{self.stack.url}/dags/{DAG}")
        wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "button[data-testid=trigger-dag-button]"))).click()
        for name, value in fields.items():
            element = wait.until(EC.presence_of_element_located((By.NAME, f"element_{name}")))
            if element.get_attribute("type") == "hidden":  # an enum: the react-select in front of it
                box = browser.find_element(
                    By.XPATH, f"//input[@name='element_{name}']/preceding::input[@role='combobox'][1]"
                )
                browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", box)
                box.click()
                box.send_keys(value, Keys.ENTER)
            else:  # an array of strings is a textarea (one per line); numbers are inputs
                browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
                element.click()
                element.send_keys(Keys.CONTROL, "a")
                element.send_keys(Keys.DELETE)
                element.send_keys("\n".join(value) if isinstance(value, list) else str(value))
            wait.until(
                lambda b, n=name, v=value: (
                    b.find_element(By.NAME, f"element_{n}").get_attribute("value")
                    == ("\n".join(v) if isinstance(v, list) else str(v))
                )
            )
        if screenshot:  # the fields filled, from the first to the last, centred in the dialog's scroll area
            first, last = (browser.find_element(By.NAME, f"element_{n}") for n in (list(fields)[0], list(fields)[-1]))
            browser.execute_script(_CENTRE_BETWEEN, first, last)
            browser.save_screenshot(str(IMG / screenshot))
        submit = browser.find_element(By.CSS_SELECTOR, "button[data-testid=trigger-dag-submit]")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", submit)
        submit.click()
        browser.set_window_size(1440, 1000)
        created = _until(lambda: [r for r in self.runs() if r not in before], 60, "the run triggered from the form")
        [run_id] = created
        return run_id

    def wait_gate(self, run_id: str) -> None:
        _until(lambda: self.states(run_id).get("await_approval") == "awaiting_input", 900, f"{run_id}'s gate", poll=3)

    def wait_success(self, run_id: str, timeout: float = 900) -> None:
        state = _until(
            lambda: (s := self.run_state(run_id)) in ("success", "failed") and s, timeout, f"{run_id} to end", poll=3
        )
        assert state == "success", self.states(run_id)

    # ---------------------------------------------------------------- state DB and cluster

    def plan_of(self, run_id: str):
        from pulsar_rebalance.store import repository as repo
        from pulsar_rebalance.store.engine import make_engine, session_scope

        with session_scope(make_engine(self.state_db)) as s:
            return repo.plan_for_run(s, run_id=run_id)

    def cordons(self) -> dict[str, str]:
        from pulsar_rebalance.store import repository as repo
        from pulsar_rebalance.store.engine import make_engine, session_scope

        with session_scope(make_engine(self.state_db)) as s:
            return {c.broker: c.cordoned_by for c in repo.cordoned(s)}

    def owned_via_admin_api(self, broker: str) -> list[str]:
        """``GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces`` without the heartbeat namespaces."""
        url = f"{self.sim.admin_url}/admin/v2/brokers/{self.sim.state.cluster}/{broker}/ownedNamespaces"
        r = httpx.get(url, follow_redirects=True, timeout=30)
        assert r.status_code == 200, r.text
        return sorted(b for b in r.json() if not b.startswith("pulsar/"))


@pytest.fixture
def operator(airflow_stack, dag_workers, state_db, browser):
    return Operator(airflow_stack, dag_workers, state_db, browser)


def test_drain_a_broker_watch_its_eta_rebalance_around_it_and_uncordon_it(operator):
    op, sim, browser = operator, operator.sim, operator.browser
    wait = WebDriverWait(browser, 60)
    owners = sim.state.owners()
    counts = {b: sum(o == b for o in owners.values()) for b in sim.broker_ids}
    drained = max(sim.broker_ids[1:], key=lambda b: (counts[b], b))  # not the admin URL's broker
    assert len(sim.broker_ids) >= 10 and counts[drained] >= 3, counts

    # the trigger form: mode=drain, the broker, one unload at a time with a pause after each
    drain = op.trigger(
        screenshot="drain-trigger-form.png",
        max_parallel_unloads=1,  # one at a time, each followed by the pause
        unload_pacing_seconds=PACING_SECONDS,
        mode="drain",
        brokers=[drained],
    )
    conf = op.runs()[drain]["conf"]
    assert (conf["mode"], conf["brokers"], conf["unload_pacing_seconds"]) == ("drain", [drained], PACING_SECONDS), conf
    op.wait_gate(drain)
    plan = op.plan_of(drain)
    assert plan.status == "pending" and plan.summary["mode"]["mode"] == "drain", plan.summary.get("mode")
    assert sorted(a.bundle for a in plan.actions if a.kind == "unload") == sorted(
        b for b, o in owners.items() if o == drained
    )
    assert op.cordons() == {drained: f"run {drain}"}  # cordoned when planned, by the run

    # approve at the gate, then watch the plan page: Progress with an ETA while it executes
    text = _gate_page(browser, op.stack, drain)
    assert plan.plan_id in text, text
    _answer(browser, "Approve", "draining for a kernel upgrade")
    page = f"{op.stack.url}{URL_PREFIX}/plans/{plan.plan_id}"

    def eta_shown() -> str | None:
        browser.get(page)
        eta = browser.find_elements(By.ID, "progress-eta")
        if eta and eta[0].text.startswith("ETA "):
            return eta[0].text
        assert op.run_state(drain) != "success", (
            f"the drain ended before its page showed an ETA; {_dump(browser, op.stack.home, 'drain')}"
        )
        return None

    eta = _until(eta_shown, 600, "the drain's plan page to show an ETA", poll=2)
    assert browser.find_element(By.ID, "plan-status").text == "executing"
    lines = browser.find_element(By.ID, "progress-lines").text
    assert "actions done" in lines and "pacing:" in lines, lines
    assert f"Drain of {drained}" in browser.find_element(By.ID, "mode-callout").text
    browser.execute_script("window.scrollTo(0, 0);")  # the head of the page: the drain, its progress and ETA
    browser.save_screenshot(str(IMG / "drain-plan-progress.png"))
    op.wait_success(drain)
    assert op.plan_of(drain).status == "executed", eta
    assert op.owned_via_admin_api(drained) == []

    # a later rebalance run (ThresholdShedder places on the least loaded broker: the emptied one) never targets it
    later = op.trigger(shedding_strategy="ThresholdShedder")
    op.wait_gate(later)
    rebalance = op.plan_of(later)
    unloads = [a for a in rebalance.actions if a.kind == "unload"]
    assert unloads and all(a.destination_broker != drained for a in unloads), [a.destination_broker for a in unloads]
    replaced = rebalance.summary["guard"]["replaced"]
    assert replaced and all(r["rules"] == ["cordoned"] and r["plannedDestination"] == drained for r in replaced), (
        replaced
    )
    _gate_page(browser, op.stack, later, option="Reject")
    _answer(browser, "Reject", "not today: only the drain")
    _until(lambda: op.run_state(later) in ("success", "failed"), 300, "the rejected run to end", poll=3)
    assert op.plan_of(later).status == "rejected"

    # the Brokers page (linked from the plan list): the drained broker owns nothing and is cordoned; Uncordon
    browser.get(f"{op.stack.url}{URL_PREFIX}/")
    wait.until(EC.element_to_be_clickable((By.ID, "brokers-link"))).click()
    row = wait.until(EC.presence_of_element_located((By.ID, f"broker-{drained}")))
    assert row.get_attribute("data-cordoned") == "yes" and f"by run {drain}" in row.text, row.text
    assert row.find_element(By.CSS_SELECTOR, "td.num").text == "0"  # bundles owned, as the rebalance run collected
    _full_page_screenshot(browser, IMG / "brokers-page.png")
    browser.find_element(By.ID, f"broker-{drained}").find_element(By.CSS_SELECTOR, "button.uncordon").click()
    # the click posts a form and the page reloads: the row found before the reload goes stale mid-read
    WebDriverWait(browser, 60, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(
        lambda b: _cordoned_attribute(b, f"broker-{drained}") == "no"
    )
    assert op.cordons() == {}
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    with session_scope(make_engine(op.state_db)) as s:
        events = [
            (e["event"], e["actor"], e["details"].get("broker")) for e in repo.audit_events(s) if "cordon" in e["event"]
        ]
    assert events == [("broker_cordoned", f"run {drain}", drained), ("broker_uncordoned", "admin", drained)]


def _cordoned_attribute(browser, row_id: str) -> str | None:
    """The row's ``data-cordoned``, or None while the page is reloading: Chromium reports a row read across the
    reload as a stale element, or as "unhandled inspector error: ... does not belong to the document"."""
    try:
        return browser.find_element(By.ID, row_id).get_attribute("data-cordoned")
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return None
        raise


def test_fill_a_new_empty_broker_to_the_average_without_moving_bundles_between_the_others(operator):
    op, sim = operator, operator.sim
    new = sim.add_broker()  # scale-out: an empty broker joins the running cluster
    assert op.owned_via_admin_api(new) == []
    before = sim.state.owners()

    fill = op.trigger(mode="fill", brokers=[new])
    op.wait_gate(fill)
    plan = op.plan_of(fill)
    assert plan.summary["mode"]["mode"] == "fill" and plan.actions, plan.summary
    _gate_page(op.browser, op.stack, fill)
    _answer(op.browser, "Approve", "fill the new broker")
    op.wait_success(fill)

    done = op.plan_of(fill)
    assert done.status == "executed", done.status
    op.browser.get(f"{op.stack.url}{URL_PREFIX}/plans/{done.plan_id}")
    WebDriverWait(op.browser, 60).until(EC.presence_of_element_located((By.ID, "actions")))
    assert f"Fill of {new}" in op.browser.find_element(By.ID, "mode-callout").text
    assert _wait_image_loaded(op.browser, "chart") > 300
    _full_page_screenshot(op.browser, IMG / "fill-plan-executed.png")
    after = sim.state.owners()
    moved = {b: (before[b], after[b]) for b in before if after[b] != before[b]}
    assert moved and all(dst == new for _, dst in moved.values()), moved  # only onto the new broker
    assert op.owned_via_admin_api(new) == sorted(moved)
    usage = done.result["broker_usage_after"]  # measured after execution, every broker of the cluster
    average = sum(usage.values()) / len(usage)
    assert len(usage) == len(sim.broker_ids) and abs(usage[new] - average) <= 0.05, (usage[new], average, usage)
