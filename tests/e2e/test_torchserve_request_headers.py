"""What a TorchServe handler reads of its request, as TorchServe hands it over: every HTTP
header through `context.get_request_header`, each query parameter and form field under its name
in the request's dict, `explain: True` on `/explanations`, which BaseHandler's `handle`
reads to call `explain_handle`, and `context.get_request_id`, the answer's `x-request-id`."""

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


def handle(data, context):
    if data is None:  # TorchServe initializes a module handler with None
        return None
    answers = []
    for index, item in enumerate(data):
        answers.append({
            "trace": context.get_request_header(index, "X-Trace"),
            "all": context.get_all_request_header(index).get("x-trace"),
            "threshold": item.get("threshold"),
            "explain": context.get_request_header(index, "explain"),
            "request_id": context.get_request_id(index),
        })
    return answers
"""


def read(body: bytes) -> dict[str, object]:
    """What the handler read, less the request id (`test_*_request_id_*` check it)."""
    answer: dict[str, object] = json.loads(body)
    answer.pop("request_id")
    return answer


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return handler_store(tmp_path_factory, "reads.mar", HANDLER)


@pytest.fixture(scope="module")
def http(store: Path, serve: Servers) -> Iterator[httpx.Client]:
    server = serve(store, workers=1, memory_budget="4GiB")
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


def test_the_handler_reads_a_request_header_by_its_name(http: httpx.Client) -> None:
    answer = http.post("/predictions/reads.mar", content=b"{}", headers={"X-Trace": "t-1"})
    assert answer.status_code == 200, answer.text
    assert read(answer.content) == {
        "trace": "t-1",
        "all": "t-1",
        "threshold": None,
        "explain": None,
    }


def test_the_handlers_request_id_is_the_answers_x_request_id(http: httpx.Client) -> None:
    """As TorchServe's: one id per request, in the handler's log lines and the client's."""
    answers = [http.post("/predictions/reads.mar", content=b"{}") for _ in range(2)]
    ids = [answer.json()["request_id"] for answer in answers]
    assert ids == [answer.headers["x-request-id"] for answer in answers]
    assert ids[0] != ids[1]


def test_a_query_parameter_is_in_the_requests_dict(http: httpx.Client) -> None:
    answer = http.post("/predictions/reads.mar?threshold=0.5", content=b"{}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["threshold"] == "0.5"


def test_a_form_field_is_in_the_requests_dict(http: httpx.Client) -> None:
    files = {"data": ("kitten.jpg", b"\xff\xd8jpeg", "image/jpeg")}
    answer = http.post("/predictions/reads.mar", files=files, data={"threshold": "0.7"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["threshold"] == "0.7"


def test_a_front_hands_the_headers_over_too(store: Path, serve: Servers) -> None:
    server = serve(store, workers=1, fronts=2, memory_budget="4GiB")
    with httpx.Client(base_url=server.url, timeout=120) as client:
        assert client.post("/predictions/reads.mar", content=b"{}").status_code == 200
    request = raw_request("/predictions/reads.mar", b"{}", "X-Trace: t-2")
    answer = hit_with_the_main_process_stopped(server, request)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), answer
    assert read(body) == {"trace": "t-2", "all": "t-2", "threshold": None, "explain": None}
    assert json.loads(body)["request_id"] == header_of(head, b"x-request-id")
    request = raw_request("/explanations/reads.mar", b"{}", "X-Trace: t-3")
    head, _, body = hit_with_the_main_process_stopped(server, request).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert json.loads(body)["explain"] == "True"


@pytest.mark.parametrize("path", ["/explanations/reads.mar", "/explanations/reads.mar/1.0"])
def test_an_explanation_is_the_handlers_call_with_explain_true(
    http: httpx.Client, path: str
) -> None:
    answer = http.post(path, content=b"{}", headers={"X-Trace": "t-4"})
    assert answer.status_code == 200, answer.text
    assert read(answer.content) == {
        "trace": "t-4",
        "all": "t-4",
        "threshold": None,
        "explain": "True",
    }
    assert answer.json()["request_id"] == answer.headers["x-request-id"]


def test_an_explanation_of_an_unknown_model_is_404(http: httpx.Client) -> None:
    answer = http.post("/explanations/absent.mar", content=b"{}")
    assert answer.status_code == 404, answer.text
    assert "absent.mar" in answer.json()["message"]


def header_of(head: bytes, name: bytes) -> str:
    """A header's value in a raw answer's head."""
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode()
    raise AssertionError(f"no {name!r} in {head!r}")
