"""h2corn as a gRPC front with no hop: HTTP/2 in Rust on the public port, each call an ASGI
call on the frontend's loop (rpc/asgi.py). It offers the grpc.aio server methods RpcServer uses;
what it holds of the guard's limits is in docs/decisions.md, "h2corn with no hop, opt-in".
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Sequence
from typing import Any, cast

import grpc

from modelhost.config import Config
from modelhost.rpc.asgi import CallLimits, GrpcApp

STREAM_WINDOW_BYTES = 2**20  # what a stream may send before the app reads it
CONNECTION_WINDOW_BYTES = 4 * 2**20
RUNTIME_THREADS = 1  # the frontend has one core: two measured alike (performance.md)


class H2cornServer:
    """An h2corn server of the methods added, on a socket `adopt` gives it."""

    def __init__(
        self, limits: CallLimits, interceptors: Sequence[grpc.aio.ServerInterceptor] = ()
    ) -> None:
        self.registered: dict[str, grpc.RpcMethodHandler] = {}
        self.generic: list[grpc.GenericRpcHandler] = []
        self.app = GrpcApp(self.registered, self.generic, limits, interceptors)
        self.settings: dict[str, Any] = {}
        self.serving: asyncio.Task[None] | None = None
        self.server: Any = None

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        self.registered.update({f"/{service}/{name}": h for name, h in handlers.items()})

    def adopt(self, sock: socket.socket, config: Config, header_bytes: int) -> None:
        """Serve on `sock` (bound and listening) with `config`'s limits and TLS."""
        self.sock = sock
        self.settings = settings(config, header_bytes) | {"bind": (f"fd://{sock.fileno()}",)}

    async def start(self) -> None:
        from h2corn import Config as H2Config
        from h2corn import Server

        self.server = Server(cast(Any, self.app), H2Config(**self.settings))
        self.serving = asyncio.ensure_future(self.server.serve())
        started = asyncio.ensure_future(self.server.wait_started())
        await asyncio.wait({self.serving, started}, return_when=asyncio.FIRST_COMPLETED)
        if self.serving.done():
            started.cancel()
            self.serving.result()  # raises why it stopped
        self.sock.close()  # h2corn serves its own copy

    async def stop(self, grace_s: float | None) -> None:
        if self.serving is None:
            return
        self.server.shutdown()  # in-flight calls get timeout_graceful_shutdown
        with contextlib.suppress(RuntimeError):  # a call outlived the drain: it was cancelled
            await self.serving


def settings(config: Config, header_bytes: int) -> dict[str, Any]:
    """h2corn's settings for `config`'s gRPC limits."""
    tls = {}
    if config.ssl_certfile:  # a certificate file may hold its key too, as ssl's may
        tls = {
            "certfile": config.ssl_certfile,
            "keyfile": config.ssl_keyfile or config.ssl_certfile,
        }
    return {
        "grpc": True,
        "http1": False,
        "lifespan": "off",
        "access_log": False,  # calls are recorded by Calls, as REST's by its middleware
        "runtime_threads": RUNTIME_THREADS,
        "max_concurrent_streams": config.grpc_max_streams,
        "limit_connections": config.grpc_max_connections,
        "h2_max_header_list_size": header_bytes,
        "h2_max_header_block_size": header_bytes,
        "h2_initial_stream_window_size": STREAM_WINDOW_BYTES,
        "h2_initial_connection_window_size": CONNECTION_WINDOW_BYTES,
        "timeout_handshake": config.header_timeout_s,
        "timeout_request_header": config.header_timeout_s,
        "timeout_keep_alive": config.grpc_connection_idle_s,
        "timeout_graceful_shutdown": config.drain_timeout_s,
        **tls,
    }


def call_limits(config: Config, max_waiting: int) -> CallLimits:
    """The limits the app holds of each call."""
    return CallLimits(config.header_timeout_s, config.max_request_bytes, max_waiting)
