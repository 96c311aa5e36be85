"""TorchServe's `x-request-id`: its frontend sets a fresh UUID on every answer, a prediction's
and a refusal's, on the inference and the management port, and never echoes one the client
sent. Clients and proxies that log it to trace a request keep it after the move."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.fronts import hit_with_the_main_process_stopped, raw_request
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
ROW = {"instances": testing.iris_rows(1)}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ts-request-ids")
    testing.mar_of(testing.mms_handler_folder(root / ".src"), root / "noop.mar")
    return root


@pytest.fixture(scope="module")
def management_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers, management_port: int) -> testing.RunningServer:
    return serve(store, workers=1, memory_budget="2GiB", management_port=management_port)


@pytest.fixture
def inference(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


@pytest.fixture
def management(server: testing.RunningServer, management_port: int) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{management_port}", timeout=60) as client:
        yield client


def request_id(answer: httpx.Response) -> str:
    assert UUID.match(answer.headers.get("x-request-id", "")), answer.headers
    return answer.headers["x-request-id"]


def test_each_prediction_has_its_own_request_id(inference: httpx.Client) -> None:
    answers = [inference.post("/predictions/noop.mar", json=ROW) for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200], answers[0].text
    assert request_id(answers[0]) != request_id(answers[1])


def test_a_refused_prediction_has_a_request_id(inference: httpx.Client) -> None:
    answer = inference.post("/predictions/InvalidModel", json=ROW)
    assert answer.status_code == 404
    request_id(answer)


def test_the_clients_request_id_is_not_echoed(inference: httpx.Client) -> None:
    sent = "11111111-2222-4333-8444-555555555555"
    answer = inference.post("/predictions/noop.mar", json=ROW, headers={"x-request-id": sent})
    assert request_id(answer) != sent


@pytest.mark.parametrize("path", ["/models", "/models/InvalidModel"])
def test_management_answers_have_a_request_id(management: httpx.Client, path: str) -> None:
    request_id(management.get(path))


def test_ping_has_a_request_id(inference: httpx.Client) -> None:
    request_id(inference.get("/ping"))


def test_a_fronts_hit_has_a_request_id(store: Path, serve: Servers) -> None:
    fronted = serve(store, workers=1, fronts=2, memory_budget="2GiB")
    with httpx.Client(base_url=fronted.url, timeout=60) as client:
        assert client.post("/predictions/noop.mar", json=ROW).status_code == 200
    request = raw_request(
        "/predictions/noop.mar", b"[[1, 2, 3, 4]]", "content-type: application/json"
    )
    answered = hit_with_the_main_process_stopped(fronted, request)
    head = answered.partition(b"\r\n\r\n")[0].decode()
    assert re.search(r"\r\nx-request-id: [0-9a-f-]{36}\r\n", head + "\r\n"), head
