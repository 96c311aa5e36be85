"""A front's connections: each client's bytes go to the main process and its answer comes back.

Two protocols joined back to back, each pausing the other's reading while its own writes wait,
so a slow reader on either side holds the other without buffering without end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from modelhost.fronts.preamble import Address, Preamble, encode

KEEP_ALIVE_S = 5.0  # uvicorn's timeout_keep_alive, which the main process keeps


class Pipe(asyncio.Protocol):
    """One side of a relayed connection; `peer` is the other side once both are open."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: Pipe | None = None
        self.ended = False  # the far end sent EOF
        self.full = False  # its writes wait: the other side's reading is paused

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)

    def eof_received(self) -> bool:
        """Half-close the other side as this one was, and keep writing back until it ends too."""
        self.ended = True
        other = self.peer
        peer = other.transport if other else None
        if other is None or peer is None or other.ended or peer.is_closing():
            return False  # closes this side, and so the other
        if not peer.can_write_eof():
            return False
        peer.write_eof()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def pause_writing(self) -> None:
        self.full = True
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        self.full = False
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class ClientSide(Pipe):
    """A client's connection: reading waits until the main process's side is open."""

    upstream_side: type[Pipe] = Pipe

    def __init__(self, front: int, upstream: str, connections: set[Any]) -> None:
        super().__init__()
        self.front, self.upstream, self.connections = front, upstream, connections
        self.early = bytearray()  # read before the main process's side opened
        self.ended_early = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.connections.add(self)
        transport.pause_reading()  # uvloop may start reading after this: `early` keeps it
        asyncio.get_running_loop().create_task(self.open_upstream(transport))

    def data_received(self, data: bytes) -> None:
        if self.peer is None:
            self.early += data
        else:
            super().data_received(data)

    def eof_received(self) -> bool:
        if self.peer is None:
            self.ended_early = True
            return True
        return super().eof_received()

    async def open_upstream(self, transport: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        try:
            upstream, main = await loop.create_unix_connection(self.upstream_side, self.upstream)
        except OSError:  # the main process is gone or stopping: as if it refused
            transport.close()
            return
        if self.transport is None:  # the client left meanwhile
            upstream.close()
            return
        self.join(main, encode(self.preamble(transport)))

    def join(self, main: Pipe, first: bytes) -> None:
        """Pair with the main process's side, `first` then what the client sent so far."""
        transport, upstream = self.transport, main.transport
        assert transport is not None and upstream is not None
        main.peer, self.peer = self, main
        upstream.write(first + self.early)
        self.early.clear()
        if self.ended_early and not self.eof_received():
            transport.close()
        if not main.full:
            transport.resume_reading()

    def preamble(self, transport: asyncio.Transport) -> Preamble:
        client = transport.get_extra_info("peername") or ("", 0)
        server = transport.get_extra_info("sockname") or ("", 0)
        return Preamble(self.front, Address(*client[:2]), Address(*server[:2]))

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)
        super().connection_lost(exc)


def client_factory(
    front: int, upstream: str, connections: set[ClientSide]
) -> Callable[[], ClientSide]:
    return lambda: ClientSide(front, upstream, connections)
