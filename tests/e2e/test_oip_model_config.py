"""Triton's model configuration extension over REST and gRPC, as Triton's clients read it: the
image client's parse step and perf_analyzer take max_batch_size, each input's datatype, format
and dims, and each output's, from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.grpc.model_config_pb2 as mc
from google.protobuf import json_format
from helpers.serving import Servers
from tritonclient.utils import InferenceServerException

from modelhost import testing

pytestmark = pytest.mark.e2e

IRIS, UNLOADED, ONNX = "tenants/iris.joblib", "later.joblib", "iris.onnx"
MAX_ROWS = 64
PROTOCOLS = ("http", "grpc")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / IRIS)
    testing.iris_logreg(root / UNLOADED)
    testing.onnx_iris(root / ONNX)
    return root


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers, grpc_port: int) -> testing.RunningServer:
    return serve(store, grpc_port=grpc_port, max_rows_per_request=MAX_ROWS)


@pytest.fixture
def client(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


def config_of(oip: Any, name: str, version: str = "") -> dict[str, Any]:
    """The configuration as a dict, whichever client asked."""
    config = oip.get_model_config(name, version)
    if isinstance(oip, triton_grpc.InferenceServerClient):
        return json_format.MessageToDict(config.config, preserving_proto_field_name=True)
    assert isinstance(config, dict)
    return config


def load(client: httpx.Client, name: str) -> None:
    response = client.post(f"/v2/repository/models/{name}/load")
    assert response.status_code == 200, response.text


def test_get_model_config_tells_batches_datatypes_and_dims(oip: Any, client: httpx.Client) -> None:
    """A model of rows batches on its first dimension, up to the rows a request may carry; the
    dims leave that dimension out, as Triton's do, and `predict`'s one dimension is a reshape."""
    load(client, IRIS)
    config = config_of(oip, IRIS)
    assert config["name"] == IRIS
    assert int(config["max_batch_size"]) == MAX_ROWS
    [features] = config["input"]
    assert (features["name"], features["data_type"]) == ("input-0", "TYPE_FP64")
    assert features.get("format", "FORMAT_NONE") == "FORMAT_NONE"
    assert [int(d) for d in features["dims"]] == [4]
    predict, proba = config["output"]
    assert (predict["name"], predict["data_type"]) == ("predict", "TYPE_INT64")
    assert [int(d) for d in predict["dims"]] == [1]
    assert predict["reshape"].get("shape", []) == []
    assert (proba["name"], proba["data_type"], [int(d) for d in proba["dims"]]) == (
        "predict_proba",
        "TYPE_FP64",
        [3],
    )
    assert "dynamic_batching" in config  # built-in handlers batch requests together
    assert config_of(oip, IRIS, "1")["input"] == config["input"]


def test_get_model_config_agrees_with_metadata_as_the_image_client_checks(
    oip: Any, client: httpx.Client
) -> None:
    """Triton's image client takes the input's rank from metadata and expects it to be the
    config's dims, plus one where max_batch_size is above 0."""
    load(client, ONNX)
    config = config_of(oip, ONNX)
    metadata = client.get(f"/v2/models/{ONNX}").json()
    batching = int(config["max_batch_size"]) > 0
    for told, configured in zip(metadata["inputs"], config["input"], strict=True):
        assert len(told["shape"]) == len(configured["dims"]) + batching
        assert configured["data_type"] == "TYPE_" + told["datatype"]


def test_get_model_config_of_an_unloaded_model_promises_nothing(oip: Any) -> None:
    """As metadata: nothing is known before a load, so no inputs, outputs or batching."""
    config = config_of(oip, UNLOADED)
    assert config["name"] == UNLOADED
    assert int(config.get("max_batch_size", 0)) == 0
    assert config.get("input", []) == [] and config.get("output", []) == []


def test_get_model_config_of_a_missing_model_is_not_found(oip: Any) -> None:
    with pytest.raises(InferenceServerException) as raised:
        oip.get_model_config("no/such.joblib")
    assert raised.value.status() in ("404", str(grpc.StatusCode.NOT_FOUND))


def test_server_metadata_lists_model_configuration(oip: Any) -> None:
    metadata = (
        oip.get_server_metadata(as_json=True)
        if isinstance(oip, triton_grpc.InferenceServerClient)
        else oip.get_server_metadata()
    )
    assert "model_configuration" in metadata["extensions"]


def test_model_config_types_convert_to_tritons_enums(oip: Any, client: httpx.Client) -> None:
    """perf_analyzer and the image client turn the names back into Triton's enums."""
    load(client, IRIS)
    config = config_of(oip, IRIS)
    assert mc.DataType.Value(config["input"][0]["data_type"]) == mc.TYPE_FP64
    formats = dict(mc.ModelInput.Format.items())
    assert formats[config["input"][0].get("format", "FORMAT_NONE")] == mc.ModelInput.FORMAT_NONE
