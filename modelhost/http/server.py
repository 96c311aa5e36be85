"""The uvicorn servers modelhost runs: settings, the drain hook, and servers beside the main one."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from modelhost.config import Config
from modelhost.http.head_limits import head_limited_protocol
from modelhost.http.hits import hits_first
from modelhost.http.relayed import relayed_protocol


def uvicorn_config(
    app: Any, config: Config, port: int, host: str = "", relayed: bool = False, **more: Any
) -> uvicorn.Config:
    """The servers' settings: httptools, head limits and deadlines, our own access log.

    Proxy headers are trusted only from --forwarded-allow-ips, never from uvicorn's own
    variable: the caller's address decides who may manage models. `relayed`: the server also
    reads the fronts' connections (http/relayed.py).
    """
    protocol = head_limited_protocol(config.header_timeout_s)
    return uvicorn.Config(
        app,
        host=host or config.host,
        port=port,
        lifespan="off",
        access_log=False,
        log_level=config.log_level,
        http=relayed_protocol(protocol) if relayed else hits_first(protocol),
        limit_concurrency=config.max_connections or None,
        proxy_headers=bool(config.forwarded_allow_ips),
        forwarded_allow_ips=config.forwarded_allow_ips or "",
        ssl_certfile=config.ssl_certfile or None,
        ssl_keyfile=config.ssl_keyfile or None,
        **more,
    )


class SecondaryServer(uvicorn.Server):
    """A server that leaves the signals to the main one and stops when it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_beside(
    main: uvicorn.Server,
    beside: list[uvicorn.Server],
    sockets: list[socket.socket] | None = None,
) -> None:
    """`main` on `sockets` (None: its own), and `beside` until it stops."""
    tasks = [asyncio.ensure_future(server.serve()) for server in beside]
    try:
        await main.serve(sockets)
    finally:
        for server in beside:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)


class DrainingServer(uvicorn.Server):
    """uvicorn's server, calling `on_drain` as it starts: event streams never end by themselves."""

    def __init__(self, on_drain: Callable[[], None], config: uvicorn.Config) -> None:
        super().__init__(config)
        self.on_drain = on_drain

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.on_drain()
        await super().shutdown(sockets)


def ignore_signals_after_drain() -> None:
    """After uvicorn's drain re-raises the signal, stop the workers and exit 0."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
