"""Connections relayed by a front process: a preamble first, then HTTP as from the client.

The protocol reads the preamble before uvicorn sees the connection, and hands uvicorn a
transport that answers the client's and the port's addresses, so a relayed request is the
request the client sent, to the same routes and checks (docs/decisions.md, "Fronts").
"""

from __future__ import annotations

import asyncio
from typing import Any

from modelhost.fronts.preamble import MAX_BYTES, Preamble, decode
from modelhost.fronts.processes import is_relayed
from modelhost.http.head_limits import HeadLimitedProtocol


class RelayedProtocol(HeadLimitedProtocol):
    """The head-limited protocol, reading a front's preamble on Unix connections."""

    _waiting: tuple[asyncio.Transport, bytearray] | None = None  # until the preamble is read

    def connection_made(self, transport: Any) -> None:
        if is_relayed(transport):
            self._waiting = (transport, bytearray())
        else:
            super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._waiting is None:
            super().data_received(data)
            return
        transport, buffer = self._waiting
        buffer += data
        end = buffer.find(b"\n")
        if end < 0:
            if len(buffer) > MAX_BYTES:
                transport.close()
            return
        try:
            preamble = decode(bytes(buffer[:end]))
        except ValueError:
            transport.close()
            return
        self._waiting = None
        super().connection_made(RelayedTransport(transport, preamble))
        if len(buffer) > end + 1:
            super().data_received(bytes(buffer[end + 1 :]))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._waiting is None:  # else uvicorn never saw the connection
            super().connection_lost(exc)
        self._waiting = None


class RelayedTransport:
    """A Unix transport that gives the relayed client's and port's addresses."""

    def __init__(self, transport: asyncio.Transport, preamble: Preamble) -> None:
        self.transport = transport
        self.extra = {
            "peername": tuple(preamble.client),
            "sockname": tuple(preamble.server),
            "socket": None,  # uvicorn would read the Unix socket's own addresses
        }

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name in self.extra:
            return self.extra[name]
        return self.transport.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self.transport.is_closing()


def relayed_protocol(base: type[HeadLimitedProtocol]) -> type[RelayedProtocol]:
    """`base`'s class (one per server) that also reads relayed connections."""
    return type("RelayedProtocol", (RelayedProtocol, base), {})
