"""A request that loaded its model says so, in its answer's headers and its access log line,
whichever protocol carried it and whether it then succeeded or failed: `simulate` sizes each
model by these lines, and the counters count the miss."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from helpers.logs import logged
from helpers.serving import Servers
from tritonclient.grpc import service_pb2, service_pb2_grpc

from modelhost import testing
from modelhost.toolkit.simulate.trace import read_access_log

pytestmark = pytest.mark.e2e

ROW = testing.iris_rows(1)[0]
WIDE = [*ROW, *ROW]  # a row the model refuses once loaded: it reads 4 features
PROTOCOLS = ("sagemaker", "torchserve", "oip", "kserve", "grpc")
OUTCOMES = {"answered": (ROW, 200), "refused": (WIDE, 400)}
Served = tuple[testing.RunningServer, Path, int]


@pytest.fixture(scope="module")
def served(serve: Servers, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """A server of a model for each protocol and outcome, with its access log and gRPC port."""
    store = tmp_path_factory.mktemp("told")
    for protocol in PROTOCOLS:
        for outcome in OUTCOMES:
            testing.iris_logreg(store / f"{protocol}/{outcome}.joblib")
            testing.iris_logreg(store / f"sized/{protocol}/{outcome}.joblib")
    access_log = tmp_path_factory.mktemp("told-log") / "access.log"
    grpc_port = testing.free_port()
    server = serve(store, workers=1, access_log=access_log, grpc_port=grpc_port)
    return server, access_log, grpc_port


def invoke(
    served: Served, protocol: str, model: str, row: list[float]
) -> tuple[int, dict[str, Any]]:
    """The status and the headers (over gRPC, its code and trailers) of one invocation."""
    server, _, grpc_port = served
    if protocol == "grpc":
        return grpc_invoke(grpc_port, model, row)
    if protocol == "oip":
        tensor = {"name": "x", "shape": [1, len(row)], "datatype": "FP64", "data": row}
        path, body = f"/v2/models/{model}/infer", {"inputs": [tensor]}
    elif protocol == "kserve":
        path, body = f"/v1/models/{model}:predict", {"instances": [row]}
    else:
        route = "/predictions/{}" if protocol == "torchserve" else "/models/{}/invoke"
        path, body = route.format(model), [row]
    response = httpx.post(server.url + path, json=body, timeout=30)
    return response.status_code, dict(response.headers)


def grpc_invoke(port: int, model: str, row: list[float]) -> tuple[int, dict[str, Any]]:
    request = service_pb2.ModelInferRequest(model_name=model)
    tensor = request.inputs.add(name="x", datatype="FP64", shape=[1, len(row)])
    tensor.contents.fp64_contents.extend(row)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            _, call = stub.ModelInfer.with_call(request)
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
            return 400, dict(error.trailing_metadata())
        return 200, dict(call.trailing_metadata())


def line_of(access_log: Path, model: str) -> dict[str, Any]:
    """The access log's line of `model`'s one request."""
    (line,) = logged(access_log, 1, lambda record: record.get("model") == model)
    return line


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("outcome", OUTCOMES)
def test_a_request_that_loaded_its_model_tells_where_from(
    served: Served, protocol: str, outcome: str
) -> None:
    """The first request to a model stored on disk, answered or refused by the loaded model:
    its headers and its log line say `disk`, with the load's time and the model's size."""
    model, (row, status) = f"{protocol}/{outcome}.joblib", OUTCOMES[outcome]
    answered, headers = invoke(served, protocol, model, row)
    assert answered == status
    assert headers["x-modelhost-cache"] == "disk" and "load;dur=" in headers["server-timing"]
    line = line_of(served[1], model)
    assert (line["status"], line["cache"], line["tier"]) == (status, "disk", "disk")
    assert line["model_bytes"] > 0 and line["load_ms"] > 0


def test_simulate_sizes_every_model_its_log_loaded(served: Served) -> None:
    """The log alone sizes each model, whichever protocol loaded it: no --sizes needed."""
    sized = {
        f"sized/{p}/{o}.joblib": (p, row) for p in PROTOCOLS for o, (row, _) in OUTCOMES.items()
    }
    for model, (protocol, row) in sized.items():
        invoke(served, protocol, model, row)
        line_of(served[1], model)
    sizes = read_access_log(served[1]).sizes
    assert set(sized) <= set(sizes) and all(sizes[model] > 0 for model in sized)
