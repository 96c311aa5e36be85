"""The fronts that can serve a gRPC port: pygrpc-native or grpc.aio behind its guard, or
h2corn with no guard.

pygrpc-native serves unary and server-streaming methods itself and hands the rest to a grpc.aio
server of its own; grpc.aio serves where it is not installed or is asked for; h2corn, only when
asked for, serves the public port itself (rpc/h2front.py). docs/decisions.md, "gRPC's front".
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import grpc

from modelhost.errors import ConfigError

AUTO = "auto"
NATIVE = "pygrpc-native"
GRPC_AIO = "grpc.aio"
H2CORN = "h2corn"
GUARDED = (NATIVE, GRPC_AIO)  # behind the guard (rpc/guard.py)
FRONTS = (*GUARDED, H2CORN)

Options = Sequence[tuple[str, int]]


def front_of(asked: str) -> str:
    """The front that serves: pygrpc-native if installed, unless another is asked for."""
    if asked == AUTO:
        return NATIVE if native_installed() else GRPC_AIO
    if asked == NATIVE and not native_installed():
        raise ConfigError(
            "--grpc-front pygrpc-native needs the pygrpc-native package: install "
            "modelhost[grpc-native], or choose --grpc-front grpc.aio"
        )
    if asked == H2CORN and importlib.util.find_spec("h2corn") is None:
        raise ConfigError(
            "--grpc-front h2corn needs the h2corn package: install modelhost[grpc-h2corn], "
            "or choose --grpc-front pygrpc-native or grpc.aio"
        )
    return asked


def native_installed() -> bool:
    return importlib.util.find_spec("pygrpc_native") is not None


def new_server(
    front: str, options: Options, interceptors: Sequence[grpc.aio.ServerInterceptor]
) -> grpc.aio.Server:
    """An unstarted server of `front` with grpc's `options` and `interceptors`."""
    if front == NATIVE:
        from pygrpc_native.aio import server  # the submodule: its package's getattr recurses

        return server(options=options, interceptors=interceptors)
    return grpc.aio.server(options=options, interceptors=interceptors)
