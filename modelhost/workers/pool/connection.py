"""The frontend's end of a worker's socket: a hello first, then replies, until it drops."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from typing import Protocol, cast

from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Hello, decode_reply
from modelhost.workers.wire import MAX_HEADER_BYTES, Frame, FrameBuffer

logger = logging.getLogger("modelhost.workers")

PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class Endpoint(Protocol):
    """What a connection tells the pool."""

    def joined(self, hello: Hello, transport: asyncio.WriteTransport, pid: int) -> WorkerHandle:
        """A worker said hello; `pid` is the process the kernel saw connect."""
        ...

    def replied(self, worker: WorkerHandle, frame: Frame) -> None: ...

    def reply_cap(self, worker: WorkerHandle, request_id: int) -> int: ...

    def disconnected(self, worker: WorkerHandle) -> None: ...


class WorkerConnection(asyncio.Protocol):
    """One worker's socket, with no task between it and the call."""

    def __init__(self, pool: Endpoint) -> None:
        self.pool = pool
        self.frames = FrameBuffer(self._cap)
        self.transport: asyncio.WriteTransport | None = None
        self.worker: WorkerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.WriteTransport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        try:
            for frame in self.frames.feed(data):
                if self.worker is None:
                    hello, pid = hello_in(frame), peer_pid(self.transport)
                    self.worker = self.pool.joined(hello, self.transport, pid)
                else:
                    self.pool.replied(self.worker, frame)
        except (ConnectionError, ValueError) as error:  # not a worker of ours
            logger.error("dropping a worker connection: %s", error)
            self.transport.close()

    def _cap(self, request_id: int) -> int:
        if self.worker is None:  # its hello
            return MAX_HEADER_BYTES
        return self.pool.reply_cap(self.worker, request_id)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.worker is not None:
            self.pool.disconnected(self.worker)


def hello_in(frame: Frame) -> Hello:
    """A worker's first frame, which must be its hello."""
    hello = decode_reply(frame.header)
    if not isinstance(hello, Hello):
        raise ConnectionError(f"a worker's first frame was {hello!r}, not a hello")
    return hello


def peer_pid(transport: asyncio.BaseTransport) -> int:
    """The pid of the process at the socket's other end, as it connected: a hello's is a claim."""
    sock = transport.get_extra_info("socket")
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEER_CREDENTIALS.size)
    return int(PEER_CREDENTIALS.unpack(creds)[0])


async def listen(socket_path: str, pool: Endpoint) -> asyncio.AbstractServer:
    """Accept workers' connections on `socket_path`."""
    loop = asyncio.get_running_loop()
    return await loop.create_unix_server(lambda: WorkerConnection(pool), path=socket_path)
