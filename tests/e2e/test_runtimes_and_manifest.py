"""Every runtime, the manifest and the lifecycle extras, against real servers and real workers."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.serving import Servers, invoke

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = testing.iris_rows(2)  # two setosas
JSON = {"content-type": "application/json"}
RUNTIME_MODELS = ["xgb/model.ubj", "xgb/model.json", "lgbm/model.txt", "onnx/model.onnx"]
TORCH_MODELS = ["torch/model.pt", "torch/model.pt2"]


def toml(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modelhost.toml").write_text(text)
    return folder


@pytest.fixture(scope="module")
def runtime_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runtime-store")
    testing.xgboost_iris(root / "xgb/model.ubj")
    testing.xgboost_iris(root / "xgb/model.json")
    testing.lightgbm_iris(root / "lgbm/model.txt")
    testing.onnx_iris(root / "onnx/model.onnx")
    chosen = toml(root / "manifest/handler", 'handler = "xgboost"\nmodel_file = "trees.json"\n')
    testing.onnx_iris(chosen / "model.onnx")
    testing.xgboost_iris(chosen / "trees.json", objective="reg:squarederror")
    for name, sample in (("ok", ROWS), ("bad", [1.0, 2.0])):
        folder = toml(root / f"warm/{name}", f'warmup = ["samples/{name}.json"]\n')
        testing.onnx_iris(folder / "model.onnx")
        (folder / "samples").mkdir()
        (folder / "samples" / f"{name}.json").write_text(json.dumps(sample))
    custom = testing.mms_handler_folder(root / ".src/mar-custom")
    testing.mar_of(custom, root / "mar/custom.mar", handler="handler.py")
    return root


@pytest.fixture(scope="module")
def runtime_server(runtime_store: Path, serve: Servers) -> testing.RunningServer:
    return serve(runtime_store, workers=2, memory_budget="4GiB", batch_size=4)


@pytest.fixture
def http(runtime_server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=runtime_server.url, timeout=60) as client:
        yield client


@pytest.mark.parametrize("name", RUNTIME_MODELS)
def test_each_runtime_serves_its_model(http: httpx.Client, name: str) -> None:
    response = invoke(http, name, {"instances": ROWS})
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0, 0]}
    one = invoke(http, name, ROWS[0], method="predict_proba")
    assert one.status_code == 200 and len(one.json()["predictions"][0]) == 3


@pytest.mark.parametrize("name", TORCH_MODELS)
def test_torch_models_serve_their_logits(
    http: httpx.Client, runtime_store: Path, name: str, torch_installed: None
) -> None:
    path = runtime_store / name
    if not path.exists():
        testing.torch_iris(path)  # the store is read in place: a model may appear any time
    response = invoke(http, name, ROWS)
    assert response.status_code == 200, response.text
    logits = response.json()["predictions"]
    assert [row.index(max(row)) for row in logits] == [0, 0]


def test_the_manifest_handler_and_model_file_choose_among_files(http: httpx.Client) -> None:
    response = invoke(http, "manifest/handler", ROWS)
    assert response.status_code == 200, response.text
    assert all(isinstance(value, float) for value in response.json()["predictions"])  # regressor


def test_a_model_loads_once_its_warm_up_passes(http: httpx.Client) -> None:
    assert invoke(http, "warm/ok", ROWS).status_code == 200
    assert http.get("/models/warm/ok").json()["state"] == "loaded"


def test_a_failing_warm_up_fails_the_load(http: httpx.Client) -> None:
    response = invoke(http, "warm/bad", ROWS)
    assert response.status_code == 500
    message = response.json()["message"]
    assert "warm-up sample samples/bad.json failed" in message
    assert "model expects 4 features per row, got 2" in message
    assert http.get("/models/warm/bad").status_code == 404


def test_a_mar_with_a_custom_handler_loads(http: httpx.Client) -> None:
    response = http.post("/predictions/mar/custom.mar", content=json.dumps(ROWS), headers=JSON)
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0, 0], "handler": "custom handler"}


def test_a_torchscript_mar_loads(
    http: httpx.Client, runtime_store: Path, torch_installed: None
) -> None:
    folder = runtime_store / ".src/mar-torch"
    testing.torch_iris(folder / "model.pt")
    # TorchServe's own handler names are not here: the serialized file chooses the handler
    testing.mar_of(folder, runtime_store / "mar/torch.mar", "base_handler", "model.pt")
    response = invoke(http, "mar/torch.mar", ROWS)
    assert response.status_code == 200, response.text
    assert len(response.json()["predictions"]) == 2


def test_a_batch_answers_every_request(http: httpx.Client) -> None:
    """Requests sent together to a batching server each get their own answer."""
    bodies = [[ROWS[0]], "not rows", ROWS]
    with httpx.Client(base_url=str(http.base_url), timeout=60) as other:
        responses = [invoke(other, "onnx/model.onnx", body) for body in bodies]
    assert [r.status_code for r in responses] == [200, 400, 200]
    assert responses[2].json() == {"predictions": [0, 0]}


def test_pinned_models_stay_and_declared_memory_is_reserved(
    http: httpx.Client, runtime_store: Path
) -> None:
    memory = http.get("/stats").json()["memory"]
    room = memory["budgetBytes"] - memory["headroomBytes"] - memory["committedBytes"]
    # two fit; five need room twice over, so evictions happen even if the idle server's
    # baseline drifts down meanwhile (it follows the measured PSS once all is settled)
    declared = int(room * 0.4)
    unpinned = (("pin/a", "false"), ("pin/b", "false"), ("pin/c", "false"), ("pin/d", "false"))
    for name, pinned in (("pin/kept", "true"), *unpinned):
        folder = toml(runtime_store / name, f"pinned = {pinned}\nmemory = {declared}\n")
        testing.onnx_iris(folder / "model.onnx")
        assert invoke(http, name, ROWS).status_code == 200
    assert http.get("/models/pin/kept").json()["memoryBytes"] >= declared
    assert http.get("/models/pin/a").status_code == 404  # evicted; the pinned one is older
    assert http.get("/models/pin/kept").json()["state"] == "loaded"


def test_a_declared_size_over_the_budget_is_507(http: httpx.Client, runtime_store: Path) -> None:
    folder = toml(runtime_store / "huge", 'memory = "64GiB"\n')
    testing.onnx_iris(folder / "model.onnx")
    response = invoke(http, "huge", ROWS)
    assert response.status_code == 507
    assert "needs about 64.0 GiB" in response.json()["message"]


# a second server: xgboost absent from its Python, and models unloaded after 1 s unused


@pytest.fixture(scope="module")
def lean_server(
    runtime_store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> testing.RunningServer:
    site = tmp_path_factory.mktemp("lean-site")
    # how Python sees a package that is not installed: `import xgboost` raises ImportError
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['xgboost'] = None\n")
    pinned = toml(runtime_store / "lean/pinned", "pinned = true\n")
    testing.onnx_iris(pinned / "model.onnx")
    env = {**os.environ, "PYTHONPATH": str(site)}
    return serve(runtime_store, env=env, workers=1, memory_budget="4GiB", idle_unload_s=1)


def test_a_missing_runtime_is_a_500_naming_the_extra(lean_server: testing.RunningServer) -> None:
    with httpx.Client(base_url=lean_server.url, timeout=60) as http:
        response = invoke(http, "xgb/model.ubj", ROWS)
        assert response.status_code == 500
        assert "pip install 'modelhost[xgboost]'" in response.json()["message"]
        assert invoke(http, "lgbm/model.txt", ROWS).status_code == 200  # the rest carry on


def test_idle_models_are_unloaded_pinned_ones_stay(lean_server: testing.RunningServer) -> None:
    with httpx.Client(base_url=lean_server.url, timeout=60) as http:
        for name in ("onnx/model.onnx", "lean/pinned"):
            assert invoke(http, name, ROWS).status_code == 200
        deadline = time.monotonic() + 30
        while "onnx/model.onnx" not in (unloads := _unloads(lean_server)):
            assert time.monotonic() < deadline, "the idle model was never unloaded"
            time.sleep(0.2)
        assert unloads["onnx/model.onnx"]["reason"] == "idle"
        assert http.get("/models/onnx/model.onnx").status_code == 404
        assert http.get("/models/lean/pinned").json()["state"] == "loaded"
    assert "lean/pinned" not in _unloads(lean_server)


def _unloads(server: testing.RunningServer) -> dict[str, dict[str, Any]]:
    """The last unload event of each model, from the events the server logs."""
    text = server.log_text()
    lines = [line for line in text.splitlines() if line.startswith("{") and line.endswith("}")]
    events = [json.loads(line) for line in lines]
    return {event["model"]: event for event in events if event.get("kind") == "unload"}
