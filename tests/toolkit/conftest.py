"""A real server on loopback for the toolkit's end-to-end tests, and a browser check for reports."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.missing import missing
from helpers.serving import Servers

from modelhost import testing

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
MODELS = [f"tenants/t{i:03d}.joblib" for i in range(3)]
SLOW = "slow"  # 50 ms a request: a worker's parallelism is its knee
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("toolkit-store")
    for name in MODELS:
        testing.iris_logreg(root / name)
    testing.slow_handler_folder(root / SLOW, sleep_s_param=False, fixed_sleep_s=0.05)
    return root


@pytest.fixture(scope="module")
def access_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The JSON-lines access log the module's server writes."""
    return tmp_path_factory.mktemp("access") / "access.jsonl"


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers, access_log: Path) -> testing.RunningServer:
    return serve(store, workers=1, memory_budget="2GiB", access_log=access_log)


def open_in_chromium(report: Path, screenshot_name: str) -> str:
    """Open a report in headless Chromium; its text, once it loaded without console errors.
    The screenshot is kept in test-artifacts/."""
    chromium = shutil.which("chromium")
    if chromium is None:
        missing("chromium is not installed; scripts/install-test-tools.sh installs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(report.resolve().as_uri())
        page.wait_for_load_state("load")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / screenshot_name), full_page=True)
        charts = page.locator("svg").count()
        text = page.inner_text("body")
        browser.close()
    assert problems == [], problems
    return f"{text}\n[svg charts: {charts}]"
