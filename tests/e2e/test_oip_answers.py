"""What an inference answer carries, as Triton's clients read it over REST and gRPC."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

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
