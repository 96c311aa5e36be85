"""One gRPC call as an ASGI exchange: its context for the servicer, its request messages read
as they arrive, its answers and status written back (rpc/asgi.py routes calls here)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from modelhost.protocols.access import names_this_machine
from modelhost.rpc import callers
from modelhost.rpc.wire import (
    CONTENT_TYPE,
    Aborted,
    Messages,
    Metadata,
    framed,
    metadata,
    trailers,
)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class Context:
    """What a servicer reads and sets of its call, as grpc.aio's ServicerContext offers it;
    the metadata read from the ASGI scope when first asked for."""

    def __init__(self, scope: dict[str, Any], exchange: Exchange) -> None:
        self.scope, self.exchange = scope, exchange
        self.metadata: Metadata | None = None
        self.trailing: Metadata = ()
        self.code, self.details = grpc.StatusCode.OK, ""

    def invocation_metadata(self) -> Metadata:
        if self.metadata is None:
            self.metadata = caller_named(self.scope, metadata(self.scope["headers"]))
        return self.metadata

    def peer(self) -> str:
        """The client as grpc's peer string names it."""
        host, port = self.scope.get("client") or ("", 0)
        return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"

    def set_trailing_metadata(self, metadata: Metadata) -> None:
        self.trailing = tuple(metadata)

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Metadata = ()
    ) -> None:
        if trailing_metadata:
            self.trailing = tuple(trailing_metadata)
        raise Aborted(code, details)

    async def write(self, message: Any) -> None:
        """An answer of a server-streaming call that writes rather than yields."""
        await self.exchange.answer(message)


class Exchange:
    """The call's side of the ASGI stream: request messages in, answers and status out."""

    def __init__(self, receive: Receive, send: Send, serialize: Callable[[Any], bytes]) -> None:
        self.receive, self.send, self.serialize = receive, send, serialize
        self.started = False
        self.ended = False  # the client's side: the request body is whole

    async def read(self, reader: Messages, whole: bool = False) -> list[bytes]:
        """The request's messages read until one is whole (`whole`: until the body ends);
        INTERNAL for a body that ends inside one."""
        found: list[bytes] = []
        while not self.ended and (whole or not found):
            event = await self.receive()
            if event["type"] == "http.disconnect":
                raise asyncio.CancelledError
            self.ended = not event.get("more_body", False)
            found += reader.feed(event.get("body", b""))
        if self.ended and reader.partial():
            raise Aborted(grpc.StatusCode.INTERNAL, "the request ended inside a message")
        return found

    async def messages(self, reader: Messages, first: list[bytes]) -> AsyncIterator[bytes]:
        """A streaming request's messages, `first` those already read."""
        while first:
            for message in first:
                yield message
            first = await self.read(reader)

    async def answer(self, message: Any) -> None:
        await self._start()
        body = framed(self.serialize(message))
        await self.send({"type": "http.response.body", "body": body, "more_body": True})

    async def finish(self, code: grpc.StatusCode, details: str, trailing: Metadata) -> None:
        await self._start()
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        fields = trailers(code, details, trailing)
        await self.send({"type": "http.response.trailers", "headers": fields})

    async def _start(self) -> None:
        if not self.started:
            self.started = True
            start = {"type": "http.response.start", "status": 200, "trailers": True}
            await self.send({**start, "headers": [CONTENT_TYPE]})

    async def watch(self, task: asyncio.Task[Any]) -> None:
        """Cancels `task` if the client resets the stream, as grpc.aio cancels a handler. Only
        streaming answers are watched: a watcher doubles a unary call's cost in the app, and
        an abandoned unary call is noticed at its answer, as REST's is."""
        while True:
            event = await self.receive()
            if event["type"] == "http.disconnect":
                task.cancel()
                return


def only_one(found: list[bytes]) -> bytes:
    """A unary call's one message: none or a second is an error, as grpc.aio makes it."""
    if len(found) != 1:
        raise Aborted(grpc.StatusCode.INTERNAL, "a unary call needs exactly one message")
    return found[0]


def caller_named(scope: dict[str, Any], found: Metadata) -> Metadata:
    """The metadata with the caller named as the guard names it (rpc/callers.py): the client's
    address and any authority that does not name this machine. A client's own is dropped."""
    client = scope.get("client") or ("", 0)
    authority = next((v for k, v in scope["headers"] if k == b"host"), b"").decode("latin-1")
    named = callers.value(client[0], "" if names_this_machine(authority) else authority)
    kept = tuple((name, value) for name, value in found if name != callers.HEADER)
    return (*kept, (callers.HEADER, named))
