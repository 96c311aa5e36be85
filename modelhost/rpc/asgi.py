"""gRPC's calls as an ASGI app for a front that speaks HTTP/2 itself (rpc/h2front.py), holding a
call's limits: the first message's deadline and size, and the waiting streams (rpc/waiting.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from typing import Any, NamedTuple

import grpc

from modelhost.rpc.calling import Context, Exchange, Receive, Send, only_one
from modelhost.rpc.waiting import WaitingStreams
from modelhost.rpc.wire import Aborted, Messages, Metadata, timeout_s

logger = logging.getLogger("modelhost")


class CallLimits(NamedTuple):
    first_message_s: float
    max_message_bytes: int
    max_waiting: int  # streams without their first message, on every connection together


class Details(NamedTuple):
    """grpc.HandlerCallDetails, for generic handlers and interceptors."""

    method: str
    invocation_metadata: Metadata


class GrpcApp:
    """The ASGI app of a port's methods: `registered` by path, then `generic` handlers."""

    def __init__(
        self,
        registered: dict[str, grpc.RpcMethodHandler],
        generic: Sequence[grpc.GenericRpcHandler],
        limits: CallLimits,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        self.registered, self.generic = registered, generic
        self.limits, self.interceptors = limits, interceptors
        self.waiting = WaitingStreams(limits.max_waiting, limits.first_message_s)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        context = Context(scope, Exchange(receive, send, bytes))
        path = scope["path"]
        handler = self.registered.get(path) if not self.interceptors else None
        if handler is None:
            handler = await self.handler(Details(path, context.invocation_metadata()))
        with contextlib.suppress(asyncio.CancelledError, OSError):  # the client is gone
            if handler is None:
                code = grpc.StatusCode.UNIMPLEMENTED
                await context.exchange.finish(code, f"no method {path}", ())
                return
            context.exchange.serialize = handler.response_serializer or bytes
            deadline_s = timeout_s(scope["headers"])
            await self.answered(handler, context, deadline_s, scope.get("client"))

    async def handler(self, details: Details) -> grpc.RpcMethodHandler | None:
        """The method's handler, through the port's interceptors."""

        async def found(details: Details) -> grpc.RpcMethodHandler | None:
            handler = self.registered.get(details.method)
            for generic in self.generic if handler is None else ():
                handler = generic.service(details)
                if handler is not None:
                    break
            return handler

        lookup = found
        for interceptor in reversed(self.interceptors):
            lookup = _through(interceptor, lookup)
        return await lookup(details)

    async def answered(
        self,
        handler: grpc.RpcMethodHandler,
        context: Context,
        deadline_s: float,
        connection: Hashable,
    ) -> None:
        """The call run within its deadline, and its status sent."""
        exchange, code, details = context.exchange, grpc.StatusCode.OK, ""
        due = contextlib.nullcontext() if math.isinf(deadline_s) else asyncio.timeout(deadline_s)
        try:
            async with due:
                await self.run(handler, context, connection)
            code, details = context.code, context.details
        except Aborted as aborted:
            code, details = aborted.code, aborted.details
        except TimeoutError:
            code, details = grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"
        except Exception as error:  # a servicer's bug: the client is told, as grpc.aio does
            logger.exception("gRPC method failed")
            code, details = grpc.StatusCode.UNKNOWN, f"Unexpected {type(error).__name__}: {error}"
        await exchange.finish(code, details, context.trailing)

    async def run(
        self, handler: grpc.RpcMethodHandler, context: Context, connection: Hashable
    ) -> None:
        """The method called on its request, its answers written as they come."""
        exchange = context.exchange
        reader = Messages(self.limits.max_message_bytes)
        found = await self.waiting.read(connection, exchange.read(reader))
        decode = _decoder(handler.request_deserializer or bytes)
        if handler.request_streaming:
            request: Any = _decoded(exchange.messages(reader, found), decode)
        else:
            request = decode(only_one(found + await exchange.read(reader, whole=True)))
        method = _method_of(handler)
        watcher = None
        if exchange.ended and handler.response_streaming:  # long-lived: see Exchange.watch
            task = asyncio.current_task()
            assert task is not None
            watcher = asyncio.ensure_future(exchange.watch(task))
        try:
            result = method(request, context)
            if handler.response_streaming and hasattr(result, "__aiter__"):
                async for answer in result:
                    await exchange.answer(answer)
            elif handler.response_streaming:
                await result  # it writes its answers with context.write
            else:
                await exchange.answer(await result)
        finally:
            if watcher is not None:
                watcher.cancel()


def _through(interceptor: grpc.aio.ServerInterceptor, lookup: Callable[..., Any]) -> Any:
    async def intercepted(details: Details) -> grpc.RpcMethodHandler | None:
        return await interceptor.intercept_service(lookup, details)

    return intercepted


def _method_of(handler: grpc.RpcMethodHandler) -> Callable[..., Any]:
    # not cast(Callable[..., Any], ...): its generic alias would be built at every call
    unary = handler.unary_unary or handler.unary_stream
    method: Callable[..., Any] = unary or handler.stream_unary or handler.stream_stream
    return method


def _decoder(deserialize: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """`deserialize`, its failure told to the client as grpc.aio tells it, and not logged."""

    def decode(message: bytes) -> Any:
        try:
            return deserialize(message)
        except Exception:
            raise Aborted(grpc.StatusCode.INTERNAL, "Failed to deserialize request") from None

    return decode


async def _decoded(messages: AsyncIterator[bytes], decode: Callable[[bytes], Any]) -> Any:
    """A streaming request's messages, decoded."""
    async for message in messages:
        yield decode(message)
