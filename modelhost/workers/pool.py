"""The frontend's side of the worker pool: start workers, send them requests, notice when they die.

Requests carry an id and wait on a future keyed by it, so many can be in flight per worker. A
worker whose connection drops fails exactly its in-flight futures with `WorkerDied` and is replaced
at once (with backoff if it keeps dying young).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from modelhost.errors import ModelhostError, WorkerDied
from modelhost.records.events import EventLog
from modelhost.workers.messages import Failed, Hello, Reply, Request, decode_reply, encode
from modelhost.workers.wire import Frame, read_frame
from modelhost.workers.wire import encode as encode_frame

logger = logging.getLogger("modelhost.workers")
ReplyT = TypeVar("ReplyT", bound=Reply)
Waiter = asyncio.Future[tuple[Reply, bytes]]

WORKER_START_TIMEOUT_S = 60.0
YOUNG_DEATH_S = 5.0
MAX_BACKOFF_S = 10.0


@dataclass(eq=False)
class WorkerHandle:
    """The server's side of one worker process: its socket, and the replies it still owes."""

    worker_id: int
    pid: int
    writer: asyncio.StreamWriter
    started_at: float
    pending: dict[int, tuple[Waiter, str]] = field(default_factory=dict)  # id → (reply, model)
    alive: bool = True

    def fail_pending(self, reason: str) -> None:
        for future, model in self.pending.values():
            if not future.done():
                future.set_exception(
                    WorkerDied(
                        f"worker {self.worker_id} (pid {self.pid}) {reason} while serving model "
                        f"{model}; it is being replaced and a retry is safe"
                    )
                )
        self.pending.clear()


LostCallback = Callable[[WorkerHandle], None]


class WorkerPool:
    """Owns the worker processes: forks them from the template, replaces the dead, and matches
    replies to requests by id."""

    def __init__(
        self,
        size: int,
        threads: int,
        run_dir: Path,
        events: EventLog,
        preload_runtimes: tuple[str, ...] = (),
    ) -> None:
        self.size = size
        self.threads = threads
        self.preload_runtimes = preload_runtimes  # optional runtimes the template imports
        self.socket_path = str(run_dir / "workers.sock")
        self.events = events
        self.workers: dict[int, WorkerHandle] = {}
        self.on_lost: LostCallback = lambda worker: None
        self._worker_ids = itertools.count(1)
        self._request_ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[WorkerHandle]] = {}
        self._deaths: dict[int, int] = {}
        self._server: asyncio.AbstractServer | None = None
        self._template: asyncio.subprocess.Process | None = None
        self._closing = False

    async def startup(self) -> None:
        self._server = await asyncio.start_unix_server(self._accept, path=self.socket_path)
        self._template = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "modelhost.workers.template",
            self.socket_path,
            str(self.threads),
            ",".join(self.preload_runtimes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self._template.stdout is not None
        ready = await asyncio.wait_for(self._template.stdout.readline(), WORKER_START_TIMEOUT_S)
        if ready.strip() != b"ready":
            raise ModelhostError("the worker template process failed to start; see the log above")
        await asyncio.gather(*(self._spawn() for _ in range(self.size)))

    def pids(self) -> list[int]:
        template = [self._template.pid] if self._template else []
        return template + [worker.pid for worker in self.workers.values()]

    async def _spawn(self) -> WorkerHandle:
        assert self._template is not None and self._template.stdin is not None
        worker_id = next(self._worker_ids)
        waiter: asyncio.Future[WorkerHandle] = asyncio.get_running_loop().create_future()
        self._waiting[worker_id] = waiter
        self._template.stdin.write(f"{worker_id}\n".encode())
        await self._template.stdin.drain()
        worker = await asyncio.wait_for(waiter, WORKER_START_TIMEOUT_S)
        self.events.emit(
            "worker_start", worker=worker_id, reason="start", detail={"pid": worker.pid}
        )
        return worker

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello = decode_reply((await read_frame(reader)).header)
        assert isinstance(hello, Hello), hello
        worker = WorkerHandle(hello.worker_id, hello.pid, writer, time.monotonic())
        self.workers[worker.worker_id] = worker
        self._waiting.pop(worker.worker_id).set_result(worker)
        await self._read_replies(worker, reader)

    async def _read_replies(self, worker: WorkerHandle, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                frame = await read_frame(reader)
                entry = worker.pending.pop(frame.request_id, None)
                if entry is not None and not entry[0].done():
                    entry[0].set_result((decode_reply(frame.header), frame.payload))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            await self._lost(worker)

    async def _lost(self, worker: WorkerHandle) -> None:
        worker.alive = False
        self.workers.pop(worker.worker_id, None)
        worker.writer.close()
        if self._closing:
            worker.fail_pending("stopped")
            return
        lost_requests = len(worker.pending)
        worker.fail_pending("died")
        self.events.emit(
            "worker_exit",
            worker=worker.worker_id,
            reason="died",
            detail={"pid": worker.pid, "lost_requests": lost_requests},
        )
        self.on_lost(worker)
        await self._replace(worker)

    async def _replace(self, worker: WorkerHandle) -> None:
        young = time.monotonic() - worker.started_at < YOUNG_DEATH_S
        deaths = self._deaths.get(worker.worker_id, 0) + 1 if young else 0
        delay = min(MAX_BACKOFF_S, 0.1 * 2**deaths) if deaths > 1 else 0.0
        await asyncio.sleep(delay)
        if not self._closing:
            replacement = await self._spawn()
            self._deaths[replacement.worker_id] = deaths

    async def call(
        self,
        worker: WorkerHandle,
        request: Request,
        expect: type[ReplyT],
        payload: bytes = b"",
        model: str = "",
    ) -> tuple[ReplyT, bytes]:
        """Send one request to one worker and wait for its reply (of type `expect`) and payload;
        a failure comes back as the exception it was."""
        if not worker.alive:
            raise WorkerDied(f"worker {worker.worker_id} has died; retry is safe")
        request_id = next(self._request_ids)
        frame = encode_frame(Frame(request_id, encode(request), payload))
        future: Waiter = asyncio.get_running_loop().create_future()
        worker.pending[request_id] = (future, model)
        worker.writer.write(frame)
        reply, body = await future
        if isinstance(reply, Failed):
            raise reply.failure.rebuild()
        if not isinstance(reply, expect):
            raise ModelhostError(f"worker {worker.worker_id} answered {reply!r} to {request!r}")
        return reply, body

    async def shutdown(self) -> None:
        self._closing = True
        for worker in list(self.workers.values()):
            worker.writer.close()
        if self._template is not None and self._template.returncode is None:
            assert self._template.stdin is not None
            self._template.stdin.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._template.wait(), 5)
            if self._template.returncode is None:
                self._template.kill()
        if self._server is not None:
            self._server.close()
