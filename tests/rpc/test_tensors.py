"""A ModelInferRequest becomes the body the worker's own OIP decoder reads, and the worker's
reply becomes a ModelInferResponse: checked against the real codec (workers/oip.py), no sockets."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from modelhost.errors import BadRequestBody
from modelhost.rpc.messages import message
from modelhost.rpc.tensors import fill_response, request_body
from modelhost.workers.oip import Tensor, decode_request, encode_response
from modelhost.workers.oip_media import oip_media_type


def infer_request(**fields: Any) -> Any:
    return message("inference.ModelInferRequest")(model_name="m", **fields)


def decoded(request: Any) -> Any:
    body, length = request_body(request)
    return decode_request(body, oip_media_type(length))


@pytest.mark.parametrize(
    "datatype,field,values",
    [
        ("BOOL", "bool_contents", [True, False]),
        ("INT8", "int_contents", [-3, 4]),
        ("INT16", "int_contents", [-300, 4]),
        ("INT32", "int_contents", [-3, 2**31 - 1]),
        ("INT64", "int64_contents", [-(2**40), 5]),
        ("UINT8", "uint_contents", [0, 255]),
        ("UINT16", "uint_contents", [0, 65535]),
        ("UINT32", "uint_contents", [0, 2**32 - 1]),
        ("UINT64", "uint64_contents", [0, 2**64 - 1]),
        ("FP32", "fp32_contents", [0.5, -1.25]),
        ("FP64", "fp64_contents", [0.1, 1e300]),
        ("BYTES", "bytes_contents", [b"a", b"\xff\x00"]),
    ],
)
def test_typed_contents_reach_the_worker_as_sent(
    datatype: str, field: str, values: list[Any]
) -> None:
    request = infer_request()
    tensor = request.inputs.add(name="x", datatype=datatype, shape=[2])
    getattr(tensor.contents, field).extend(values)
    (got,) = decoded(request).inputs
    assert got.datatype == datatype
    assert got.values.tolist() == values


def test_raw_contents_reach_the_worker_unchanged_in_any_rank() -> None:
    values = np.arange(24, dtype=np.float16).reshape(2, 3, 2, 2)
    request = infer_request(raw_input_contents=[values.tobytes()])
    request.inputs.add(name="x", datatype="FP16", shape=[2, 3, 2, 2])
    (got,) = decoded(request).inputs
    assert np.array_equal(got.values, values)


def test_outputs_asked_as_binary_data() -> None:
    """Outputs are asked for as binary data with the client's parameters."""
    request = infer_request(id="r7")
    request.inputs.add(name="x", datatype="FP64", shape=[1]).contents.fp64_contents.append(1.0)
    output = request.outputs.add(name="predict_proba")
    output.parameters["classification"].int64_param = 2
    request.parameters["method"].string_param = "predict_proba"
    oip = decoded(request)
    assert oip.id == "r7"
    assert oip.parameters["method"] == "predict_proba"
    assert [(o.name, o.binary) for o in oip.outputs] == [("predict_proba", True)]


def test_unknown_datatype_gets_its_message() -> None:
    """A datatype the worker does not know gets its message."""
    request = infer_request()
    request.inputs.add(name="x", datatype="FP128", shape=[1])
    with pytest.raises(BadRequestBody, match="datatype 'FP128' is not one of"):
        decoded(request)


@pytest.mark.parametrize(
    "change,words",
    [
        (lambda r: r.raw_input_contents.extend([b"", b""]), "holds 2 tensors for 1 inputs"),
        (lambda r: r.inputs[0].contents.fp64_contents.append(1.0), "not fp64_contents"),
    ],
)
def test_contents_that_contradict_the_inputs_are_refused(change: Any, words: str) -> None:
    request = infer_request()
    request.inputs.add(name="x", datatype="FP32", shape=[1])
    change(request)
    with pytest.raises(BadRequestBody, match=words):
        request_body(request)


def test_fp16_needs_raw_contents() -> None:
    request = infer_request()
    request.inputs.add(name="x", datatype="FP16", shape=[1])
    with pytest.raises(BadRequestBody, match="raw_input_contents"):
        request_body(request)


def test_an_int8_out_of_range_is_refused() -> None:
    request = infer_request()
    request.inputs.add(name="x", datatype="INT8", shape=[1]).contents.int_contents.append(300)
    with pytest.raises(BadRequestBody, match="out of INT8's range"):
        request_body(request)


def worker_reply(outputs: list[Tensor], binary: bool) -> tuple[bytes, str]:
    oip_request = decoded(_one_input(binary))
    return encode_response("m", "1", oip_request, outputs)


def _one_input(binary: bool) -> Any:
    request = infer_request(id="r1")
    request.inputs.add(name="x", datatype="FP64", shape=[1]).contents.fp64_contents.append(1.0)
    return request


OUTPUTS = [
    Tensor("p", "FP64", np.array([[0.25, 0.75]])),
    Tensor("c", "INT64", np.array([1, 2, 3])),
    Tensor("t", "BYTES", np.array([b"x", b"yz"], dtype=object)),
]


@pytest.mark.parametrize("raw", [True, False])
def test_the_reply_becomes_a_response_raw_or_typed(raw: bool) -> None:
    body, content_type = worker_reply(OUTPUTS, binary=True)
    response = message("inference.ModelInferResponse")()
    fill_response(response, body, content_type, raw)
    assert (response.model_name, response.model_version, response.id) == ("m", "1", "r1")
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [
        ("p", "FP64", [1, 2]),
        ("c", "INT64", [3]),
        ("t", "BYTES", [2]),
    ]
    if raw:
        assert response.raw_output_contents[0] == np.array([0.25, 0.75]).tobytes()
        assert response.raw_output_contents[2] == b"\x01\x00\x00\x00x\x02\x00\x00\x00yz"
    else:
        assert not response.raw_output_contents
        p, c, t = (o.contents for o in response.outputs)
        assert (list(p.fp64_contents), list(c.int64_contents)) == ([0.25, 0.75], [1, 2, 3])
        assert list(t.bytes_contents) == [b"x", b"yz"]


def test_untyped_output_makes_answer_raw() -> None:
    """An output with no typed field makes the whole answer raw."""
    body, content_type = worker_reply([Tensor("h", "FP16", np.array([1.5], np.float16))], True)
    response = message("inference.ModelInferResponse")()
    fill_response(response, body, content_type, raw=False)
    assert response.raw_output_contents[0] == np.array([1.5], np.float16).tobytes()


def test_json_outputs_of_a_handler_are_packed_too() -> None:
    output = {"name": "y", "datatype": "INT32", "shape": [2], "data": [7, 8]}
    header = json.dumps({"model_name": "m", "outputs": [output]}).encode()
    response = message("inference.ModelInferResponse")()
    fill_response(response, header, "application/json", raw=True)
    assert response.raw_output_contents[0] == np.array([7, 8], "<i4").tobytes()
