"""The bytes a front writes for a request it answered itself: the main process's own.

The head is uvicorn's, as http/whole_response.py writes it, then the headers
http/invocations.py (or http/oip_replies.py) sets on a hit, or its error response.
"""

from __future__ import annotations

import time
from email.utils import formatdate

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from modelhost.errors import ModelhostError
from modelhost.fronts.heads import Hit
from modelhost.http.errors import error_response
from modelhost.http.invocation_paths import error_type, reply_headers
from modelhost.http.oip_replies import oip_error, oip_reply
from modelhost.protocols.status import status_of, type_name_of

Headers = list[tuple[bytes, bytes]]
SERVER = (b"server", b"uvicorn")  # uvicorn's default server header


class Dated:
    """uvicorn's date header, made once a second as uvicorn makes it."""

    def __init__(self) -> None:
        self.second, self.header = -1, b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self.second:
            self.second, self.header = second, formatdate(second, usegmt=True).encode()
        return self.header


def head_and_body(status: int, date: bytes, headers: Headers, body: bytes) -> bytes:
    head = [STATUS_LINE[status]]
    for name, value in ((b"date", date), SERVER, *headers):
        head += (name, b": ", value, b"\r\n")
    head += (b"\r\n", body)
    return b"".join(head)


def hit_headers(
    content_type: str, payload: bytes, timings_ms: dict[str, float], hit: Hit
) -> Headers:
    """What the main process sets on a hit: on OIP's route, or on the invocations'."""
    if hit.oip:
        return list(oip_reply(payload, content_type, "hit", "host", timings_ms).raw_headers)
    size = len(payload)
    return reply_headers(content_type, size, "hit", "host", timings_ms, request_id=hit.request_id)


def failure(error: ModelhostError, hit: Hit) -> tuple[int, str | None, Headers, bytes]:
    """The status, error type (as the main process records it), headers and body the main
    process answers `error` with on the hit's route."""
    status, kind = status_of(error), type_name_of(error)
    if hit.oip:
        response = oip_error(error)
        return status, kind, list(response.raw_headers), bytes(response.body)
    typed = error_type(hit.route, error)
    response = error_response(status, typed, str(error), error.retry_after_s, hit.request_id)
    return status, kind, list(response.raw_headers), bytes(response.body)
