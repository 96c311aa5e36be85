"""Models trained on scikit-learn's bundled data sets, and corrupt artifacts.

Each maker writes to the path given (``model.joblib`` inside a directory) and returns it.
"""

from __future__ import annotations

import copy
import functools
import os
import random
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import joblib

# ---------------------------------------------------------------------------- data and models


def iris_rows(n: int = 1) -> list[list[float]]:
    """The first `n` rows of iris, cycling, as plain floats."""
    return _rows("iris", n)


def digits_rows(n: int = 1) -> list[list[float]]:
    """Rows of digits, which `random_forest` models take."""
    return _rows("digits", n)


def _rows(dataset: str, n: int) -> list[list[float]]:
    from sklearn import datasets

    x = getattr(datasets, f"load_{dataset}")().data
    return [[float(v) for v in x[i % len(x)]] for i in range(n)]


def iris_logreg(path: Path) -> Path:
    return dump(_fitted_iris(), path)


def _fitted_iris() -> Any:
    """The LogisticRegression on iris that the iris makers write in each format: a copy."""
    return copy.deepcopy(_iris_fit())


@functools.cache
def _iris_fit() -> Any:
    """Fitted once a process: a store of many iris models would otherwise refit the same one."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=1000).fit(*load_iris(return_X_y=True))


def padded_logreg(path: Path, total_bytes: int, seed: int = 0) -> Path:
    """The iris model padded to about `total_bytes`: large to load, small to predict."""
    import numpy as np

    model = _fitted_iris()
    model.padding_ = np.random.default_rng(seed).integers(0, 256, total_bytes, dtype=np.uint8)
    return dump(model, path)


def random_forest(path: Path, target_bytes: int = 15 * 2**20, seed: int = 0) -> Path:
    """A RandomForestClassifier on digits whose file is within ±30% of `target_bytes`.

    A two-tree pilot gives the tree count; the forest then grows or is trimmed to fit.
    """
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier

    x, y = load_digits(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=2, random_state=seed, n_jobs=-1, warm_start=True)
    forest.fit(x, y)
    path = dump(forest, path)
    for _ in range(4):
        size = path.stat().st_size
        one_tree_too_big = size > target_bytes and len(forest.estimators_) == 1
        if abs(size - target_bytes) <= 0.1 * target_bytes or one_tree_too_big:
            break
        trees = max(1, round(len(forest.estimators_) * target_bytes / size))
        if trees > len(forest.estimators_):
            forest.n_estimators, forest.n_jobs = trees, -1
            forest.fit(x, y)
        else:
            forest.estimators_ = forest.estimators_[:trees]
            forest.n_estimators = trees
        dump(forest, path)
    return path


# ---------------------------------------------------------------------------- other runtimes
# each trained on iris; the suffix of `path` picks the format


def xgboost_iris(path: Path, objective: str = "multi:softprob") -> Path:
    """An XGBoost booster on iris, a regressor for `reg:squarederror`."""
    import xgboost
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    params = {"objective": objective, "max_depth": 3, "nthread": 1}
    if objective.startswith("multi:"):
        params["num_class"] = 3
    booster = xgboost.train(params, xgboost.DMatrix(x, label=y), num_boost_round=10)
    path = parent_made(path)
    if path.suffix == ".bst":  # xgboost names no format for .bst
        path.write_bytes(bytes(booster.save_raw("ubj")))
    else:
        booster.save_model(str(path))
    return path


def lightgbm_iris(path: Path) -> Path:
    """A LightGBM multiclass booster on iris, saved as text."""
    import lightgbm
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    params = {"objective": "multiclass", "num_class": 3, "verbose": -1, "num_threads": 1}
    booster = lightgbm.train(params, lightgbm.Dataset(x, label=y), num_boost_round=10)
    booster.save_model(str(parent_made(path)))
    return path


def onnx_iris(path: Path) -> Path:
    """The iris LogisticRegression exported to ONNX with skl2onnx."""
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(x, y)
    parent_made(path).write_bytes(to_onnx(model, x[:1].astype(np.float32)).SerializeToString())
    return path


def torch_iris(path: Path) -> Path:
    """The iris model as a torch module answering logits: TorchScript `.pt` or exported `.pt2`."""
    import torch

    model = _fitted_iris()
    linear = torch.nn.Linear(4, 3)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(model.coef_, dtype=torch.float32))
        linear.bias.copy_(torch.tensor(model.intercept_, dtype=torch.float32))
    linear.eval()
    path = parent_made(path)
    if path.suffix == ".pt2":
        batch = {0: torch.export.Dim.DYNAMIC}
        program = torch.export.export(linear, (torch.zeros(2, 4),), dynamic_shapes=(batch,))
        torch.export.save(program, str(path))
    else:
        with warnings.catch_warnings():  # TorchScript is deprecated; users still ship it
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.jit.save(torch.jit.script(linear), str(path))
    return path


_SAVED_MODEL = """
import json, sys
import numpy as np, tensorflow as tf
coef, intercept = map(json.loads, sys.argv[1:3])

class Iris(tf.Module):
    def __init__(self):
        self.w = tf.Variable(np.array(coef, np.float32).T)
        self.b = tf.Variable(np.array(intercept, np.float32))

    def answer(self, features):
        probabilities = tf.nn.softmax(features @ self.w + self.b)
        return {"classes": tf.argmax(probabilities, axis=1), "probabilities": probabilities}

for folder, inputs in zip(sys.argv[3::2], map(int, sys.argv[4::2])):
    iris = Iris()
    spec = tf.TensorSpec([None, 4], tf.float32)
    if inputs == 1:
        serve = tf.function(lambda features: iris.answer(features), input_signature=[spec])
    else:
        serve = tf.function(lambda x, more: iris.answer(x + more), input_signature=[spec] * 2)
    tf.saved_model.save(iris, folder, signatures={"serving_default": serve})
"""


def tensorflow_iris(folder: Path, inputs: int = 1) -> Path:
    """The iris LogisticRegression as a TensorFlow SavedModel answering classes and
    probabilities; written by a child process, so this one never imports TensorFlow (which does
    not survive a fork)."""
    return tensorflow_irises({Path(folder): inputs})[0]


def tensorflow_irises(inputs_by_folder: dict[Path, int]) -> list[Path]:
    """`tensorflow_iris` into each folder, with its inputs, in one child."""
    import json

    model = _fitted_iris()
    weights = [json.dumps(model.coef_.tolist()), json.dumps(model.intercept_.tolist())]
    pairs = [str(part) for item in inputs_by_folder.items() for part in item]
    command = [sys.executable, "-c", _SAVED_MODEL, *weights, *pairs]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    return [Path(folder) for folder in inputs_by_folder]


MODEL_CONFIG = "model-config.yaml"  # a folder's, the archive's configFile


def mar_of(
    folder: Path,
    archive_path: Path,
    handler: str = "handler.py",
    serialized_file: str = "",
    version: str = "1.0",
) -> Path:
    """A TorchServe `.mar` of a folder, built with `torch-model-archiver`."""
    folder, archive_path = Path(folder), parent_made(archive_path)
    named = {handler, serialized_file, MODEL_CONFIG}
    extras = [str(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name not in named]
    command = [
        *("--model-name", archive_path.name.removesuffix(".mar"), "--version", version),
        *("--handler", str(folder / handler) if (folder / handler).is_file() else handler),
        *("--export-path", str(archive_path.parent), "--force"),
    ]
    if serialized_file:
        command += ["--serialized-file", str(folder / serialized_file)]
    if (folder / MODEL_CONFIG).is_file():
        command += ["--config-file", str(folder / MODEL_CONFIG)]
    if extras:
        command += ["--extra-files", ",".join(extras)]
    run_archiver(command)
    return archive_path


def run_archiver(arguments: list[str]) -> None:
    """torch-model-archiver, in a temporary folder of its own: it gathers an archive's files in
    $TMPDIR/<model name>, which two builds of one name at once would share."""
    archiver = str(Path(sys.executable).with_name("torch-model-archiver"))
    with tempfile.TemporaryDirectory() as own:
        environment = {**os.environ, "TMPDIR": own}
        subprocess.run([archiver, *arguments], check=True, capture_output=True, env=environment)


def dump(model: Any, path: Path) -> Path:
    path = _file_path(path)
    if hasattr(model, "n_jobs"):
        model.n_jobs = None  # no thread per core on each predict
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, path)
    return path


def _file_path(path: Path) -> Path:
    path = Path(path)
    return path / "model.joblib" if path.is_dir() else path


def corrupt_artifact(path: Path, size_bytes: int = 4096, seed: int = 0) -> Path:
    path = _file_path(path)
    if path.suffix != ".joblib":
        path = path.with_name(path.name + ".joblib")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(random.Random(seed).randbytes(size_bytes))
    return path


def parent_made(path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
