"""The last resort: an exception no route translated gets a 500 with a request id, and is logged.

No exception reaches the ASGI server, which would answer in its own shape, or not at all.
"""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from typing import Any

from prometheus_client import Counter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelhost.http.errors import error_response

logger = logging.getLogger("modelhost.http")

REQUEST_ID_HEADER = "X-Request-Id"
_ANSWERED = "modelhost.answered_error"  # scope key of an error the framework answered


class LastResort:
    """Wraps the whole ASGI app, whose handler for `Exception` is `unhandled.framework_handler`."""

    def __init__(self, app: ASGIApp, unhandled: Unhandled) -> None:
        self.app = app
        self.unhandled = unhandled

    @property
    def routes(self) -> Any:
        return getattr(self.app, "routes", [])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as error:
            if scope.get(_ANSWERED) is error:
                return  # the framework sent the response already
            response = self.unhandled.answer(scope, error)
            if not started:
                await response(scope, receive, send)


class Unhandled:
    def __init__(self, counter: Counter | None = None) -> None:
        self.counter = counter

    async def framework_handler(self, request: Request, error: Exception) -> Response:
        """Starlette sends this response, then re-raises `error` to `__call__`."""
        request.scope[_ANSWERED] = error
        return self.answer(request.scope, error)

    def answer(self, scope: Scope, error: Exception) -> JSONResponse:
        """Log and count `error`; the 500 telling the client the id to report."""
        request_id = uuid.uuid4().hex
        where = f"{scope.get('method', '')} {scope.get('path', '')}"[:300]
        trace = "".join(traceback.format_exception(error))
        logger.error(
            "unhandled error request_id=%s on %s: %s traceback=%s",
            request_id,
            where,
            type(error).__name__,
            json.dumps(trace),  # one line
        )
        if self.counter is not None:
            self.counter.inc()
        message = (
            f"unexpected error {type(error).__name__} while answering {where}; it is logged with "
            f"request id {request_id}: report that id to the operator"
        )
        response = error_response(500, "InternalError", message)
        response.headers[REQUEST_ID_HEADER] = request_id
        return response
