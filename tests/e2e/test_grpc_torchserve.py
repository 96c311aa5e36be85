"""TorchServe's gRPC APIs on a real server, called by a client made from TorchServe's own protos
(modelhost/rpc/protos/torchserve, served stubs built from the same descriptors). The tests follow
TorchServe's client, ts_scripts/torchserve_grpc_client.py: register, infer, infer_stream,
infer_stream2, unregister; and its docs/grpc_api.md for scale, describe, list, set-default. Each
runs on both fronts of the inference port; on pygrpc-native, StreamPredictions2 (bidirectional)
is served by its grpc.aio fallback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from helpers.described import CUSTOMIZED, described_mar
from helpers.serving import Servers

from modelhost import testing
from modelhost.rpc.fronts import FRONTS
from modelhost.rpc.messages import TS_INFERENCE_SERVICE, TS_MANAGEMENT_SERVICE, message
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

INFERENCE = "org.pytorch.serve.grpc.inference."
MANAGEMENT = "org.pytorch.serve.grpc.management."
ROWS = json.dumps(testing.iris_rows(2)).encode()


class Ports:
    def __init__(self) -> None:
        self.inference, self.management = testing.free_port(), testing.free_port()


@pytest.fixture(scope="module", params=FRONTS)
def front(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def ports(front: str) -> Ports:
    return Ports()


@pytest.fixture(scope="module")
def ts_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ts-grpc-store")
    source = testing.mms_handler_folder(root / ".src/iris")
    testing.mar_of(source, root / "iris.mar")
    testing.iris_logreg(root / "plain.joblib")
    described_mar(root / ".src/described", root / "noop_customized.mar")
    return root


@pytest.fixture(scope="module")
def server(ts_store: Path, serve: Servers, ports: Ports, front: str) -> testing.RunningServer:
    return serve(
        ts_store,
        workers=2,
        memory_budget="4GiB",
        grpc_port=ports.inference,
        grpc_management_port=ports.management,
        grpc_front=front,
    )


@pytest.fixture
def inference(server: testing.RunningServer, ports: Ports) -> Iterator[Any]:
    with grpc.insecure_channel(f"127.0.0.1:{ports.inference}") as channel:
        yield Stub(channel, TS_INFERENCE_SERVICE)


@pytest.fixture
def management(server: testing.RunningServer, ports: Ports) -> Iterator[Any]:
    with grpc.insecure_channel(f"127.0.0.1:{ports.management}") as channel:
        yield Stub(channel, TS_MANAGEMENT_SERVICE)


def predictions_request(model: str, **fields: Any) -> Any:
    return message(INFERENCE + "PredictionsRequest")(
        model_name=model, input={"data": ROWS}, **fields
    )


def register(management: Any, model: str, url: str) -> str:
    """ts_scripts/torchserve_grpc_client.py's register: one initial worker, synchronously."""
    request = message(MANAGEMENT + "RegisterModelRequest")(
        url=url, initial_workers=1, synchronous=True, model_name=model
    )
    return str(management.RegisterModel(request).msg)


def test_ping(inference: Any) -> None:
    response = inference.Ping(message("google.protobuf.Empty")())
    assert json.loads(response.health) == {"status": "Healthy"}


def test_register_describe_scale_unregister(management: Any) -> None:
    assert register(management, "iris", "iris.mar") == (
        'Model "iris" Version: 1.0 registered with 1 initial workers'
    )
    describe = message(MANAGEMENT + "DescribeModelRequest")(model_name="iris")
    (description,) = json.loads(management.DescribeModel(describe).msg)
    assert (description["modelName"], description["modelVersion"]) == ("iris", "1.0")
    assert len(description["workers"]) == 1
    scale = message(MANAGEMENT + "ScaleWorkerRequest")(
        model_name="iris", min_worker=2, max_worker=2, synchronous=True
    )
    assert management.ScaleWorker(scale).msg == "Workers scaled to 2 for model: iris"
    (description,) = json.loads(management.DescribeModel(describe).msg)
    assert len(description["workers"]) == 2
    unregister = message(MANAGEMENT + "UnregisterModelRequest")(model_name="iris")
    assert management.UnregisterModel(unregister).msg == 'Model "iris" unregistered'
    with pytest.raises(grpc.RpcError) as missing:
        management.DescribeModel(describe)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_describe_model_with_customized_true(management: Any) -> None:
    """docs/grpc_api.md's DescribeModel with `customized: true`: the description carries the
    handler's `customizedMetadata`."""
    register(management, "noop_customized", "noop_customized.mar")
    describe = message(MANAGEMENT + "DescribeModelRequest")
    customized = describe(model_name="noop_customized", model_version="1.0", customized=True)
    (description,) = json.loads(management.DescribeModel(customized).msg)
    assert description["customizedMetadata"] == CUSTOMIZED
    (plain,) = json.loads(management.DescribeModel(describe(model_name="noop_customized")).msg)
    assert "customizedMetadata" not in plain


def test_infer(inference: Any, management: Any) -> None:
    register(management, "iris-infer", "iris.mar")
    response = inference.Predictions(predictions_request("iris-infer"))
    assert json.loads(response.prediction) == {
        "predictions": [0, 0],
        "handler": "custom handler",
    }


def test_infer_a_model_of_the_store_by_its_path(inference: Any) -> None:
    response = inference.Predictions(predictions_request("plain.joblib", model_version="1.0"))
    assert json.loads(response.prediction) == {"predictions": [0, 0]}


def test_infer_stream(inference: Any) -> None:
    (response,) = list(inference.StreamPredictions(predictions_request("plain.joblib")))
    assert json.loads(response.prediction) == {"predictions": [0, 0]}


def test_infer_stream2_answers_each_request_and_errors_in_band(inference: Any) -> None:
    requests = [
        predictions_request("plain.joblib", sequence_id="s1"),
        predictions_request("no-such.joblib", sequence_id="s1"),
        predictions_request("plain.joblib", sequence_id="s1"),
    ]
    first, failed, last = inference.StreamPredictions2(iter(requests))
    assert json.loads(first.prediction) == json.loads(last.prediction) == {"predictions": [0, 0]}
    assert (first.sequence_id, failed.sequence_id) == ("s1", "s1")
    assert failed.status.code == grpc.StatusCode.NOT_FOUND.value[0]
    assert "no-such.joblib" in failed.status.message


def test_infer_of_an_unknown_model_is_not_found(inference: Any) -> None:
    with pytest.raises(grpc.RpcError) as error:
        inference.Predictions(predictions_request("no-such.joblib"))
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_list_models_pages_by_offset(management: Any) -> None:
    for name in ("list-a", "list-b", "list-c"):
        register(management, name, "iris.mar")
    request = message(MANAGEMENT + "ListModelsRequest")(limit=2)
    first = json.loads(management.ListModels(request).msg)
    assert len(first["models"]) == 2
    offset = int(first["nextPageToken"])
    request = message(MANAGEMENT + "ListModelsRequest")(limit=2, next_page_token=offset)
    second = json.loads(management.ListModels(request).msg)
    names = [m["modelName"] for m in first["models"] + second["models"]]
    assert {"list-a", "list-b", "list-c"} <= set(names)
    assert len(names) == len(set(names))


def test_set_default_of_a_model_with_one_version(management: Any) -> None:
    register(management, "iris-default", "iris.mar")
    request = message(MANAGEMENT + "SetDefaultRequest")(
        model_name="iris-default", model_version="1.0"
    )
    assert management.SetDefault(request).msg == (
        'Default version successfully updated for model "iris-default" to "1.0"'
    )


def test_register_without_url_is_invalid_argument(management: Any) -> None:
    with pytest.raises(grpc.RpcError) as error:
        management.RegisterModel(message(MANAGEMENT + "RegisterModelRequest")(model_name="x"))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "url is required" in error.value.details()
