from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.linear_model import LinearRegression, LogisticRegression

from modelhost.errors import BadRequestBody, HandlerError, ModelLoadError, Unavailable
from modelhost.workers.handlers import load_handler
from modelhost.workers.handlers.base import Handler, InferRequest
from modelhost.workers.handlers.preload import CORE_MODULES, SKLEARN_MODULES

ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]


@pytest.fixture(scope="module")
def iris() -> LogisticRegression:
    data = load_iris()
    labels = data.target_names[data.target]  # string labels, as most users train with
    return LogisticRegression(max_iter=1000).fit(data.data, labels)


@pytest.fixture(scope="module")
def iris_file(iris: LogisticRegression, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("iris") / "model.joblib"
    joblib.dump(iris, path)
    return path


def invoke(handler: Handler, body: object, **params: str) -> Any:
    reply = handler.infer(InferRequest(json.dumps(body).encode(), params=params))
    assert reply.content_type == "application/json"
    return json.loads(reply.body)


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def model_folder(tmp_path: Path, iris_file: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.joblib").write_bytes(iris_file.read_bytes())
    return folder


# scikit-learn


def test_joblib_predict(iris: LogisticRegression, iris_file: Path) -> None:
    handler = load_handler(iris_file, "iris.joblib")
    expected = iris.predict(np.array(ROWS)).tolist()
    assert invoke(handler, {"instances": ROWS}) == {"predictions": expected}


def test_pickle_predict_proba(iris: LogisticRegression, tmp_path: Path) -> None:
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(iris))
    handler = load_handler(path, "iris.pkl")
    reply = invoke(handler, ROWS, method="predict_proba")
    assert isinstance(reply, dict)
    assert np.allclose(reply["predictions"], iris.predict_proba(np.array(ROWS)))


def test_csv_in_and_out(iris_file: Path) -> None:
    handler = load_handler(iris_file, "iris.joblib")
    reply = handler.infer(InferRequest(b"5.1,3.5,1.4,0.2\n", "text/csv", "text/csv"))
    assert (reply.body, reply.content_type) == (b"setosa\n", "text/csv")


def test_feature_count_mismatch_is_a_bad_request(iris_file: Path) -> None:
    handler = load_handler(iris_file, "iris.joblib")
    with pytest.raises(BadRequestBody, match="model expects 4 features per row, got 3"):
        invoke(handler, [[1.0, 2.0, 3.0]])


def test_unknown_method_lists_the_allowed(iris_file: Path) -> None:
    handler = load_handler(iris_file, "iris.joblib")
    with pytest.raises(BadRequestBody, match="allowed: predict, predict_proba"):
        invoke(handler, ROWS, method="fit")


def test_model_without_predict_proba(tmp_path: Path) -> None:
    data = load_iris()
    path = tmp_path / "regression.joblib"
    joblib.dump(LinearRegression().fit(data.data, data.target), path)
    handler = load_handler(path, "regression.joblib")
    with pytest.raises(BadRequestBody, match=r"LinearRegression\) has no predict_proba"):
        invoke(handler, ROWS, method="predict_proba")
    assert len(invoke(handler, ROWS)["predictions"]) == 2


def test_batch_answers_as_one_by_one(
    iris_file: Path,
) -> None:
    """A batch is answered as one by one with failures kept to their request."""
    handler = load_handler(iris_file, "iris.joblib")
    requests = [
        InferRequest(json.dumps(ROWS).encode()),
        InferRequest(b"[[1.0, 2.0]]"),  # too few features: fails alone
        InferRequest(json.dumps(ROWS[0]).encode(), params={"method": "predict_proba"}),
        InferRequest(b"5.1,3.5,1.4,0.2\n", content_type="text/csv", accept="text/csv"),
        InferRequest(b"not json"),
        InferRequest(json.dumps([ROWS[1]]).encode()),
    ]
    batched = handler.infer_batch(requests)
    for request, reply in zip(requests, batched, strict=True):
        try:
            alone: Any = handler.infer(request)
        except BadRequestBody as error:
            assert isinstance(reply, BadRequestBody) and str(reply) == str(error)
        else:
            assert reply == alone
    assert [type(reply).__name__ for reply in batched] == [
        "InferReply",
        "BadRequestBody",
        "InferReply",
        "InferReply",
        "BadRequestBody",
        "InferReply",
    ]


def test_model_refusing_input_is_a_bad_request(iris_file: Path) -> None:
    handler = load_handler(iris_file, "iris.joblib")
    with pytest.raises(BadRequestBody, match="NaN"):
        invoke(handler, [[1.0, None, 1.0, 1.0]])


# MMS / TorchServe


MODULE_HANDLER = """
    import os
    import joblib

    _model = None

    def handle(data, context):
        global _model
        if _model is None:  # TorchServe's module style initialises on the first call
            model_dir = context.system_properties["model_dir"]
            _model = joblib.load(os.path.join(model_dir, "model.joblib"))
        import json
        rows = json.loads(data[0]["body"])
        return [{"labels": _model.predict(rows).tolist(), "model": context.model_name}]
"""

CLASS_HANDLER = """
    import json
    import os
    import joblib

    class IrisService:
        def initialize(self, context):
            model_dir = context.system_properties["model_dir"]
            self.model = joblib.load(os.path.join(model_dir, "model.joblib"))

        def preprocess(self, data):
            return [json.loads(row.get("data") or row.get("body")) for row in data]

        def inference(self, batch):
            return [self.model.predict_proba(rows).tolist() for rows in batch]
"""


def test_mms_module_style(tmp_path: Path, iris_file: Path) -> None:
    folder = model_folder(tmp_path, iris_file)
    write(folder, "handler.py", MODULE_HANDLER)
    handler = load_handler(folder, "tenant/iris")
    assert invoke(handler, ROWS) == {"labels": ["setosa", "virginica"], "model": "tenant/iris"}


def test_mms_class_style_with_preprocess_inference(tmp_path: Path, iris_file: Path) -> None:
    folder = model_folder(tmp_path, iris_file)
    write(folder, "handler.py", CLASS_HANDLER)
    probabilities = invoke(load_handler(folder, "iris"), ROWS)
    assert np.allclose(np.sum(probabilities, axis=1), 1.0)


def test_mms_class_with_handle_sets_the_content_type(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    write(
        folder,
        "handler.py",
        """
        class Base:
            def handle(self, data, context):
                raise NotImplementedError

        class Echo(Base):
            def initialize(self, context):
                self.prefix = context.manifest["model"]["modelName"]

            def handle(self, data, context):
                context.set_response_content_type(0, "text/csv")
                return [self.prefix + ":" + data[0]["data"].decode()]
        """,
    )
    write(folder, "MAR-INF/MANIFEST.json", '{"model": {"modelName": "echo"}}')
    reply = load_handler(folder, "echo").infer(InferRequest(b"1,2"))
    assert (reply.body, reply.content_type) == (b"echo:1,2", "text/csv")


def test_torchserve_handlers_may_record_metrics_on_the_context(tmp_path: Path) -> None:
    """TorchServe's BaseHandler times every call through `context.metrics`."""
    folder = tmp_path / "model"
    write(
        folder,
        "handler.py",
        """
        class Timed:
            def initialize(self, context):
                self.metrics = context.metrics

            def handle(self, data, context):
                self.metrics.add_time("HandlerTime", 1.5, None, "ms")
                context.metrics.add_counter("Requests", 1)
                return [len(data[0]["data"])]
        """,
    )
    assert load_handler(folder, "timed").infer(InferRequest(b"abc")).body == b"3"


def test_mms_manifest_names_the_entry_point(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    write(folder, "serve.py", "def entry(data, context):\n    return [b'raw']\n")
    write(folder, "MAR-INF/MANIFEST.json", '{"model": {"handler": "serve:entry"}}')
    reply = load_handler(folder, "raw").infer(InferRequest(b""))
    assert (reply.body, reply.content_type) == (b"raw", "application/octet-stream")


def test_a_named_entry_point_that_is_missing_says_which_file_lacks_it(tmp_path: Path) -> None:
    """The name may come from a registration's handler=, not a manifest: say what to fix."""
    folder = tmp_path / "model"
    write(folder, "serve.py", "def entry(data, context):\n    return [b'raw']\n")
    write(folder, "MAR-INF/MANIFEST.json", '{"model": {"handler": "serve:nope"}}')
    with pytest.raises(ModelLoadError, match="serve.py has no function nope: name one of its"):
        load_handler(folder, "raw")


def test_mms_wrong_number_of_results(tmp_path: Path) -> None:
    write(tmp_path, "handler.py", "def handle(data, context):\n    return [1, 2]\n")
    with pytest.raises(HandlerError, match="returned a list of 2; it must return a list"):
        load_handler(tmp_path, "two").infer(InferRequest(b"[]"))


def test_mms_initialize_failure_is_a_load_error(tmp_path: Path) -> None:
    write(
        tmp_path,
        "handler.py",
        """
        class Service:
            def initialize(self, context):
                raise RuntimeError("weights missing")

            def handle(self, data, context):
                return data
        """,
    )
    with pytest.raises(
        ModelLoadError, match="could not load model m: RuntimeError: weights missing"
    ):
        load_handler(tmp_path, "m")


def test_mms_without_entry_point(tmp_path: Path) -> None:
    write(tmp_path, "handler.py", "X = 1\n")
    with pytest.raises(ModelLoadError, match="no handle\\(data, context\\) function"):
        load_handler(tmp_path, "m")


def test_models_never_share_sibling_modules(tmp_path: Path) -> None:
    handlers = []
    for answer in ("first", "second"):
        folder = tmp_path / answer
        write(folder, "helper.py", f"ANSWER = {answer!r}\n")
        write(
            folder,
            "handler.py",
            "import helper\n\ndef handle(data, context):\n    return [helper.ANSWER]\n",
        )
        handlers.append(load_handler(folder, answer))
    assert [h.infer(InferRequest(b"")).body for h in handlers] == [b"first", b"second"]
    assert "helper" not in sys.modules
    assert str(tmp_path / "first") not in sys.path


def test_close_forgets_the_user_module(tmp_path: Path) -> None:
    write(tmp_path, "handler.py", "def handle(data, context):\n    return ['ok']\n")
    before = set(sys.modules)
    handler = load_handler(tmp_path, "m")
    assert len(set(sys.modules) - before) == 1
    handler.close()
    assert set(sys.modules) - before == set()


# SageMaker


MODEL_FN = """
    import os
    import joblib

    def model_fn(model_dir):
        return joblib.load(os.path.join(model_dir, "model.joblib"))
"""


def test_sagemaker_with_only_model_fn(
    tmp_path: Path, iris_file: Path, iris: LogisticRegression
) -> None:
    folder = model_folder(tmp_path, iris_file)
    write(folder, "code/inference.py", MODEL_FN)
    expected = iris.predict(np.array(ROWS)).tolist()
    assert invoke(load_handler(folder, "sm"), {"inputs": ROWS}) == expected  # as the toolkit


def test_sagemaker_with_all_four_functions(tmp_path: Path, iris_file: Path) -> None:
    folder = model_folder(tmp_path, iris_file)
    source = (
        MODEL_FN
        + """
    import json

    def input_fn(request_body, request_content_type):
        assert request_content_type == "application/vnd.rows"
        return [[float(x) for x in line.split()] for line in request_body.decode().splitlines()]

    def predict_fn(input_data, model):
        return model.predict(input_data)

    def output_fn(prediction, accept):
        return json.dumps({"classes": prediction.tolist()}), "application/vnd.classes"
    """
    )
    write(folder, "code/inference.py", source)
    handler = load_handler(folder, "sm")
    reply = handler.infer(InferRequest(b"5.1 3.5 1.4 0.2\n", "application/vnd.rows"))
    assert (reply.body, reply.content_type) == (
        b'{"classes": ["setosa"]}',
        "application/vnd.classes",
    )


def test_sagemaker_transform_fn(tmp_path: Path, iris_file: Path) -> None:
    folder = model_folder(tmp_path, iris_file)
    source = (
        MODEL_FN
        + """
    def transform_fn(model, request_body, content_type, accept):
        rows = [[float(x) for x in request_body.split(",")]]  # text/csv comes as str
        return ",".join(model.predict(rows))
    """
    )
    write(folder, "code/inference.py", source)
    reply = load_handler(folder, "sm").infer(
        InferRequest(b"5.1,3.5,1.4,0.2", "text/csv", "text/csv")
    )
    assert (reply.body, reply.content_type) == (b"setosa", "text/csv")


def test_sagemaker_without_model_fn(tmp_path: Path) -> None:
    write(tmp_path, "code/inference.py", "def predict_fn(data, model):\n    return data\n")
    with pytest.raises(ModelLoadError, match="defines no model_fn"):
        load_handler(tmp_path, "sm")


def test_sagemaker_missing_dependency_names_it(tmp_path: Path) -> None:
    write(tmp_path, "code/inference.py", "import modelhost_no_such_package\n")
    write(tmp_path, "code/requirements.txt", "modelhost_no_such_package\n")
    with pytest.raises(ModelLoadError) as caught:
        load_handler(tmp_path, "sm")
    message = str(caught.value)
    assert "'modelhost_no_such_package'" in message
    assert "requirements.txt is not installed at load time" in message


def test_sagemaker_exit_at_import_is_a_load_error(tmp_path: Path) -> None:
    write(tmp_path, "code/inference.py", "import sys\nsys.exit(2)\n")
    with pytest.raises(ModelLoadError, match="SystemExit: 2; fix code/inference.py"):
        load_handler(tmp_path, "sm")


# choosing a handler


def test_unknown_extension(tmp_path: Path) -> None:
    path = tmp_path / "model.xyz"
    path.write_bytes(b"?")
    with pytest.raises(ModelLoadError, match=r"no built-in handler for '\.xyz' files; supported"):
        load_handler(path, "model.xyz")


def test_corrupt_pickle(tmp_path: Path) -> None:
    path = tmp_path / "model.pkl"
    path.write_bytes(b"this is not a pickle")
    with pytest.raises(ModelLoadError, match="could not load model m.pkl: .*scikit-learn"):
        load_handler(path, "m.pkl")


def test_folder_with_a_nested_single_joblib(tmp_path: Path, iris_file: Path) -> None:
    nested = tmp_path / "artifact" / "top"
    nested.mkdir(parents=True)
    (nested / "model.joblib").write_bytes(iris_file.read_bytes())
    (tmp_path / "artifact" / "._model.joblib").write_bytes(b"macOS litter")
    assert "predictions" in invoke(load_handler(tmp_path / "artifact", "m"), ROWS)


def test_pickle_one_level_down_among_several_folders(tmp_path: Path, iris_file: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.pkl").write_bytes(iris_file.read_bytes())
    assert "predictions" in invoke(load_handler(tmp_path, "m"), ROWS)


def test_folder_with_two_models_is_ambiguous(tmp_path: Path, iris_file: Path) -> None:
    for name in ("a.joblib", "b.pkl"):
        (tmp_path / name).write_bytes(iris_file.read_bytes())
    with pytest.raises(ModelLoadError, match=r"found 2 model files .*\(a.joblib, b.pkl\)"):
        load_handler(tmp_path, "m")


def test_folder_with_nothing_loadable_lists_what_it_found(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("hi")
    (tmp_path / "weights.h5").write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"found: README.md, weights.h5\); ship one"):
        load_handler(tmp_path, "m")


def test_importing_the_package_imports_no_runtime() -> None:
    assert "numpy" in CORE_MODULES and "sklearn.ensemble" in SKLEARN_MODULES
    code = (
        "import sys, modelhost.workers.handlers; "
        "print(sorted({'numpy', 'sklearn', 'joblib'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_artifact_gone_from_disk_is_a_retry(tmp_path: Path) -> None:
    """An artifact gone from disk is a retry without its path.

    Its cache entry was deleted as it loaded: a retry fetches it again (not a broken model)."""
    with pytest.raises(Unavailable) as gone:
        load_handler(tmp_path / "cache/models/m", "m")
    assert "model m" in str(gone.value) and str(tmp_path) not in str(gone.value)
