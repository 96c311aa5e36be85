"""Servicers and client stubs made from a service's descriptor, as protoc's `_pb2_grpc` modules
would make them, for message classes that live in our own pool (see `messages`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from modelhost.rpc.messages import message, service


def method_path(service_name: str, method: str) -> str:
    return f"/{service_name}/{method}"


def generic_handler(service_name: str, servicer: object) -> grpc.GenericRpcHandler:
    """The handler of every method of `service_name` that `servicer` has a coroutine for."""
    handlers = {}
    for method in service(service_name).methods:
        call = getattr(servicer, method.name, None)
        if call is None:
            continue  # not served: the client gets UNIMPLEMENTED
        request = message(method.input_type.full_name)
        response = message(method.output_type.full_name)
        handlers[method.name] = _handler(method.client_streaming, method.server_streaming)(
            call,
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(service_name, handlers)


def _handler(client_streaming: bool, server_streaming: bool) -> Callable[..., Any]:
    kind = ("stream" if client_streaming else "unary") + "_"
    kind += "stream" if server_streaming else "unary"
    maker: Callable[..., Any] = getattr(grpc, f"{kind}_rpc_method_handler")
    return maker


class Stub:
    """A client of `service_name` on `channel` (sync or grpc.aio): one callable per method,
    by the method's name, as a generated stub has."""

    def __init__(self, channel: grpc.Channel | grpc.aio.Channel, service_name: str) -> None:
        for method in service(service_name).methods:
            kind = (
                ("stream" if method.client_streaming else "unary")
                + "_"
                + ("stream" if method.server_streaming else "unary")
            )
            call = getattr(channel, kind)(
                method_path(service_name, method.name),
                request_serializer=message(method.input_type.full_name).SerializeToString,
                response_deserializer=message(method.output_type.full_name).FromString,
            )
            setattr(self, method.name, call)

    def __getattr__(self, name: str) -> Any:  # the methods set above, for the type checker
        raise AttributeError(name)
