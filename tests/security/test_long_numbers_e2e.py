"""A whole number too long for Python's int() (4300 digits) is refused like any malformed one:
400 on every route that reads one, not a 500 counted as a bug."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

HUGE = "1" * 5000


@pytest.fixture(scope="module")
def ports(
    store: Path, cache_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    management = testing.free_port()
    args = testing.serve_args(store, cache_dir, workers=1, management_port=management)
    with testing.RunningServer(args, tmp_path_factory.mktemp("server")) as running:
        yield running.url, f"http://127.0.0.1:{management}"


@pytest.mark.parametrize(
    ("port", "method", "path", "kwargs"),
    [
        (0, "GET", "/models", {"params": {"limit": HUGE}}),
        (0, "GET", "/events", {"headers": {"last-event-id": HUGE}}),
        (0, "GET", "/events", {"params": {"last_event_id": HUGE}}),
        (
            0,
            "POST",
            "/v2/models/iris.pkl/infer",
            {"headers": {"inference-header-content-length": HUGE}, "content": b"{}"},
        ),
        (1, "GET", "/models", {"params": {"next_page_token": HUGE}}),
        (1, "POST", "/models", {"params": {"url": "iris.pkl", "initial_workers": HUGE}}),
    ],
    ids=["limit", "last-event-id", "last_event_id", "header-length", "offset", "workers"],
)
def test_a_number_of_thousands_of_digits_is_400(
    ports: tuple[str, str], port: int, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    with httpx.Client(base_url=ports[port], timeout=30) as client:
        response = client.request(method, path, **kwargs)
    assert response.status_code == 400, response.text
