"""TorchServe's inference API collection (test/postman/inference_api_test_collection.json),
mirrored: one test per request, named after it, with its expectations, against a real server.
The collection's model archives are on the internet; an archive of our own, whose handler answers
the size and digest of the input it was handed, stands in for each. The documented calls beside
it follow: curl -F, requests' files=, curl -T, /invocations?model_name=, and API discovery.
Requests left out, and why: docs/conformance/torchserve-inference.md."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

ECHO_HANDLER = """
import hashlib


def handle(data, context):
    if data is None:
        return None
    answers = []
    for row in data:
        body = row.get("data") or row.get("body") or b""
        body = body.encode() if isinstance(body, str) else body
        answers.append({"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()})
    return answers
"""
IMAGE = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 64  # stands in for kitten.jpg
TEXT = b"Bloomberg has decided to publish a new report on the global economy.\n"
ROWS = testing.iris_rows(2)


def echoed(body: bytes) -> dict[str, object]:
    """What the archive's handler answers when it is handed `body`."""
    return {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ts-inference-store")
    source = root / ".src/echo"
    source.mkdir(parents=True)
    (source / "handler.py").write_text(ECHO_HANDLER)
    testing.mar_of(source, root / "zoo.mar")
    testing.iris_logreg(root / "iris.pkl")
    return root


@pytest.fixture(scope="module")
def management_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def ts_server(store: Path, management_port: int, serve: Servers) -> testing.RunningServer:
    return serve(store, workers=1, memory_budget="4GiB", management_port=management_port)


@pytest.fixture
def inference(ts_server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=ts_server.url, timeout=60) as http:
        yield http


@pytest.fixture
def management(ts_server: testing.RunningServer, management_port: int) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://localhost:{management_port}", timeout=60) as http:
        yield http


def register(management: httpx.Client, name: str) -> httpx.Response:
    """The collection's register call: one worker, synchronously."""
    params = {"url": "zoo.mar", "model_name": name, "initial_workers": 1, "synchronous": "true"}
    return management.post("/models", params=params)


# the collection's requests, in its order ----------------------------------------------------


def test_model_zoo_register_model(management: httpx.Client) -> None:
    response = register(management, "zoo_register")
    assert response.status_code in (200,), response.text


@pytest.mark.parametrize("body", [IMAGE, TEXT], ids=["image", "text"])
def test_model_zoo_inference_model(
    management: httpx.Client, inference: httpx.Client, body: bytes
) -> None:
    """The file as the raw body of a POST; the JSON answer equals the data file's expectation."""
    name = f"zoo_infer_{len(body)}"
    assert register(management, name).status_code == 200
    response = inference.post(f"/predictions/{name}", content=body)
    assert response.status_code in (200,), response.text
    assert response.json() == echoed(body)


def test_model_zoo_unregister_model(management: httpx.Client) -> None:
    assert register(management, "zoo_unregister").status_code == 200
    response = management.delete("/models/zoo_unregister")
    assert response.status_code in (200, 201, 202), response.text


# the inference API's documented calls -------------------------------------------------------


def test_curl_form_data_file(management: httpx.Client, inference: httpx.Client) -> None:
    """A curl form data file gives the handler the file's bytes.

    `curl http://host:8080/predictions/m -F "data=@kitten.jpg"`."""
    assert register(management, "zoo_form").status_code == 200
    files = {"data": ("kitten.jpg", IMAGE, "image/jpeg")}
    response = inference.post("/predictions/zoo_form", files=files)
    assert response.status_code == 200, response.text
    assert response.json() == echoed(IMAGE)


def test_requests_files_reach_a_built_in_model_as_json(inference: httpx.Client) -> None:
    """`requests.post(url, files={"data": open("rows.json", "rb")})`: typed by its name."""
    files = {"data": ("rows.json", json.dumps(ROWS).encode())}
    response = inference.post("/predictions/iris.pkl", files=files)
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0, 0]}


def test_urlencoded_form_reaches_a_built_in_model(inference: httpx.Client) -> None:
    """`curl --data-urlencode data@rows.json`: the field named data is the input."""
    response = inference.post("/predictions/iris.pkl", data={"data": json.dumps(ROWS)})
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0, 0]}


def test_malformed_multipart_is_400(inference: httpx.Client) -> None:
    """Malformed multipart is a 400 that says what to fix."""
    headers = {"content-type": "multipart/form-data; boundary=xyz"}
    body = b'--xyz\r\nContent-Disposition: form-data; name="data"\r\n\r\n[1]\r\n'
    response = inference.post("/predictions/iris.pkl", content=body, headers=headers)
    assert response.status_code == 400
    assert "closing boundary --xyz--" in response.json()["message"]


def test_curl_upload_file_is_a_put_that_infers(
    management: httpx.Client, inference: httpx.Client
) -> None:
    """`curl http://host:8080/predictions/m -T kitten.jpg`, TorchServe's quick start."""
    assert register(management, "zoo_put").status_code == 200
    response = inference.put("/predictions/zoo_put", content=IMAGE)
    assert response.status_code == 200, response.text
    assert response.json() == echoed(IMAGE)


def test_invocations_with_model_name_infer(inference: httpx.Client) -> None:
    """`POST /invocations?model_name=m`, TorchServe's SageMaker-style route."""
    response = inference.post("/invocations", params={"model_name": "iris.pkl"}, json=ROWS)
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0, 0]}


def test_invocations_with_model_name_in_the_form_infer(inference: httpx.Client) -> None:
    form = {"model_name": "iris.pkl", "data": json.dumps(ROWS)}
    response = inference.post("/invocations", data=form)
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0, 0]}


@pytest.mark.parametrize(
    ("method", "path"),
    [("OPTIONS", "/"), ("GET", "/api-description"), ("POST", "/api-description")],
)
@pytest.mark.parametrize("port", ["inference", "management"])
def test_api_description_answers_the_openapi_document(
    inference: httpx.Client, management: httpx.Client, port: str, method: str, path: str
) -> None:
    """TorchServe's API discovery, on both ports: the port's own OpenAPI document."""
    client = inference if port == "inference" else management
    response = client.request(method, path)
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["openapi"].startswith("3.")
    assert document == client.get("/openapi.json").json()
    served = "/predictions/{model}" if port == "inference" else "/models/{model}"
    assert served in document["paths"]
