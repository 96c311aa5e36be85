"""gRPC's calls as an ASGI app, for a front that speaks HTTP/2 itself (rpc/h2front.py): each
method's grpc handler called as grpc.aio calls it, on the loop the app runs on.

The front holds HTTP/2's limits; the app holds those that are a call's: a stream's first
message within `first_message_s`, a message no larger than `max_message_bytes`, and at most
`max_waiting` streams without their first message at once, across every connection
(rpc/waiting.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple, cast

import grpc

from modelhost.protocols.access import names_this_machine
from modelhost.rpc import callers
from modelhost.rpc.calling import Context, Exchange, Receive, Send, first_of, only_one
from modelhost.rpc.waiting import WaitingStreams
from modelhost.rpc.wire import Aborted, Messages, Metadata, metadata, timeout_s

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
        self.waiting = WaitingStreams(limits.max_waiting)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        call_metadata = caller_named(scope, metadata(scope["headers"]))
        handler = await self.handler(Details(path, call_metadata))
        if handler is None:
            exchange = Exchange(receive, send, bytes)
            await exchange.finish(grpc.StatusCode.UNIMPLEMENTED, f"no method {path}", ())
            return
        exchange = Exchange(receive, send, handler.response_serializer or bytes)
        context = Context(call_metadata, peer_of(scope), exchange)
        connection = scope.get("client")
        with contextlib.suppress(asyncio.CancelledError, OSError):  # the client is gone
            await self.answered(handler, context, timeout_s(scope["headers"]), connection)

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
        try:
            async with asyncio.timeout(None if math.isinf(deadline_s) else deadline_s):
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
        messages = exchange.messages(reader)
        with self.waiting.waiting(connection):
            first = await first_of(messages, self.limits.first_message_s)
        decode = handler.request_deserializer or bytes
        if handler.request_streaming:
            request: Any = _decoded(first, messages, decode)
        else:
            request = decode(await only_one(messages, first))
        method = _method_of(handler)
        watcher = None
        if exchange.ended:
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
    method = handler.unary_unary or handler.unary_stream or handler.stream_unary
    return cast(Callable[..., Any], method or handler.stream_stream)


async def _decoded(first: bytes | None, rest: Any, decode: Callable[[bytes], Any]) -> Any:
    """A streaming request's messages, decoded, the first already read."""
    if first is None:
        return
    yield decode(first)
    async for message in rest:
        yield decode(message)


def caller_named(scope: dict[str, Any], found: Metadata) -> Metadata:
    """The metadata with the caller named as the guard names it (rpc/callers.py): the client's
    address and any authority that does not name this machine. A client's own is dropped."""
    client = scope.get("client") or ("", 0)
    authority = next((v for k, v in scope["headers"] if k == b"host"), b"").decode("latin-1")
    named = callers.value(client[0], "" if names_this_machine(authority) else authority)
    kept = tuple((name, value) for name, value in found if name != callers.HEADER)
    return (*kept, (callers.HEADER, named))


def peer_of(scope: dict[str, Any]) -> str:
    """The client as grpc's peer string names it."""
    host, port = scope.get("client") or ("", 0)
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
