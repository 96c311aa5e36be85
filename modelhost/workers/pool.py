"""The frontend's side of the worker pool: start workers, send them requests, notice when they die.

A dropped connection fails exactly that worker's in-flight futures, and the worker is replaced.
A call past its deadline kills its worker. The module is near the size limit because spawning,
supervising and calling all share the table of workers and their pending calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from modelhost.deadlines import Deadlines
from modelhost.errors import ModelhostError, Unavailable
from modelhost.records.events import EventLog
from modelhost.workers.handle import CallKey, Waiter, WorkerHandle
from modelhost.workers.messages import (
    Hello,
    Infer,
    Load,
    Loaded,
    Request,
    Unload,
    Unloaded,
    decode_reply,
    encode,
)
from modelhost.workers.replies import ReplyT, checked, gone, missed
from modelhost.workers.wire import Frame, FrameBuffer
from modelhost.workers.wire import encode as encode_frame

logger = logging.getLogger("modelhost.workers")

WORKER_START_TIMEOUT_S = 60.0
YOUNG_DEATH_S = 5.0
# kept past its models' footprints, a worker is replaced once idle (security.md)
RECYCLE_KEPT_BYTES = 64 * 2**20
MAX_BACKOFF_S = 10.0


LostCallback = Callable[[WorkerHandle], None]


class WorkerPool:
    def __init__(
        self,
        size: int,
        threads: int,
        run_dir: Path,
        events: EventLog,
        preload_runtimes: tuple[str, ...] = (),
        load_timeout_s: float = 300.0,
        infer_timeout_s: float = 120.0,
        environment: dict[str, str] | None = None,
        refuse_pickle: bool = False,
    ) -> None:
        self.size = size
        self.refuse_pickle = refuse_pickle
        self.load_timeout_s, self.infer_timeout_s = load_timeout_s, infer_timeout_s
        self.environment = environment  # None: the frontend's
        self.threads = threads
        self.preload_runtimes = preload_runtimes
        self.socket_path = str(run_dir / "workers.sock")
        self.events = events
        self.workers: dict[int, WorkerHandle] = {}
        self._on_lost: LostCallback = lambda worker: None  # until `attach`
        self._on_joined: Callable[[], None] = lambda: None
        self._worker_ids = itertools.count(1)
        self._request_ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[WorkerHandle]] = {}
        self._deaths: dict[int, int] = {}
        self._server: asyncio.AbstractServer | None = None
        # a task nobody holds may be collected
        self._replacements: set[asyncio.Future[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        # one timer per kind of call, not one per call
        self._deadlines: dict[type[Request], Deadlines[CallKey]] = {
            kind: Deadlines(timeout_s, functools.partial(self._missed, kind))
            for kind, timeout_s in (
                (Infer, infer_timeout_s),
                (Load, load_timeout_s),
                (Unload, load_timeout_s),
            )
        }
        self._template: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False

    def attach(self, on_lost: LostCallback, on_joined: Callable[[], None]) -> None:
        """Set the callbacks once the host exists (the pool starts first, for the baseline)."""
        self._on_lost, self._on_joined = on_lost, on_joined

    async def start_template(self) -> None:
        """Listen for workers and spawn the template: its imports run beside the caller's work."""
        loop = self._loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(
            lambda: WorkerConnection(self), path=self.socket_path
        )
        await self._spawn_template()

    async def startup(self) -> None:
        """Once the template is ready, fork the workers; then keep a template running."""
        if self._server is None:
            await self.start_template()
        await self._template_ready()
        await asyncio.gather(*(self._spawn() for _ in range(self.size)))
        self._supervisor = asyncio.ensure_future(self._supervise_template())

    async def _spawn_template(self) -> None:
        self._template = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "modelhost.workers.template",
            self.socket_path,
            str(self.threads),
            ",".join(self.preload_runtimes),
            *(["refuse-pickle"] if self.refuse_pickle else []),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self.environment,
        )

    async def _template_ready(self) -> None:
        assert self._template is not None and self._template.stdout is not None
        ready = await asyncio.wait_for(self._template.stdout.readline(), WORKER_START_TIMEOUT_S)
        if ready.strip() != b"ready":
            raise ModelhostError("the worker template process failed to start; see the log above")

    async def _supervise_template(self) -> None:
        """Restart the template whenever it dies, then top the pool up."""
        failures = 0
        while not self._closing:
            assert self._template is not None
            code = await self._template.wait()
            if self._closing:
                return
            self.events.emit("worker_exit", reason="template_died", detail={"code": code})
            await asyncio.sleep(min(MAX_BACKOFF_S, 0.1 * 2**failures) if failures else 0.0)
            try:
                await self._spawn_template()
                await self._template_ready()
                await self._top_up()
                failures = 0
            except (ModelhostError, OSError, asyncio.TimeoutError) as error:
                failures += 1
                logger.error("restarting the worker template failed: %s", error)

    async def _top_up(self) -> None:
        missing = self.size - len(self.workers) - len(self._waiting)
        await asyncio.gather(*(self._spawn() for _ in range(missing)))

    def health(self) -> tuple[int, int]:
        return len(self.workers), self.size

    def pids(self) -> list[int]:
        template = [self._template.pid] if self._template else []
        return template + [worker.pid for worker in self.workers.values()]

    async def _spawn(self) -> WorkerHandle:
        template = self._template
        assert template is not None and template.stdin is not None
        worker_id = next(self._worker_ids)
        if template.returncode is not None or template.stdin.is_closing():
            # the supervisor tops the pool up once a successor starts
            raise Unavailable(f"the worker template has exited before forking worker {worker_id}")
        waiter: asyncio.Future[WorkerHandle] = asyncio.get_running_loop().create_future()
        self._waiting[worker_id] = waiter
        exited: asyncio.Future[Any] = asyncio.ensure_future(template.wait())
        try:
            await self._order(template.stdin, worker_id)
            await asyncio.wait(
                {waiter, exited}, timeout=WORKER_START_TIMEOUT_S, return_when="FIRST_COMPLETED"
            )
            if not waiter.done():
                raise Unavailable(
                    f"the worker template forked no worker {worker_id}: it died or hangs"
                )
            worker = waiter.result()
        finally:
            exited.cancel()
            self._waiting.pop(worker_id, None)
        self.events.emit(
            "worker_start", worker=worker_id, reason="start", detail={"pid": worker.pid}
        )
        return worker

    @staticmethod
    async def _order(stdin: asyncio.StreamWriter, worker_id: int) -> None:
        """Ask the template for a worker."""
        try:
            stdin.write(f"{worker_id}\n".encode())
            await stdin.drain()
        except (RuntimeError, ConnectionError) as error:
            raise Unavailable(
                f"the worker template has exited before forking worker {worker_id}"
            ) from error

    def _hello(self, frame: Frame, transport: asyncio.WriteTransport) -> WorkerHandle:
        hello = decode_reply(frame.header)
        if not isinstance(hello, Hello):
            raise ConnectionError(f"a worker's first frame was {hello!r}, not a hello")
        worker = WorkerHandle(hello.worker_id, hello.pid, transport, time.monotonic())
        self.workers[worker.worker_id] = worker
        waiter = self._waiting.get(worker.worker_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(worker)
        self._on_joined()
        return worker

    def _reply(self, worker: WorkerHandle, frame: Frame) -> None:
        """Give a reply to its call's future, unless the call is over."""
        entry = worker.pending.pop(frame.request_id, None)
        if entry is None:
            return
        future, _, deadlines = entry
        deadlines.discard((worker, frame.request_id))
        reply = decode_reply(frame.header)
        if not future.done():  # done: its caller was cancelled
            future.set_result((reply, frame.payload))
        if isinstance(reply, Unloaded) and reply.kept >= RECYCLE_KEPT_BYTES:
            worker.kept_bytes = reply.kept
        elif isinstance(reply, Loaded):
            worker.kept_bytes = 0  # it holds a model again
        if worker.kept_bytes and not worker.pending:
            # after its caller has taken the reply
            asyncio.get_running_loop().call_soon(self._recycle, worker)

    def _recycle(self, worker: WorkerHandle) -> None:
        """Replace an idle worker holding unexplained memory: only a fresh fork gives it back."""
        if worker.alive and not worker.pending:
            worker.transport.close()  # `_disconnected` follows
            self.kill(worker)  # surely now, not at the end of its socket

    def _disconnected(self, worker: WorkerHandle) -> None:
        """Drop the worker within this callback, so nothing is sent to it in between."""
        if not worker.alive:
            return
        worker.alive = False
        self.workers.pop(worker.worker_id, None)
        worker.transport.close()
        if self._closing:
            worker.fail_pending("stopped")
            return
        lost_requests = len(worker.pending)
        worker.fail_pending("died")
        detail = {"pid": worker.pid, "lost_requests": lost_requests}
        if worker.kept_bytes:
            detail["kept_bytes"] = worker.kept_bytes
        self.events.emit(
            "worker_exit",
            worker=worker.worker_id,
            reason="recycled" if worker.kept_bytes else "died",
            detail=detail,
        )
        self._on_lost(worker)
        task = asyncio.ensure_future(self._replace(worker))
        self._replacements.add(task)
        task.add_done_callback(self._replacements.discard)

    async def _replace(self, worker: WorkerHandle) -> None:
        young = not worker.kept_bytes and time.monotonic() - worker.started_at < YOUNG_DEATH_S
        deaths = self._deaths.get(worker.worker_id, 0) + 1 if young else 0
        delay = min(MAX_BACKOFF_S, 0.1 * 2**deaths) if deaths > 1 else 0.0
        await asyncio.sleep(delay)
        if self._closing:
            return
        try:
            replacement = await self._spawn()
        except (OSError, Unavailable) as error:  # the supervisor restarts the template
            logger.warning(
                "replacing worker %d waits for the template: %s", worker.worker_id, error
            )
            return
        self._deaths[replacement.worker_id] = deaths

    def send(
        self, worker: WorkerHandle, request: Request, payload: bytes = b"", model: str = ""
    ) -> Waiter:
        """Send one request; the future gets its reply and payload (for callers without a task)."""
        if not worker.alive or worker.transport.is_closing():
            raise gone(worker)
        request_id = next(self._request_ids)
        frame = encode_frame(Frame(request_id, encode(request), payload))
        future: Waiter = (self._loop or asyncio.get_running_loop()).create_future()
        deadlines = self._deadlines[type(request)]
        worker.pending[request_id] = (future, model, deadlines)
        try:
            worker.transport.write(frame)
        except (RuntimeError, ConnectionError) as error:  # closed before its reader saw the end
            worker.pending.pop(request_id, None)
            raise gone(worker) from error
        # the call's own deadline: a caller that gives up must not leave a hung worker
        deadlines.add((worker, request_id))
        return future

    async def call(
        self,
        worker: WorkerHandle,
        request: Request,
        expect: type[ReplyT],
        payload: bytes = b"",
        model: str = "",
    ) -> tuple[ReplyT, bytes]:
        """Send one request and await its reply of type `expect`, or its failure raised."""
        reply, body = await self.send(worker, request, payload, model)
        return checked(reply, expect, worker), body

    def _missed(self, kind: type[Request], key: CallKey) -> None:
        """Fail a call past its deadline and kill its worker, which may hang for ever."""
        worker, request_id = key
        entry = worker.pending.pop(request_id, None)
        if entry is None:
            return
        future, model, deadlines = entry
        if not future.done():
            future.set_exception(missed(worker, kind, model, deadlines.timeout_s))
        self.kill(worker)

    def kill(self, worker: WorkerHandle) -> None:
        """SIGKILL a worker; its dropped connection does the rest."""
        if worker.pid <= 0:  # not a process: 0 would name our own process group
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)

    async def shutdown(self) -> None:
        self._closing = True
        for deadlines in self._deadlines.values():
            deadlines.close()
        if self._supervisor is not None:
            self._supervisor.cancel()
        for worker in list(self.workers.values()):
            worker.transport.close()
        if self._template is not None and self._template.returncode is None:
            assert self._template.stdin is not None
            self._template.stdin.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._template.wait(), 5)
            if self._template.returncode is None:
                self._template.kill()
        if self._server is not None:
            self._server.close()


class WorkerConnection(asyncio.Protocol):
    """The frontend's end of one worker's socket, with no task between it and the call."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.frames = FrameBuffer()
        self.transport: asyncio.WriteTransport | None = None
        self.worker: WorkerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.WriteTransport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        try:
            for frame in self.frames.feed(data):
                if self.worker is None:
                    self.worker = self.pool._hello(frame, self.transport)
                else:
                    self.pool._reply(self.worker, frame)
        except (ConnectionError, ValueError) as error:  # not a worker of ours
            logger.error("dropping a worker connection: %s", error)
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.worker is not None:
            self.pool._disconnected(self.worker)
