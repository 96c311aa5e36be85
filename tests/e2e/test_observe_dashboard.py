"""The dashboard, opened in headless Chromium, shows the loaded models and updates live when
another one loads, without a console error. Its screenshot is kept in test-artifacts/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest
from helpers.browser import chromium_page
from helpers.serving import Servers
from observe_tools import require_tool

from modelhost import testing

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 30_000
ROW = json.dumps(testing.iris_rows(1)[0])


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers) -> testing.RunningServer:
    return serve(store, workers=2, memory_budget="4GiB")


def invoke(url: str, name: str) -> None:
    response = httpx.post(
        f"{url}/models/{name}/invoke", content=ROW, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text


def model_row(name: str) -> str:
    return f'#models tbody tr[data-model="{name}"]'


def test_the_dashboard_shows_models_and_updates_when_one_loads(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    chromium = require_tool("chromium", "chromium")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    invoke(server.url, "tenants/t000.joblib")
    invoke(server.url, "tenants/t000.joblib")
    with chromium_page(chromium, CHROMIUM_ARGS, width=1366) as (page, problems):
        page.goto(server.url + "/")
        page.wait_for_selector(model_row("tenants/t000.joblib"), timeout=WAIT_MS)
        page.wait_for_selector("#status.live", timeout=WAIT_MS)

        invoke(server.url, "tenants/t001.joblib")  # loads while the page is open
        page.wait_for_selector(model_row("tenants/t001.joblib"), timeout=WAIT_MS)
        page.wait_for_selector('#events li[data-kind="load"]', timeout=WAIT_MS)
        page.wait_for_function(
            "document.querySelector('#hit-ratio').textContent.endsWith('%')", timeout=WAIT_MS
        )
        hits = page.inner_text(f"{model_row('tenants/t000.joblib')} td:nth-child(6)")
        memory = page.inner_text("#memory-now")
        screenshot = tmp_path / "dashboard.png"
        page.screenshot(path=str(screenshot), full_page=True)
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(screenshot, ARTIFACTS / "dashboard.png")
    assert hits == "1"  # the second of its two invocations; the first was a miss
    assert " of " in memory
    assert problems == []
