"""Model metadata over REST and gRPC says what each loaded model takes and gives, so Triton's own
clients build requests from it that the model answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import joblib
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from helpers.serving import Servers
from sklearn.datasets import load_iris
from sklearn.linear_model import LinearRegression
from tritonclient.utils import InferenceServerException, triton_to_np_dtype

from modelhost import testing

pytestmark = pytest.mark.e2e

IRIS, ONNX, REGRESSOR, DECLARED = "iris.joblib", "iris.onnx", "regressor.joblib", "declared"
UNTOLD = {"inputs": [], "outputs": []}
DECLARATION = """
[[inputs]]
name = "features"
datatype = "FP32"
shape = [-1, 4]
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / IRIS)
    testing.onnx_iris(root / ONNX)
    x, y = load_iris(return_X_y=True)
    testing.dump(LinearRegression().fit(x, y), root / REGRESSOR)
    testing.iris_logreg(root / DECLARED / "model.joblib")
    (root / DECLARED / "modelhost.toml").write_text(DECLARATION)
    return root


@pytest.fixture(scope="module")
def grpc_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def management_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def server(
    store: Path, serve: Servers, grpc_port: int, management_port: int
) -> testing.RunningServer:
    return serve(
        store,
        workers=2,
        memory_budget="2GiB",
        grpc_port=grpc_port,
        management_port=management_port,
    )


@pytest.fixture
def client(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


@pytest.fixture
def http_oip(server: testing.RunningServer) -> Iterator[triton_http.InferenceServerClient]:
    oip = triton_http.InferenceServerClient(server.url.removeprefix("http://"))
    yield oip
    oip.close()


@pytest.fixture
def grpc_oip(
    server: testing.RunningServer, grpc_port: int
) -> Iterator[triton_grpc.InferenceServerClient]:
    oip = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    yield oip
    oip.close()


def loaded(client: httpx.Client, name: str) -> dict[str, Any]:
    """`name` loaded, then its metadata's inputs and outputs."""
    response = client.post(f"/v2/repository/models/{name}/load")
    assert response.status_code == 200, response.text
    metadata = client.get(f"/v2/models/{name}")
    assert metadata.status_code == 200, metadata.text
    return {key: metadata.json()[key] for key in ("inputs", "outputs")}


def tensor(name: str, datatype: str, shape: list[int]) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": shape}


def test_an_unloaded_model_promises_nothing(client: httpx.Client) -> None:
    """Before a load nothing is known of the model, and metadata says nothing false: neither
    placeholder types nor outputs it may not have."""
    metadata = client.get(f"/v2/models/{REGRESSOR}")
    assert metadata.status_code == 200, metadata.text
    assert metadata.json() == {"name": REGRESSOR, "versions": ["1"], "platform": "modelhost"} | (
        UNTOLD
    )


def test_an_iris_classifier_answers_its_width_and_label_type(client: httpx.Client) -> None:
    assert loaded(client, IRIS) == {
        "inputs": [tensor("input-0", "FP64", [-1, 4])],
        "outputs": [tensor("predict", "INT64", [-1]), tensor("predict_proba", "FP64", [-1, 3])],
    }
    versioned = client.get(f"/v2/models/{IRIS}/versions/1").json()
    assert versioned["inputs"] == [tensor("input-0", "FP64", [-1, 4])]


def test_an_onnx_model_answers_its_graphs_input(client: httpx.Client) -> None:
    assert loaded(client, ONNX) == {
        "inputs": [tensor("X", "FP32", [-1, 4])],
        "outputs": [tensor("predict", "INT64", [-1]), tensor("predict_proba", "FP64", [-1, 3])],
    }


def test_a_regressor_answers_fp64_predict_and_no_probabilities(client: httpx.Client) -> None:
    assert loaded(client, REGRESSOR) == {
        "inputs": [tensor("input-0", "FP64", [-1, 4])],
        "outputs": [tensor("predict", "FP64", [-1])],
    }


def test_a_manifests_declaration_wins(client: httpx.Client) -> None:
    assert loaded(client, DECLARED) == {
        "inputs": [tensor("features", "FP32", [-1, 4])],
        "outputs": [tensor("predict", "INT64", [-1]), tensor("predict_proba", "FP64", [-1, 3])],
    }


def test_an_unloaded_model_keeps_its_metadata(client: httpx.Client, store: Path) -> None:
    """A client that reads metadata before it infers (tritonclient) sees a cold model's last
    inputs and outputs, not empty lists."""
    name = "kept.joblib"
    testing.iris_logreg(store / name)
    seen = loaded(client, name)
    assert client.post(f"/v2/repository/models/{name}/unload").status_code == 200
    assert client.get(f"/v2/models/{name}/ready").status_code == 400
    metadata = client.get(f"/v2/models/{name}").json()
    assert {key: metadata[key] for key in UNTOLD} == seen


def test_a_name_registered_anew_forgets_its_metadata(
    client: httpx.Client, store: Path, management_port: int
) -> None:
    """Registered again on another artifact, a name promises nothing of the old one."""
    name = "replaced.joblib"
    testing.iris_logreg(store / name)
    assert loaded(client, name)["outputs"]
    assert client.post(f"/v2/repository/models/{name}/unload").status_code == 200
    management = f"http://127.0.0.1:{management_port}/models"
    registered = httpx.post(management, params={"url": REGRESSOR, "model_name": name})
    assert registered.status_code == 200, registered.text
    metadata = client.get(f"/v2/models/{name}").json()
    assert {key: metadata[key] for key in UNTOLD} == UNTOLD
    assert loaded(client, name)["outputs"] == [tensor("predict", "FP64", [-1])]


def said(tensors: Any) -> list[dict[str, Any]]:
    """Metadata tensors as REST gives them, from a gRPC answer's messages or REST's."""
    return [
        t if isinstance(t, dict) else tensor(t.name, t.datatype, list(t.shape)) for t in tensors
    ]


def test_grpc_says_what_rest_says(
    client: httpx.Client, grpc_oip: triton_grpc.InferenceServerClient
) -> None:
    rest = loaded(client, ONNX)
    metadata = grpc_oip.get_model_metadata(ONNX)
    assert {"inputs": said(metadata.inputs), "outputs": said(metadata.outputs)} == rest


ROWS = load_iris().data[[0, 60, 120]]  # one of each class


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("name", [IRIS, ONNX, REGRESSOR])
def test_a_triton_client_builds_its_request_from_metadata(
    request: pytest.FixtureRequest, client: httpx.Client, store: Path, protocol: str, name: str
) -> None:
    """As tritonclient's examples and perf_analyzer do: the input's name, datatype and shape
    from metadata, then each output asked for by name, answered 200 in its declared type."""
    loaded(client, name)
    triton: Any = triton_http if protocol == "http" else triton_grpc
    oip = request.getfixturevalue(f"{protocol}_oip")
    metadata = oip.get_model_metadata(name)
    if protocol == "grpc":
        metadata = {"inputs": metadata.inputs, "outputs": metadata.outputs}
    (spec,) = said(metadata["inputs"])
    values = ROWS.astype(triton_to_np_dtype(spec["datatype"]))
    given = triton.InferInput(spec["name"], [len(values), *spec["shape"][1:]], spec["datatype"])
    given.set_data_from_numpy(values)
    answers = {}
    for output in said(metadata["outputs"]):
        wanted = [triton.InferRequestedOutput(output["name"])]
        answer = oip.infer(name, [given], outputs=wanted).as_numpy(output["name"])
        assert answer.dtype == triton_to_np_dtype(output["datatype"])
        assert [len(values), *output["shape"][1:]] == list(answer.shape)
        answers[output["name"]] = answer
    reference = joblib.load(store / (IRIS if name == ONNX else name))
    assert np.allclose(answers["predict"], reference.predict(ROWS))
    if "predict_proba" in answers:
        assert np.allclose(answers["predict_proba"], reference.predict_proba(ROWS), atol=1e-5)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_triton_client_asks_both_outputs_at_once(
    request: pytest.FixtureRequest, client: httpx.Client, store: Path, protocol: str
) -> None:
    """Both outputs metadata lists, in one request: one in binary, one as JSON over REST;
    raw_output_contents over gRPC."""
    loaded(client, IRIS)
    triton: Any = triton_http if protocol == "http" else triton_grpc
    oip = request.getfixturevalue(f"{protocol}_oip")
    given = triton.InferInput("input-0", list(ROWS.shape), "FP64")
    given.set_data_from_numpy(ROWS)
    if protocol == "http":
        probabilities = triton.InferRequestedOutput("predict_proba", binary_data=True)
        labels = triton.InferRequestedOutput("predict", binary_data=False)
    else:
        probabilities = triton.InferRequestedOutput("predict_proba")
        labels = triton.InferRequestedOutput("predict")
    result = oip.infer(IRIS, [given], outputs=[probabilities, labels])
    reference = joblib.load(store / IRIS)
    assert np.allclose(result.as_numpy("predict_proba"), reference.predict_proba(ROWS))
    assert result.as_numpy("predict").tolist() == reference.predict(ROWS).tolist()
    response = result.get_response()
    if protocol == "grpc":
        assert [output.name for output in response.outputs] == ["predict_proba", "predict"]
        assert len(response.raw_output_contents) == 2
    else:
        assert [output["name"] for output in response["outputs"]] == ["predict_proba", "predict"]
        assert response["outputs"][1]["data"] == reference.predict(ROWS).tolist()


def test_rest_json_answers_both_outputs(client: httpx.Client) -> None:
    loaded(client, IRIS)
    given = {"name": "input-0", "datatype": "FP64", "shape": [3, 4], "data": ROWS.tolist()}
    asked = {"inputs": [given], "outputs": [{"name": "predict"}, {"name": "predict_proba"}]}
    answer = client.post(f"/v2/models/{IRIS}/infer", json=asked)
    assert answer.status_code == 200, answer.text
    labels, probabilities = answer.json()["outputs"]
    assert (labels["name"], labels["shape"], labels["data"]) == ("predict", [3], [0, 1, 2])
    assert (probabilities["name"], probabilities["shape"]) == ("predict_proba", [3, 3])


def test_an_unknown_output_among_two_is_400_naming_the_outputs(client: httpx.Client) -> None:
    loaded(client, IRIS)
    given = {"name": "input-0", "datatype": "FP64", "shape": [3, 4], "data": ROWS.tolist()}
    asked = {"inputs": [given], "outputs": [{"name": "predict"}, {"name": "scores"}]}
    answer = client.post(f"/v2/models/{IRIS}/infer", json=asked)
    assert answer.status_code == 400
    assert "predict, predict_proba" in answer.json()["error"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_unknown_output_of_a_regressor_names_its_metadatas_outputs(
    request: pytest.FixtureRequest, client: httpx.Client, protocol: str
) -> None:
    """The refusal lists the outputs metadata lists (predict alone), not predict_proba."""
    outputs = ", ".join(output["name"] for output in loaded(client, REGRESSOR)["outputs"])
    triton: Any = triton_http if protocol == "http" else triton_grpc
    oip = request.getfixturevalue(f"{protocol}_oip")
    given = triton.InferInput("input-0", list(ROWS.shape), "FP64")
    given.set_data_from_numpy(ROWS)
    wanted = [triton.InferRequestedOutput("scores")]
    with pytest.raises(InferenceServerException) as refused:
        oip.infer(REGRESSOR, [given], outputs=wanted)
    assert refused.value.status() in ("400", "StatusCode.INVALID_ARGUMENT")
    assert f"its outputs, as its metadata lists them, are {outputs}:" in refused.value.message()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_triton_client_asks_for_a_classification(
    request: pytest.FixtureRequest, client: httpx.Client, store: Path, protocol: str
) -> None:
    """class_count=2 answers each row's two best classes as "value:index", the best first,
    and the server says it has the classification extension."""
    loaded(client, IRIS)
    triton: Any = triton_http if protocol == "http" else triton_grpc
    oip = request.getfixturevalue(f"{protocol}_oip")
    extensions = oip.get_server_metadata()
    extensions = extensions.extensions if protocol == "grpc" else extensions["extensions"]
    assert "classification" in extensions
    given = triton.InferInput("input-0", list(ROWS.shape), "FP64")
    given.set_data_from_numpy(ROWS)
    wanted = [triton.InferRequestedOutput("predict_proba", class_count=2)]
    answer = oip.infer(IRIS, [given], outputs=wanted).as_numpy("predict_proba")
    assert answer.shape == (3, 2)
    pairs = [[item.decode().split(":") for item in row] for row in answer]
    reference = joblib.load(store / IRIS)
    assert [int(row[0][1]) for row in pairs] == reference.predict(ROWS).tolist()
    best = reference.predict_proba(ROWS).max(axis=1)
    assert np.allclose([float(row[0][0]) for row in pairs], best)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"config": '{"max_batch_size": 8}'}, "built from its metadata"),
        ({"config": "{}", "files": {"file:1/model.joblib": b"x"}}, "file:1/model.joblib"),
    ],
    ids=["config", "files"],
)
def test_a_load_with_tritons_config_or_files_is_refused(
    request: pytest.FixtureRequest, protocol: str, given: dict[str, Any], words: str
) -> None:
    """tritonclient's load_model(config=, files=) would have Triton apply them; modelhost would
    load the store's artifact in their place, so it refuses them, saying what it takes."""
    oip = request.getfixturevalue(f"{protocol}_oip")
    with pytest.raises(InferenceServerException) as refused:
        oip.load_model(IRIS, **given)
    assert refused.value.status() in ("400", "StatusCode.INVALID_ARGUMENT")
    assert words in refused.value.message()
