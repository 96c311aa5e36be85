"""The gRPC servers: pygrpc-native, grpc.aio or h2corn on the frontend's event loop, beside the
HTTP ones (rpc/fronts.py).

pygrpc-native's and grpc.aio's listen on Unix sockets behind a guard (rpc/guard.py), which holds
the public port, its TLS and the HTTP/2 limits the fronts lack; h2corn holds the public port
itself (rpc/h2front.py). They drain with the HTTP servers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from modelhost.config import Config
from modelhost.errors import ConfigError
from modelhost.rpc.admission import ConnectionRate
from modelhost.rpc.frames import Limits, StreamBudget
from modelhost.rpc.fronts import GRPC_AIO, H2CORN, new_server
from modelhost.rpc.guard import BACKEND_HOST, Admission, Guard, Hop
from modelhost.rpc.h2front import H2cornServer, call_limits
from modelhost.rpc.stubs import Handlers

logger = logging.getLogger("modelhost")


ACCEPTING_SERVERS = 8  # decisions.md, "Eight grpc.aio servers share the inference port"
MAX_HEADER_LIST_BYTES = 16 * 2**10  # grpc's own default, now also a hard cap, and the guard's
# a call waiting for its message, in grpc core and grpc.aio, with room (docs/performance.md)
STREAM_BYTES = 32 * 2**10
UNIX_PATH_BYTES = 107  # sun_path's room, less its terminating NUL


class RpcServer:
    """A `front` server with the services given, by name. Of grpc.aio, `copies` servers take
    the guard's connections in turn, as each accepts one call at a time; pygrpc-native takes
    calls in batches, so one serves. They listen in `hop_folder` (None: a loopback port)."""

    def __init__(
        self,
        config: Config,
        host: str,
        port: int,
        services: Mapping[str, Handlers],
        *,
        front: str = GRPC_AIO,
        health_names: Sequence[str] = (),
        copies: int = 1,
        hop_folder: Path | None = None,
        admission: Admission | None = None,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        self.drain_timeout_s = config.drain_timeout_s
        self.front = front
        options = server_options(config)
        copies = copies if front == GRPC_AIO else 1
        admission = admission or admission_of(config, StreamBudget(stream_budget(config)))
        self.servers: list[Any]  # grpc.aio's servers, or h2corn's with the same methods
        if front == H2CORN:
            limits_of_calls = call_limits(config, admission.budget.max_streams)
            self.servers = [H2cornServer(limits_of_calls, interceptors)]
        else:
            self.servers = [new_server(front, options, interceptors) for _ in range(copies)]
        self.health: health.aio.HealthServicer | None = None
        self.health_names = ("", *health_names)  # "": the whole server
        if health_names:
            self.health = health.aio.HealthServicer()
        generic = tuple(grpc.method_handlers_generic_handler(*each) for each in services.items())
        for server in self.servers:
            server.add_generic_rpc_handlers(generic)  # for a grpc.aio that serves no other kind
            for name, handlers in services.items():
                server.add_registered_method_handlers(name, handlers)
            if self.health is not None:
                health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        sock = listen(host, port)
        self.port = sock.getsockname()[1]
        self.guard: Guard | None = None
        if front == H2CORN:
            self.servers[0].adopt(sock, config, MAX_HEADER_LIST_BYTES)
        else:
            self.guard = Guard(
                sock,
                bind_all(self.servers, hop_folder, self.port),
                limits=limits(config),
                admission=admission,
                tls=tls_context(config),
            )
        self.address = f"{host}:{self.port}"
        self._stopping: asyncio.Task[None] | None = None

    async def start(self) -> None:
        for server in self.servers:
            await server.start()
        if self.guard is not None:
            await self.guard.start()
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)

    async def serving(self) -> None:
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)

    def drain(self) -> None:
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop())

    async def stop(self) -> None:
        self.drain()
        assert self._stopping is not None
        await self._stopping

    async def _stop(self) -> None:
        deadline = time.monotonic() + self.drain_timeout_s
        if self.health is not None:
            await self.health.enter_graceful_shutdown()
        if self.guard is not None:
            await self.guard.drain(deadline)
        grace_s = max(0.0, deadline - time.monotonic())
        await asyncio.gather(*(server.stop(grace_s) for server in self.servers))
        if self.guard is not None:
            self.guard.abort()

    async def _set_health(self, status: int) -> None:
        if self.health is not None:
            for name in self.health_names:
                await self.health.set(name, status)


def server_options(config: Config) -> list[tuple[str, int]]:
    """Messages up to --max-request-size; SO_REUSEPORT, for the copies to share the port;
    streams a connection and header size. A connection's lifetimes are the guard's."""
    return [
        ("grpc.max_receive_message_length", config.max_request_bytes),
        ("grpc.so_reuseport", 1),
        ("grpc.max_concurrent_streams", config.grpc_max_streams),
        ("grpc.max_metadata_size", MAX_HEADER_LIST_BYTES),
        ("grpc.absolute_max_metadata_size", MAX_HEADER_LIST_BYTES),
    ]


def limits(config: Config) -> Limits:
    """The guard's limits: a stream's first message is due as a request's headers are, and a
    connection's idle time and age."""
    streams = config.grpc_max_streams
    return Limits(
        streams,
        MAX_HEADER_LIST_BYTES,
        config.header_timeout_s,
        2 * streams,
        idle_s=config.grpc_connection_idle_s,
        age_s=config.grpc_connection_age_s,
        age_grace_s=config.drain_timeout_s,
    )


def stream_budget(config: Config) -> int:
    """Streams without a message the ports hold in all: a quarter of the frontend's allowance's
    worth, the rest left to HTTP's connections and the per-name state."""
    return max(config.grpc_max_streams, config.frontend_allowance_bytes // 4 // STREAM_BYTES)


def admission_of(
    config: Config, budget: StreamBudget, refused: Callable[[str], None] = lambda reason: None
) -> Admission:
    """A port's caps on connections: at once, from one address a second, and their streams'."""
    rate = ConnectionRate(config.grpc_connections_per_s, config.grpc_max_connections)
    return Admission(config.grpc_max_connections, rate, budget, refused)


def bind_all(servers: list[grpc.aio.Server], folder: Path | None, public_port: int) -> Hop:
    """Each server on a Unix socket of its own in `folder`, which only the guard connects to;
    or, without one, every server on one free loopback port."""
    if folder is None or not hasattr(socket, "AF_UNIX"):
        return Hop(port=bind_port(servers))
    paths = tuple(str(folder / f"grpc-{public_port}-{n}.sock") for n in range(len(servers)))
    if not all(map(fits, paths)):
        return Hop(port=bind_port(servers))
    for server, path in zip(servers, paths, strict=True):
        bind(server, f"unix:{path}")
    return Hop(paths)


def bind_port(servers: list[grpc.aio.Server]) -> int:
    """Every server on one free loopback port (SO_REUSEPORT)."""
    port = bind(servers[0], f"{BACKEND_HOST}:0")
    for server in servers[1:]:
        bind(server, f"{BACKEND_HOST}:{port}")
    return port


def fits(path: str) -> bool:
    """Whether a Unix socket can be bound at `path`: a long temporary folder can pass sun_path."""
    return len(os.fsencode(path)) <= UNIX_PATH_BYTES


def bind(server: grpc.aio.Server, address: str) -> int:
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as error:
        refuse(address, f": {error}")
    if not isinstance(port, int) or not port:
        refuse(address, "")
    return port


def listen(host: str, port: int) -> socket.socket:
    """The public port's socket, bound now so that a port in use is refused at start."""
    try:
        found = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, _, _, _, address = found[0]
        return socket.create_server(address, family=family)
    except OSError as error:
        refuse(f"{host}:{port}", f": {error}")


def refuse(address: str, reason: str) -> NoReturn:
    raise ConfigError(
        f"cannot listen for gRPC on {address}{reason}; choose a free port "
        "(--grpc-port, --grpc-management-port)"
    )


def tls_context(config: Config) -> ssl.SSLContext | None:
    """The HTTP servers' certificate, offering HTTP/2 only, as gRPC requires."""
    if not config.ssl_certfile:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile or None)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(
            f"cannot read the TLS certificate or key for gRPC: {error}; check --ssl-certfile "
            "and --ssl-keyfile"
        ) from None
    context.set_alpn_protocols(["h2"])
    return context
