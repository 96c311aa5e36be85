"""SageMaker's variables that change how each model answers, on a real server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.fronts import hit_with_the_main_process_stopped, raw_request

from modelhost import testing

pytestmark = pytest.mark.e2e

CSV_ROW = ",".join(str(value) for value in testing.iris_rows(1)[0])

SCRIPT = """
import json
import os

import joblib


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def output_fn(prediction, accept):
    return json.dumps({{"script": "{name}", "labels": prediction.tolist()}}), "application/json"
"""


ACCEPT_SWITCH = """
import os

import joblib


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def output_fn(prediction, accept):
    if accept == "text/csv":
        return ",".join(str(label) for label in prediction), accept
    return "[]", "application/json"
"""


def scripted(store: Path, model: str, *scripts: str) -> None:
    """An iris folder whose code/ holds `scripts`, each answering with its own name."""
    testing.iris_logreg(store / model / "model.joblib")
    (store / model / "code").mkdir()
    for name in scripts:
        (store / model / "code" / name).write_text(SCRIPT.format(name=name))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testing.RunningServer]:
    root = tmp_path_factory.mktemp("environment")
    scripted(root / "store", "both", "inference.py", "predictor.py")
    scripted(root / "store", "inference-only", "inference.py")
    scripted(root / "store", "predictor-only", "predictor.py")
    testing.iris_logreg(root / "store" / "iris.joblib")
    testing.iris_logreg(root / "store" / "accept-switch" / "model.joblib")
    (root / "store" / "accept-switch" / "code").mkdir()
    (root / "store" / "accept-switch" / "code" / "inference.py").write_text(ACCEPT_SWITCH)
    args = testing.serve_args(root / "store", root / "cache", workers=1)
    env = {
        **os.environ,
        "SAGEMAKER_PROGRAM": "predictor.py",
        "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "text/csv",
    }
    with testing.RunningServer(args, root, env=env) as running:
        yield running


@pytest.fixture
def http(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def invoke(http: httpx.Client, model: str, **headers: str) -> httpx.Response:
    """POST /invocations with a CSV row, and no Accept header unless given."""
    headers = {"content-type": "text/csv", "X-Amzn-SageMaker-Target-Model": model, **headers}
    request = http.build_request("POST", "/invocations", content=CSV_ROW, headers=headers)
    if "accept" not in headers:
        del request.headers["accept"]  # httpx's own */*
    return http.send(request)


@pytest.mark.parametrize(
    ("model", "script"),
    [
        ("both", "predictor.py"),
        ("predictor-only", "predictor.py"),
        ("inference-only", "inference.py"),
    ],
)
def test_sagemaker_program_names_the_script_in_code(
    http: httpx.Client, model: str, script: str
) -> None:
    """The toolkit imports SAGEMAKER_PROGRAM from the model's code/ folder; a folder without
    that script keeps its inference.py."""
    response = invoke(http, model)
    assert response.status_code == 200, response.text
    assert response.json() == {"script": script, "labels": [0]}


@pytest.mark.parametrize(("model", "body"), [("iris.joblib", "0\n"), ("accept-switch", "0")])
def test_default_invocations_accept_answers_requests_without_accept(
    http: httpx.Client, model: str, body: str
) -> None:
    """SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT=text/csv, as AWS's inference-pipeline examples set
    it: a request with no Accept is answered in CSV, by a built-in handler or by output_fn."""
    response = invoke(http, model)
    assert response.status_code == 200, response.text
    assert (response.text, response.headers["content-type"]) == (body, "text/csv")


@pytest.mark.parametrize(("model", "body"), [("iris.joblib", "0\n"), ("accept-switch", "0")])
def test_an_accept_of_any_type_is_answered_in_the_default(
    http: httpx.Client, model: str, body: str
) -> None:
    """`Accept: */*`, which curl and most clients send, reads as none, as the toolkit reads it."""
    response = invoke(http, model, accept="*/*")
    assert response.status_code == 200, response.text
    assert (response.text, response.headers["content-type"]) == (body, "text/csv")


def test_a_given_accept_wins_over_the_default(http: httpx.Client) -> None:
    response = invoke(http, "iris.joblib", accept="application/json")
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0]}


def test_a_front_answers_without_accept_in_the_default(
    tmp_path: Path, server: testing.RunningServer
) -> None:
    """With --fronts 2, a hit a front answers itself takes the same default as the main process,
    without an Accept and with `*/*`."""
    store = Path(server.argv[server.argv.index("--model-store") + 1])
    args = testing.serve_args(store, tmp_path / "cache", workers=1)
    env = {**os.environ, "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "text/csv"}
    with testing.RunningServer([*args, "--fronts", "2"], tmp_path, env=env) as fronted:
        with httpx.Client(base_url=fronted.url, timeout=60) as client:
            assert invoke(client, "iris.joblib").status_code == 200  # loaded: a hit from now on
        head = ["content-type: text/csv", "x-amzn-sagemaker-target-model: iris.joblib"]
        without = raw_request("/invocations", CSV_ROW.encode(), *head)
        any_type = raw_request("/invocations", CSV_ROW.encode(), *head, "accept: */*")
        answers = [hit_with_the_main_process_stopped(fronted, r) for r in (without, any_type)]
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 200 "), answer
        assert b"\r\ncontent-type: text/csv" in answer, answer
        assert answer.endswith(b"\r\n\r\n0\n"), answer
