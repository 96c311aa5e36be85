"""The gRPC servers: grpc.aio servers on the frontend's event loop, beside the HTTP ones.

They share the HTTP servers' TLS certificate and drain with them.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from modelhost.config import Config
from modelhost.errors import ConfigError

logger = logging.getLogger("modelhost")


ACCEPTING_SERVERS = 8  # decisions.md, "Eight grpc.aio servers share the inference port"
MAX_HEADER_LIST_BYTES = 16 * 2**10  # grpc's own default, now also a hard cap
CONNECTION_IDLE_MS = 5 * 60 * 1000  # a connection with no call open for this long gets GOAWAY
CONNECTION_AGE_MS = 60 * 60 * 1000  # then GOAWAY, so no connection pins its memory for ever


class RpcServer:
    """`copies` grpc.aio servers sharing one address (SO_REUSEPORT), each with the handlers
    given: each accepts one call at a time, so several take calls side by side."""

    def __init__(
        self,
        config: Config,
        host: str,
        port: int,
        handlers: Sequence[grpc.GenericRpcHandler],
        health_names: Sequence[str] = (),
        copies: int = 1,
    ) -> None:
        self.drain_timeout_s = config.drain_timeout_s
        options = server_options(config, copies)
        self.servers = [grpc.aio.server(options=options) for _ in range(copies)]
        self.health: health.aio.HealthServicer | None = None
        self.health_names = ("", *health_names)  # "": the whole server
        if health_names:
            self.health = health.aio.HealthServicer()
        for server in self.servers:
            server.add_generic_rpc_handlers(tuple(handlers))
            if self.health is not None:
                health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        self.port = bind_all(self.servers, host, port, config)
        self.address = f"{host}:{self.port}"
        self._stopping: asyncio.Task[None] | None = None

    async def start(self) -> None:
        for server in self.servers:
            await server.start()
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
        if self.health is not None:
            await self.health.enter_graceful_shutdown()
        await asyncio.gather(*(server.stop(self.drain_timeout_s) for server in self.servers))

    async def _set_health(self, status: int) -> None:
        if self.health is not None:
            for name in self.health_names:
                await self.health.set(name, status)


def server_options(config: Config, copies: int = 1) -> list[tuple[str, int]]:
    """Messages up to --max-request-size; SO_REUSEPORT, for the copies to share the port; and
    HTTP/2's limits: streams a connection, connections (shared by the copies), header size,
    idle and whole-life ages of a connection."""
    return [
        ("grpc.max_receive_message_length", config.max_request_bytes),
        ("grpc.so_reuseport", 1),
        ("grpc.max_concurrent_streams", config.grpc_max_streams),
        ("grpc.max_allowed_incoming_connections", -(-config.grpc_max_connections // copies)),
        ("grpc.max_metadata_size", MAX_HEADER_LIST_BYTES),
        ("grpc.absolute_max_metadata_size", MAX_HEADER_LIST_BYTES),
        ("grpc.max_connection_idle_ms", CONNECTION_IDLE_MS),
        ("grpc.max_connection_age_ms", CONNECTION_AGE_MS),
        ("grpc.max_connection_age_grace_ms", int(config.drain_timeout_s * 1000)),
    ]


def bind_all(servers: list[grpc.aio.Server], host: str, port: int, config: Config) -> int:
    """Every server on one port, `port` or else the first one's; refused if another process
    listens there, which SO_REUSEPORT alone would let them share."""
    if port:
        check_free(host, port)
    port = bind(servers[0], f"{host}:{port}", config)
    for server in servers[1:]:
        bind(server, f"{host}:{port}", config)
    return port


def check_free(host: str, port: int) -> None:
    """A plain bind fails where any socket listens, with SO_REUSEPORT or without."""
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
        for family, kind, protocol, _, address in found:
            with socket.socket(family, kind, protocol) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
    except OSError as error:
        refuse(f"{host}:{port}", f": {error}")


def bind(server: grpc.aio.Server, address: str, config: Config) -> int:
    """Listen on `address`, with TLS if configured; the port."""
    try:
        if config.ssl_certfile:
            port = server.add_secure_port(address, credentials(config))
        else:
            port = server.add_insecure_port(address)
    except RuntimeError as error:
        port, reason = 0, f": {error}"
    else:
        reason = ""
    if not isinstance(port, int) or not port:
        refuse(address, reason)
    return port


def refuse(address: str, reason: str) -> NoReturn:
    raise ConfigError(
        f"cannot listen for gRPC on {address}{reason}; choose a free port "
        "(--grpc-port, --grpc-management-port)"
    )


def credentials(config: Config) -> grpc.ServerCredentials:
    try:
        key = Path(config.ssl_keyfile).read_bytes()
        certificate = Path(config.ssl_certfile).read_bytes()
    except OSError as error:
        raise ConfigError(
            f"cannot read the TLS certificate or key for gRPC: {error}; check --ssl-certfile "
            "and --ssl-keyfile"
        ) from None
    return grpc.ssl_server_credentials([(key, certificate)])
