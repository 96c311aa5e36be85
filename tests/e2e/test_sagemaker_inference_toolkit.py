"""`code/inference.py` as sagemaker-inference-toolkit's Transformer runs it, on a real server.

Each model folder holds an iris model and a script written the way the toolkit's users and AWS's
example notebooks write theirs; each request is sent as those notebooks and the toolkit's tests
send it: POST /invocations with the target-model header, text/csv, application/x-npy, JSON.
"""

from __future__ import annotations

import io
import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from modelhost import testing
from modelhost.config import load_config

pytestmark = pytest.mark.e2e

ROW = testing.iris_rows(1)[0]
CSV_ROW = ",".join(str(value) for value in ROW)

MODEL_FN = """
import io
import json
import os

import joblib
import numpy as np


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))
"""

SCRIPTS = {
    "model-fn-only": "",  # the toolkit's default input_fn, predict_fn and output_fn
    # the toolkit decodes JSON and CSV bodies to str before input_fn; other types stay bytes
    "text-input": """
def input_fn(input_data, content_type):
    if content_type == "application/x-npy":
        return np.load(io.BytesIO(input_data)).reshape(1, -1)
    text = io.StringIO(input_data)
    if content_type == "text/csv":
        return np.genfromtxt(text, delimiter=",").reshape(1, -1)
    return np.array(json.load(text)).reshape(1, -1)


def output_fn(prediction, accept):
    return json.dumps(prediction.tolist()), "application/json"
""",
    # the accept switch of AWS's scikit-learn featurizer example
    "accept-switch": """
def output_fn(prediction, accept):
    if accept == "application/json":
        return json.dumps({"instances": prediction.tolist()}), accept
    if accept == "text/csv":
        return ",".join(str(label) for label in prediction), accept
    raise RuntimeError("{} accept type is not supported by this script.".format(accept))
""",
    # toolkit 1.10's handler functions may take the request's context as a last argument
    "with-context": """
def model_fn(model_dir, context):
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def input_fn(input_data, content_type, context):
    return np.genfromtxt(io.StringIO(input_data), delimiter=",").reshape(1, -1)


def predict_fn(data, model, context):
    return model.predict(data)


def output_fn(prediction, accept, context):
    attributes = context.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes")
    return json.dumps({"labels": prediction.tolist(), "attributes": attributes}), accept
""",
    # the toolkit answers a BaseInferenceToolkitError with its status_code
    "toolkit-errors": """
from sagemaker_inference import errors


class NotAllowed(errors.BaseInferenceToolkitError):  # as the toolkit's own test subclasses it
    def __init__(self, status_code, message):
        self.status_code, self.message, self.phrase = status_code, message, "Forbidden"


def input_fn(input_data, content_type):
    if content_type == "application/x-npy":
        raise NotAllowed(403, "this tenant may not send arrays")
    if content_type != "text/csv":
        raise errors.GenericInferenceToolkitError(415, "send text/csv")
    raise errors.GenericInferenceToolkitError(400, "this row has 4 values; send 5")
""",
    # toolkit 1.10's hooks around model_fn: before it, and after it with the model
    "load-hooks": """
STEPS = []


def pre_model_fn(model_dir):
    STEPS.append("pre_model_fn")


def model_warmup_fn(model_dir, model):
    model.predict(np.zeros((1, 4)))
    STEPS.append("model_warmup_fn")


def output_fn(prediction, accept):
    return json.dumps(STEPS), "application/json"
""",
    "slow": """
def transform_fn(model, input_data, content_type, accept):
    import time

    time.sleep(10)
    return "late"
""",
    "body-size": """
def transform_fn(model, input_data, content_type, accept):
    return str(len(input_data)), "text/plain"
""",
}


# what a script vendoring the toolkit's errors module finds in code/: its exception's attributes
TOOLKIT_ERRORS = """
class BaseInferenceToolkitError(Exception):
    def __init__(self, status_code, message, phrase):
        self.status_code, self.message, self.phrase = status_code, message, phrase
        super().__init__(status_code, message, phrase)


class GenericInferenceToolkitError(BaseInferenceToolkitError):
    def __init__(self, status_code, message=None, phrase=None):
        super().__init__(status_code, message or "Invalid Request", phrase or message)
"""


# MMS's handler convention, as the MMS and TorchServe based images run it
ATTRIBUTES_HANDLER = """
def handle(data, context):
    return [context.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes")]
"""


def write_model(store: Path, name: str, script: str) -> None:
    folder = store / name
    (folder / "code").mkdir(parents=True)
    testing.iris_logreg(folder / "model.joblib")
    (folder / "code" / "inference.py").write_text(MODEL_FN + textwrap.dedent(script))
    package = folder / "code" / "sagemaker_inference"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "errors.py").write_text(TOOLKIT_ERRORS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testing.RunningServer]:
    root = tmp_path_factory.mktemp("toolkit")
    for name, script in SCRIPTS.items():
        write_model(root / "store", name, script)
    (root / "store" / "mms-attributes").mkdir()
    (root / "store" / "mms-attributes" / "handler.py").write_text(ATTRIBUTES_HANDLER)
    args = testing.serve_args(root / "store", root / "cache", workers=1)
    with testing.RunningServer(args, root) as running:
        yield running


@pytest.fixture
def http(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def invoke(http: httpx.Client, model: str, body: bytes, **headers: str) -> httpx.Response:
    headers = {key.replace("_", "-"): value for key, value in headers.items()}
    headers["X-Amzn-SageMaker-Target-Model"] = model
    return http.post("/invocations", content=body, headers=headers)


def npy(row: list[float]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array(row))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/csv", CSV_ROW.encode()),
        ("application/json", json.dumps(ROW).encode()),
        ("application/x-npy", npy(ROW)),
    ],
)
def test_input_fn_gets_csv_and_json_as_text(
    http: httpx.Client, content_type: str, body: bytes
) -> None:
    """The Transformer decodes text/csv and application/json bodies as UTF-8 before input_fn;
    scripts read them with io.StringIO, and .npy bodies with io.BytesIO."""
    response = invoke(http, "text-input", body, content_type=content_type)
    assert response.status_code == 200, response.text
    assert response.json() == [0]


@pytest.mark.parametrize("accept", ["*/*", ""])
def test_output_fn_gets_the_default_accept_for_any(http: httpx.Client, accept: str) -> None:
    """Accept */* (what curl and requests send) or empty reaches output_fn as application/json,
    the toolkit's SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT default."""
    response = invoke(
        http, "accept-switch", CSV_ROW.encode(), content_type="text/csv", accept=accept
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"instances": [0]}
    assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    "attributes", ["c000b4f9-df62-4c85-a0bf-7c525f9104a4", "accept_eula=true", "a=1; b"]
)
def test_custom_attributes_reach_the_handler_verbatim(http: httpx.Client, attributes: str) -> None:
    """InvokeEndpoint's CustomAttributes is opaque and forwarded verbatim (AWS's example is a
    trace ID): a handler reads the header from its context as the caller wrote it."""
    headers = {"X-Amzn-SageMaker-Custom-Attributes": attributes}
    response = invoke(http, "mms-attributes", b"{}", content_type="application/json", **headers)
    assert response.status_code == 200, response.text
    assert response.text == attributes


def test_handler_functions_taking_a_context(http: httpx.Client) -> None:
    """model_fn, input_fn, predict_fn and output_fn with a context argument, as the toolkit's
    _run_handler_function calls them; the context carries the request's custom attributes."""
    attributes = "c000b4f9-df62-4c85-a0bf-7c525f9104a4"  # a trace ID, AWS's example
    response = invoke(
        http,
        "with-context",
        CSV_ROW.encode(),
        content_type="text/csv",
        accept="application/json",
        X_Amzn_SageMaker_Custom_Attributes=attributes,
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"labels": [0], "attributes": attributes}


@pytest.mark.parametrize(
    ("content_type", "status", "message"),
    [
        ("text/csv", 400, "this row has 4 values; send 5"),
        ("application/json", 415, "send text/csv"),
        ("application/x-npy", 403, "this tenant may not send arrays"),
    ],
)
def test_toolkit_error_answers_its_status_code(
    http: httpx.Client, content_type: str, status: int, message: str
) -> None:
    """A GenericInferenceToolkitError(status_code, message) from a hook answers status_code,
    as the Transformer's handle_error sets it, with the script's message."""
    response = invoke(http, "toolkit-errors", CSV_ROW.encode(), content_type=content_type)
    assert response.status_code == status, response.text
    assert response.json()["message"] == message


def test_max_payload_in_mb_raises_the_request_limit(tmp_path: Path) -> None:
    """SAGEMAKER_MAX_PAYLOAD_IN_MB (batch transform's MaxPayloadInMB) is the toolkit's
    max_request_size, in MiB: a 7 MiB body passes where it is 8."""
    write_model(tmp_path / "store", "body-size", SCRIPTS["body-size"])
    args = testing.serve_args(tmp_path / "store", tmp_path / "cache", workers=1)
    env = {**os.environ, "SAGEMAKER_MAX_PAYLOAD_IN_MB": "8"}
    body = b"0" * (7 * 1024 * 1024)
    with (
        testing.RunningServer(args, tmp_path, env=env) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        response = invoke(client, "body-size", body, content_type="application/octet-stream")
    assert response.status_code == 200, response.text[:300]
    assert response.text == str(len(body))


@pytest.mark.parametrize(
    ("accept", "body"), [("application/json", b"[0]"), ("text/csv", b"0\n"), ("*/*", b"[0]")]
)
def test_default_output_fn_encodes_as_the_toolkit(
    http: httpx.Client, accept: str, body: bytes
) -> None:
    """A script with model_fn alone answers as the scikit-learn container does: its
    default_output_fn encodes the predictions themselves, a JSON array for application/json."""
    response = invoke(
        http, "model-fn-only", CSV_ROW.encode(), content_type="text/csv", accept=accept
    )
    assert response.status_code == 200, response.text
    assert response.content == body
    assert response.headers["content-type"] == accept.replace("*/*", "application/json")


def test_pre_model_fn_and_model_warmup_fn_run_around_model_fn(http: httpx.Client) -> None:
    """The Transformer calls pre_model_fn(model_dir) before model_fn and
    model_warmup_fn(model_dir, model) after it, once, at the model's load."""
    response = invoke(http, "load-hooks", CSV_ROW.encode(), content_type="text/csv")
    assert response.status_code == 200, response.text
    assert response.json() == ["pre_model_fn", "model_warmup_fn"]


@pytest.mark.parametrize(("value", "size"), [("8", 8 << 20), ("6MB", 6_000_000)])
def test_max_payload_in_mb_takes_a_unit_when_given_one(
    tmp_path: Path, value: str, size: int
) -> None:
    """A bare number is MiB, as the toolkit reads it; a size with its unit is read as written."""
    environ = {"SAGEMAKER_MAX_PAYLOAD_IN_MB": value}
    assert load_config({}, environ, tmp_path).max_request_bytes == size


def test_submit_directory_is_reported_as_not_fetched(tmp_path: Path) -> None:
    """The SDK points SAGEMAKER_SUBMIT_DIRECTORY at a sourcedir.tar.gz that the toolkit's
    containers fetch; here each model's own code/ is its script, and the start says so."""
    environ = {"SAGEMAKER_SUBMIT_DIRECTORY": "s3://bucket/churn/sourcedir.tar.gz"}
    (notice,) = load_config({}, environ, tmp_path).notices
    assert notice.startswith("SAGEMAKER_SUBMIT_DIRECTORY=s3://bucket/churn/sourcedir.tar.gz")
    assert "code/inference.py" in notice


def test_model_server_timeout_seconds_bounds_a_request(tmp_path: Path) -> None:
    """SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS, which the toolkit hands the model server as its
    response timeout, wins over SAGEMAKER_MODEL_SERVER_TIMEOUT: a slower answer is a 504."""
    write_model(tmp_path / "store", "slow", SCRIPTS["slow"])
    args = testing.serve_args(tmp_path / "store", tmp_path / "cache", workers=1)
    env = {
        **os.environ,
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "120",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "1",
    }
    with (
        testing.RunningServer(args, tmp_path, env=env) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        response = invoke(client, "slow", b"", content_type="text/csv")
    assert response.status_code == 504, response.text
