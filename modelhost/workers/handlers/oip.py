"""Every handler speaks the Open Inference Protocol through this wrapper.

Models of rows get the tensors as rows; TorchServe handlers get its KServe v2 envelope. The
response needs the request's header, so the translation wraps the handler rather than the codecs.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from modelhost.errors import BadRequestBody, HandlerError
from modelhost.names import echo
from modelhost.workers.codecs import JSON, NPY, media_type
from modelhost.workers.handlers.base import ARRAY, Handler, InferReply, InferRequest
from modelhost.workers.handlers.mms import MmsHandler
from modelhost.workers.handlers.rows import RowsHandler
from modelhost.workers.oip import (
    OipRequest,
    Tensor,
    check_features,
    decode_request,
    encode_response,
    rows_of,
    tensor_of,
)
from modelhost.workers.oip_media import MODEL_NAME_PARAM, MODEL_VERSION_PARAM, is_oip
from modelhost.workers.signatures import Signature

METHODS = ("predict", "predict_proba")
Asked = tuple[OipRequest, list[str]]  # and the outputs asked


class SpeaksOip(Handler):
    """A handler, answering OIP requests itself and passing the others through."""

    _outputs: tuple[str, ...] | None = None  # its metadata's, once asked

    def __init__(self, inner: Handler) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copying, unpickling)
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def batches(self) -> bool:  # type: ignore[override]
        return self.inner.batches

    def limit_rows(self, max_rows: int) -> None:
        self.inner.limit_rows(max_rows)

    def signature(self) -> Signature | None:
        return self.inner.signature()

    def output_names(self) -> tuple[str, ...]:
        """The outputs its metadata lists; both methods' where it tells none."""
        if self._outputs is None:
            signature = self.inner.signature()
            told = tuple(spec.name for spec in signature.outputs) if signature else ()
            self._outputs = told or METHODS
        return self._outputs

    @property
    def reads_artifact(self) -> bool:  # type: ignore[override]
        return self.inner.reads_artifact

    @property
    def pure(self) -> bool:  # type: ignore[override]
        return self.inner.pure

    @property
    def mapped_bytes(self) -> int:  # type: ignore[override]
        return self.inner.mapped_bytes

    @property
    def device_capable(self) -> bool:  # type: ignore[override]
        return self.inner.device_capable

    @property
    def torch_allocator(self) -> bool:  # type: ignore[override]
        return self.inner.torch_allocator

    def to_device(self, device: str) -> None:
        self.inner.to_device(device)

    def tensor_bytes(self) -> int:
        return self.inner.tensor_bytes()

    def infer(self, request: InferRequest) -> InferReply:
        if not is_oip(request.content_type) or self.inner.answers_oip:
            return self.inner.infer(request)
        oip = decode_request(request.body, request.content_type)
        if isinstance(self.inner, MmsHandler):
            return kserve_v2(self.inner, request, oip)
        asked = handler_requests(oip, self.inner, self.output_names())
        return answer(request, oip, {name: self.inner.infer(r) for name, r in asked.items()})

    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        """Translate a batch's OIP requests, let the handler batch them, translate back."""
        if self.inner.answers_oip or (len(requests) == 1 and not is_oip(requests[0].content_type)):
            return self.inner.infer_batch(requests)
        oip_in_batch = any(is_oip(request.content_type) for request in requests)
        if isinstance(self.inner, MmsHandler) and oip_in_batch:  # one envelope a call
            return Handler.infer_batch(self, requests)
        decoded: list[Asked | Exception | None] = []
        inner: list[InferRequest] = []
        for request in requests:
            if not is_oip(request.content_type):
                decoded.append(None)
                inner.append(request)
                continue
            try:
                oip = decode_request(request.body, request.content_type)
                asked = handler_requests(oip, self.inner, self.output_names())
            except BadRequestBody as error:
                decoded.append(error)
            else:
                decoded.append((oip, list(asked)))
                inner.extend(asked.values())
        replies = iter(self.inner.infer_batch(inner))
        return [
            _batch_reply(request, asked, replies)
            for request, asked in zip(requests, decoded, strict=True)
        ]

    def close(self) -> None:
        self.inner.close()


def _batch_reply(
    request: InferRequest,
    asked: Asked | Exception | None,
    replies: Iterator[InferReply | Exception],
) -> InferReply | Exception:
    if isinstance(asked, Exception):
        return asked
    if asked is None:
        return next(replies)
    oip, names = asked
    answered: dict[str, InferReply] = {}
    failed: list[Exception] = []
    for name in names:  # all of its replies, even past a failure
        reply = next(replies)
        if isinstance(reply, Exception):
            failed.append(reply)
        else:
            answered[name] = reply
    if failed:
        return failed[0]
    try:
        return answer(request, oip, answered)
    except BadRequestBody as error:
        return error


def handler_requests(
    oip: OipRequest, handler: Handler, outputs: Sequence[str]
) -> dict[str, InferRequest]:
    """Each output asked, and the handler's request for it."""
    high = [tensor for tensor in oip.inputs if tensor.values.ndim > 2]
    if isinstance(handler, RowsHandler):
        if high:
            raise BadRequestBody(_takes_rows(high[0]))
        check_features(oip, handler.input_datatype)
        rows = rows_of(oip)  # once, for every method asked
        methods = methods_asked(oip, outputs)
        return {m: InferRequest(b"", ARRAY, ARRAY, {"method": m}, values=rows) for m in methods}
    if len(oip.outputs) > 1:
        raise BadRequestBody("request one output at a time; this model answers one tensor")
    one = oip.inputs[0]
    shaped = high == [one] and one.datatype != "BYTES"
    instances = one.values if shaped else rows_of(oip)
    body = json.dumps({"instances": instances.tolist()}).encode()
    method = method_of(oip)
    name = oip.outputs[0].name if oip.outputs else method
    return {name: InferRequest(body, JSON, JSON, {"method": method})}


def methods_asked(oip: OipRequest, outputs: Sequence[str]) -> list[str]:
    """The methods whose outputs are asked; `predict` by default."""
    asked = [output.name for output in oip.outputs]
    method = method_of(oip) if "method" in oip.parameters else None
    for name in asked:
        _check_output(name, method, outputs)
    return [method] if method else asked or ["predict"]


def _check_output(name: str, method: str | None, outputs: Sequence[str]) -> None:
    if name == method or (method is None and name in outputs):
        return
    method_s = f" for parameters.method {method}" if method else ""
    way_out = f"ask for {method} or leave parameters.method out" if method else "ask for those"
    raise BadRequestBody(
        f"this model has no output {echo(name)}{method_s}; its outputs, as its metadata lists "
        f"them, are {', '.join(outputs)}: {way_out}, or leave outputs out"
    )


def _takes_rows(tensor: Tensor) -> str:
    shape = list(tensor.values.shape)
    rows = [shape[0], int(np.prod(shape[1:]))]
    return (
        f"input {tensor.name} has shape {shape}; this model takes rows of numbers, shape "
        f"[rows, features] (or [features] for one row): send {rows} if it was trained on "
        "these values flattened"
    )


def method_of(oip: OipRequest) -> str:
    """`parameters.method`, else a requested output named after a method, else `predict`."""
    method = oip.parameters.get("method")
    if method is None:
        named = [output.name for output in oip.outputs if output.name in METHODS]
        method = named[0] if named else "predict"
    if not isinstance(method, str):
        raise BadRequestBody("parameters.method must be a string: predict or predict_proba")
    return method


def answer(request: InferRequest, oip: OipRequest, replies: dict[str, InferReply]) -> InferReply:
    """The handler's replies as the OIP response."""
    tensors = [tensor_of(name, predictions_of(reply)) for name, reply in replies.items()]
    body, content_type = encode_response(
        request.params.get(MODEL_NAME_PARAM, ""),
        request.params.get(MODEL_VERSION_PARAM, ""),
        oip,
        tensors,
    )
    return InferReply(body, content_type)


def kserve_v2(handler: MmsHandler, request: InferRequest, oip: OipRequest) -> InferReply:
    """What TorchServe's KServe v2 envelope does around a handler."""
    data = [_envelope_input(tensor) for tensor in oip.inputs]
    results = handler.call(data, request)
    if not isinstance(results, list):
        raise HandlerError(
            f"handle(data, context) returned {type(results).__name__}; for a KServe v2 request "
            f"it must return a list with one result per input in data ({len(data)} here)"
        )
    names = [tensor.name for tensor in oip.inputs]
    outputs = [
        tensor_of(names[i] if i < len(names) else f"output-{i}", np.asarray(result).reshape(-1))
        for i, result in enumerate(results)
    ]
    manifest_model = handler.manifest.get("model") or {}
    version = request.params.get(MODEL_VERSION_PARAM) or manifest_model.get("modelVersion", "")
    body, content_type = encode_response(
        request.params.get(MODEL_NAME_PARAM, ""), str(version), oip, outputs
    )
    return InferReply(body, content_type)


def _envelope_input(tensor: Tensor) -> dict[str, Any]:
    """An input as TorchServe's envelope hands it (BYTES as their first element)."""
    values: Any = tensor.values.tolist()
    if tensor.datatype == "BYTES":
        first = tensor.values.reshape(-1)[0] if tensor.values.size else b""
        values = _text_if_utf8(first)
    shape = list(tensor.values.shape)
    return {"name": tensor.name, "shape": shape, "datatype": tensor.datatype, "data": values}


def _text_if_utf8(item: bytes) -> str | bytes:
    try:
        return item.decode()
    except UnicodeDecodeError:
        return item


def predictions_of(reply: InferReply) -> Any:
    """The values in a handler's reply: JSON `predictions`, an .npy array, else raw bytes."""
    if reply.content_type == ARRAY:
        return reply.values
    kind = media_type(reply.content_type)
    if kind == NPY:
        return np.load(io.BytesIO(reply.body), allow_pickle=False)
    if kind == JSON:
        try:
            value = json.loads(reply.body)
        except ValueError as exc:
            raise HandlerError(f"the handler answered invalid JSON ({exc})") from None
        return value.get("predictions", value) if isinstance(value, dict) else value
    return np.array([reply.body], dtype=object)
