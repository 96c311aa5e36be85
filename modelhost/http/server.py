"""The uvicorn servers modelhost runs: settings, the drain hook, and servers beside the main one."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import ssl
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import uvicorn

from modelhost.config import Config
from modelhost.errors import ConfigError
from modelhost.fronts.listeners import refusal
from modelhost.http.client_pace import pace_of
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
    protocol = head_limited_protocol(pace_of(config))
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


def refuse_unusable_tls(config: Config) -> None:
    """A certificate or key TLS cannot load stops the start, before any model loads."""
    if not config.ssl_certfile:
        return
    try:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile or None)
    except OSError as error:  # ssl.SSLError too
        raise ConfigError(
            f"cannot serve HTTPS with --ssl-certfile {config.ssl_certfile} and --ssl-keyfile "
            f"{config.ssl_keyfile or '(none)'}: {error}; give PEM files this user can read, the "
            "certificate chain and its private key"
        ) from None


class ListeningServer(uvicorn.Server):
    """A server whose port, once bound, sets `listening`; a port it cannot bind stops the start,
    naming the setting."""

    def __init__(self, config: uvicorn.Config, flag: str) -> None:
        super().__init__(config)
        self.flag = flag
        self.listening = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        except SystemExit as stop:
            raise ConfigError(self.refusal(stop.__context__)) from None
        self.listening.set()

    def refusal(self, error: BaseException | None) -> str:
        """What stopped the bind, and the setting to change."""
        return refusal(self.config.host, self.config.port, self.flag, error)


class SecondaryServer(ListeningServer):
    """A server that leaves the signals to the main one and stops when it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_beside(
    main: uvicorn.Server,
    beside: Sequence[ListeningServer],
    sockets: list[socket.socket] | None = None,
) -> None:
    """`beside` listening first, then `main` on `sockets` (None: its own), until it stops."""
    tasks = [asyncio.ensure_future(server.serve()) for server in beside]
    try:
        for server, task in zip(beside, tasks, strict=True):
            await listening(server, task)
        await main.serve(sockets)
    finally:
        for server in beside:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)


async def listening(server: ListeningServer, serving: asyncio.Future[Any]) -> None:
    """Once `server` listens; its refusal raised if it stops first."""
    bound: asyncio.Future[Any] = asyncio.ensure_future(server.listening.wait())
    await asyncio.wait([serving, bound], return_when=asyncio.FIRST_COMPLETED)
    bound.cancel()
    if serving.done():
        serving.result()


class DrainingServer(ListeningServer):
    """uvicorn's server, calling `on_drain` as it starts: event streams never end by themselves."""

    def __init__(self, on_drain: Callable[[], None], config: uvicorn.Config) -> None:
        super().__init__(config, "--port")
        self.on_drain = on_drain
        self.failed = False

    def stop_failed(self) -> None:
        """Drain, then exit 1 for the server's supervisor to restart it."""
        self.failed = self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.on_drain()
        await super().shutdown(sockets)


def ignore_signals_after_drain() -> None:
    """After uvicorn's drain re-raises the signal, stop the workers and exit 0."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
