"""SageMaker's variables that change how each model's script runs, on a real server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

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
    args = testing.serve_args(root / "store", root / "cache", workers=1)
    env = {**os.environ, "SAGEMAKER_PROGRAM": "predictor.py"}
    with testing.RunningServer(args, root, env=env) as running:
        yield running


@pytest.fixture
def http(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def invoke(http: httpx.Client, model: str, **headers: str) -> httpx.Response:
    headers = {"content-type": "text/csv", "X-Amzn-SageMaker-Target-Model": model, **headers}
    return http.post("/invocations", content=CSV_ROW, headers=headers)


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
