"""TorchServe's `x-request-id`: a fresh id on every answer, as its frontend sets one (it never
reads the client's); a prediction's handler reads the same id as its request's."""

from __future__ import annotations

import itertools
import os
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID = b"x-request-id"
# OIP's answers, which a front writes as the main process does (oip_replies.py), carry none
UNMARKED_PREFIX = "/v2/"


class RequestIds:
    """Ids in a UUID's shape: a random prefix and a count (a uuid4 each costs five times as
    much)."""

    def __init__(self) -> None:
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)

    def reseed(self) -> None:
        self._prefix = str(uuid.uuid4())[:24]
        self._count = itertools.count()

    def next(self) -> bytes:
        return f"{self._prefix}{next(self._count) % 16**12:012x}".encode()


REQUEST_IDS = RequestIds()


def request_id_header(request_id: str = "") -> tuple[bytes, bytes]:
    """`request_id`, the one a TorchServe handler was handed, else a fresh one."""
    return REQUEST_ID, request_id.encode() if request_id else REQUEST_IDS.next()


class RequestIdHeader:
    """Sets `x-request-id` on each answer of `app` that has none, OIP's aside."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(UNMARKED_PREFIX):
            return await self.app(scope, receive, send)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if all(name != REQUEST_ID for name, _ in headers):
                    message = {**message, "headers": [*headers, request_id_header()]}
            await send(message)

        await self.app(scope, receive, send_with_id)
