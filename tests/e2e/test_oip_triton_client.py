"""Triton's own client, unmodified, against the Open Inference Protocol routes of a real server."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from modelhost import testing

MODEL = "tenants/t001.joblib"  # a name with a slash, as every store path may have


@pytest.fixture
def oip(server: testing.RunningServer) -> Iterator[triton.InferenceServerClient]:
    client = triton.InferenceServerClient(server.url.removeprefix("http://"))
    yield client
    client.close()


def iris_input(n: int, binary: bool) -> triton.InferInput:
    rows = np.asarray(testing.iris_rows(n), dtype=np.float32)
    tensor = triton.InferInput("input-0", list(rows.shape), "FP32")
    tensor.set_data_from_numpy(rows, binary_data=binary)
    return tensor


def test_server_health_and_metadata(oip: triton.InferenceServerClient) -> None:
    assert oip.is_server_live()
    assert oip.is_server_ready()
    metadata = oip.get_server_metadata()
    assert metadata["name"] == "modelhost"
    assert set(metadata["extensions"]) >= {"binary_tensor_data", "model_repository"}


def test_server_metadata_lists_the_statistics_it_serves(oip: triton.InferenceServerClient) -> None:
    """GET /v2/models/{m}/stats is served, so the statistics extension is listed, as Triton
    lists it for clients that look before they ask."""
    assert "statistics" in oip.get_server_metadata()["extensions"]


def test_load_infer_unload_through_the_repository(oip: triton.InferenceServerClient) -> None:
    assert not oip.is_model_ready(MODEL)
    oip.load_model(MODEL)
    assert oip.is_model_ready(MODEL)
    assert {"name": MODEL, "version": "1", "state": "READY"} in oip.get_model_repository_index()
    assert oip.get_model_metadata(MODEL)["name"] == MODEL
    result = oip.infer(MODEL, [iris_input(3, binary=False)])
    assert result.as_numpy("predict").tolist() == [0, 0, 0]
    assert result.get_response()["model_name"] == MODEL
    oip.unload_model(MODEL)
    assert not oip.is_model_ready(MODEL)


def test_binary_inputs_and_outputs(oip: triton.InferenceServerClient) -> None:
    wanted = triton.InferRequestedOutput("predict_proba", binary_data=True)
    result = oip.infer(MODEL, [iris_input(4, binary=True)], outputs=[wanted], request_id="r1")
    probabilities = result.as_numpy("predict_proba")
    assert probabilities.shape == (4, 3)
    assert np.allclose(probabilities.sum(axis=1), 1.0)
    response = result.get_response()
    assert response["id"] == "r1"
    assert response["outputs"][0]["parameters"]["binary_data_size"] == 4 * 3 * 8


def test_versioned_path_and_json_outputs(oip: triton.InferenceServerClient) -> None:
    wanted = triton.InferRequestedOutput("predict", binary_data=False)
    result = oip.infer(MODEL, [iris_input(2, binary=True)], model_version="1", outputs=[wanted])
    assert result.get_response()["outputs"][0]["data"] == [0, 0]
    with pytest.raises(InferenceServerException, match="one version"):
        oip.infer(MODEL, [iris_input(1, binary=False)], model_version="7")


def test_errors_take_the_protocols_shape(client: httpx.Client) -> None:
    missing = client.post("/v2/models/no/such.joblib/infer", json={"inputs": []})
    assert missing.status_code == 404
    assert set(missing.json()) == {"error"}
    wrong = client.post(
        f"/v2/models/{MODEL}/infer",
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": [1]}]},
    )
    assert wrong.status_code == 400
    assert "holds 2 values but 1 were sent" in wrong.json()["error"]


def test_slashes_may_be_percent_encoded(client: httpx.Client) -> None:
    body = {
        "inputs": [{"name": "x", "datatype": "FP64", "shape": [4], "data": testing.iris_rows(1)[0]}]
    }
    response = client.post("/v2/models/tenants%2Ft002.joblib/infer", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["model_name"] == "tenants/t002.joblib"
    assert response.headers["x-modelhost-cache"] in ("disk", "remote")


@pytest.mark.parametrize(
    "path",
    ["/v2/models/no/such.joblib", "/v2/models/no/such.joblib/versions/1"],
    ids=["metadata", "versioned"],
)
def test_a_missing_model_has_no_metadata(client: httpx.Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert set(response.json()) == {"error"}
    assert "no/such.joblib" in response.json()["error"]


def test_a_missing_model_is_not_merely_unready(
    client: httpx.Client, oip: triton.InferenceServerClient
) -> None:
    response = client.get("/v2/models/no/such.joblib/ready")
    assert response.status_code == 404
    assert set(response.json()) == {"error"}
    with pytest.raises(InferenceServerException) as raised:
        oip.get_model_metadata("no/such.joblib")
    assert raised.value.status() == "404"


def test_config_is_not_taken_for_a_model_named_config(client: httpx.Client) -> None:
    """Triton's model configuration extension answers for the model, not one named config."""
    response = client.get(f"/v2/models/{MODEL}/config")
    assert response.status_code == 200, response.text
    assert response.json()["name"] == MODEL
    assert client.get("/v2/models/no/such.joblib/config").status_code == 404


def test_stats_count_a_models_inferences(oip: triton.InferenceServerClient) -> None:
    """Triton's statistics extension, from the counters the server keeps per model."""
    model = "tenants/t005.joblib"
    for _ in range(2):
        oip.infer(model, [iris_input(1, binary=False)])
    (entry,) = oip.get_inference_statistics(model)["model_stats"]
    assert (entry["name"], entry["version"]) == (model, "1")
    assert entry["inference_count"] == 2
    assert entry["inference_stats"]["success"]["count"] == 2
    assert entry["inference_stats"]["fail"]["count"] == 0
    assert entry["last_inference"] > 0
    versioned = oip.get_inference_statistics(model, model_version="1")["model_stats"]
    assert versioned == [entry]
    every = oip.get_inference_statistics()["model_stats"]
    assert entry in every
    with pytest.raises(InferenceServerException) as raised:
        oip.get_inference_statistics("no/such.joblib")
    assert raised.value.status() == "404"


def test_a_compressed_request_is_415_naming_the_encoding(
    oip: triton.InferenceServerClient,
) -> None:
    """tritonclient's request_compression_algorithm compresses the body; modelhost reads bodies
    as they come, so it says which header to drop rather than failing to decode JSON."""
    with pytest.raises(InferenceServerException, match="Content-Encoding 'gzip'") as caught:
        oip.infer(MODEL, [iris_input(1, binary=False)], request_compression_algorithm="gzip")
    assert caught.value.status() == "415"


def test_loading_a_loaded_model_from_another_url_is_409(client: httpx.Client) -> None:
    """A load naming the URL the model came from is done already; naming another one is not
    answered 200 with the old model left in place: the refusal says to unload first."""
    model = "tenants/t003.joblib"
    load = f"/v2/repository/models/{model}/load"
    assert client.post(load).status_code == 200
    assert client.post(load, json={"parameters": {"url": model}}).status_code == 200
    other = client.post(load, json={"parameters": {"url": "iris.pkl"}})
    assert other.status_code == 409, other.text
    assert f"POST /v2/repository/models/{model}/unload" in other.json()["error"]
    forbidden = client.post(load, json={"parameters": {"url": "file:///etc/passwd"}})
    assert forbidden.status_code == 403


@pytest.mark.parametrize(
    ("body", "words"),
    [({"parameters": {"url": 5}}, "parameters.url"), ({"parameters": [1]}, "'parameters'")],
)
def test_a_load_parameter_of_the_wrong_kind_is_400(
    client: httpx.Client, body: dict[str, object], words: str
) -> None:
    response = client.post(f"/v2/repository/models/{MODEL}/load", json=body)
    assert response.status_code == 400, response.text
    assert words in response.json()["error"]


@pytest.mark.parametrize("call", ["get_inference_statistics", "get_model_config"])
def test_an_extension_call_on_a_missing_model_names_the_model(
    oip: triton.InferenceServerClient, call: str
) -> None:
    """The 404 names the model asked for, not the model with `/stats` or `/config` added."""
    with pytest.raises(InferenceServerException) as raised:
        getattr(oip, call)("no/such.joblib")
    assert raised.value.status() == "404"
    assert "model no/such.joblib is" in raised.value.message()


PERF_ANALYZER_DURATIONS = ("success", "queue", "compute_input", "compute_infer", "compute_output")


def test_get_inference_statistics_has_every_field_perf_analyzer_reads(
    oip: triton.InferenceServerClient,
) -> None:
    """perf_analyzer reads each of these with rapidjson's GetUint64 over HTTP, which fails on a
    missing member; Triton prints every field, zeros too."""
    model = "tenants/t004.joblib"
    oip.infer(model, [iris_input(1, binary=False)])
    (entry,) = oip.get_inference_statistics(model)["model_stats"]
    assert entry["inference_count"] == entry["execution_count"] == 1
    stats = entry["inference_stats"]
    for duration in (*PERF_ANALYZER_DURATIONS, "fail", "cache_hit", "cache_miss"):
        assert set(stats[duration]) == {"count", "ns"}, duration
    assert stats["success"]["count"] == 1
    assert entry["batch_stats"] == [] and entry["memory_usage"] == []


def test_get_inference_statistics_times_what_perf_analyzer_prints(
    oip: triton.InferenceServerClient,
) -> None:
    """perf_analyzer prints a model's average latency, queue and compute from these sums over
    the success count, and stops where the three compute counts differ."""
    model = "tenants/t000.joblib"
    for _ in range(3):
        oip.infer(model, [iris_input(1, binary=False)])
    (entry,) = oip.get_inference_statistics(model)["model_stats"]
    stats = entry["inference_stats"]
    counts = {stats[part]["count"] for part in ("queue", *PERF_ANALYZER_DURATIONS)}
    assert counts == {3}
    assert stats["compute_infer"]["ns"] > 0
    assert stats["queue"]["ns"] + stats["compute_infer"]["ns"] < stats["success"]["ns"]


def test_get_model_config_of_a_handler_that_tells_nothing_is_empty(
    oip: triton.InferenceServerClient,
) -> None:
    """An MMS handler declares no tensors, so its configuration, like its metadata, lists none
    and claims no batching."""
    oip.load_model("custom/mms")
    config = oip.get_model_config("custom/mms")
    assert (config["max_batch_size"], config["input"], config["output"]) == (0, [], [])
