"""The served OpenAPI documents, checked against the real server by schemathesis: every response
is documented (status, content type, schema) and malformed input never gets a 5xx. And the Open
Inference Protocol's published document: Triton's client's every call, answered as it defines."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import schemathesis
import tritonclient.http as triton
from helpers.serving import Servers
from hypothesis import HealthCheck, given, settings
from jsonschema import Draft202012Validator
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tritonclient.utils import InferenceServerException

from modelhost import testing

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES_PER_OPERATION = 10  # enough to vary each operation's input; ~10 s for both documents
STREAMS = {"/events"}  # never ends by itself


@pytest.fixture(scope="module")
def ports(store: Path, serve: Servers) -> tuple[str, str]:
    management_port = testing.free_port()
    running = serve(store, workers=1, management_port=management_port)
    return running.url, f"http://127.0.0.1:{management_port}"


@pytest.mark.parametrize("which", [0, 1], ids=["main", "torchserve"])
def test_responses_are_documented_and_robust(ports: tuple[str, str], which: int) -> None:
    """Every response is documented and no input breaks the server."""
    schema = schemathesis.openapi.from_url(f"{ports[which]}/openapi.json")
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in STREAMS:
            continue
        try:
            exercise(operation)
        except Exception as error:  # noqa: BLE001  (collect every operation's failure, then report)
            failures.append(f"{operation.method.upper()} {operation.path}: {error}")
    assert not failures, "\n\n".join(failures)


def exercise(operation: Any) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        case.call_and_validate(checks=CHECKS)

    run()


def test_the_served_document_lists_the_protocols(ports: tuple[str, str]) -> None:
    paths = httpx.get(f"{ports[0]}/openapi.json").json()["paths"]
    assert "/v2/models/{model}/infer" in paths
    assert "/predictions/{model}" in paths
    management = httpx.get(f"{ports[1]}/openapi.json").json()["paths"]
    assert set(management) == {"/models", "/models/{model}", "/openapi.json"}


# The Open Inference Protocol's own document ---------------------------------------------------
#
# Our JSON Schemas of the responses the protocol's REST specification defines
# (specification/protocol/open_inference_rest.yaml and inference_rest.md in
# kserve/open-inference-protocol), and of the extensions Triton's client calls (binary tensor
# data, model repository, statistics, as Triton documents them). Each call Triton's client makes
# is recorded as the server answered it and its body checked against the schema of its call.

DATATYPES = [
    *("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"),
    *("FP16", "FP32", "FP64", "BYTES"),
]
STRING, INTEGER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
DEFS: dict[str, Any] = {
    "shape": {"type": "array", "items": INTEGER},
    "parameters": {"type": "object"},
    "tensor_data": {
        "type": "array",
        "items": {
            "anyOf": [{"$ref": "#/$defs/tensor_data"}, {"type": ["number", "string", "boolean"]}]
        },
    },
    "metadata_tensor": {
        "type": "object",
        "required": ["name", "datatype", "shape"],
        "properties": {
            "name": STRING,
            "datatype": {"enum": DATATYPES},
            "shape": {"$ref": "#/$defs/shape"},
        },
    },
    "response_output": {
        "type": "object",
        "required": ["name", "shape", "datatype"],
        "properties": {
            "name": STRING,
            "shape": {"$ref": "#/$defs/shape"},
            "datatype": {"enum": DATATYPES},
            "parameters": {"$ref": "#/$defs/parameters"},
            "data": {"$ref": "#/$defs/tensor_data"},
        },
        # `data`, unless the binary tensor data extension sends the values after the JSON
        "anyOf": [
            {"required": ["data"]},
            {
                "required": ["parameters"],
                "properties": {
                    "parameters": {
                        "required": ["binary_data_size"],
                        "properties": {"binary_data_size": {"type": "integer", "minimum": 0}},
                    }
                },
            },
        ],
    },
    "stat_duration": {
        "type": "object",
        "required": ["count"],
        "properties": {"count": INTEGER, "ns": INTEGER},
    },
}


def strict(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


ERROR = strict(["error"], {"error": STRING})
SERVER_LIVE = strict(["live"], {"live": BOOLEAN})
SERVER_READY = strict(["ready"], {"ready": BOOLEAN})  # the prose says "live": a slip
MODEL_READY = strict(["name", "ready"], {"name": STRING, "ready": BOOLEAN})
SERVER_METADATA = strict(
    ["name", "version", "extensions"],
    {"name": STRING, "version": STRING, "extensions": {"type": "array", "items": STRING}},
)
MODEL_METADATA = strict(
    ["name", "platform"],
    {
        "name": STRING,
        "versions": {"type": "array", "items": STRING},
        "platform": STRING,
        "inputs": {"type": "array", "items": {"$ref": "#/$defs/metadata_tensor"}},
        "outputs": {"type": "array", "items": {"$ref": "#/$defs/metadata_tensor"}},
        "properties": {"type": "object", "additionalProperties": STRING},
    },
)
INFERENCE = strict(
    ["model_name", "outputs"],
    {
        "model_name": STRING,
        "model_version": STRING,
        "id": STRING,
        "parameters": {"$ref": "#/$defs/parameters"},
        "outputs": {"type": "array", "items": {"$ref": "#/$defs/response_output"}},
    },
)
REPOSITORY_INDEX = {
    "type": "array",
    "items": strict(
        ["name"], {"name": STRING, "version": STRING, "state": STRING, "reason": STRING}
    ),
}
STATISTICS = strict(
    ["model_stats"],
    {
        "model_stats": {
            "type": "array",
            "items": strict(
                ["name", "version", "last_inference", "inference_count", "inference_stats"],
                {
                    "name": STRING,
                    "version": STRING,
                    "last_inference": INTEGER,
                    "inference_count": INTEGER,
                    "inference_stats": {
                        "type": "object",
                        "additionalProperties": {"$ref": "#/$defs/stat_duration"},
                    },
                },
            ),
        }
    },
)
# (method, path pattern after /v2, status) → the schema of the body; None: an empty body
CALLS: list[tuple[str, str, int, dict[str, Any] | None]] = [
    ("GET", r"/health/live", 200, SERVER_LIVE),
    ("GET", r"/health/ready", 200, SERVER_READY),
    ("GET", r"", 200, SERVER_METADATA),
    ("GET", r"/models(/.+)?/stats", 200, STATISTICS),
    ("GET", r"/models/.+/ready", 200, MODEL_READY),
    ("GET", r"/models/.+/ready", 400, MODEL_READY),
    ("GET", r"/models/.+", 200, MODEL_METADATA),
    ("POST", r"/models/.+/infer", 200, INFERENCE),
    ("POST", r"/repository/index", 200, REPOSITORY_INDEX),
    ("POST", r"/repository/models/.+/(load|unload)", 200, None),
]


def schema_of(method: str, path: str, status: int) -> dict[str, Any] | None:
    """The schema of a call's answer: the first of CALLS to match; any error, ERROR."""
    if status >= 400 and not (status == 400 and path.endswith("/ready")):
        return ERROR
    for verb, pattern, answered, schema in CALLS:
        if verb == method and answered == status and re.fullmatch("/v2" + pattern, path):
            return schema
    raise AssertionError(f"{method} {path} answered {status}, which the protocol has no call for")


class Recorded:
    """A response read whole when it arrived, readable again by the client that asked."""

    def __init__(self, method: str, uri: str, response: Any) -> None:
        self.method, self.path = method, "/" + uri.partition("?")[0].lstrip("/")
        self.status_code = response.status_code
        self.headers = {name.lower(): value for name, value in response.items()}
        self.body: bytes = response.read()
        self._offset = 0

    def get(self, name: str, default: Any = None) -> Any:
        return self.headers.get(name.lower(), default)

    def read(self, length: int = -1) -> bytes:
        start = self._offset
        self._offset = len(self.body) if length == -1 else start + length
        return self.body[start : self._offset]

    def document(self) -> Any:
        """The JSON of the body: its header only when binary tensor data follows."""
        length = self.get("Inference-Header-Content-Length")
        return json.loads(self.body[: int(length)] if length is not None else self.body)


class RecordingClient(triton.InferenceServerClient):
    """Triton's HTTP client, unchanged but for keeping each response it gets."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.recorded: list[Recorded] = []

    def _get(self, request_uri: str, headers: Any, query_params: Any) -> Recorded:
        response = super()._get(request_uri, headers, query_params)
        return self._keep(Recorded("GET", request_uri, response))

    def _post(self, request_uri: str, request_body: Any, headers: Any, query_params: Any) -> Any:
        response = super()._post(request_uri, request_body, headers, query_params)
        return self._keep(Recorded("POST", request_uri, response))

    def _keep(self, recorded: Recorded) -> Recorded:
        self.recorded.append(recorded)
        return recorded

    def check_all(self) -> int:
        """Validate every response recorded against its call's schema; how many were."""
        for answer in self.recorded:
            schema = schema_of(answer.method, answer.path, answer.status_code)
            if schema is None:
                assert answer.body == b"", f"{answer.method} {answer.path}: {answer.body!r}"
                continue
            validator = Draft202012Validator({"$defs": DEFS, **schema})
            errors = [e.message for e in validator.iter_errors(answer.document())]
            assert not errors, f"{answer.method} {answer.path} {answer.status_code}: {errors}"
        return len(self.recorded)


OIP_MODEL = "tenants/t002.joblib"


@pytest.fixture
def recording(ports: tuple[str, str]) -> Iterator[RecordingClient]:
    client = RecordingClient(ports[0].removeprefix("http://"))
    yield client
    client.close()


def rows_input(n: int, binary: bool) -> triton.InferInput:
    rows = np.asarray(testing.iris_rows(n), dtype=np.float32)
    tensor = triton.InferInput("input-0", list(rows.shape), "FP32")
    tensor.set_data_from_numpy(rows, binary_data=binary)
    return tensor


def test_health_and_server_metadata_follow_the_protocol(recording: RecordingClient) -> None:
    assert recording.is_server_live() and recording.is_server_ready()
    recording.get_server_metadata()
    assert recording.check_all() == 3


def test_model_calls_follow_the_protocol(recording: RecordingClient) -> None:
    recording.unload_model(OIP_MODEL)
    assert not recording.is_model_ready(OIP_MODEL)  # 400 with the protocol's body
    recording.load_model(OIP_MODEL)
    assert recording.is_model_ready(OIP_MODEL)
    recording.get_model_metadata(OIP_MODEL)
    recording.get_model_metadata(OIP_MODEL, model_version="1")
    recording.get_model_repository_index()
    assert recording.check_all() == 7


def test_inference_follows_the_protocol(recording: RecordingClient) -> None:
    recording.infer(OIP_MODEL, [rows_input(2, binary=False)], request_id="json")
    proba = triton.InferRequestedOutput("predict_proba", binary_data=True)
    recording.infer(OIP_MODEL, [rows_input(3, binary=True)], outputs=[proba], model_version="1")
    recording.get_inference_statistics(OIP_MODEL)
    recording.get_inference_statistics()
    assert recording.check_all() == 4
    assert recording.recorded[0].document()["id"] == "json"  # given, so returned


def test_errors_follow_the_protocol(recording: RecordingClient) -> None:
    calls = [
        lambda: recording.get_model_metadata("no/such.joblib"),
        lambda: recording.is_model_ready("no/such.joblib"),
        lambda: recording.infer(OIP_MODEL, [rows_input(1, False)], model_version="9"),
        lambda: recording.get_inference_statistics("no/such.joblib"),
    ]
    for call in calls:
        try:
            answered = call()
        except InferenceServerException:
            continue
        assert answered is False  # is_model_ready answers False, not an exception
    statuses = [answer.status_code for answer in recording.recorded]
    assert statuses == [404, 404, 404, 404]
    assert recording.check_all() == 4
