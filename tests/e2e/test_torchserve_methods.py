"""The methods TorchServe's `/predictions/{model}[/{version}]` takes: its frontend hands the
request to the model whatever the method (`curl -X GET`, `-T` for PUT, DELETE, PATCH), so
clients that call it with another method than POST keep working."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

SIZING_HANDLER = """def handle(data, context):
    if data is None:
        return None
    answers = []
    for row in data:
        body = row.get("body") or row.get("data") or b""
        answers.append({"bytes": len(body if isinstance(body, (bytes, bytearray)) else str(body))})
    return answers
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ts-methods-store")
    (root / ".src").mkdir()
    (root / ".src/handler.py").write_text(SIZING_HANDLER)
    testing.mar_of(root / ".src", root / "sizing.mar")
    return root


@pytest.fixture(scope="module")
def http(store: Path, serve: Servers) -> Iterator[httpx.Client]:
    server = serve(store, workers=1, memory_budget="2GiB")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


@pytest.mark.parametrize("method", ["GET", "DELETE", "PATCH", "PUT", "POST"])
def test_predictions_take_any_method(http: httpx.Client, method: str) -> None:
    answer = http.request(method, "/predictions/sizing.mar", content=b"12345")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"bytes": 5}


def test_a_get_without_a_body_reaches_the_handler(http: httpx.Client) -> None:
    """`curl http://host:8080/predictions/sizing`: the handler gets an empty body."""
    answer = http.get("/predictions/sizing.mar/1.0")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"bytes": 0}
