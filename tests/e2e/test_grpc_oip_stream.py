"""gRPC's ModelStreamInfer as Triton's clients use it (image_client --streaming, perf_analyzer
--streaming): each request answered on the stream, a failure as that answer's error."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as triton
from helpers.serving import Servers
from tritonclient.utils import InferenceServerException

from modelhost import testing

pytestmark = pytest.mark.e2e

IRIS = "iris.joblib"  # the iris store's; input-0 is FP64
ANSWER_WAIT_S = 60  # a bound on a hang, not a timing assertion


@pytest.fixture(scope="module")
def server(iris_store: Path, serve: Servers, grpc_port: int) -> testing.RunningServer:
    return serve(iris_store, grpc_port=grpc_port)


@pytest.fixture
def oip(server: testing.RunningServer, grpc_port: int) -> Iterator[triton.InferenceServerClient]:
    client = triton.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    yield client
    client.close()


def rows_input(n: int, features: int = 4) -> triton.InferInput:
    rows = np.asarray(testing.iris_rows(n))[:, :features]
    tensor = triton.InferInput("input-0", list(rows.shape), "FP64")
    tensor.set_data_from_numpy(rows)
    return tensor


def test_async_stream_infer_answers_each_request_and_each_failure(
    oip: triton.InferenceServerClient,
) -> None:
    answers: queue.Queue[tuple[Any, InferenceServerException | None]] = queue.Queue()
    oip.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        oip.async_stream_infer(IRIS, [rows_input(2)], request_id="1")
        oip.async_stream_infer(IRIS, [rows_input(1, features=3)], request_id="2")
        oip.async_stream_infer(IRIS, [rows_input(3)], request_id="3")
        got = [answers.get(timeout=ANSWER_WAIT_S) for _ in range(3)]
    finally:
        oip.stop_stream()
    results = {r.get_response().id: r for r, error in got if error is None}
    errors = [error for _, error in got if error is not None]
    assert results["1"].as_numpy("predict").tolist() == [0, 0]
    assert results["3"].as_numpy("predict").tolist() == [0, 0, 0]
    [error] = errors
    assert "4 features" in error.message()
