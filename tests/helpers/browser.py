"""A page in headless Chromium that keeps what its console reports as errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest


@contextlib.contextmanager
def chromium_page(
    chromium: str, args: Sequence[str], width: int, height: int = 900
) -> Iterator[tuple[Any, list[str]]]:
    """A new page of the `chromium` binary, and the list its console errors and uncaught
    exceptions go into; skips the test where playwright is not installed."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=list(args))
        page = browser.new_page(viewport={"width": width, "height": height})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        yield page, problems
        browser.close()
