"""Servicers and client stubs made from a service's descriptor, as protoc's `_pb2_grpc` would."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.descriptor import MethodDescriptor

from modelhost.rpc.messages import message, service


def method_path(service_name: str, method: str) -> str:
    return f"/{service_name}/{method}"


def generic_handler(service_name: str, servicer: object) -> grpc.GenericRpcHandler:
    """A handler of the methods of `service_name` that `servicer` has coroutines for."""
    handlers = {}
    for method in service(service_name).methods:
        call = getattr(servicer, method.name, None)
        if call is None:
            continue  # not served: the client gets UNIMPLEMENTED
        request = message(method.input_type.full_name)
        response = message(method.output_type.full_name)
        maker = getattr(grpc, f"{_kind(method)}_rpc_method_handler")
        handlers[method.name] = maker(
            call,
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(service_name, handlers)


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
