"""A front process: `python -m modelhost.fronts FRONT HOST PORT UPSTREAM` (docs/decisions.md,
"Fronts"): the routing table on stdin, reports on stdout, other connections relayed to UPSTREAM."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from modelhost.fronts.direct import DirectSide
from modelhost.fronts.links import Router
from modelhost.fronts.listeners import reuse_port_sockets
from modelhost.fronts.messages import RouteChanges, Table, Unpacker, applied, pack
from modelhost.fronts.rejoin import Followed

READY = b"listening\n"
REPORT_S = 0.1


class Control(asyncio.Protocol):
    """The main process's tables, read from stdin; its end sets `gone`."""

    def __init__(self, router: Router, gone: asyncio.Event) -> None:
        self.router, self.gone, self.unpacker = router, gone, Unpacker()

    def data_received(self, data: bytes) -> None:
        for message in self.unpacker.feed(data):
            if isinstance(message, Table):
                self.router.take(message)
            elif isinstance(message, RouteChanges):
                self.router.take(applied(self.router.table, message))

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone.set()


async def report(router: Router, out: asyncio.WriteTransport) -> None:
    """Send what the front answered itself, every REPORT_S, until cancelled."""
    while True:
        await asyncio.sleep(REPORT_S)
        report = router.take_report()
        if report is not None and not out.is_closing():
            out.write(pack(report))


async def serve(front: int, host: str, port: int, upstream: str) -> None:
    loop = asyncio.get_running_loop()
    connections: set[Any] = set()
    router = Router(front)
    stopping, gone = asyncio.Event(), asyncio.Event()
    await loop.connect_read_pipe(lambda: Control(router, gone), sys.stdin)

    def factory() -> DirectSide:
        return DirectSide(front, upstream, router, connections)

    servers = [await loop.create_server(factory, sock=s) for s in reuse_port_sockets(host, port)]
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    sys.stdout.buffer.write(READY)
    sys.stdout.flush()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    reporting = asyncio.ensure_future(report(router, out))
    await first_of(stopping.wait(), gone.wait())
    for server in servers:
        server.close()
    for connection in list(connections):
        if isinstance(connection, (DirectSide, Followed)):
            connection.stop()
    while connections and not gone.is_set():  # the main process closes them as it drains
        await first_of(asyncio.sleep(0.05), gone.wait())
    reporting.cancel()
    last = router.take_report()
    if last is not None and not out.is_closing():
        out.write(pack(last))


async def first_of(*waits: object) -> None:
    tasks = [asyncio.ensure_future(wait) for wait in waits]  # type: ignore[call-overload]
    _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()


def main(argv: list[str]) -> int:
    front, host, port, upstream = argv
    coroutine = serve(int(front), host, int(port), upstream)
    try:
        import uvloop
    except ImportError:
        asyncio.run(coroutine)
    else:
        uvloop.run(coroutine)
    return 0
