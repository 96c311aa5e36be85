"""What a TorchServe handler says of its answers reaches the client, as TorchServe sends it: the
status and headers it sets through `context` (its `testPredictionCustomErrorCode` and
`testPredictionsModifyResponseHeader`), and the code of a `PredictionException` it raises; and
none of it can break the HTTP framing or pass itself off as the server's own headers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.fronts import hit_with_the_main_process_stopped, raw_request
from helpers.handlers import handler_store
from helpers.serving import Servers

pytestmark = pytest.mark.e2e

HANDLER = """import json

from ts.utils.util import PredictionException


def handle(data, context):
    if data is None:  # TorchServe initializes a module handler with None
        return None
    answers = []
    for index, item in enumerate(data):
        asked = item.get("body")
        asked = asked.decode() if isinstance(asked, (bytes, bytearray)) else asked
        if asked == "raise":
            raise PredictionException("the input is too large", 413)
        if asked == "bad":
            context.set_response_status(422, "Unprocessable", index)
            context.set_response_header(index, "x-reason", "bad input")
            answers.append({"error": "bad input"})
            continue
        context.set_response_header(index, "x-checked", "yes")
        context.set_response_header(index, "Content-Length", "1")
        context.set_response_header(index, "x-modelhost-cache", "forged")
        context.set_response_header(index, "x-split", "a\\r\\nset-cookie: stolen=1")
        if asked == "odd status":
            context.set_response_status(204, "No Content", index)
        answers.append({"ok": asked})
    return answers
"""
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return handler_store(tmp_path_factory, "told.mar", HANDLER)


@pytest.fixture(scope="module")
def http(store: Path, serve: Servers) -> Iterator[httpx.Client]:
    server = serve(store, workers=1, memory_budget="4GiB")
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


def ask(http: httpx.Client, asked: str, path: str = "/predictions/told.mar") -> httpx.Response:
    return http.post(path, content=json.dumps(asked), headers=JSON)


INVOCATION_PATHS = [
    "/predictions/told.mar",
    "/models/told.mar/invoke",
    "/v1/models/told.mar:predict",
]


@pytest.mark.parametrize("path", INVOCATION_PATHS)
def test_a_status_the_handler_sets_is_the_answers_with_its_body(
    http: httpx.Client, path: str
) -> None:
    answer = ask(http, "bad", path)
    assert answer.status_code == 422, answer.text
    assert answer.json() == {"error": "bad input"}
    assert answer.headers["x-reason"] == "bad input"


@pytest.mark.parametrize("path", INVOCATION_PATHS)
def test_headers_the_handler_sets_come_back_but_never_the_servers_own(
    http: httpx.Client, path: str
) -> None:
    answer = ask(http, "fine", path)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"ok": "fine"}
    assert answer.headers["x-checked"] == "yes"
    assert answer.headers["content-length"] == str(len(answer.content))
    assert answer.headers["x-modelhost-cache"] in ("hit", "disk", "remote")
    assert "x-split" not in answer.headers and "set-cookie" not in answer.headers


def test_a_prediction_exception_answers_its_code_and_message(http: httpx.Client) -> None:
    answer = ask(http, "raise")
    assert answer.status_code == 413, answer.text
    assert "the input is too large" in answer.json()["message"]
    assert ask(http, "fine").status_code == 200  # the model serves on


def test_a_status_an_answer_with_a_body_cannot_have_is_refused(http: httpx.Client) -> None:
    answer = ask(http, "odd status")
    assert answer.status_code == 500
    assert "204" in answer.json()["message"]


def test_a_front_answers_the_handlers_status_and_headers(store: Path, serve: Servers) -> None:
    """And a refusal on /predictions with TorchServe's exception name, as the main process."""
    server = serve(store, workers=1, fronts=2, memory_budget="4GiB")
    with httpx.Client(base_url=server.url, timeout=120) as client:
        from_main = ask(client, "raise")  # loaded: a front's hit from now on
    request = raw_request("/models/told.mar/invoke", b'"bad"', "content-type: application/json")
    answer = hit_with_the_main_process_stopped(server, request)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 422 "), answer
    assert b"\r\nx-reason: bad input" in head and json.loads(body) == {"error": "bad input"}
    request = raw_request("/predictions/told.mar", b'"raise"', "content-type: application/json")
    head, _, body = hit_with_the_main_process_stopped(server, request).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 "), head
    assert json.loads(body)["type"] == from_main.json()["type"], (body, from_main.text)
