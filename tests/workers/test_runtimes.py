"""The built-in handlers of the optional runtimes, on real models trained on iris in the test."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost import testing
from modelhost.errors import BadRequestBody, ModelLoadError
from modelhost.workers.handlers import load_handler
from modelhost.workers.handlers.base import Handler, InferReply, InferRequest
from modelhost.workers.handlers.select import LoadSpec
from modelhost.workers.warmup import warm_up

ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]  # a setosa (0) and a virginica (2)


MAKERS: dict[str, Callable[[Path], Path]] = {
    "model.ubj": testing.xgboost_iris,
    "model.json": testing.xgboost_iris,
    "model.bst": testing.xgboost_iris,
    "model.txt": testing.lightgbm_iris,
    "model.lgb": testing.lightgbm_iris,
    "model.onnx": testing.onnx_iris,
    "model.pt": testing.torch_iris,
    "model.pt2": testing.torch_iris,
}


@pytest.fixture(params=list(MAKERS), scope="module")
def model_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    name = str(request.param)
    if name.startswith("model.pt"):
        request.getfixturevalue("torch_installed")
    return MAKERS[name](tmp_path_factory.mktemp("runtime") / name)


def request_of(body: object, **params: str) -> InferRequest:
    return InferRequest(json.dumps(body).encode(), params=params)


def answer(reply: InferReply | Exception) -> Any:
    assert isinstance(reply, InferReply), reply
    return json.loads(reply.body)["predictions"]


def classes(handler: Handler, rows: list[list[float]]) -> list[int]:
    predictions = np.asarray(answer(handler.infer(request_of(rows))))
    return (predictions.argmax(axis=1) if predictions.ndim == 2 else predictions).tolist()


def test_unbatched_predicts_iris(model_file: Path) -> None:
    handler = load_handler(model_file, model_file.name, LoadSpec(threads=1))
    assert handler.batches
    assert classes(handler, ROWS) == [0, 2]


def test_batched_answers_each_request_as_alone(model_file: Path) -> None:
    handler = load_handler(model_file, model_file.name)
    requests = [request_of(ROWS[0]), request_of({"instances": ROWS}), request_of("nonsense")]
    replies = handler.infer_batch(requests)
    assert answer(replies[0]) == answer(handler.infer(requests[0]))
    assert answer(replies[1]) == answer(handler.infer(requests[1]))
    assert isinstance(replies[2], BadRequestBody)


def test_wrong_width_fails_only_its_request(model_file: Path) -> None:
    """A batch with a wrong width fails only that request."""
    handler = load_handler(model_file, model_file.name)
    replies = handler.infer_batch([request_of(ROWS), request_of([1.0, 2.0])])
    assert len(answer(replies[0])) == 2
    assert isinstance(replies[1], BadRequestBody)
    message = "the model refused the input" if model_file.suffix == ".pt" else "4 features per row"
    assert message in str(replies[1])


@pytest.mark.parametrize("name", ["model.ubj", "model.txt", "model.onnx"])
def test_classifiers_give_probabilities(name: str, tmp_path: Path) -> None:
    handler = load_handler(MAKERS[name](tmp_path / name), name)
    probabilities = np.asarray(answer(handler.infer(request_of(ROWS, method="predict_proba"))))
    assert probabilities.shape == (2, 3)
    assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    assert answer(handler.infer(request_of(ROWS))) == [0, 2]


def test_xgboost_regressor_refuses_predict_proba(tmp_path: Path) -> None:
    path = testing.xgboost_iris(tmp_path / "reg.ubj", objective="reg:squarederror")
    handler = load_handler(path, "reg.ubj")
    assert len(answer(handler.infer(request_of(ROWS)))) == 2
    with pytest.raises(BadRequestBody, match=r"reg:squarederror\) gives no probabilities"):
        handler.infer(request_of(ROWS, method="predict_proba"))


def test_torch_export_answers_logits(tmp_path: Path, torch_installed: None) -> None:
    handler = load_handler(testing.torch_iris(tmp_path / "m.pt2"), "m.pt2")
    logits = answer(handler.infer(request_of(ROWS)))
    assert np.asarray(logits).shape == (2, 3)


def test_non_xgboost_json_is_refused(tmp_path: Path) -> None:
    """A JSON file that is no XGBoost model is refused."""
    path = tmp_path / "config.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ModelLoadError, match="config.json, which is not an XGBoost"):
        load_handler(path, "config.json")


def test_a_lightgbm_text_bst_loads_as_lightgbm(tmp_path: Path) -> None:
    """ModelMesh's LightGBM models are text boosters named .bst (its example mushroom.bst)."""
    path = testing.lightgbm_iris(tmp_path / "mushroom.bst")
    assert classes(load_handler(path, "mushroom.bst"), ROWS) == [0, 2]


def test_folder_picks_its_model(tmp_path: Path) -> None:
    """A folder picks its model among other JSON and text."""
    (tmp_path / "README.txt").write_text("how to use this model\n")
    (tmp_path / "labels.json").write_text('["setosa", "versicolor", "virginica"]')
    testing.onnx_iris(tmp_path / "model.onnx")
    assert classes(load_handler(tmp_path, "m"), ROWS) == [0, 2]


def test_the_manifest_handler_and_model_file_choose(tmp_path: Path) -> None:
    testing.onnx_iris(tmp_path / "model.onnx")
    testing.xgboost_iris(tmp_path / "trees.data.json")
    handler = load_handler(tmp_path, "m", LoadSpec("xgboost", "trees.data.json"))
    assert type(handler.inner).__name__ == "XGBoostHandler"  # inside the OIP wrapper
    with pytest.raises(ModelLoadError, match="neither a built-in handler"):
        load_handler(tmp_path, "m", LoadSpec("tensorrt"))
    with pytest.raises(ModelLoadError, match="outside the artifact"):
        load_handler(tmp_path, "m", LoadSpec("onnx", "../elsewhere.onnx"))


def test_the_manifest_handler_may_be_a_python_file(tmp_path: Path) -> None:
    (tmp_path / "serve.py").write_text(
        "def answer(data, context):\n    return [{'from': 'serve.py'} for _ in data]\n"
    )
    testing.onnx_iris(tmp_path / "model.onnx")
    handler = load_handler(tmp_path, "m", LoadSpec("serve.py:answer", root=tmp_path))
    try:
        assert json.loads(handler.infer(request_of(ROWS)).body) == {"from": "serve.py"}
    finally:
        handler.close()


@pytest.mark.parametrize(
    ("name", "module", "extra"),
    [
        ("model.ubj", "xgboost", "xgboost"),
        ("model.txt", "lightgbm", "lightgbm"),
        ("model.onnx", "onnxruntime", "onnx"),
        ("model.pt", "torch", "torch"),
    ],
)
def test_a_missing_runtime_names_the_extra(
    name: str, module: str, extra: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / name
    if module == "torch":
        path.write_bytes(b"PK\x03\x04")  # never read: the import fails first
    else:
        MAKERS[name](path)
    monkeypatch.setitem(sys.modules, module, None)  # what `import` sees of a missing package
    with pytest.raises(ModelLoadError, match=rf"pip install 'modelhost\[{extra}\]'"):
        load_handler(path, name)


def test_warm_up_failure_closes_the_handler(tmp_path: Path) -> None:
    handler = load_handler(testing.onnx_iris(tmp_path / "model.onnx"), "m")
    (tmp_path / "good.json").write_text(json.dumps(ROWS))
    (tmp_path / "bad.csv").write_text("1,2\n")
    warm_up(handler, "m", tmp_path, ["good.json"])
    with pytest.raises(ModelLoadError, match=r"warm-up sample bad.csv failed: BadRequestBody"):
        warm_up(handler, "m", tmp_path, ["good.json", "bad.csv"])
    with pytest.raises(ModelLoadError, match="holds no file ../x.json"):
        warm_up(handler, "m", tmp_path, ["../x.json"])


BODIES = st.one_of(
    st.lists(st.sampled_from(ROWS), min_size=1, max_size=4),  # rows
    st.sampled_from([[1.0, 2.0], "nonsense", [], {"instances": ROWS}, [[1.0, None, 2.0, 3.0]]]),
)


@settings(max_examples=40, deadline=None)
@given(bodies=st.lists(BODIES, min_size=1, max_size=6), methods=st.data())
def test_a_batch_answers_each_request_exactly_as_alone(
    bodies: list[object], methods: st.DataObject, sklearn_handler: Handler
) -> None:
    method = st.sampled_from(["predict", "predict_proba", "bogus"])
    requests = [request_of(body, method=methods.draw(method)) for body in bodies]
    replies = sklearn_handler.infer_batch(requests)
    assert len(replies) == len(requests)
    for request, reply in zip(requests, replies, strict=True):
        try:
            alone: InferReply | Exception = sklearn_handler.infer(request)
        except Exception as error:  # noqa: BLE001
            alone = error
        if isinstance(alone, Exception):
            assert type(reply) is type(alone)
        else:  # a stacked call may differ in the last bit of a float (BLAS blocks rows)
            assert isinstance(reply, InferReply) and reply.content_type == alone.content_type
            assert np.allclose(answer(reply), answer(alone), rtol=1e-12, atol=0)


@pytest.fixture(scope="module")
def sklearn_handler(tmp_path_factory: pytest.TempPathFactory) -> Handler:
    path = testing.iris_logreg(tmp_path_factory.mktemp("sk") / "model.joblib")
    return load_handler(path, "model.joblib")
