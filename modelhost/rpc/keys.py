"""TorchServe's token authorization over gRPC: each call's `authorization` metadata must hold the
key of its API, as TorchServe's gRPC services check it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from modelhost.protocols.keys import INFERENCE, MANAGEMENT, TokenKeys, refusal_message
from modelhost.rpc.messages import OIP_SERVICE, TS_INFERENCE_SERVICE

# health checks, which probes make without keys
OPEN = ("/grpc.health.v1.Health/", f"/{TS_INFERENCE_SERVICE}/Ping")
# the calls on the inference port that change what is served
MANAGING = tuple(f"/{OIP_SERVICE}/RepositoryModel{verb}" for verb in ("Load", "Unload"))

Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]]


def inference_port_needs(method: str) -> str | None:
    """The management key for the repository's load and unload, else the inference key."""
    if method.startswith(OPEN):
        return None
    return MANAGEMENT if method in MANAGING else INFERENCE


def management_port_needs(method: str) -> str | None:
    return None if method.startswith(OPEN) else MANAGEMENT


class KeyInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc has no hints
    """Answers UNAUTHENTICATED, unserved, a call without the key its method needs."""

    def __init__(self, keys: TokenKeys, needs: Callable[[str], str | None]) -> None:
        self.keys = keys
        self.needs = needs

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        kind = self.needs(details.method)
        metadata = dict(details.invocation_metadata or ())
        given = metadata.get("authorization", "")
        if handler is None or not kind or self.keys.allows(kind, str(given)):
            return handler
        return refusing(handler, refusal_message(kind))


def refusing(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` that ends each call with `message`."""

    async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def streaming(
        request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # never reached: abort raises

    sent = "stream" if handler.request_streaming else "unary"
    answered = "stream" if handler.response_streaming else "unary"
    maker = getattr(grpc, f"{sent}_{answered}_rpc_method_handler")
    return maker(
        streaming if handler.response_streaming else unary,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
