"""The dashboard, opened in headless Chromium, shows the loaded models and updates live when
another one loads, without a console error, and lists every loaded model of a server with
thousands of names from the event stream, not by listing again. Its screenshot is kept in
test-artifacts/."""

from __future__ import annotations

import http.client
import json
import shutil
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
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
        page.wait_for_function(
            "Number(document.querySelector('#sizing-chart').dataset.points) > 0",
            timeout=WAIT_MS,
        )
        sizing = page.inner_text("#sizing-now")
        thrash = page.inner_text("#thrash")
        hits = page.inner_text(f"{model_row('tenants/t000.joblib')} td:nth-child(6)")
        memory = page.inner_text("#memory-now")
        screenshot = tmp_path / "dashboard.png"
        page.screenshot(path=str(screenshot), full_page=True)
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(screenshot, ARTIFACTS / "dashboard.png")
    assert hits == "1"  # the second of its two invocations; the first was a miss
    assert " of " in memory
    assert sizing.endswith("predicted") and "% hits seen" in sizing
    assert thrash == "quiet"
    assert problems == []


REGISTERED_ONLY = 4_800  # 'aa-…': registered, never loaded; they fill the first pages
LOADED = 200  # 'zz-…': loaded, after every 'aa-…' in name order


@pytest.fixture(scope="module")
def crowded(store: Path, serve: Servers) -> tuple[testing.RunningServer, str]:
    """A server knowing 5,000 names, of which the 200 loaded sort after the others."""
    port = testing.free_port()
    running = serve(store, workers=2, memory_budget="4GiB", management_port=port)
    names = [f"aa-{i:04d}" for i in range(REGISTERED_ONLY)]
    names += [f"zz-{i:03d}" for i in range(LOADED)]
    with ThreadPoolExecutor(4) as threads:
        list(threads.map(lambda part: register(port, part), [names[i::4] for i in range(4)]))
    return running, f"http://127.0.0.1:{port}"


def register(port: int, names: list[str]) -> None:
    """TorchServe's register: with 0 workers a name only, with 1 loaded now.

    On http.client: an httpx request costs as much CPU as the server's answer to it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        for name in names:
            workers = 1 if name.startswith("zz-") else 0
            params = {"url": "iris.pkl", "model_name": name, "initial_workers": workers}
            connection.request("POST", "/models?" + urllib.parse.urlencode(params))
            response = connection.getresponse()
            body = response.read()
            assert response.status == 200, body
    finally:
        connection.close()


def test_dashboard_lists_every_loaded_model(
    crowded: tuple[testing.RunningServer, str],
) -> None:
    """The dashboard lists every loaded model among thousands from events.

    5,000 names whose 200 loaded ones come after the first pages: all are listed; loads and
    unloads while the page is open update it from /events without another listing."""
    chromium = require_tool("chromium", "chromium")
    server, management = crowded
    with chromium_page(chromium, CHROMIUM_ARGS, width=1366) as (page, problems):
        listings: list[str] = []
        page.on("request", lambda r: listings.append(r.url) if "/models?" in r.url else None)
        page.goto(server.url + "/")
        page.wait_for_selector(model_row(f"zz-{LOADED - 1:03d}"), timeout=WAIT_MS)
        page.wait_for_selector("#status.live", timeout=WAIT_MS)
        assert page.locator("#models tbody tr").count() == LOADED
        listed = len(listings)
        for i in range(3):
            invoke(server.url, f"tenants/t00{i}.joblib")  # loads while the page is open
            page.wait_for_selector(model_row(f"tenants/t00{i}.joblib"), timeout=WAIT_MS)
            assert httpx.delete(f"{management}/models/zz-00{i}").status_code == 200
            page.wait_for_selector(model_row(f"zz-00{i}"), state="detached", timeout=WAIT_MS)
        rows = page.locator("#models tbody tr").count()
        count = page.inner_text("#models-count")
    assert all("state=loaded" in url for url in listings)
    assert len(listings) - listed <= 1  # at most the slow refresh of figures, not one an event
    assert rows == LOADED and count == f"{LOADED} in memory"
    assert problems == []
