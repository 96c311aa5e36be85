"""Tensors of any rank through the OIP wrapper: a handler that takes them gets them with their
shape; a model of rows refuses other ranks and says what it takes. No sockets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelhost import testing
from modelhost.errors import BadRequestBody
from modelhost.workers.handlers import load_handler
from modelhost.workers.handlers.base import Handler, InferReply, InferRequest
from modelhost.workers.oip_media import oip_media_type

SHAPES_HANDLER = '''"""For each input TorchServe's KServe v2 envelope hands it: its shape."""

import numpy as np


def handle(data, context):
    if data is None:
        return None
    return [list(np.asarray(item["data"]).shape) for item in data]
'''
MAR_MANIFEST = {"model": {"modelName": "shapes", "modelVersion": "1.0", "handler": "handler.py"}}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> Handler:
    folder = tmp_path_factory.mktemp("shapes")
    (folder / "handler.py").write_text(SHAPES_HANDLER)
    (folder / "MAR-INF").mkdir()
    (folder / "MAR-INF" / "MANIFEST.json").write_text(json.dumps(MAR_MANIFEST))
    return load_handler(folder, "shapes")


@pytest.fixture(scope="module")
def iris(tmp_path_factory: pytest.TempPathFactory) -> Handler:
    return load_handler(testing.iris_logreg(tmp_path_factory.mktemp("iris") / "m.joblib"), "iris")


def oip(document: dict[str, object], version: str = "") -> InferRequest:
    params = {"oip_model_name": "shapes", "oip_model_version": version}
    return InferRequest(json.dumps(document).encode(), oip_media_type(), oip_media_type(), params)


def image(shape: list[int], nested: bool = True) -> dict[str, object]:
    flat = [float(i) for i in range(shape[0] * shape[1] * shape[2])]
    rows = [flat[i : i + shape[2]] for i in range(0, len(flat), shape[2])]
    planes = [rows[i : i + shape[1]] for i in range(0, len(rows), shape[1])]
    data = planes if nested else flat
    return {"name": "input-0", "datatype": "FP32", "shape": shape, "data": data}


def test_torchserve_handler_gets_rank_3(shapes: Handler) -> None:
    """A TorchServe handler gets a rank 3 tensor with its shape.

    TorchServe's v2 MNIST request: one [1, 28, 28] input, answered as its envelope does."""
    reply = shapes.infer(oip({"id": "r-1", "inputs": [image([1, 28, 28])]}))
    assert json.loads(reply.body) == {
        "id": "r-1",
        "model_name": "shapes",
        "model_version": "1.0",
        "outputs": [{"name": "input-0", "datatype": "INT64", "shape": [3], "data": [1, 28, 28]}],
    }


def test_flat_data_is_unflattened_row_major(tmp_path: Path) -> None:
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "handler.py").write_text(
        "def handle(data, context):\n"
        "    return None if data is None else [item['data'] for item in data]\n"
    )
    reply = load_handler(folder, "echo").infer(oip({"inputs": [image([2, 2, 3], nested=False)]}))
    (output,) = json.loads(reply.body)["outputs"]
    assert output["data"] == [float(i) for i in range(12)]  # flattened back, in the same order
    nested = image([2, 2, 3])
    reply = load_handler(folder, "echo").infer(oip({"inputs": [nested]}))
    assert json.loads(reply.body)["outputs"][0]["data"] == output["data"]


def test_the_path_version_wins_over_the_manifests(shapes: Handler) -> None:
    reply = shapes.infer(oip({"inputs": [image([1, 2, 2])]}, version="1"))
    assert json.loads(reply.body)["model_version"] == "1"


def test_row_model_refuses_rank_3(iris: Handler) -> None:
    """A model of rows refuses rank 3 and says what it takes."""
    with pytest.raises(BadRequestBody) as refused:
        iris.infer(oip({"inputs": [image([1, 28, 28])]}))
    message = str(refused.value)
    assert "input-0 has shape [1, 28, 28]" in message
    assert "[rows, features]" in message
    assert "[1, 784]" in message  # the way out: the same values as rows


def test_a_model_of_rows_still_takes_rank_2(iris: Handler) -> None:
    rows = testing.iris_rows(2)
    document = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [2, 4], "data": rows}]}
    reply = iris.infer(oip(document))
    assert json.loads(reply.body)["outputs"][0]["data"] == [0, 0]


def test_a_model_of_rows_answers_in_its_own_datatype(tmp_path: Path) -> None:
    """A float32 network's outputs are FP32, as Triton answers them, and a batch answers as
    each request alone."""
    torch_iris = load_handler(testing.torch_iris(tmp_path / "iris.pt"), "iris")
    rows = testing.iris_rows(2)
    document = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [2, 4], "data": rows}]}
    alone = json.loads(torch_iris.infer(oip(document)).body)["outputs"][0]
    replies = torch_iris.infer_batch([oip(document)] * 2)
    batched = [json.loads(r.body) for r in replies if isinstance(r, InferReply)]
    assert alone["datatype"] == "FP32" and alone["shape"] == [2, 3]
    assert [b["outputs"][0] for b in batched] == [alone, alone]


SAGEMAKER_SHAPES = '''"""Answers the shape of the instances it is sent."""

import json

import numpy as np


def model_fn(model_dir):
    return None


def input_fn(body, content_type):
    return np.asarray(json.loads(body)["instances"])


def predict_fn(instances, model):
    return list(instances.shape)


def output_fn(prediction, accept):
    return json.dumps({"predictions": prediction}), "application/json"
'''


def test_sagemaker_code_gets_rank_3(tmp_path: Path) -> None:
    """SageMaker code gets one rank 3 tensor in its shape."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "inference.py").write_text(SAGEMAKER_SHAPES)
    reply = load_handler(tmp_path, "sm").infer(oip({"inputs": [image([1, 28, 28])]}))
    assert json.loads(reply.body)["outputs"][0]["data"] == [1, 28, 28]
