"""Which datatypes a model of rows takes through Triton's clients: numbers, converted to its own;
not BOOL flags or UINT8 bytes, which are refused as the other datatype mismatches are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from helpers.serving import Servers
from tritonclient.utils import InferenceServerException

from modelhost import testing

pytestmark = pytest.mark.e2e

IRIS = "iris.joblib"  # the iris store's; input-0 is FP64


@pytest.fixture(scope="module")
def server(iris_store: Path, serve: Servers, grpc_port: int) -> testing.RunningServer:
    return serve(iris_store, grpc_port=grpc_port)


def infer(oip: Any, values: np.ndarray, datatype: str, binary: bool) -> Any:
    """tritonclient's infer of one input, as the example clients build it."""
    module = triton_grpc if isinstance(oip, triton_grpc.InferenceServerClient) else triton_http
    tensor = module.InferInput("input-0", list(values.shape), datatype)
    if module is triton_http:
        tensor.set_data_from_numpy(values, binary_data=binary)
    else:
        tensor.set_data_from_numpy(values)
    return oip.infer(IRIS, [tensor])


def refused(raised: InferenceServerException) -> bool:
    return raised.status() in ("400", str(grpc.StatusCode.INVALID_ARGUMENT))


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("datatype", ["BOOL", "UINT8"])
def test_infer_bool_or_uint8_into_fp64_is_refused_naming_both(
    oip: Any, datatype: str, binary: bool
) -> None:
    rows = np.asarray(testing.iris_rows(2))
    values = rows > 2 if datatype == "BOOL" else rows.astype(np.uint8)
    with pytest.raises(InferenceServerException) as raised:
        infer(oip, values, datatype, binary)
    assert refused(raised.value), raised.value
    message = raised.value.message()
    assert "input-0" in message and datatype in message and "FP64" in message


@pytest.mark.parametrize("datatype", ["FP32", "FP64", "INT64", "INT32"])
def test_infer_numbers_of_another_width_are_converted(oip: Any, datatype: str) -> None:
    """Numbers still convert to the model's FP64, as tritonclient users send float32 rows."""
    rows = np.asarray(testing.iris_rows(2))
    result = infer(oip, rows.astype(datatype.replace("FP", "float").lower()), datatype, True)
    assert result.as_numpy("predict").tolist() == [0, 0]
