"""A request's head as a front reads it: only a keep-alive HTTP/1.1 invocation hit (SageMaker's,
TorchServe's or OIP's) with a declared body is answered there; anything else is relayed whole."""

from __future__ import annotations

import time
from typing import NamedTuple

import httptools

from modelhost.errors import BadRequestBody, ModelhostError
from modelhost.fronts.messages import Table
from modelhost.http.forms import is_form
from modelhost.http.invocation_paths import (
    CUSTOM_ATTRIBUTES_HEADER,
    PASSED_ON_HEADERS,
    TARGET_MODEL_HEADER,
    accept_of,
    handed,
    is_torchserve,
    route_of,
)
from modelhost.http.oip_replies import (
    HEADER_LENGTH_HEADER,
    check_encoding,
    header_length,
    infer_path_of,
)
from modelhost.http.plain_heads import Head, Heads
from modelhost.protocols.keys import holds_key
from modelhost.protocols.params import check_headers
from modelhost.workers.oip_media import (
    MODEL_NAME_PARAM,
    MODEL_VERSION_PARAM,
    OIP_MEDIA_TYPE,
    oip_media_type,
)

END = b"\r\n\r\n"
HIT_START = b"POST "  # a hit's first bytes
MODEL_VERSION = "1"  # OIP's only version of a model registered without versions
ONE_VERSION = "/1.0"  # TorchServe's
# headers that ask for what only the main process does: its checks, CORS, uvicorn's own paths
RELAYED_HEADERS = frozenset(
    {CUSTOM_ATTRIBUTES_HEADER, "transfer-encoding", "expect", "upgrade", "origin"}
)


class Hit(NamedTuple):
    """An invocation a front may send straight to a worker."""

    route: str
    model: str
    content_type: str
    accept: str
    body_bytes: int  # declared: the body follows the head
    params: dict[str, str]
    oip: bool  # answered in OIP's shape (http/oip_replies.py), else SageMaker's
    headers: dict[str, str] | None = None  # a TorchServe prediction's, for its handler
    request_id: str = ""  # a TorchServe prediction's


class HeadReader(Heads):
    """The heads of a front's client connection."""

    def hit_of(self, head: bytes, table: Table) -> Hit | None:
        """The hit `head` (through its blank line) asks for, holding the table's unexpired
        inference key if any; None: relay it."""
        if not self.feed(head):
            return None
        key = table.inference_key
        if key and not (
            time.time() < table.inference_key_until
            and holds_key(self.read.headers.get("authorization", ""), key)
        ):
            return None  # the main process refuses it in TorchServe's words
        return _hit_of(self.parser, self.read, table)


def _hit_of(parser: httptools.HttpRequestParser, read: Head, table: Table) -> Hit | None:
    if parser.get_method() != b"POST" or parser.get_http_version() != "1.1":
        return None
    headers = read.headers
    if "close" in headers.get("connection", "").lower():
        return None  # uvicorn closes after the answer: the main process's to do
    if not RELAYED_HEADERS.isdisjoint(headers) or b"?" in read.url or b"%" in read.url:
        return None
    try:
        body_bytes = int(headers.get("content-length", "0"))
    except ValueError:
        return None
    if not 0 <= body_bytes <= table.max_request_bytes:
        return None
    path = read.url.decode("latin-1")
    route = route_of(path)
    if route is not None:
        return invocation_hit(*route, headers, body_bytes, table.default_accept)
    inference = infer_path_of(path)
    return None if inference is None else oip_hit(*inference, headers, body_bytes)


def invocation_hit(
    route: str,
    model: str | None,
    headers: dict[str, str],
    body_bytes: int,
    default_accept: str,
) -> Hit | None:
    """SageMaker's or TorchServe's invocation, as http/invocations.py reads it."""
    if is_torchserve(route) and model is not None and model.endswith(ONE_VERSION):
        return None  # TorchServe's `m/1.0`: the main process knows which models have versions
    model = model or headers.get(TARGET_MODEL_HEADER, "")
    content_type = headers.get("content-type", "application/json")
    try:
        check_headers(headers, PASSED_ON_HEADERS)
    except ModelhostError:
        return None
    if not model or is_form(content_type):
        return None
    accept = accept_of(route, headers, default_accept)
    to_handler, request_id = handed(route, headers)
    return Hit(
        route,
        model,
        content_type,
        accept,
        body_bytes,
        params={},
        oip=False,
        headers=to_handler,
        request_id=request_id,
    )


def oip_hit(
    route: str, model: str, version: str, headers: dict[str, str], body_bytes: int
) -> Hit | None:
    """OIP's inference, as http/oip.py reads it, for a model of one version."""
    if version not in ("", MODEL_VERSION):
        return None
    try:
        check_encoding(headers.get("content-encoding"))
        length = header_length(headers.get(HEADER_LENGTH_HEADER), body_bytes)
    except BadRequestBody:
        return None
    params = {MODEL_NAME_PARAM: model, MODEL_VERSION_PARAM: version}
    media_type = oip_media_type(length)
    return Hit(route, model, media_type, OIP_MEDIA_TYPE, body_bytes, params=params, oip=True)
