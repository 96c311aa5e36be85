"""What the toolkit's end-to-end tests share: the store's model names, and a browser check for
the reports they write. A module, not the conftest, so that tests can import it by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers.missing import missing

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
MODELS = [f"tenants/t{i:03d}.joblib" for i in range(3)]
SLOW = "slow"  # 50 ms a request: a worker's parallelism is its knee
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


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
