"""Servicers and client stubs made from a service's descriptor, as protoc's `_pb2_grpc` would.

Methods are registered by name, as generated code registers them, which grpc.aio and
pygrpc-native both serve, the latter natively (a generic handler would go to its fallback).
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.descriptor import MethodDescriptor

from modelhost.rpc.calls import Calls
from modelhost.rpc.messages import message, service

Handlers = dict[str, grpc.RpcMethodHandler]  # a service's methods, by name


def method_path(service_name: str, method: str) -> str:
    return f"/{service_name}/{method}"


def method_handlers(service_name: str, servicer: object, calls: Calls) -> Handlers:
    """The methods of `service_name` that `servicer` has coroutines for, by name. A unary
    method is observed around its coroutine; a streaming one observes its answers itself."""
    handlers = {}
    for method in service(service_name).methods:
        call = getattr(servicer, method.name, None)
        if call is None:
            continue  # not served: the client gets UNIMPLEMENTED
        kind = _kind(method)
        if kind == "unary_unary":
            call = calls.observing(method_path(service_name, method.name), call)
        maker = getattr(grpc, f"{kind}_rpc_method_handler")
        handlers[method.name] = maker(
            call,
            request_deserializer=message(method.input_type.full_name).FromString,
            response_serializer=message(method.output_type.full_name).SerializeToString,
        )
    return handlers


def _kind(method: MethodDescriptor) -> str:
    """grpc's name of a method's shape, such as unary_stream."""
    sent = "stream" if method.client_streaming else "unary"
    return f"{sent}_{'stream' if method.server_streaming else 'unary'}"


class Stub:
    """A client of `service_name` on `channel`, with a callable per method."""

    def __init__(self, channel: grpc.Channel | grpc.aio.Channel, service_name: str) -> None:
        for method in service(service_name).methods:
            call = getattr(channel, _kind(method))(
                method_path(service_name, method.name),
                request_serializer=message(method.input_type.full_name).SerializeToString,
                response_deserializer=message(method.output_type.full_name).FromString,
            )
            setattr(self, method.name, call)

    def __getattr__(self, name: str) -> Any:  # for the type checker
        raise AttributeError(name)
