"""The gRPC servers: grpc.aio servers on the frontend's event loop, beside the HTTP ones.

They share the HTTP servers' TLS certificate and drain with them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from modelhost.config import Config
from modelhost.errors import ConfigError

logger = logging.getLogger("modelhost")


class RpcServer:
    """One grpc.aio server on one address, with the handlers given."""

    def __init__(
        self,
        config: Config,
        host: str,
        port: int,
        handlers: Sequence[grpc.GenericRpcHandler],
        health_names: Sequence[str] = (),
    ) -> None:
        self.address = f"{host}:{port}"
        self.drain_timeout_s = config.drain_timeout_s
        self.server = grpc.aio.server(options=server_options(config))
        self.server.add_generic_rpc_handlers(tuple(handlers))
        self.health: health.aio.HealthServicer | None = None
        self.health_names = ("", *health_names)  # "": the whole server
        if health_names:
            self.health = health.aio.HealthServicer()
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.port = bind(self.server, self.address, config)
        self._stopping: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.server.start()
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
        await self.server.stop(self.drain_timeout_s)

    async def _set_health(self, status: int) -> None:
        if self.health is not None:
            for name in self.health_names:
                await self.health.set(name, status)


def server_options(config: Config) -> list[tuple[str, int]]:
    """Messages up to --max-request-size; no SO_REUSEPORT, so a port is never shared."""
    return [
        ("grpc.max_receive_message_length", config.max_request_bytes),
        ("grpc.so_reuseport", 0),
    ]


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
        raise ConfigError(
            f"cannot listen for gRPC on {address}{reason}; choose a free port "
            "(--grpc-port, --grpc-management-port)"
        )
    return port


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
