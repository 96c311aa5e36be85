"""What an inference answer carries, as Triton's clients read it over REST and gRPC."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

IRIS = "iris.joblib"  # the iris store's
ANSWER_WAIT_S = 60  # a bound on a hang, not a timing assertion


@pytest.fixture(scope="module")
def server(iris_store: Path, serve: Servers, grpc_port: int) -> testing.RunningServer:
    return serve(iris_store, grpc_port=grpc_port)


def rows_input(oip: Any, n: int) -> Any:
    module = triton_grpc if isinstance(oip, triton_grpc.InferenceServerClient) else triton_http
    rows = np.asarray(testing.iris_rows(n))
    tensor = module.InferInput("input-0", list(rows.shape), "FP64")
    tensor.set_data_from_numpy(rows)
    return tensor


def answer_of(result: Any) -> dict[str, Any]:
    """The response's header as a dict, whichever client read it."""
    response = result.get_response()
    if isinstance(response, dict):
        return response
    return {"model_name": response.model_name, "model_version": response.model_version}


def test_an_answer_names_the_version_that_served(oip: Any) -> None:
    """Triton names the version that served even when the request names none, as the
    protocol's response schema has it; a client logging or checking it reads "1"."""
    unnamed = answer_of(oip.infer(IRIS, [rows_input(oip, 2)]))
    named = answer_of(oip.infer(IRIS, [rows_input(oip, 1)], model_version="1"))
    assert unnamed["model_name"] == IRIS
    assert unnamed["model_version"] == named["model_version"] == "1"


def test_a_streamed_answer_is_marked_final(server: testing.RunningServer, grpc_port: int) -> None:
    """Triton marks each streamed answer of a model that is not decoupled with the parameter
    triton_final_response: true. Stream clients written for Triton read until they see it, and
    would wait for ever without it."""
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    oip = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    oip.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        oip.async_stream_infer(IRIS, [rows_input(oip, 2)], enable_empty_final_response=True)
        result, error = answers.get(timeout=ANSWER_WAIT_S)
    finally:
        oip.stop_stream()
        oip.close()
    assert error is None
    assert result.as_numpy("predict").tolist() == [0, 0]
    assert result.get_response().parameters["triton_final_response"].bool_param


@pytest.mark.parametrize(
    "parameters",
    [
        {"binary_data_output": "false"},
        {"priority": "high"},
        {"timeout": -5},
        {"sequence_id": 1.5},
        {"sequence_start": 1},
    ],
    ids=["binary_data_output", "priority", "timeout", "sequence_id", "sequence_start"],
)
def test_a_triton_parameter_of_another_type_is_refused(
    server: testing.RunningServer, parameters: dict[str, Any]
) -> None:
    """Triton refuses its request parameters in another JSON type (400, naming the key); read
    by truth instead, "false" asked for a binary answer."""
    response = infer(server, iris_body(parameters))
    assert response.status_code == 400, response.text
    assert f"parameters.{next(iter(parameters))}" in response.json()["error"]


def test_an_output_asked_binary_by_a_string_is_refused(server: testing.RunningServer) -> None:
    body = {**iris_body({}), "outputs": [{"name": "predict", "parameters": {"binary_data": "no"}}]}
    response = infer(server, body)
    assert response.status_code == 400, response.text
    assert "parameters.binary_data" in response.json()["error"]


def test_triton_parameters_of_their_types_are_accepted(server: testing.RunningServer) -> None:
    """A model here batches no sequences and has one priority, as a Triton model without a
    sequence batcher or priority levels, which takes these parameters and answers as usual."""
    parameters = {"priority": 1, "timeout": 1000, "sequence_id": "s", "sequence_start": True}
    body = iris_body({**parameters, "sequence_end": False, "binary_data_output": False})
    response = infer(server, body)
    assert response.status_code == 200, response.text
    assert response.json()["outputs"][0]["data"] == [0]


def infer(server: testing.RunningServer, body: dict[str, Any]) -> httpx.Response:
    """A JSON inference request, as curl or a KServe client sends one."""
    return httpx.post(f"{server.url}/v2/models/{IRIS}/infer", json=body, timeout=60)


def iris_body(parameters: dict[str, Any]) -> dict[str, Any]:
    row = testing.iris_rows(1)[0]
    tensor = {"name": "input-0", "datatype": "FP64", "shape": [1, 4], "data": row}
    return {"inputs": [tensor], "parameters": parameters}
