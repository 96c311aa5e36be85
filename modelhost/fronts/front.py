"""A front process: `python -m modelhost.fronts FRONT HOST PORT UPSTREAM`.

It binds the port beside the main process, says "listening" on stdout, and relays every
connection to the main process's Unix socket `UPSTREAM`. SIGTERM or SIGINT stops it taking
connections; it exits once those it holds have closed, or at once when its stdin closes (the
main process is gone).
"""

from __future__ import annotations

import asyncio
import signal
import sys

from modelhost.fronts.listeners import reuse_port_sockets
from modelhost.fronts.relay import ClientSide, client_factory

READY = b"listening\n"


async def serve(front: int, host: str, port: int, upstream: str) -> None:
    loop = asyncio.get_running_loop()
    connections: set[ClientSide] = set()
    factory = client_factory(front, upstream, connections)
    servers = [await loop.create_server(factory, sock=s) for s in reuse_port_sockets(host, port)]
    stopping, gone = asyncio.Event(), asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    loop.add_reader(sys.stdin.fileno(), gone.set)  # readable only at EOF: nothing is written
    sys.stdout.buffer.write(READY)
    sys.stdout.flush()
    await first_of(stopping.wait(), gone.wait())
    for server in servers:
        server.close()
    while connections and not gone.is_set():  # the main process closes them as it drains
        await first_of(asyncio.sleep(0.05), gone.wait())


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
