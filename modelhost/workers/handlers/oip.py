"""Every handler speaks the Open Inference Protocol: an OIP request's tensors become the rows a
handler predicts on (sent to it as JSON, which built-in and user handlers all read), and its
predictions become the OIP response's output tensor.

The request's header (id, requested outputs, which of them in binary) is needed to write the
response, so the translation wraps the handler rather than living in `decode_rows` /
`encode_predictions`, which see only a body or an Accept header.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from modelhost.errors import BadRequestBody, HandlerError
from modelhost.workers.codecs import JSON, NPY, media_type
from modelhost.workers.handlers.base import Handler, InferReply, InferRequest
from modelhost.workers.oip import OipRequest, decode_request, encode_response, rows_of, tensor_of
from modelhost.workers.oip_media import MODEL_NAME_PARAM, MODEL_VERSION_PARAM, is_oip

METHODS = ("predict", "predict_proba")


class SpeaksOip(Handler):
    """A handler, answering OIP requests itself and passing every other request through."""

    def __init__(self, inner: Handler) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copying, unpickling)
            raise AttributeError(name)
        return getattr(self.inner, name)  # what a handler declares (batching) stays visible

    @property
    def batches(self) -> bool:  # type: ignore[override]
        return self.inner.batches

    def limit_rows(self, max_rows: int) -> None:
        self.inner.limit_rows(max_rows)

    @property
    def reads_artifact(self) -> bool:  # type: ignore[override]
        return self.inner.reads_artifact

    @property
    def pure(self) -> bool:  # type: ignore[override]
        return self.inner.pure

    def infer(self, request: InferRequest) -> InferReply:
        if not is_oip(request.content_type):
            return self.inner.infer(request)
        oip = decode_request(request.body, request.content_type)
        return answer(request, oip, self.inner.infer(rows_request(oip)))

    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        """Translate the OIP requests of a batch, let the handler batch them all, translate back."""
        if len(requests) == 1 and not is_oip(requests[0].content_type):
            return self.inner.infer_batch(requests)  # nothing to translate
        decoded: list[OipRequest | Exception | None] = []
        inner: list[InferRequest] = []
        for request in requests:
            if not is_oip(request.content_type):
                decoded.append(None)
                inner.append(request)
                continue
            try:
                oip = decode_request(request.body, request.content_type)
                inner.append(rows_request(oip))
            except BadRequestBody as error:
                decoded.append(error)
            else:
                decoded.append(oip)
        replies = iter(self.inner.infer_batch(inner))
        return [
            _batch_reply(request, oip, replies)
            for request, oip in zip(requests, decoded, strict=True)
        ]

    def close(self) -> None:
        self.inner.close()


def _batch_reply(
    request: InferRequest, oip: OipRequest | Exception | None, replies: Any
) -> InferReply | Exception:
    if isinstance(oip, Exception):
        return oip
    reply = next(replies)
    if oip is None or isinstance(reply, Exception):
        return reply  # type: ignore[no-any-return]
    try:
        return answer(request, oip, reply)
    except BadRequestBody as error:
        return error


def rows_request(oip: OipRequest) -> InferRequest:
    """The request a handler predicts on: the rows as JSON, the method the client asked for."""
    body = json.dumps({"instances": rows_of(oip).tolist()}).encode()
    return InferRequest(body, JSON, JSON, {"method": method_of(oip)})


def method_of(oip: OipRequest) -> str:
    """`parameters.method`, else a requested output named after a method, else `predict`."""
    method = oip.parameters.get("method")
    if method is None:
        named = [output.name for output in oip.outputs if output.name in METHODS]
        method = named[0] if named else "predict"
    if not isinstance(method, str):
        raise BadRequestBody("parameters.method must be a string: predict or predict_proba")
    return method


def answer(request: InferRequest, oip: OipRequest, reply: InferReply) -> InferReply:
    """The handler's reply as the OIP response, its one output named as the client asked."""
    if len(oip.outputs) > 1:
        raise BadRequestBody("request one output at a time; this model answers with one tensor")
    name = oip.outputs[0].name if oip.outputs else method_of(oip)
    tensor = tensor_of(name, predictions_of(reply))
    body, content_type = encode_response(
        request.params.get(MODEL_NAME_PARAM, ""),
        request.params.get(MODEL_VERSION_PARAM, ""),
        oip,
        [tensor],
    )
    return InferReply(body, content_type)


def predictions_of(reply: InferReply) -> Any:
    """The values in a handler's reply: `predictions` of JSON, an .npy array, else raw bytes."""
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
