"""The public side of a gRPC port: a relay that holds HTTP/2's limits grpc core lacks.

grpc's servers listen on a socket of their own; the guard accepts each connection up to the cap,
reads its frames as they pass (rpc/frames.py), and ends it with GOAWAY past a limit, or once
idle or old. It also names the caller and the authority it asked for in a header of each call
(rpc/callers.py), for the management rule. docs/decisions.md, "A guard of ours relays the gRPC
ports and holds HTTP/2's limits".
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import NamedTuple, cast

from modelhost.rpc import callers
from modelhost.rpc.admission import ConnectionRate
from modelhost.rpc.frames import (
    END_HEADERS,
    END_STREAM,
    HEAD_BYTES,
    HEADERS,
    NO_ERROR,
    RST_STREAM,
    ClientFrames,
    FrameReader,
    Head,
    Limits,
    Refusal,
    StreamBudget,
    goaway,
)

logger = logging.getLogger("modelhost")

BACKEND_HOST = "127.0.0.1"
FINISH_FRAME_S = 1.0  # for the server's frame under way before a GOAWAY
LINGER_S = 1.0  # after a GOAWAY, reading and dropping what the client still sends
DRAIN_CHECK_S = 0.05
EVERY_STREAM = 2**31 - 1  # a notice's last stream (RFC 9113, 6.8)
MAX_AGE, SHUTDOWN = "max connection age", "server shutting down"
SHARED = "connections shared by address"


class Hop(NamedTuple):
    """Where the guard reaches grpc's servers: a Unix socket each, or else a loopback port."""

    paths: tuple[str, ...] = ()
    port: int = 0


class Admission(NamedTuple):
    """What a port's guard holds beyond one connection's limits."""

    max_connections: int
    rate: ConnectionRate  # new connections from one address
    budget: StreamBudget  # streams without a message, shared by the ports' guards
    refused: Callable[[str], None] = lambda reason: None  # counts a refusal, by its kind


class Guard:
    """Accepts connections on `sock` and relays each to grpc's servers at `hop`."""

    def __init__(
        self,
        sock: socket.socket,
        hop: Hop,
        *,
        limits: Limits,
        admission: Admission,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.sock, self.hop, self.tls = sock, hop, tls
        self.limits, self.admission = limits, admission
        self.relays: set[Relay] = set()
        self.connections = itertools.count()  # spread over the servers' sockets in turn
        self.server: asyncio.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: Relay(self), sock=self.sock, ssl=self.tls)

    def close(self) -> None:
        """Stops accepting; the connections end as grpc's servers end them."""
        if self.server is not None:
            self.server.close()

    async def drain(self, deadline: float) -> None:
        """Stops accepting and tells each connection to go; ends each once its calls' answers
        passed, or at `deadline` (monotonic)."""
        self.close()
        for relay in self.relays:
            relay.tell_to_go(SHUTDOWN)
        while any(relay.frames.open for relay in self.relays) and time.monotonic() < deadline:
            await asyncio.sleep(DRAIN_CHECK_S)
        for relay in list(self.relays):
            relay.end_with(goaway(relay.frames.last_stream_id, NO_ERROR, SHUTDOWN))

    def abort(self) -> None:
        for relay in list(self.relays):
            relay.end()

    def room_for(self, address: str) -> Relay | None:
        """At the cap, the connection to end for one from `address`; None: refuse it."""
        kept = [relay for relay in self.relays if relay.closing is None and not relay.told_to_go]
        held = collections.Counter(relay.address for relay in kept)
        most, count = held.most_common(1)[0] if held else (address, 0)
        if count < held[address] + 2:
            return None
        theirs = [relay for relay in kept if relay.address == most]
        return min(theirs, key=lambda relay: (len(relay.frames.open), -relay.frames.idle_for_s()))


class Relay(asyncio.Protocol):
    """One client connection and its loopback connection to grpc's servers."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.frames = ClientFrames(guard.limits, budget=guard.admission.budget)
        self.server_frames = FrameReader(lambda head: False)
        self.address = ""
        self.client: asyncio.Transport | None = None
        self.backend: asyncio.Transport | None = None
        self.closing: bytes | None = None  # the GOAWAY to send once between server frames
        self.gone = False  # the GOAWAY sent and the client's end written: nothing more to it
        self.notice: bytes | None = None  # a GOAWAY to send between them, the calls going on
        self.told_to_go = ""  # why, once told
        self.born = self.frames.clock()
        self.timer: asyncio.TimerHandle | None = None
        self.early = bytearray()
        self.held = b""  # a header block's frame under way: its flags may yet change
        self.connecting: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.client = transport = cast(asyncio.Transport, transport)  # uvloop's: no subclass
        self.address = str((transport.get_extra_info("peername") or ("",))[0])
        refusal = self.admitted()
        if refusal:
            self.guard.admission.refused(refusal)
            transport.abort()
            return
        self.guard.relays.add(self)
        self.guard.admission.budget.holders[self.frames] = self.refuse
        transport.pause_reading()  # until the loopback connection is made
        self.connecting = asyncio.ensure_future(self.connect())  # held: a task is weakly kept

    def admitted(self) -> str:
        """Why the connection is refused at once ("" if it is not): the cap, or the rate."""
        admission = self.guard.admission
        full = len(self.guard.relays) >= admission.max_connections
        giving_way = self.guard.room_for(self.address) if full else None
        if full and giving_way is None:
            return "connections"
        if not admission.rate.allow(self.address):
            return "rate"
        if giving_way is not None:
            giving_way.give_way()
        return ""

    async def connect(self) -> None:
        loop, hop = asyncio.get_running_loop(), self.guard.hop
        try:
            if hop.paths:
                path = hop.paths[next(self.guard.connections) % len(hop.paths)]
                backend, _ = await loop.create_unix_connection(lambda: Backend(self), path)
            else:
                backend, _ = await loop.create_connection(
                    lambda: Backend(self), BACKEND_HOST, hop.port
                )
        except OSError:
            self.end()
            return
        if self.client is None or self.client.is_closing():
            backend.close()
            return
        self.backend = backend
        backend.write(bytes(self.early))
        self.early.clear()
        self.client.resume_reading()
        self.watch()

    def watch(self) -> None:
        """Every so often, refuse a stream that waits too long for its first message, and end
        a connection idle or old."""
        try:
            self.frames.check_waiting()
        except Refusal as refusal:
            self.refuse(refusal)
            return
        if self.outlived():
            return
        period_s = min(1.0, self.guard.limits.first_message_s / 4)
        self.timer = asyncio.get_running_loop().call_later(period_s, self.watch)

    def outlived(self) -> bool:
        """Idle, or past its age and then its calls' grace (or its calls): GOAWAY and the end."""
        limits, frames = self.guard.limits, self.frames
        age_s = frames.clock() - self.born
        if age_s > limits.age_s:
            self.tell_to_go(MAX_AGE)
        over = not frames.open or age_s > limits.age_s + limits.age_grace_s
        idle = frames.idle_for_s() > limits.idle_s
        reason = "idle" if idle else self.told_to_go if over else ""
        if reason:
            self.end_with(goaway(frames.last_stream_id, NO_ERROR, reason))
        return bool(reason)

    def give_way(self) -> None:
        """GOAWAY for another address's connection; the end once no call is open."""
        logger.info("gRPC connection from %s told to go: %s", self.address, SHARED)
        self.guard.admission.refused("shared")
        self.tell_to_go(SHARED)
        self.outlived()

    def tell_to_go(self, reason: str) -> None:
        """GOAWAY once, between the server's frames: no new calls, those under way go on."""
        if self.told_to_go:
            return
        self.told_to_go = reason
        self.notice = goaway(EVERY_STREAM, NO_ERROR, reason)
        if self.server_frames.between_frames and self.client is not None:
            self.client.write(self.notice)
            self.notice = None

    def data_received(self, data: bytes) -> None:
        if self.closing is not None:
            return
        try:
            block_ends = self.frames.feed(data)  # before grpc sees the bytes
        except Refusal as refusal:
            self.refuse(refusal)
            return
        if block_ends or self.held or self.frames.reader.unfinished_block_bytes():
            data = self.with_callers(data, block_ends)
        if self.backend is not None:
            self.backend.write(data)
        else:
            self.early += data  # read before pause_reading took hold; a read's worth at most

    def with_callers(self, data: bytes, block_ends: list[tuple[Head, int]]) -> bytes:
        """`data` with the caller's field ending each header block that opens a stream; a
        frame under way that may end one is held until it is whole."""
        out = bytearray(self.held)
        shift = len(out)
        out += data
        for head, end in reversed(block_ends):
            at = shift + end
            out[at - HEAD_BYTES - head.length + 4] &= ~END_HEADERS & 0xFF  # the frame's flags
            authority = self.frames.foreign_authority
            out[at:at] = callers.continuation(head.stream_id, self.address, authority)
        unfinished = len(out) - self.frames.reader.unfinished_block_bytes()
        self.held = bytes(out[unfinished:])
        return bytes(out[:unfinished])

    def from_backend(self, data: bytes) -> None:
        assert self.client is not None
        # the backend, aborted at the goodbye or the client's end, still hands over what it read
        if self.gone or self.client.is_closing():
            return
        written = 0
        for head, _, end in self.server_frames.feed(data):
            if head.kind == RST_STREAM or (head.kind == HEADERS and head.flags & END_STREAM):
                self.frames.ended(head.stream_id)
            if self.closing is not None:
                self.client.write(data[written:end])
                self.say_goodbye()
                return
            if self.notice is not None:
                self.client.write(data[written:end] + self.notice)
                written, self.notice = end, None
        self.client.write(data[written:])

    def refuse(self, refusal: Refusal) -> None:
        """GOAWAY with the reason, once the server's frame under way is whole, then close."""
        if self.closing is not None:
            return
        logger.info("gRPC connection from %s refused: %s", self.address, refusal)
        self.guard.admission.refused("goaway")
        self.guard.admission.rate.penalise(self.address)
        self.end_with(goaway(self.frames.last_stream_id, refusal.code, str(refusal)))

    def end_with(self, frame: bytes) -> None:
        """`frame`, a GOAWAY, once the server's frame under way is whole, then close."""
        if self.closing is not None:
            return
        self.guard.admission.budget.holders.pop(self.frames, None)
        self.frames.release()  # grpc's calls end with the connection: the budget has them back
        self.closing = frame
        if self.client is not None:
            self.client.pause_reading()
        if self.server_frames.between_frames:
            self.say_goodbye()
        else:
            asyncio.get_running_loop().call_later(FINISH_FRAME_S, self.end)

    def say_goodbye(self) -> None:
        """The GOAWAY, then a lingering close: what the client still sends is read and dropped
        for a while, since closing on unread bytes would reset the GOAWAY away."""
        assert self.client is not None and self.closing is not None
        self.client.write(self.closing)
        self.gone = True
        if self.backend is not None:
            self.backend.abort()
        if self.client.can_write_eof():
            with contextlib.suppress(OSError):  # the client gone
                self.client.write_eof()
        self.client.resume_reading()
        asyncio.get_running_loop().call_later(LINGER_S, self.end)

    def end(self) -> None:
        for transport in (self.client, self.backend):
            if transport is not None:
                transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.relays.discard(self)
        self.guard.admission.budget.holders.pop(self.frames, None)
        self.frames.release()
        if self.timer is not None:
            self.timer.cancel()
        if self.backend is not None:
            self.backend.close()

    def pause_writing(self) -> None:
        if self.backend is not None:
            self.backend.pause_reading()

    def resume_writing(self) -> None:
        if self.backend is not None:
            self.backend.resume_reading()


class Backend(asyncio.Protocol):
    """The loopback side of a relay: what grpc's server sends goes to the client."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.relay.from_backend(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.relay.client is not None and self.relay.closing is None:  # else it lingers
            self.relay.client.close()

    def pause_writing(self) -> None:
        if self.relay.client is not None:
            self.relay.client.pause_reading()

    def resume_writing(self) -> None:
        if self.relay.client is not None and self.relay.closing is None:
            self.relay.client.resume_reading()
