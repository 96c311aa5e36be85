"""Triton's calls modelhost does not serve (shared memory, trace and log settings) answer a clear
refusal that says what to do instead, over REST and gRPC, as the example clients make them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from helpers.serving import Servers
from tritonclient.utils import InferenceServerException

from modelhost import testing

pytestmark = pytest.mark.e2e

IRIS = "iris.joblib"  # the iris store's; input-0 is FP64

CALLS: dict[str, Callable[[Any], Any]] = {
    "get_system_shared_memory_status": lambda c: c.get_system_shared_memory_status(),
    "register_system_shared_memory": lambda c: c.register_system_shared_memory("in", "/k", 64),
    "unregister_system_shared_memory": lambda c: c.unregister_system_shared_memory(),
    "get_cuda_shared_memory_status": lambda c: c.get_cuda_shared_memory_status(),
    "unregister_cuda_shared_memory": lambda c: c.unregister_cuda_shared_memory("in"),
}


@pytest.fixture(scope="module")
def server(iris_store: Path, serve: Servers, grpc_port: int) -> testing.RunningServer:
    return serve(iris_store, grpc_port=grpc_port)


@pytest.mark.parametrize("call", sorted(CALLS))
def test_shared_memory_calls_say_to_send_tensors_in_the_request(oip: Any, call: str) -> None:
    with pytest.raises(InferenceServerException) as raised:
        CALLS[call](oip)
    assert raised.value.status() in ("404", str(grpc.StatusCode.UNIMPLEMENTED))
    message = raised.value.message()
    assert "shared memory" in message and "set_data_from_numpy" in message, message


SETTINGS: dict[str, Callable[[Any], Any]] = {
    "get_trace_settings": lambda c: c.get_trace_settings(),
    "get_model_trace_settings": lambda c: c.get_trace_settings(model_name=IRIS),
    "update_trace_settings": lambda c: c.update_trace_settings(settings={"trace_rate": "1"}),
    "get_log_settings": lambda c: c.get_log_settings(),
    "update_log_settings": lambda c: c.update_log_settings({"log_verbose_level": 1}),
}


@pytest.mark.parametrize("call", sorted(SETTINGS))
def test_trace_and_log_settings_say_where_logs_are_set(oip: Any, call: str) -> None:
    with pytest.raises(InferenceServerException) as raised:
        SETTINGS[call](oip)
    assert raised.value.status() in ("404", str(grpc.StatusCode.UNIMPLEMENTED))
    message = raised.value.message()
    assert "not served" in message and "--log-level" in message, message


def module_of(oip: Any) -> Any:
    return triton_grpc if isinstance(oip, triton_grpc.InferenceServerClient) else triton_http


def test_infer_with_an_input_in_shared_memory_is_refused_naming_it(oip: Any) -> None:
    """simple_*_shm_client's infer: the input's values are in a region the server never saw."""
    tensor = module_of(oip).InferInput("input-0", [2, 4], "FP64")
    tensor.set_shared_memory("input_data", 64)
    with pytest.raises(InferenceServerException) as raised:
        oip.infer(IRIS, [tensor])
    assert raised.value.status() in ("400", str(grpc.StatusCode.INVALID_ARGUMENT))
    message = raised.value.message()
    assert "input-0" in message and "input_data" in message and "shared memory" in message


def test_infer_with_an_output_to_shared_memory_is_refused_naming_it(oip: Any) -> None:
    """Answering in the body would leave the client reading a region nothing wrote."""
    module = module_of(oip)
    tensor = module.InferInput("input-0", [2, 4], "FP64")
    tensor.set_data_from_numpy(np.asarray(testing.iris_rows(2)))
    output = module.InferRequestedOutput("predict")
    output.set_shared_memory("output_data", 16)
    with pytest.raises(InferenceServerException) as raised:
        oip.infer(IRIS, [tensor], outputs=[output])
    assert raised.value.status() in ("400", str(grpc.StatusCode.INVALID_ARGUMENT))
    message = raised.value.message()
    assert "predict" in message and "output_data" in message and "shared memory" in message


@pytest.mark.parametrize("extension", ["generate", "generate_stream"])
def test_triton_generate_says_to_call_infer(server: testing.RunningServer, extension: str) -> None:
    """Triton's generate extension, as its docs' curl calls it: not a bare 405 naming GET."""
    answer = httpx.post(
        f"{server.url}/v2/models/{IRIS}/{extension}", json={"text_input": "a"}, timeout=30
    )
    assert answer.status_code in (404, 405), answer.text
    message = answer.json()["error"]
    assert "generate" in message and "/v2/models/{model}/infer" in message, message
