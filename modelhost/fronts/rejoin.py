"""A relayed connection, back to its front once the main process has answered it and its next
request may be a hit; the relay and the main process's side are kept for its next relay."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from modelhost.fronts.follow import Exchanges
from modelhost.fronts.heads import HIT_START
from modelhost.fronts.relay import KEEP_ALIVE_S, ClientSide, Pipe

# an older parked side may meet the main process's keep-alive timeout on its way
REUSED_S = KEEP_ALIVE_S / 2


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


# the transport, and the next request's bytes read so far
Back = Callable[[asyncio.Transport, bytes], None]


class Followed(ClientSide):
    """A client's relayed connection, handed `back` once every request has its answer and the
    next may be a hit."""

    upstream_side = Upstream

    def __init__(self, front: int, upstream: str, connections: set[Any], back: Back) -> None:
        super().__init__(front, upstream, connections)
        self.back = back
        self.parked: Upstream | None = None
        self.exchanges = Exchanges()
        self.held = bytearray()  # a request begun while answers were due
        self.stopping = False

    def take(self, data: bytes) -> None:
        """The bytes the front read, from the relayed request's first."""
        self.exchanges.client(data)
        self.early += data

    def connection_made(self, transport: Any) -> None:
        parked = self.unpark()
        if parked is None or asyncio.get_running_loop().time() - parked.parked_at > REUSED_S:
            if parked is not None and parked.transport is not None:
                parked.transport.close()
            super().connection_made(transport)
            return
        Pipe.connection_made(self, transport)
        self.connections.add(self)
        self.join(parked, b"")  # the main process knows this client already

    def data_received(self, data: bytes) -> None:
        exchanges = self.exchanges
        if self.held or exchanges.awaiting:
            self.held += data
            if self.transport is not None:
                self.transport.pause_reading()
            return
        if exchanges.settled and data.startswith(HIT_START) and self._hand_back(data):
            return
        exchanges.client(data)
        super().data_received(data)

    def eof_received(self) -> bool:
        held = bytes(self.held)
        self.held.clear()
        if held:
            self._forward(held)
        return super().eof_received()

    def stop(self) -> None:
        self.stopping = True

    def unpark(self) -> Upstream | None:
        """The main process's side kept from the last relay, if still open."""
        parked, self.parked = self.parked, None
        return parked if parked is not None and parked.transport is not None else None

    def answered(self, data: bytes) -> None:
        """Hand the connection back with a waiting request once every other is answered."""
        exchanges = self.exchanges
        exchanges.upstream(data)
        if not self.held or exchanges.awaiting:
            return
        held = bytes(self.held)
        self.held.clear()
        if not (exchanges.settled and held.startswith(HIT_START) and self._hand_back(held)):
            self._forward(held)

    def _forward(self, data: bytes) -> None:
        """A waiting request on to the main process."""
        self.exchanges.client(data)
        ClientSide.data_received(self, data)
        if self.transport is not None and not (self.peer is not None and self.peer.full):
            self.transport.resume_reading()

    def _hand_back(self, data: bytes) -> bool:
        """The connection back to the front, `data` its next request's first bytes."""
        transport, main = self.transport, self.peer
        if self.ended or self.ended_early or self.stopping or transport is None:
            return False
        if transport.is_closing() or not isinstance(main, Upstream) or main.transport is None:
            return False
        if main.transport.is_closing():
            return False
        self.peer, main.peer, self.parked = None, None, main
        main.parked_at = asyncio.get_running_loop().time()
        main.transport.resume_reading()  # paused by the client's writes, maybe
        self.connections.discard(self)
        self.transport = None
        self.back(transport, data)
        return True
