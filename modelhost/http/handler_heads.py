"""The status and headers a handler set for its answer (TorchServe's `context`), as far as an
HTTP answer may carry them: a worker's word, checked before a client sees it."""

from __future__ import annotations

import re

from modelhost.errors import HandlerError
from modelhost.protocols.answer_headers import TIMING
from modelhost.workers.messages import Custom

Headers = list[tuple[bytes, bytes]]
NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110's token
VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")  # no control character: no second line
# the framing's, and what the server says of itself
SERVERS = frozenset(
    {
        *("content-length", "transfer-encoding", "connection", "keep-alive", "upgrade"),
        *("te", "trailer", "proxy-connection", "content-type", "date", "server"),
        *(TIMING, "x-request-id"),
    }
)
NO_BODY = frozenset({204, 205, 304})


def handler_head(custom: Custom) -> tuple[int, Headers]:
    """The status and the headers a client is shown; HandlerError for a status no answer with a
    body has."""
    status = custom.status
    if not 200 <= status <= 599 or status in NO_BODY:
        raise HandlerError(
            f"the handler set status {status}, which no answer with a body has: set one from "
            "200 to 599 but 204, 205 and 304 (context.set_response_status)"
        )
    shown = [(name.lower(), value) for name, value in custom.headers if _may_show(name, value)]
    return status, [(name.encode(), value.encode("latin-1")) for name, value in shown]


def _may_show(name: str, value: str) -> bool:
    lowered = name.lower()
    if lowered in SERVERS or lowered.startswith("x-modelhost-"):
        return False
    return NAME.fullmatch(name) is not None and VALUE.fullmatch(value) is not None
