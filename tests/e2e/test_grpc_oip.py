"""Triton's own gRPC client, unmodified, against the Open Inference Protocol's gRPC service of a
real server (GRPCInferenceService on --grpc-port). Each test is named after the client call or
the protocol's rule it mirrors (tritonclient.grpc's InferenceServerClient methods; the typed
contents of grpc_predict_v2.proto's InferTensorContents). Each runs on both fronts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton
from helpers.serving import Servers
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from modelhost import testing
from modelhost.rpc.fronts import FRONTS
from modelhost.rpc.messages import OIP_SERVICE, message
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

MODEL = "tenants/t001.joblib"  # a name with a slash, as every store path may have
ECHO = "echo"  # an MMS handler that answers each input's values back
LOGGED = "logged"  # an MMS handler that sleeps, and notes each request it runs in a file

_ECHO_HANDLER = """
def handle(data, context):
    if data is None:
        return None
    return [item["data"] for item in data]
"""

_LOGGED_HANDLER = """
import time

LOG = {log!r}


def handle(data, context):
    if data is None:
        return None
    with open(LOG, "a") as log:
        log.write("start\\n")
    time.sleep(1.5)
    with open(LOG, "a") as log:
        log.write("end\\n")
    return [item["data"] for item in data]
"""


@pytest.fixture(scope="module")
def runs_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs") / "runs.log"


@pytest.fixture(scope="module", params=FRONTS)
def front(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def grpc_port(front: str) -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def grpc_server(
    store: Path, runs_log: Path, serve: Servers, grpc_port: int, front: str
) -> testing.RunningServer:
    (store / ECHO).mkdir(exist_ok=True)
    (store / ECHO / "handler.py").write_text(_ECHO_HANDLER)
    (store / LOGGED).mkdir(exist_ok=True)
    (store / LOGGED / "handler.py").write_text(_LOGGED_HANDLER.format(log=str(runs_log)))
    return serve(
        store,
        workers=2,
        memory_budget="4GiB",
        max_request_size="1MiB",
        workers_per_model=1,
        max_workers_per_model=1,
        job_queue_size=1,
        access_log="-",  # into the server's log, one JSON line a request
        grpc_port=grpc_port,
        grpc_front=front,
    )


@pytest.fixture
def address(grpc_server: testing.RunningServer, grpc_port: int) -> str:
    return f"127.0.0.1:{grpc_port}"


@pytest.fixture
def oip(address: str) -> Iterator[triton.InferenceServerClient]:
    client = triton.InferenceServerClient(address)
    yield client
    client.close()


@pytest.fixture
def stub(address: str) -> Iterator[service_pb2_grpc.GRPCInferenceServiceStub]:
    with grpc.insecure_channel(address) as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


def test_the_start_line_names_the_front(
    grpc_server: testing.RunningServer, grpc_port: int, front: str
) -> None:
    line = f"serving gRPC on 127.0.0.1:{grpc_port} ({front})"
    assert line in grpc_server.log_path.read_text()


def iris_input(rows: np.ndarray, datatype: str = "FP32") -> triton.InferInput:
    tensor = triton.InferInput("input-0", list(rows.shape), datatype)
    tensor.set_data_from_numpy(rows)
    return tensor


def iris(n: int, dtype: type = np.float32) -> np.ndarray:
    return np.asarray(testing.iris_rows(n), dtype=dtype)


# ---------------------------------------------------------------------------- health, metadata


def test_is_server_live_and_ready(oip: triton.InferenceServerClient) -> None:
    assert oip.is_server_live()
    assert oip.is_server_ready()


def test_get_server_metadata(oip: triton.InferenceServerClient) -> None:
    metadata = oip.get_server_metadata(as_json=True)
    assert metadata["name"] == "modelhost"
    assert "model_repository" in metadata["extensions"]


def test_get_model_metadata(oip: triton.InferenceServerClient) -> None:
    """Loaded, the model says its own inputs and outputs (tests/e2e/test_oip_metadata.py)."""
    oip.load_model(MODEL)
    metadata = oip.get_model_metadata(MODEL)
    assert (metadata.name, list(metadata.versions)) == (MODEL, ["1"])
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [
        ("input-0", "FP64", [-1, 4])
    ]
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.outputs] == [
        ("predict", "INT64", [-1]),
        ("predict_proba", "FP64", [-1, 3]),
    ]


# ---------------------------------------------------------------------------- inference


@pytest.mark.parametrize("dtype,datatype", [(np.float32, "FP32"), (np.int64, "INT64")])
def test_infer_with_raw_contents(
    oip: triton.InferenceServerClient, dtype: type, datatype: str
) -> None:
    """tritonclient sends raw_input_contents and reads raw_output_contents."""
    wanted = [triton.InferRequestedOutput("predict_proba")]
    result = oip.infer(MODEL, [iris_input(iris(3, dtype), datatype)], outputs=wanted)
    probabilities = result.as_numpy("predict_proba")
    assert probabilities.shape == (3, 3)
    assert np.allclose(probabilities.sum(axis=1), 1.0)


def test_infer_rank_one_is_one_row(oip: triton.InferenceServerClient) -> None:
    result = oip.infer(MODEL, [iris_input(iris(1)[0])], request_id="r-1")
    assert result.as_numpy("predict").tolist() == [0]
    assert result.get_response().id == "r-1"


@pytest.mark.parametrize("shape", [[2, 2, 2], [1, 2, 2, 2]])
def test_infer_rank_three_and_four(oip: triton.InferenceServerClient, shape: list[int]) -> None:
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    tensor = triton.InferInput("x", shape, "FP32")
    tensor.set_data_from_numpy(values)
    result = oip.infer(ECHO, [tensor])
    assert result.as_numpy("x").tolist() == values.reshape(-1).tolist()


def test_infer_bytes(oip: triton.InferenceServerClient) -> None:
    tensor = triton.InferInput("text", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([b"hello"], dtype=np.object_))
    result = oip.infer(ECHO, [tensor])
    assert result.as_numpy("text").tolist() == [b"hello"]


def test_model_infer_with_typed_contents_answers_typed(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    """InferTensorContents instead of raw bytes: the answer comes typed too."""
    response = stub.ModelInfer(typed_iris_request("predict_proba"))
    assert not response.raw_output_contents
    (output,) = response.outputs
    assert list(output.shape) == [2, 3]
    assert len(output.contents.fp64_contents) == 6


def test_model_infer_typed_answers_each_output_asked(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    """Both outputs the metadata lists, asked at once, come typed in the order asked."""
    response = stub.ModelInfer(typed_iris_request("predict_proba", "predict"))
    assert not response.raw_output_contents
    probabilities, labels = response.outputs
    assert (probabilities.name, list(probabilities.shape)) == ("predict_proba", [2, 3])
    assert len(probabilities.contents.fp64_contents) == 6
    assert (labels.name, list(labels.contents.int64_contents)) == ("predict", [0, 0])


def typed_iris_request(*outputs: str) -> service_pb2.ModelInferRequest:
    """Two iris rows as FP64 contents, asking for `outputs`."""
    request = service_pb2.ModelInferRequest(model_name=MODEL)
    tensor = request.inputs.add(name="input-0", datatype="FP64", shape=[2, 4])
    tensor.contents.fp64_contents.extend(np.asarray(testing.iris_rows(2)).reshape(-1).tolist())
    for name in outputs:
        request.outputs.add(name=name)
    return request


def test_model_infer_typed_bytes(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = service_pb2.ModelInferRequest(model_name=ECHO)
    tensor = request.inputs.add(name="text", datatype="BYTES", shape=[1])
    tensor.contents.bytes_contents.append(b"hi")
    (output,) = stub.ModelInfer(request).outputs
    assert list(output.contents.bytes_contents) == [b"hi"]


def test_infer_answers_server_timing_as_trailing_metadata(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    request = service_pb2.ModelInferRequest(model_name=MODEL)
    tensor = request.inputs.add(name="input-0", datatype="FP64", shape=[1, 4])
    tensor.contents.fp64_contents.extend(testing.iris_rows(1)[0])
    _, call = stub.ModelInfer.with_call(request)
    trailers = dict(call.trailing_metadata())
    assert "infer;dur=" in trailers["server-timing"]
    assert trailers["x-modelhost-cache"] in ("hit", "disk", "remote")


# ---------------------------------------------------------------------------- errors


def test_unknown_model_is_not_found(oip: triton.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as error:
        oip.infer("no/such.joblib", [iris_input(iris(1))])
    assert error.value.status() == "StatusCode.NOT_FOUND"
    assert "is not in the model store" in error.value.message()


def test_bad_shape_is_invalid_argument_with_the_rest_message(
    oip: triton.InferenceServerClient,
) -> None:
    tensor = iris_input(iris(1))
    tensor.set_shape([2, 4])  # 4 values for a shape of 8
    with pytest.raises(InferenceServerException) as error:
        oip.infer(MODEL, [tensor])
    assert error.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "shape [2, 4] holds 8 values but 4 were sent" in error.value.message()


def test_wrong_datatype_is_invalid_argument_with_the_rest_message(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    request = service_pb2.ModelInferRequest(model_name=MODEL)
    request.inputs.add(name="input-0", datatype="FP128", shape=[1, 4])
    with pytest.raises(grpc.RpcError) as error:
        stub.ModelInfer(request)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "datatype 'FP128' is not one of" in error.value.details()


def test_deadline_expiring_in_queue_cancels(
    oip: triton.InferenceServerClient, runs_log: Path
) -> None:
    """A deadline that expires in the queue cancels the request.

    The model has one worker, busy; a second request whose deadline passes while it waits is
    never run: the handler notes every request it runs."""
    tensor = triton.InferInput("x", [1], "FP32")
    tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    oip.load_model(LOGGED)  # loaded, without a run of its sleep
    runs_log.write_text("")
    first = threading.Thread(target=oip.infer, args=(LOGGED, [tensor]))
    first.start()
    while "start" not in runs_log.read_text():
        time.sleep(0.02)
    with pytest.raises(InferenceServerException) as error:
        oip.infer(LOGGED, [tensor], client_timeout=0.3)
    assert error.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    first.join()
    oip.infer(LOGGED, [tensor])
    assert runs_log.read_text().split() == ["start", "end", "start", "end"]


def test_a_full_queue_is_resource_exhausted_with_the_numbers(
    oip: triton.InferenceServerClient, runs_log: Path
) -> None:
    """One request runs, the queue (job_queue_size 1) holds the next: of two more sent at once,
    one waits and the other is refused."""
    tensor = triton.InferInput("x", [1], "FP32")
    tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    oip.load_model(LOGGED)  # loaded, without a run of its sleep
    runs_log.write_text("")
    first = threading.Thread(target=oip.infer, args=(LOGGED, [tensor]))
    first.start()
    while "start" not in runs_log.read_text():
        time.sleep(0.02)
    refusals: list[InferenceServerException] = []

    def send() -> None:
        try:
            oip.infer(LOGGED, [tensor])
        except InferenceServerException as error:
            refusals.append(error)

    others = [threading.Thread(target=send) for _ in range(2)]
    for thread in others:
        thread.start()
    for thread in [first, *others]:
        thread.join()
    (refused,) = refusals
    assert refused.status() == "StatusCode.RESOURCE_EXHAUSTED"
    assert "the limit (job_queue_size) is 1" in refused.message()


def test_a_message_over_max_request_size_is_resource_exhausted(
    oip: triton.InferenceServerClient,
) -> None:
    rows = np.zeros((2**16, 4), dtype=np.float32)  # 1 MiB of values, and the message around them
    with pytest.raises(InferenceServerException) as error:
        oip.infer(MODEL, [iris_input(rows)])
    assert error.value.status() == "StatusCode.RESOURCE_EXHAUSTED"


# ---------------------------------------------------------------------------- repository


def test_load_model_unload_model_and_get_model_repository_index(
    oip: triton.InferenceServerClient,
) -> None:
    model = "tenants/t002.joblib"
    assert not oip.is_model_ready(model)
    oip.load_model(model)
    assert oip.is_model_ready(model)
    index = oip.get_model_repository_index(as_json=True)["models"]
    assert {"name": model, "version": "1", "state": "READY"} in index
    oip.unload_model(model)
    assert not oip.is_model_ready(model)


def test_infer_with_a_model_version(oip: triton.InferenceServerClient) -> None:
    """A model of the store has one version, "1", as on REST's versioned path."""
    result = oip.infer(MODEL, [iris_input(iris(1))], model_version="1")
    assert result.get_response().model_version == "1"
    with pytest.raises(InferenceServerException) as error:
        oip.infer(MODEL, [iris_input(iris(1))], model_version="7")
    assert error.value.status() == "StatusCode.NOT_FOUND"
    assert "one version" in error.value.message()


def test_repository_model_load_in_kserves_layout(address: str) -> None:
    """KServe's RepositoryModelLoadRequest has model_name as field 1, where Triton's has
    repository_name: sent so, it loads the model named and answers KServe's fields."""
    model = "tenants/t003.joblib"
    with grpc.insecure_channel(address) as channel:
        stub: Any = Stub(channel, OIP_SERVICE)
        request = message("inference.RepositoryModelLoadRequest")(repository_name=model)
        response = stub.RepositoryModelLoad(request)
        assert (response.model_name, response.isLoaded) == (model, True)
        ready = stub.ModelReady(message("inference.ModelReadyRequest")(name=model))
        assert ready.ready
        unload = message("inference.RepositoryModelUnloadRequest")(repository_name=model)
        assert stub.RepositoryModelUnload(unload).isUnloaded


def test_model_ready_of_unknown_is_not_found(
    oip: triton.InferenceServerClient,
) -> None:
    """IsModelReady of an unknown model is NOT_FOUND."""
    with pytest.raises(InferenceServerException) as error:
        oip.is_model_ready("no/such.joblib")
    assert error.value.status() == "StatusCode.NOT_FOUND"


def test_the_access_log_has_a_line_per_grpc_call(
    oip: triton.InferenceServerClient, grpc_server: testing.RunningServer
) -> None:
    route = "/inference.GRPCInferenceService/ModelInfer"

    def logged() -> list[dict[str, object]]:
        lines = [json.loads(x) for x in grpc_server.log_text().splitlines() if route in x]
        return [line for line in lines if line["model"] == MODEL and line["status"] == 200]

    before = len(logged())
    oip.infer(MODEL, [iris_input(iris(1))])
    for _ in range(100):  # the log's writer flushes a tenth of a second after the answer
        if len(logged()) > before:
            break
        time.sleep(0.05)
    line = logged()[-1]
    assert line["method"] == "POST"
    assert {"infer_ms", "queue_ms", "cache"} <= set(line)
    assert line["tier"] in ("disk", "host")  # as the x-modelhost-tier trailer says


def test_metrics_count_grpc_calls_by_their_method_path(
    oip: triton.InferenceServerClient, grpc_server: testing.RunningServer
) -> None:
    oip.infer(MODEL, [iris_input(iris(1))])
    metrics = httpx.get(grpc_server.url + "/metrics").text
    assert 'route="/inference.GRPCInferenceService/ModelInfer",status="200"' in metrics


REQUEST_FAMILIES = (
    "modelhost_http_requests",
    "modelhost_http_request_duration_seconds",
    "modelhost_http_request_bytes",
    "modelhost_http_response_bytes",
)


def test_request_metrics_tell_rest_from_grpc_by_a_protocol_label(
    oip: triton.InferenceServerClient, grpc_server: testing.RunningServer
) -> None:
    """One infer over each protocol: every request series names its protocol, from two values."""
    rows = iris(1)
    oip.infer(MODEL, [iris_input(rows)])
    tensor = {"name": "input-0", "datatype": "FP32", "shape": [1, 4], "data": rows[0].tolist()}
    url = f"{grpc_server.url}/v2/models/{MODEL}/infer"
    assert httpx.post(url, json={"inputs": [tensor]}, timeout=30).status_code == 200
    text = httpx.get(grpc_server.url + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in REQUEST_FAMILIES:
        protocols = {s.labels["route"]: s.labels.get("protocol") for s in families[name].samples}
        assert protocols["/inference.GRPCInferenceService/ModelInfer"] == "grpc", name
        assert protocols["/v2/models/{model:path}/infer"] == "rest", name
        assert set(protocols.values()) == {"rest", "grpc"}, name


def test_a_running_call_is_counted_in_flight(
    oip: triton.InferenceServerClient, grpc_server: testing.RunningServer, runs_log: Path
) -> None:
    """The gauge an autoscaler reads counts gRPC calls as it counts REST requests."""
    tensor = triton.InferInput("x", [1], "FP32")
    tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    oip.load_model(LOGGED)  # loaded, without a run of its sleep
    idle = in_flight(grpc_server)  # the scrape itself
    runs_log.write_text("")
    running = threading.Thread(target=oip.infer, args=(LOGGED, [tensor]))
    running.start()
    while "start" not in runs_log.read_text():
        time.sleep(0.02)
    busy = in_flight(grpc_server)
    running.join()
    assert busy - idle == 1


def in_flight(server: testing.RunningServer) -> float:
    text = httpx.get(server.url + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (gauge,) = families["modelhost_http_requests_in_flight"].samples
    return gauge.value


def test_loading_a_loaded_model_from_another_url_already_exists(address: str) -> None:
    """Triton's load with a url parameter, of a model loaded from elsewhere: refused with the
    way out, not answered as loaded while the old artifact stays."""
    model = "tenants/t004.joblib"
    with grpc.insecure_channel(address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name=model))
        request = service_pb2.RepositoryModelLoadRequest(model_name=model)
        request.parameters["url"].string_param = "iris.pkl"
        with pytest.raises(grpc.RpcError) as refused:
            stub.RepositoryModelLoad(request)
        assert refused.value.code() == grpc.StatusCode.ALREADY_EXISTS
        assert f"POST /v2/repository/models/{model}/unload" in str(refused.value.details())
        stub.RepositoryModelUnload(service_pb2.RepositoryModelUnloadRequest(model_name=model))


def test_get_inference_statistics(oip: triton.InferenceServerClient) -> None:
    """Triton's statistics extension over gRPC: the counters REST's /stats answers."""
    model = "tenants/t005.joblib"
    for _ in range(2):
        oip.infer(model, [iris_input(iris(1))])
    (entry,) = oip.get_inference_statistics(model, as_json=True)["model_stats"]
    assert (entry["name"], entry["version"]) == (model, "1")
    assert int(entry["inference_count"]) == 2
    assert int(entry["inference_stats"]["success"]["count"]) == 2
    timed = entry["inference_stats"]["compute_infer"]
    assert int(timed["count"]) == 2 and int(timed["ns"]) > 0
    assert int(entry["last_inference"]) > 0
    versioned = oip.get_inference_statistics(model, model_version="1", as_json=True)
    assert versioned["model_stats"] == [entry]
    assert entry in oip.get_inference_statistics(as_json=True)["model_stats"]
    assert "statistics" in oip.get_server_metadata(as_json=True)["extensions"]
    with pytest.raises(InferenceServerException) as error:
        oip.get_inference_statistics("no/such.joblib")
    assert error.value.status() == "StatusCode.NOT_FOUND"
