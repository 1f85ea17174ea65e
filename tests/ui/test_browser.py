"""The plan pages in a real browser: headless Chromium against a real ``airflow api-server``.

The plan is made by the real pipeline stages (Spark, the HTTP simulator, the embedded Postgres);
the api-server loads this repo's plugin and finds the state DB through the ``pulsar_rebalance_db``
Connection, as in production. Screenshots go to ``docs/img/`` (the README shows them).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from pulsar_rebalance.orchestration.ui.app import URL_PREFIX, create_app

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]

IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


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
        lambda b: b.execute_script(f"const i = document.getElementById('{element_id}'); return i && i.complete;"))
    return browser.execute_script(f"return document.getElementById('{element_id}').naturalWidth;")


def _full_page_screenshot(browser, path: Path, width: int = 1440) -> None:
    height = browser.execute_script("return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight);")
    browser.set_window_size(width, min(max(height + 40, 800), 4000))
    path.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(path))
    browser.set_window_size(width, 1000)


def test_every_plugin_route_answers_401_over_http_without_credentials(airflow_stack, pipeline_plan):
    token = airflow_stack.token("viewer")
    for route in create_app().routes:
        url = airflow_stack.url + URL_PREFIX + route.path.replace("{plan_id}", pipeline_plan)
        for method in route.methods:
            anonymous = httpx.request(method, url, timeout=60)
            assert anonymous.status_code == 401, (method, url, anonymous.status_code)
            assert pipeline_plan not in anonymous.text
            assert httpx.request(method, url, headers={"Authorization": f"Bearer {token}"}, timeout=60).status_code == 200


def test_login_open_the_plan_from_the_nav_entry_and_directly_and_see_the_chart(airflow_stack, pipeline_plan, browser):
    _login(browser, airflow_stack, "admin")
    wait = WebDriverWait(browser, 60)

    # Browse -> Rebalance plans: the plugin's page inside the Airflow UI (an iframe of /pulsar-rebalance/)
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "button[aria-label=Browse]"))).click()
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "a[data-value='Rebalance plans']"))).click()
    wait.until(lambda b: b.current_url.endswith("/plugin/pulsar-rebalance"))
    wait.until(EC.frame_to_be_available_and_switch_to_it((By.TAG_NAME, "iframe")))
    row_link = wait.until(EC.element_to_be_clickable((By.LINK_TEXT, pipeline_plan)))
    assert "pending" in browser.find_element(By.ID, "plans").text
    row_link.click()
    wait.until(EC.presence_of_element_located((By.ID, "actions")))
    assert browser.find_element(By.ID, "plan-status").text == "pending"
    assert _wait_image_loaded(browser, "chart") > 300
    gate = browser.find_element(By.ID, "gate-link").get_attribute("href")
    assert "/dags/pulsar_rebalance/runs/manual__2026-11-23T12%3A00%3A00%2B00%3A00/tasks/await_approval/required_actions" in gate
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
