"""A request's head as a front reads it: only a keep-alive HTTP/1.1 invocation hit with a
declared body is answered there; anything else is relayed whole."""

from __future__ import annotations

from typing import NamedTuple

import httptools

from modelhost.errors import ModelhostError
from modelhost.http.forms import is_form
from modelhost.http.invocation_paths import (
    CUSTOM_ATTRIBUTES_HEADER,
    INVOCATIONS,
    MODEL_INVOKE,
    PASSED_ON_HEADERS,
    TARGET_MODEL_HEADER,
    route_of,
)
from modelhost.protocols.params import check_headers

END = b"\r\n\r\n"
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


class _Head:
    """httptools' callbacks: the URL and the headers, names lowered, the last of each kept."""

    def __init__(self) -> None:
        self.url = b""
        self.headers: dict[str, str] = {}

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")


def hit_of(head: bytes, max_request_bytes: int) -> Hit | None:
    """The hit `head` (through its blank line) asks for; None: relay it."""
    read = _Head()
    parser = httptools.HttpRequestParser(read)
    try:
        parser.feed_data(head)
    except httptools.HttpParserError:
        return None
    if parser.get_method() != b"POST" or parser.get_http_version() != "1.1":
        return None
    headers = read.headers
    if "close" in headers.get("connection", "").lower():
        return None  # uvicorn closes after the answer: the main process's to do
    if not RELAYED_HEADERS.isdisjoint(headers) or b"?" in read.url or b"%" in read.url:
        return None
    route = route_of(read.url.decode("latin-1"))
    if route is None or route[0] not in (INVOCATIONS, MODEL_INVOKE):
        return None
    model = route[1] or headers.get(TARGET_MODEL_HEADER, "")
    content_type = headers.get("content-type", "application/json")
    try:
        body_bytes = int(headers.get("content-length", "0"))
        check_headers(headers, PASSED_ON_HEADERS)
    except (ValueError, ModelhostError):
        return None
    if not model or is_form(content_type) or not 0 <= body_bytes <= max_request_bytes:
        return None
    return Hit(route[0], model, content_type, headers.get("accept", "application/json"), body_bytes)
