"""`X-Modelhost-Instance` on every response, so a client behind a router sees who answered."""

from __future__ import annotations

import socket

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelhost.protocols.answer_headers import INSTANCE

INSTANCE_HEADER = INSTANCE.encode()


def instance_name(configured: str) -> str:
    """The configured id, or this machine's hostname."""
    return configured or socket.gethostname()


def instance_header(instance: str) -> tuple[bytes, bytes]:
    return INSTANCE_HEADER, instance.encode("latin-1")


class InstanceHeader:
    def __init__(self, app: ASGIApp, instance: str) -> None:
        self.app = app
        self.header = instance_header(instance)

    @property
    def routes(self) -> object:
        return getattr(self.app, "routes", [])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, named)
