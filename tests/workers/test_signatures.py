"""Each handler's signature, and that a request built from it is answered as it says."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.linear_model import LinearRegression, LogisticRegression

from modelhost import testing
from modelhost.errors import ModelLoadError
from modelhost.workers.handlers import load_handler
from modelhost.workers.handlers.base import Handler, InferRequest
from modelhost.workers.oip import DTYPES, datatype_of
from modelhost.workers.oip_media import oip_media_type
from modelhost.workers.signatures import DATATYPES, Signature, TensorSpec, declared, merged

FEATURES = TensorSpec("input-0", "FP64", (-1, 4))
LABELS = TensorSpec("predict", "INT64", (-1,))
PROBABILITIES = TensorSpec("predict_proba", "FP64", (-1, 3))


def string_labels(path: Path) -> Path:
    data = load_iris()
    model = LogisticRegression(max_iter=1000).fit(data.data, data.target_names[data.target])
    return testing.dump(model, path)


def regressor(path: Path) -> Path:
    x, y = load_iris(return_X_y=True)
    return testing.dump(LinearRegression().fit(x[:, :3], x[:, 3] + y), path)


def xgboost_regressor(path: Path) -> Path:
    return testing.xgboost_iris(path, "reg:squarederror")


MAKERS: dict[str, Callable[[Path], Path]] = {
    "iris.joblib": testing.iris_logreg,
    "labels.joblib": string_labels,
    "regressor.joblib": regressor,
    "forest.joblib": lambda path: testing.random_forest(path, target_bytes=200_000),
    "iris.onnx": testing.onnx_iris,
    "iris.ubj": testing.xgboost_iris,
    "regressor.ubj": xgboost_regressor,
    "iris.txt": testing.lightgbm_iris,
    "iris.pt2": testing.torch_iris,
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("signatures")


def handler_of(folder: Path, name: str) -> Handler:
    path = folder / name
    if not path.exists():
        MAKERS[name](path)
    return load_handler(path, name)


def test_an_iris_classifier_takes_four_features_and_answers_labels(folder: Path) -> None:
    signature = handler_of(folder, "iris.joblib").signature()
    assert signature == Signature((FEATURES,), (LABELS, PROBABILITIES))


def test_string_labels_are_bytes(folder: Path) -> None:
    signature = handler_of(folder, "labels.joblib").signature()
    assert signature is not None
    assert signature.outputs == (TensorSpec("predict", "BYTES", (-1,)), PROBABILITIES)


def test_a_regressor_answers_fp64_and_no_probabilities(folder: Path) -> None:
    signature = handler_of(folder, "regressor.joblib").signature()
    assert signature == Signature(
        (TensorSpec("input-0", "FP64", (-1, 3)),), (TensorSpec("predict", "FP64", (-1,)),)
    )


def test_an_onnx_model_declares_its_graphs_input(folder: Path) -> None:
    """skl2onnx names the input X, of float; the outputs are named after the methods, as the
    infer path answers them, and the ZipMap's probabilities come as FP64."""
    signature = handler_of(folder, "iris.onnx").signature()
    assert signature == Signature((TensorSpec("X", "FP32", (-1, 4)),), (LABELS, PROBABILITIES))


def test_xgboost_takes_fp32_and_answers_its_own_types(folder: Path) -> None:
    classifier = handler_of(folder, "iris.ubj").signature()
    assert classifier is not None
    assert classifier.inputs == (TensorSpec("input-0", "FP32", (-1, 4)),)
    assert classifier.outputs == (LABELS, TensorSpec("predict_proba", "FP32", (-1, 3)))
    fitted = handler_of(folder, "regressor.ubj").signature()
    assert fitted is not None
    assert fitted.outputs == (TensorSpec("predict", "FP32", (-1,)),)


@pytest.mark.usefixtures("torch_installed")
def test_a_torchscript_module_of_unknown_width_declares_its_input_only(tmp_path: Path) -> None:
    handler = load_handler(testing.torch_iris(tmp_path / "iris.pt"), "iris.pt")
    assert handler.signature() == Signature((TensorSpec("input-0", "FP32", (-1, -1)),))


def test_a_users_handler_declares_nothing(tmp_path: Path) -> None:
    folder = testing.mms_handler_folder(tmp_path / "mms")
    assert load_handler(folder, "mms").signature() is None


def request_from(signature: Signature, output: str, rows: int = 3) -> InferRequest:
    """An OIP request as a client builds it from metadata: each input's name, datatype and
    shape, its -1 dimensions given."""
    (spec,) = signature.inputs
    width = spec.shape[1] if spec.shape[1] != -1 else 4
    source = testing.iris_rows(rows) if width <= 4 else testing.digits_rows(rows)
    values = np.asarray(source)[:, :width].astype(DTYPES[spec.datatype])
    tensor = {"name": spec.name, "datatype": spec.datatype, "shape": [rows, width]}
    document = {"inputs": [{**tensor, "data": values.reshape(-1).tolist()}]}
    document["outputs"] = [{"name": output}]
    return InferRequest(json.dumps(document).encode(), oip_media_type(), oip_media_type())


def fits(shape: tuple[int, ...], said: tuple[int, ...]) -> bool:
    return len(shape) == len(said) and all(d in (-1, n) for n, d in zip(shape, said, strict=True))


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_request_built_from_the_signature_is_answered_as_declared(
    request: pytest.FixtureRequest, folder: Path, name: str
) -> None:
    if name.endswith(".pt2"):
        request.getfixturevalue("torch_installed")
    handler = handler_of(folder, name)
    signature = handler.signature()
    assert signature is not None and signature.outputs
    for spec in signature.outputs:
        (output,) = json.loads(handler.infer(request_from(signature, spec.name)).body)["outputs"]
        assert (output["name"], output["datatype"]) == (spec.name, spec.datatype)
        assert fits(tuple(output["shape"]), spec.shape), (output["shape"], spec.shape)


def test_a_declared_part_wins_over_the_inferred() -> None:
    inferred = Signature((FEATURES,), (LABELS, PROBABILITIES))
    own = Signature((TensorSpec("x", "FP32", (-1, 4)),))
    assert merged(own, inferred) == Signature(own.inputs, inferred.outputs)
    assert merged(Signature(), inferred) == inferred
    assert merged(own, None) == own
    assert merged(Signature(), None) is None


def test_declarations_read_as_mlservers() -> None:
    table = [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
    assert declared(table, "inputs") == (TensorSpec("x", "FP32", (-1, 4)),)


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"name": "x"}, "inputs must be a list of tables"),
        ([{"datatype": "FP32", "shape": [4]}], "inputs[0] needs a name"),
        ([{"name": "x", "datatype": "FP128", "shape": [4]}], "datatype 'FP128' is not one of"),
        ([{"name": "x", "datatype": "FP32", "shape": [-2]}], "shape must be a list of"),
        ([{"name": "x", "datatype": "FP32", "shape": [True]}], "shape must be a list of"),
        ([{"name": "x", "datatype": "FP32", "shape": [4], "size": 1}], "unknown keys ['size']"),
    ],
)
def test_a_wrong_declaration_says_what_is_wrong(table: object, words: str) -> None:
    with pytest.raises(ModelLoadError) as raised:
        declared(table, "inputs")
    assert words in str(raised.value)


def test_the_datatypes_are_the_codecs() -> None:
    assert set(DATATYPES) == set(DTYPES)


def test_a_pickled_model_without_a_width_declares_any(tmp_path: Path) -> None:
    """A model with no n_features_in_ takes rows of any width; nothing is probed."""
    model = LogisticRegression(max_iter=1000).fit(*load_iris(return_X_y=True))
    del model.n_features_in_
    path = tmp_path / "m.joblib"
    joblib.dump(model, path)
    assert load_handler(path, "m").signature() == Signature(
        (TensorSpec("input-0", "FP64", (-1, -1)),)
    )


def test_an_input_type_oip_lacks_is_declared_as_the_rows_arrive() -> None:
    """A SavedModel may take bfloat16, which OIP has no name for; it loads all the same."""
    assert datatype_of(np.float32) == "FP32"
    assert datatype_of(np.dtype(">i8")) == "INT64"
    assert datatype_of(np.complex64) == "FP64"
