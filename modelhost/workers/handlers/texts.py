"""Requests of texts and their answers, in the form the request came in.

JSON as Hugging Face inference endpoints take it, plain text, or OIP with one BYTES input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelhost.errors import BadRequestBody, PayloadTooLarge
from modelhost.workers.codecs import JSON, media_type, not_a_form
from modelhost.workers.handlers.base import InferReply, InferRequest
from modelhost.workers.oip import OipRequest, Tensor, decode_request, encode_response, tensor_of
from modelhost.workers.oip_media import MODEL_NAME_PARAM, MODEL_VERSION_PARAM, is_oip

TEXT = "text/plain"
_EXPECTED = (
    'send {"inputs": "a text"} or {"inputs": ["a text", ...]} as JSON, a text/plain body, or an '
    "Open Inference Protocol request with one BYTES input of texts"
)


@dataclass(frozen=True)
class TextRequest:
    """A request's texts, parameters and OIP header."""

    texts: list[str]
    single: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)
    oip: OipRequest | None = None


def decode_texts(request: InferRequest, max_texts: int = 0) -> TextRequest:
    """The texts of a request, refused when it holds none or too many."""
    kind = media_type(request.content_type or "")
    if is_oip(request.content_type):
        decoded = _from_oip(decode_request(request.body, request.content_type))
    elif kind == TEXT:
        decoded = TextRequest([_utf8(request.body)], single=True)
    elif kind in ("", "*/*", JSON):
        decoded = _from_json(request.body)
    else:
        raise BadRequestBody(
            f"cannot decode Content-Type '{request.content_type}'; {_EXPECTED}{not_a_form(kind)}"
        )
    if not decoded.texts:
        raise BadRequestBody(f"the request holds no texts; {_EXPECTED}")
    if max_texts and len(decoded.texts) > max_texts:
        raise PayloadTooLarge(
            f"the request has {len(decoded.texts)} texts, the limit (max_rows_per_request) is "
            f"{max_texts}; send fewer texts a request, or raise --max-rows-per-request"
        )
    return decoded


def _from_json(body: bytes) -> TextRequest:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequestBody(f"body is not valid JSON ({exc}); {_EXPECTED}") from None
    except RecursionError:
        raise BadRequestBody(f"the body's JSON nests too deep; {_EXPECTED}") from None
    parameters: Any = {}
    if isinstance(document, dict):
        parameters = document.get("parameters") or {}
        document = document.get("inputs", document.get("instances"))
    if not isinstance(parameters, dict):
        raise BadRequestBody('"parameters" must be an object, e.g. {"top_k": 1}')
    if isinstance(document, str):
        return TextRequest([document], single=True, parameters=parameters)
    if isinstance(document, list) and all(isinstance(text, str) for text in document):
        return TextRequest(document, parameters=parameters)
    raise BadRequestBody(f"expected a text or a list of texts; {_EXPECTED}")


def _from_oip(oip: OipRequest) -> TextRequest:
    if len(oip.inputs) != 1 or oip.inputs[0].datatype != "BYTES":
        got = ", ".join(f"{t.name} ({t.datatype})" for t in oip.inputs)
        raise BadRequestBody(f"this model takes one BYTES input of texts; got {got}")
    texts = [_utf8(item) for item in oip.inputs[0].values.reshape(-1)]
    return TextRequest(texts, parameters=dict(oip.parameters), oip=oip)


def _utf8(item: bytes) -> str:
    try:
        return item.decode() if isinstance(item, bytes) else str(item)
    except UnicodeDecodeError as exc:
        raise BadRequestBody(f"a text is not valid UTF-8 ({exc})") from None


def json_reply(results: list[Any], request: TextRequest) -> InferReply:
    """One result for a text sent alone, else the list, as JSON."""
    value = results[0] if request.single else results
    return InferReply(json.dumps(value).encode(), JSON)


def oip_reply(request: InferRequest, texts: TextRequest, outputs: dict[str, Any]) -> InferReply:
    """The outputs the client asked for (default all) as an OIP response."""
    assert texts.oip is not None
    wanted = [output.name for output in texts.oip.outputs] or list(outputs)
    unknown = [name for name in wanted if name not in outputs]
    if unknown:
        raise BadRequestBody(f"no output named {unknown[0]}; this model answers {list(outputs)}")
    tensors: list[Tensor] = [tensor_of(name, np.asarray(outputs[name])) for name in wanted]
    body, content_type = encode_response(
        request.params.get(MODEL_NAME_PARAM, ""),
        request.params.get(MODEL_VERSION_PARAM, ""),
        texts.oip,
        tensors,
    )
    return InferReply(body, content_type)


def parameter(texts: TextRequest, name: str, kind: type, default: Any) -> Any:
    """A request parameter of the type needed, or its default."""
    value = texts.parameters.get(name, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadRequestBody(f"parameters.{name} must be of type {kind.__name__}, got {value!r}")
    return value
