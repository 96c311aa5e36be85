"""TensorFlow SavedModels served by a real server and real workers: a folder, a SageMaker-style
archive of numbered versions (the highest served), answers equal to the scikit-learn model the
graph was built from; a signature the built-in handler cannot feed is refused with why, and the
worker goes on serving other runtimes after TensorFlow was imported in it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from helpers.missing import require_module
from helpers.serving import Servers, invoke

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = testing.iris_rows(150)[::7]  # every class


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_module("tensorflow")
    root = tmp_path_factory.mktemp("tf-store")
    # SavedModels cost a TensorFlow import in a child process: one for both, the versions copies
    testing.tensorflow_irises({root / "tf/iris": 1, root / "tf/two-inputs": 2})
    versions = root / ".src/versions"
    shutil.copytree(root / "tf/two-inputs", versions / "1")  # older; would not load
    shutil.copytree(root / "tf/iris", versions / "2")
    testing.tar_gz_of(versions, root / "tf/versions.tar.gz")
    testing.iris_logreg(root / "sklearn/iris.joblib")
    return root


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers) -> testing.RunningServer:
    return serve(store, workers=1, memory_budget="4GiB", batch_size=8)


@pytest.fixture(scope="module")
def http(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


@pytest.mark.parametrize("name", ["tf/iris", "tf/versions.tar.gz"])
def test_a_saved_model_answers_as_its_scikit_learn_source(http: httpx.Client, name: str) -> None:
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    source = LogisticRegression(max_iter=1000).fit(*load_iris(return_X_y=True))
    classes = invoke(http, name, {"instances": ROWS})
    assert classes.status_code == 200, classes.text
    assert classes.json()["predictions"] == source.predict(ROWS).tolist()
    scores = invoke(http, name, ROWS, method="predict_proba")
    assert scores.status_code == 200, scores.text
    expected = source.predict_proba(ROWS)
    np.testing.assert_allclose(scores.json()["predictions"], expected, rtol=1e-4, atol=1e-6)


def test_the_first_saved_model_is_not_charged_tensorflow(
    http: httpx.Client, server: testing.RunningServer
) -> None:
    """Importing TensorFlow holds about 140 MB, which stays when the model goes: the worker's."""
    assert invoke(http, "tf/iris", ROWS).status_code == 200
    (first, *_) = [e for e in server.events("load") if e["model"].startswith("tf/")]
    assert first["bytes"] < 32 * 2**20, first


def test_metadata_names_the_signatures_input_and_its_types(http: httpx.Client) -> None:
    """The serving signature's input name and dtype, and each output as OIP infer answers it."""
    assert http.post("/v2/repository/models/tf/iris/load").status_code == 200
    metadata = http.get("/v2/models/tf/iris").json()
    assert metadata["inputs"] == [{"name": "features", "datatype": "FP32", "shape": [-1, 4]}]
    assert metadata["outputs"] == [
        {"name": "predict", "datatype": "INT64", "shape": [-1]},
        {"name": "predict_proba", "datatype": "FP32", "shape": [-1, 3]},
    ]
    given = {"name": "features", "datatype": "FP32", "shape": [len(ROWS), 4], "data": ROWS}
    for output in metadata["outputs"]:
        body = {"inputs": [given], "outputs": [{"name": output["name"]}]}
        response = http.post("/v2/models/tf/iris/infer", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["outputs"][0]["datatype"] == output["datatype"]
    config = http.get("/v2/models/tf/iris/config").json()  # Triton's get_model_config
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("features", "TYPE_FP32", [4])
    ]


def test_rows_of_the_wrong_width_get_a_400(http: httpx.Client) -> None:
    response = invoke(http, "tf/iris", [[1.0, 2.0]])
    assert response.status_code == 400
    assert "4 features" in response.json()["message"]


def test_a_signature_of_two_inputs_is_refused_with_what_to_do(http: httpx.Client) -> None:
    response = invoke(http, "tf/two-inputs", ROWS)
    assert response.status_code == 500
    message = response.json()["message"]
    assert "takes 2 inputs" in message and "handler.py" in message


def test_the_worker_serves_other_runtimes_beside_tensorflow(http: httpx.Client) -> None:
    assert invoke(http, "tf/iris", ROWS).status_code == 200
    response = invoke(http, "sklearn/iris.joblib", ROWS)
    assert response.status_code == 200, response.text
    assert len(response.json()["predictions"]) == len(ROWS)
