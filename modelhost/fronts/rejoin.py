"""A relayed connection that comes back to its front once the main process has answered it.

A request begun while answers are due waits, reading paused, until they are in; it then goes
back with the connection. The main process's side is parked for the next relay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from modelhost.fronts.follow import Exchanges
from modelhost.fronts.relay import ClientSide, Pipe


class Upstream(Pipe):
    """The main process's side; between relays it is parked, with no peer."""

    def __init__(self) -> None:
        super().__init__()
        self.parked_at = 0.0  # loop time

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if not isinstance(peer, Followed) or peer.transport is None:
            if self.transport is not None:  # bytes nobody asked for
                self.transport.close()
            return
        peer.transport.write(data)
        peer.answered(data)


# the transport, the next request's bytes read so far, the parked side
Back = Callable[[asyncio.Transport, bytes, Upstream], None]


class Followed(ClientSide):
    """A client's relayed connection, handed `back` once every request has its answer."""

    upstream_side = Upstream

    def __init__(
        self, front: int, upstream: str, connections: set[Any], back: Back, parked: Upstream | None
    ) -> None:
        super().__init__(front, upstream, connections)
        self.back, self.parked = back, parked
        self.exchanges = Exchanges()
        self.held = bytearray()  # a request begun while answers were due
        self.stopping = False

    def take(self, data: bytes) -> None:
        """The bytes the front read, from the relayed request's first."""
        self.exchanges.client(data)
        self.early += data

    def connection_made(self, transport: Any) -> None:
        parked, self.parked = self.parked, None
        if parked is None:
            super().connection_made(transport)
            return
        Pipe.connection_made(self, transport)
        self.connections.add(self)
        self.join(parked, b"")  # the main process knows this client already

    def data_received(self, data: bytes) -> None:
        if self.held or self.exchanges.awaiting:
            self.held += data
            if self.transport is not None:
                self.transport.pause_reading()
            return
        self.exchanges.client(data)
        super().data_received(data)

    def eof_received(self) -> bool:
        self._release()
        return super().eof_received()

    def stop(self) -> None:
        self.stopping = True

    def answered(self, data: bytes) -> None:
        """Hand the connection back once every request is answered."""
        exchanges = self.exchanges
        exchanges.upstream(data)
        if exchanges.settled and not (self.ended or self.ended_early or self.stopping):
            self._hand_back()
        elif self.held and not exchanges.awaiting:
            self._release()

    def _release(self) -> None:
        """The waiting request on to the main process."""
        held = bytes(self.held)
        self.held.clear()
        if held:
            self.exchanges.client(held)
            ClientSide.data_received(self, held)
        if self.transport is not None:
            self.transport.resume_reading()

    def _hand_back(self) -> None:
        transport, main = self.transport, self.peer
        if transport is None or transport.is_closing() or not isinstance(main, Upstream):
            return
        if main.transport is None or main.transport.is_closing():
            return
        self.peer, main.peer = None, None
        main.parked_at = asyncio.get_running_loop().time()
        main.transport.resume_reading()  # paused by the client's writes, maybe
        self.connections.discard(self)
        self.transport = None
        held = bytes(self.held)
        self.held.clear()
        self.back(transport, held, main)
