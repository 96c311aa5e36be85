"""One gRPC call as an ASGI exchange: its context for the servicer, its request messages read
as they arrive, its answers and status written back (rpc/asgi.py routes calls here)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from modelhost.rpc.wire import CONTENT_TYPE, Aborted, Messages, Metadata, framed, trailers

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class Context:
    """What a servicer reads and sets of its call, as grpc.aio's ServicerContext offers it."""

    def __init__(self, metadata: Metadata, peer: str, exchange: Exchange) -> None:
        self.metadata, self.address, self.exchange = metadata, peer, exchange
        self.trailing: Metadata = ()
        self.code, self.details = grpc.StatusCode.OK, ""

    def invocation_metadata(self) -> Metadata:
        return self.metadata

    def peer(self) -> str:
        return self.address

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

    async def messages(self, reader: Messages) -> AsyncIterator[bytes]:
        """The request's messages as they arrive; INTERNAL for a body that ends inside one."""
        while not self.ended:
            event = await self.receive()
            if event["type"] == "http.disconnect":
                raise asyncio.CancelledError
            self.ended = not event.get("more_body", False)
            for message in reader.feed(event.get("body", b"")):
                yield message
        if reader.partial():
            raise Aborted(grpc.StatusCode.INTERNAL, "the request ended inside a message")

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
        """Cancels `task` if the client resets the stream, as grpc.aio cancels a handler."""
        while True:
            event = await self.receive()
            if event["type"] == "http.disconnect":
                task.cancel()
                return


async def first_of(messages: AsyncIterator[bytes], wait_s: float) -> bytes | None:
    """The first request message within `wait_s` seconds; None if the body has none."""
    try:
        async with asyncio.timeout(None if math.isinf(wait_s) else wait_s):
            return await anext(messages, None)
    except TimeoutError:
        raise Aborted(grpc.StatusCode.DEADLINE_EXCEEDED, "no message in time") from None


async def only_one(messages: AsyncIterator[bytes], first: bytes | None) -> bytes:
    """A unary call's one message: none or a second is an error, as grpc.aio makes it."""
    if first is None or await anext(messages, None) is not None:
        raise Aborted(grpc.StatusCode.INTERNAL, "a unary call needs exactly one message")
    return first
