"""SageMaker's multi-model container contract, call by call, in the container's mode.

The server is started as the container starts it (`deploy/sagemaker-entrypoint.sh serve` with
`SAGEMAKER_MULTI_MODEL=true`), each model a folder under /opt/ml/models (`OPT_ML_DIR` stands in)
declaring 1 GiB, in a budget where two fit and a third does not. One test per call of the
contract (LoadModel, ListModels, GetModel, UnloadModel, InvokeModel), named after it, with the
expectations AWS documents and sagemaker-inference-toolkit's multi-model test checks; then a
scripted sequence of the calls the platform makes. Every test starts from no model loaded.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "sagemaker-entrypoint.sh"
NAMES = ("alpha", "bravo", "charlie", "delta")
ROW = json.dumps(testing.iris_rows(1)[0])
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def opt_ml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/opt/ml/models/<name>/model as SageMaker lays it out: each model 1 GiB by its manifest."""
    root = tmp_path_factory.mktemp("opt_ml")
    for name in NAMES:
        model_dir(root, name).mkdir(parents=True)
        testing.iris_logreg(model_dir(root, name) / "model.joblib")
        (model_dir(root, name) / "modelhost.toml").write_text('memory = "1GiB"\n')
    huge = model_dir(root, "huge")
    huge.mkdir(parents=True)
    testing.iris_logreg(huge / "model.joblib")
    (huge / "modelhost.toml").write_text('memory = "64GiB"\n')
    return root


def model_dir(opt_ml: Path, name: str) -> Path:
    return opt_ml / "models" / name / "model"


def entrypoint_server(opt_ml: Path, **variables: str) -> testing.RunningServer:
    """`sagemaker-entrypoint.sh serve` in multi-model mode, with the venv's `modelhost`."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {
        **os.environ,
        "PATH": path,
        "OPT_ML_DIR": str(opt_ml),
        "SAGEMAKER_MULTI_MODEL": "true",
        "SAGEMAKER_MODEL_SERVER_WORKERS": "1",
        "MODELHOST_WORKERS": "1",
        "MODELHOST_MEMORY_BUDGET": "2560MiB",
        **variables,
    }
    command = ["sh", str(ENTRYPOINT), "serve"]
    return testing.RunningServer([], opt_ml, env=env, command=command)


@pytest.fixture(scope="module")
def container(opt_ml: Path) -> Iterator[testing.RunningServer]:
    """The container's server: room for two of the 1 GiB models, not three."""
    with entrypoint_server(opt_ml, MODELHOST_CACHE_DIR=str(opt_ml / "cache")) as server:
        yield server


@pytest.fixture
def sagemaker(container: testing.RunningServer) -> Iterator[httpx.Client]:
    """A client of the container with no model loaded: what an earlier test loaded is unloaded
    through the contract itself."""
    with httpx.Client(base_url=container.url, timeout=60) as http:
        for entry in http.get("/models").json()["models"]:
            http.delete(f"/models/{entry['modelName']}")
        yield http


def load_model(http: httpx.Client, opt_ml: Path, name: str) -> httpx.Response:
    return http.post("/models", json={"model_name": name, "url": str(model_dir(opt_ml, name))})


def invoke_model(http: httpx.Client, name: str) -> httpx.Response:
    headers = {**JSON, "X-Amzn-SageMaker-Target-Model": f"{name}.tar.gz"}
    return http.post(f"/models/{name}/invoke", content=ROW, headers=headers)


def entry(opt_ml: Path, name: str) -> dict[str, str]:
    """A ListModels/GetModel entry as the contract shows it: the url as LoadModel gave it."""
    return {"modelName": name, "modelUrl": str(model_dir(opt_ml, name))}


def unload_event(server: testing.RunningServer, name: str) -> dict[str, object]:
    """The model's first unload event, once the server's log has it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for event in server.events("unload"):
            if event["model"] == name:
                return event
        time.sleep(0.1)
    raise AssertionError(f"no unload of {name} in the log:\n{server.log_text()[-4000:]}")


def listed(http: httpx.Client) -> list[dict[str, str]]:
    response = http.get("/models")
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"models"}  # one page: no nextPageToken
    models: list[dict[str, str]] = response.json()["models"]
    return models


# Ping -------------------------------------------------------------------------------------------


def test_ping_answers_200(sagemaker: httpx.Client) -> None:
    assert sagemaker.get("/ping").status_code == 200


# LoadModel ---------------------------------------------------------------------------------------


def test_load_model_answers_200_as_mms_does(sagemaker: httpx.Client, opt_ml: Path) -> None:
    response = load_model(sagemaker, opt_ml, "alpha")
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "Workers scaled"}


def test_load_model_of_a_loaded_model_is_409(sagemaker: httpx.Client, opt_ml: Path) -> None:
    assert load_model(sagemaker, opt_ml, "alpha").status_code == 200
    again = load_model(sagemaker, opt_ml, "alpha")
    assert again.status_code == 409 and "DELETE /models/alpha" in again.json()["message"]


def test_load_model_of_a_missing_url_is_404(sagemaker: httpx.Client, opt_ml: Path) -> None:
    spec = {"model_name": "banana", "url": str(model_dir(opt_ml, "banana"))}
    assert sagemaker.post("/models", json=spec).status_code == 404
    assert listed(sagemaker) == []


def test_load_model_of_a_missing_url_names_the_url(sagemaker: httpx.Client, opt_ml: Path) -> None:
    """The caller gave a url, not a name in the store: the 404 says which url holds nothing."""
    url = str(model_dir(opt_ml, "cherry"))
    response = sagemaker.post("/models", json={"model_name": "kiwi", "url": url})
    assert response.status_code == 404
    assert url in response.json()["message"] and "check the url" in response.json()["message"]


def test_load_model_past_memory_is_507(sagemaker: httpx.Client, opt_ml: Path) -> None:
    """LoadModel past the memory is 507 and unloads nothing.

    The platform chooses what to unload on a 507: the container must not choose for it."""
    for name in ("alpha", "bravo"):
        assert load_model(sagemaker, opt_ml, name).status_code == 200
    refused = load_model(sagemaker, opt_ml, "charlie")
    assert refused.status_code == 507, refused.text
    assert "DELETE /models/" in refused.json()["message"]
    assert listed(sagemaker) == [entry(opt_ml, "alpha"), entry(opt_ml, "bravo")]
    assert invoke_model(sagemaker, "alpha").status_code == 200


def test_load_model_that_can_never_fit_is_507(sagemaker: httpx.Client, opt_ml: Path) -> None:
    refused = load_model(sagemaker, opt_ml, "huge")
    assert refused.status_code == 507 and "--memory-budget" in refused.json()["message"]
    assert listed(sagemaker) == []


# ListModels --------------------------------------------------------------------------------------


def test_list_models_is_empty_with_nothing_loaded(sagemaker: httpx.Client) -> None:
    assert listed(sagemaker) == []


def test_list_models_gives_loaded_models_as_the_contract_shows(
    sagemaker: httpx.Client, opt_ml: Path
) -> None:
    """Name and URL as LoadModel gave them, nothing more, in name order."""
    for name in ("bravo", "alpha"):
        assert load_model(sagemaker, opt_ml, name).status_code == 200
    assert listed(sagemaker) == [entry(opt_ml, "alpha"), entry(opt_ml, "bravo")]


def test_list_models_pages_with_next_page_token(sagemaker: httpx.Client, opt_ml: Path) -> None:
    for name in ("alpha", "bravo"):
        assert load_model(sagemaker, opt_ml, name).status_code == 200
    first = sagemaker.get("/models", params={"max_results": 1}).json()
    assert first["models"] == [entry(opt_ml, "alpha")]
    token = first["nextPageToken"]
    second = sagemaker.get("/models", params={"max_results": 1, "next_page_token": token})
    assert second.json() == {"models": [entry(opt_ml, "bravo")]}  # no token: the last page


def test_list_models_names_the_page_size_parameter_it_refuses(sagemaker: httpx.Client) -> None:
    response = sagemaker.get("/models", params={"max_results": "0"})
    assert response.status_code == 400 and "max_results '0'" in response.json()["message"]


def test_list_models_with_a_made_up_token_is_400(sagemaker: httpx.Client) -> None:
    response = sagemaker.get("/models", params={"next_page_token": "42"})
    assert response.status_code == 400 and "next_page_token" in response.json()["message"]


# GetModel ----------------------------------------------------------------------------------------


def test_get_model_gives_the_entry_of_a_loaded_model(sagemaker: httpx.Client, opt_ml: Path) -> None:
    assert load_model(sagemaker, opt_ml, "alpha").status_code == 200
    response = sagemaker.get("/models/alpha")
    assert response.status_code == 200 and response.json() == entry(opt_ml, "alpha")


def test_get_model_of_a_model_not_loaded_is_404(sagemaker: httpx.Client, opt_ml: Path) -> None:
    assert sagemaker.get("/models/alpha").status_code == 404


# UnloadModel -------------------------------------------------------------------------------------


def test_unload_model_answers_200_as_mms_does(sagemaker: httpx.Client, opt_ml: Path) -> None:
    assert load_model(sagemaker, opt_ml, "alpha").status_code == 200
    response = sagemaker.delete("/models/alpha")
    assert response.status_code == 200
    assert response.json() == {"status": 'Model "alpha" unregistered'}
    assert listed(sagemaker) == []


def test_unload_model_of_a_model_not_loaded_is_404(sagemaker: httpx.Client) -> None:
    assert sagemaker.delete("/models/alpha").status_code == 404


# InvokeModel -------------------------------------------------------------------------------------


def test_invoke_model_answers_with_the_prediction(sagemaker: httpx.Client, opt_ml: Path) -> None:
    assert load_model(sagemaker, opt_ml, "alpha").status_code == 200
    response = invoke_model(sagemaker, "alpha")
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0]}


def test_invoke_model_never_loaded_is_404(
    sagemaker: httpx.Client,
) -> None:
    """InvokeModel of a model never loaded is 404 and loads nothing.

    Only LoadModel loads: the folder is in the store, and still it is not loaded."""
    response = invoke_model(sagemaker, "alpha/model")
    assert response.status_code == 404 and "POST /models" in response.json()["message"]
    assert listed(sagemaker) == []


def test_invoke_model_of_an_unloaded_model_is_404(sagemaker: httpx.Client, opt_ml: Path) -> None:
    """404 is the platform's cue to call LoadModel; a 200 would hold a model it thinks gone."""
    assert load_model(sagemaker, opt_ml, "alpha").status_code == 200
    assert sagemaker.delete("/models/alpha").status_code == 200
    assert invoke_model(sagemaker, "alpha").status_code == 404
    assert listed(sagemaker) == []


# the platform's sequence ------------------------------------------------------------------------


def test_a_scripted_sequence_keeps_the_contract(sagemaker: httpx.Client, opt_ml: Path) -> None:
    """LoadModel / InvokeModel / UnloadModel / 507 / ListModels as the platform makes them: on
    507 it unloads the model it used least and loads again; on 404 it loads."""
    http = sagemaker
    assert load_model(http, opt_ml, "alpha").status_code == 200
    assert load_model(http, opt_ml, "bravo").status_code == 200
    assert invoke_model(http, "alpha").status_code == 200
    assert load_model(http, opt_ml, "charlie").status_code == 507
    assert listed(http) == [entry(opt_ml, "alpha"), entry(opt_ml, "bravo")]
    assert http.delete("/models/bravo").status_code == 200
    assert invoke_model(http, "bravo").status_code == 404
    assert load_model(http, opt_ml, "charlie").status_code == 200
    assert invoke_model(http, "charlie").status_code == 200
    assert listed(http) == [entry(opt_ml, "alpha"), entry(opt_ml, "charlie")]
    assert http.get("/models/bravo").status_code == 404
    assert load_model(http, opt_ml, "bravo").status_code == 507
    assert http.delete("/models/alpha").status_code == 200
    assert load_model(http, opt_ml, "bravo").status_code == 200
    assert invoke_model(http, "alpha").status_code == 404
    assert invoke_model(http, "bravo").status_code == 200
    assert listed(http) == [entry(opt_ml, "bravo"), entry(opt_ml, "charlie")]


def test_self_unloaded_model_is_404(
    opt_ml: Path,
) -> None:
    """A model the container unloads by itself answers 404 and leaves the list.

    The container unloads without being told only when it must (memory pressure, a dead
    worker, or idle_unload_s as here): invoke then answers 404, the platform's cue to load."""
    cache = str(opt_ml / "idle-cache")
    server = entrypoint_server(opt_ml, MODELHOST_IDLE_UNLOAD_S="1", MODELHOST_CACHE_DIR=cache)
    with server, httpx.Client(base_url=server.url, timeout=60) as http:
        assert load_model(http, opt_ml, "delta").status_code == 200
        assert unload_event(server, "delta")["reason"] == "idle"
        assert invoke_model(http, "delta").status_code == 404
        assert listed(http) == []
        assert http.get("/models/delta").status_code == 404
        assert load_model(http, opt_ml, "delta").status_code == 200
        assert invoke_model(http, "delta").status_code == 200
