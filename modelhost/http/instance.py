"""`X-Modelhost-Instance` on every response, so a client behind a router (nginx, an ingress, Ray
Serve) can tell which instance answered: the configured instance id, or the hostname."""

from __future__ import annotations

import socket

from starlette.types import ASGIApp, Message, Receive, Scope, Send

INSTANCE_HEADER = b"x-modelhost-instance"


def instance_name(configured: str) -> str:
    """The configured id, or this machine's hostname (a pod's name in Kubernetes)."""
    return configured or socket.gethostname()


def instance_header(instance: str) -> tuple[bytes, bytes]:
    return INSTANCE_HEADER, instance.encode("latin-1")


class InstanceHeader:
    """Wraps the whole ASGI app and adds the header to each response's start."""

    def __init__(self, app: ASGIApp, instance: str) -> None:
        self.app = app
        self.header = instance_header(instance)

    @property
    def routes(self) -> object:
        """The wrapped app's route table."""
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
