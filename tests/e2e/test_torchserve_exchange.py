"""What passes between a client and a TorchServe handler, as TorchServe's frontend passes it:

- what the handler says of its answers reaches the client: the status and headers it sets
  through `context` (TorchServe's `testPredictionCustomErrorCode` and
  `testPredictionsModifyResponseHeader`), and the code of a `PredictionException` it raises;
  none of it can break the HTTP framing or pass itself off as the server's own headers;
- what the handler reads of its request: every HTTP header through
  `context.get_request_header`, each query parameter and form field under its name in the
  request's dict, and `explain: True` on `/explanations`, which BaseHandler's `handle` reads to
  call `explain_handle`;
- `x-request-id`: a fresh UUID on every answer, a prediction's and a refusal's, on the inference
  and the management port, never one the client sent, as clients and proxies that log it expect;
  a prediction's handler reads the same id through `context.get_request_id`;
- the methods `/predictions/{model}[/{version}]` takes: the request reaches the model whatever
  the method (`curl -X GET`, `-T` for PUT, DELETE, PATCH).

The tests share one server, and one with fronts for what a front answers alone; each asks its
own archive or names an absent one, so none depends on another's state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.fronts import hit_with_the_main_process_stopped, raw_request
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

TOLD_HANDLER = """import json

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
READS_HANDLER = """import json


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
SIZING_HANDLER = """def handle(data, context):
    if data is None:
        return None
    answers = []
    for row in data:
        body = row.get("body") or row.get("data") or b""
        answers.append({"bytes": len(body if isinstance(body, (bytes, bytearray)) else str(body))})
    return answers
"""
JSON = {"content-type": "application/json"}
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
ROW = {"instances": testing.iris_rows(1)}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """told.mar, reads.mar and sizing.mar of the handlers above, and noop.mar (MMS's)."""
    root = tmp_path_factory.mktemp("ts-exchange")
    for archive, handler in (
        ("told.mar", TOLD_HANDLER),
        ("reads.mar", READS_HANDLER),
        ("sizing.mar", SIZING_HANDLER),
    ):
        (root / f".src/{archive}").mkdir(parents=True)
        (root / f".src/{archive}/handler.py").write_text(handler)
        testing.mar_of(root / f".src/{archive}", root / archive)
    testing.mar_of(testing.mms_handler_folder(root / ".src/noop"), root / "noop.mar")
    return root


@pytest.fixture
def ts_handlers() -> None:
    """The handlers' tests need TorchServe's `ts` package (its PredictionException)."""
    pytest.importorskip("ts", reason="pip install 'modelhost[torchserve-handlers]'")


@pytest.fixture(scope="module")
def management_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers, management_port: int) -> testing.RunningServer:
    return serve(store, workers=1, memory_budget="4GiB", management_port=management_port)


@pytest.fixture(scope="module")
def fronted(store: Path, serve: Servers) -> testing.RunningServer:
    return serve(store, workers=1, fronts=2, memory_budget="4GiB")


@pytest.fixture
def http(server: testing.RunningServer, ts_handlers: None) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


@pytest.fixture
def inference(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


@pytest.fixture
def management(server: testing.RunningServer, management_port: int) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{management_port}", timeout=60) as client:
        yield client


# ---------------------------------------------------------------- what the handler answers


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


def test_a_front_answers_the_handlers_status_and_headers(
    fronted: testing.RunningServer, ts_handlers: None
) -> None:
    """And a refusal on /predictions with TorchServe's exception name, as the main process."""
    server = fronted
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


# ---------------------------------------------------------------- what the handler reads


def read(body: bytes) -> dict[str, object]:
    """What the reads.mar handler read, less the request id (checked on its own)."""
    answer: dict[str, object] = json.loads(body)
    answer.pop("request_id")
    return answer


def header_of(head: bytes, name: bytes) -> str:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode()
    raise AssertionError(f"no {name!r} in {head!r}")


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


def test_a_front_hands_the_headers_over_too(
    fronted: testing.RunningServer, ts_handlers: None
) -> None:
    server = fronted
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


# ---------------------------------------------------------------- x-request-id


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


def test_a_fronts_hit_has_a_request_id(fronted: testing.RunningServer) -> None:
    with httpx.Client(base_url=fronted.url, timeout=60) as client:
        assert client.post("/predictions/noop.mar", json=ROW).status_code == 200
    request = raw_request(
        "/predictions/noop.mar", b"[[1, 2, 3, 4]]", "content-type: application/json"
    )
    answered = hit_with_the_main_process_stopped(fronted, request)
    head = answered.partition(b"\r\n\r\n")[0].decode()
    assert re.search(r"\r\nx-request-id: [0-9a-f-]{36}\r\n", head + "\r\n"), head


# ---------------------------------------------------------------- methods


@pytest.mark.parametrize("method", ["GET", "DELETE", "PATCH", "PUT", "POST"])
def test_predictions_take_any_method(inference: httpx.Client, method: str) -> None:
    answer = inference.request(method, "/predictions/sizing.mar", content=b"12345")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"bytes": 5}


def test_a_get_without_a_body_reaches_the_handler(inference: httpx.Client) -> None:
    """`curl http://host:8080/predictions/sizing`: the handler gets an empty body."""
    answer = inference.get("/predictions/sizing.mar/1.0")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"bytes": 0}
