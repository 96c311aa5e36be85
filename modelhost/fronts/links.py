"""A front's connections to the workers' direct sockets, and the table that says which to use."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from modelhost.fronts.messages import Sample, Table
from modelhost.workers.messages import Infer, Reply, decode_reply, encode
from modelhost.workers.wire import Frame, FrameBuffer
from modelhost.workers.wire import encode as encode_frame

Call = asyncio.Future[tuple[Reply, bytes]]


class WorkerLink(asyncio.Protocol):
    """One front's connection to one worker: frames out, replies matched back by request id."""

    def __init__(self, path: str, links: dict[str, WorkerLink]) -> None:
        self.path, self.links = path, links
        self.transport: asyncio.Transport | None = None
        self.frames = FrameBuffer()
        self.calls: dict[int, Call] = {}
        self.ids = itertools.count(1)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def call(self, request: Infer, payload: bytes) -> Call:
        call: Call = asyncio.get_running_loop().create_future()
        if self.transport is None or self.transport.is_closing():
            call.set_exception(ConnectionError(f"{self.path} is closed"))
            return call
        request_id = next(self.ids)
        self.calls[request_id] = call
        self.transport.write(encode_frame(Frame(request_id, encode(request), payload)))
        return call

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.frames.feed(data)
        except ConnectionError:
            assert self.transport is not None
            self.transport.close()
            return
        for frame in frames:
            call = self.calls.pop(frame.request_id, None)
            if call is not None and not call.done():
                call.set_result((decode_reply(frame.header), frame.payload))

    def connection_lost(self, exc: Exception | None) -> None:
        """The worker is gone: its calls fail, and their requests are relayed."""
        self.transport = None
        if self.links.get(self.path) is self:
            del self.links[self.path]
        for call in self.calls.values():
            if not call.done():
                call.set_exception(ConnectionError(f"worker {self.path} closed"))
        self.calls.clear()


class Router:
    """The main process's latest table, the links to workers, and the answers to report."""

    def __init__(self) -> None:
        self.table = Table({})
        self.links: dict[str, WorkerLink] = {}
        self.opening: dict[str, asyncio.Future[WorkerLink]] = {}
        self.turns = itertools.count()
        self.samples: list[Sample] = []

    def worker_of(self, model: str) -> str | None:
        """A direct socket of a worker holding `model`, in turn; None: relay the request."""
        paths = self.table.routes.get(model)
        return paths[next(self.turns) % len(paths)] if paths else None

    async def link(self, path: str) -> WorkerLink:
        """The open link to `path`; OSError where the worker is not there."""
        link = self.links.get(path)
        if link is not None:
            return link
        opening = self.opening.get(path)
        if opening is None:
            opening = asyncio.ensure_future(self._open(path))
            self.opening[path] = opening
            opening.add_done_callback(lambda _: self.opening.pop(path, None))
        return await asyncio.shield(opening)

    async def _open(self, path: str) -> WorkerLink:
        loop = asyncio.get_running_loop()
        _, link = await loop.create_unix_connection(lambda: WorkerLink(path, self.links), path)
        self.links[path] = link
        return link

    def answered(self, sample: Sample) -> None:
        self.samples.append(sample)

    def take_samples(self) -> list[Sample]:
        samples, self.samples = self.samples, []
        return samples
