"""The commands as `pip install modelhost` gives them: the wheel in a fresh venv with the base
dependencies and no extra. Each optional group is missing there, so each says what to install."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

TOOLKIT = "pip install 'modelhost[toolkit]'"
RUNTIME_MODELS = {  # model → the extra its runtime comes with
    "xgb/model.ubj": "xgboost",
    "lgbm/model.txt": "lightgbm",
    "onnx/model.onnx": "onnx",
    "torch/model.pt": "torch",
    "tf/iris": "tensorflow",
}


def run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`modelhost ARGS` from the fresh venv, away from the checkout so the wheel is imported."""
    command = [str(bin_dir / "modelhost"), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_env_has_no_extra(base_env: Path, tmp_path: Path) -> None:
    probe = (
        "import importlib.util as u; print([m for m in ('rich', 'aiohttp', 'matplotlib', "
        "'xgboost', 'lightgbm', 'onnxruntime', 'torch', 'tensorflow') if u.find_spec(m)])"
    )
    found = subprocess.run(
        [str(base_env / "python"), "-c", "import modelhost; print(modelhost.__file__);" + probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert "site-packages" in found[0]  # the installed wheel, not the checkout
    assert found[1] == "[]"


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "http://127.0.0.1:9", "--duration", "1"],
        ["tune", "--model-store", "models"],
        ["simulate", "access.log"],
        ["cost", "--throughput", "100"],
    ],
    ids=lambda args: args[0],
)
def test_toolkit_commands_say_what_to_install(
    base_env: Path, tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "access.log").write_text("")
    result = run(base_env, *args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: modelhost {args[0]} needs aiohttp, rich and matplotlib, which are not "
        f"installed: {TOOLKIT}\n"
    )


def test_help_version_and_examples_work_without_extras(base_env: Path, tmp_path: Path) -> None:
    for args in (["--help"], ["--version"], ["bench", "--help"], ["serve", "--help"]):
        assert run(base_env, *args, cwd=tmp_path).returncode == 0, args
    made = run(base_env, "examples", "store", "--tenants", "1", "--port", "9123", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "modelhost serve --model-store store --port 9123" in made.stdout
    assert "curl -s -X POST http://127.0.0.1:9123/models/tenants/t000/churn.joblib" in made.stdout


@pytest.fixture(scope="module")
def runtime_server(
    base_env: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> testing.RunningServer:
    """The wheel's server on a store with one model of each runtime, none of them installed."""
    store = tmp_path_factory.mktemp("runtime-store")
    testing.iris_logreg(store / "sklearn/model.joblib")
    testing.xgboost_iris(store / "xgb/model.ubj")
    testing.lightgbm_iris(store / "lgbm/model.txt")
    testing.onnx_iris(store / "onnx/model.onnx")
    if importlib.util.find_spec("torch") is not None:
        testing.torch_iris(store / "torch/model.pt")
    if importlib.util.find_spec("tensorflow") is not None:  # in the dev set
        testing.tensorflow_iris(store / "tf/iris")
    command = [str(base_env / "modelhost"), "serve"]
    return serve(store, command=command, workers=1, memory_budget="2GiB")


@pytest.mark.e2e
@pytest.mark.parametrize("model", RUNTIME_MODELS)
def test_a_model_whose_runtime_is_missing_names_its_extra(
    runtime_server: testing.RunningServer, model: str, request: pytest.FixtureRequest
) -> None:
    if model.startswith("torch/"):
        request.getfixturevalue("torch_installed")
    rows = testing.iris_rows(1)
    with httpx.Client(base_url=runtime_server.url, timeout=60) as http:
        response = http.post(f"/models/{model}/invoke", json=rows)
        assert response.status_code == 500
        assert f"pip install 'modelhost[{RUNTIME_MODELS[model]}]'" in response.json()["message"]
        assert http.post("/models/sklearn/model.joblib/invoke", json=rows).status_code == 200
