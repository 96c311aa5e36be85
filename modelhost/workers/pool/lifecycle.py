"""The worker pool: its workers forked, replaced when lost or when they keep memory, stopped.

A dropped connection fails exactly that worker's in-flight calls; it is killed and replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from modelhost.errors import Unavailable
from modelhost.records.events import EventLog
from modelhost.resources import usable_cores
from modelhost.workers import running
from modelhost.workers.handle import Waiter, WorkerHandle
from modelhost.workers.messages import (
    UNASKED,
    Grown,
    Hello,
    Loaded,
    Reply,
    Request,
    Unloaded,
    decode_reply,
)
from modelhost.workers.pool.calls import Calls
from modelhost.workers.pool.connection import listen
from modelhost.workers.pool.output import OutputLog
from modelhost.workers.pool.scratch import ScratchWatch
from modelhost.workers.pool.supervisor import TemplateSupervisor, backoff_s, template_argv
from modelhost.workers.pool.table import WorkerTable
from modelhost.workers.replies import ReplyT
from modelhost.workers.sandbox import scratch_path
from modelhost.workers.views import Views
from modelhost.workers.wire import Frame

logger = logging.getLogger("modelhost.workers")

YOUNG_DEATH_S = 5.0
# kept past its models' footprints, a worker is replaced once idle (security.md)
RECYCLE_KEPT_BYTES = 64 * 2**20
GROWN_GRACE_S = 1.0  # a grown worker's calls in flight may end first

LostCallback = Callable[[WorkerHandle], None]
FirstWorkers = Callable[[list[int], int], None]  # the first workers' pids, the pool's size


class WorkerPool:
    """`size` workers forked from one template; each call to them has a deadline."""

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
        untrusted_size: int = 0,
        views: Views | None = None,
        max_response_bytes: int = 0,
        max_scratch_bytes: int = 0,
    ) -> None:
        self.size, self.threads, self.events = size, threads, events
        self.load_timeout_s = load_timeout_s
        self.untrusted_size = untrusted_size  # of `size`: sandboxed, for untrusted models only
        self.views = views  # the sandboxed workers' views
        self.run_dir = run_dir
        self.socket_path = str(run_dir / "workers.sock")
        self.table = WorkerTable()
        argv = template_argv(self.socket_path, threads, preload_runtimes, untrusted_size > 0)
        self.template = TemplateSupervisor(argv, environment, self.table, events)
        self.calls = Calls(load_timeout_s, infer_timeout_s, self._missed, max_response_bytes)
        self.output = OutputLog()  # of the sandboxed workers
        self.scratch = ScratchWatch(run_dir, max_scratch_bytes, self.table, self.kill)
        self._on_lost: LostCallback = lambda worker: None  # until `attach`
        self._on_joined: Callable[[], None] = lambda: None
        self._deaths: dict[int, int] = {}  # young deaths in a row, by worker id
        # a task nobody holds may be collected
        self._replacements: set[asyncio.Future[None]] = set()
        self._scratch_watch: asyncio.Future[None] | None = None
        self._server: asyncio.AbstractServer | None = None
        self._closing = False

    @property
    def workers(self) -> dict[int, WorkerHandle]:
        return self.table.workers

    def attach(self, on_lost: LostCallback, on_joined: Callable[[], None]) -> None:
        """Set the callbacks once the host exists (the pool starts first, for the baseline)."""
        self._on_lost, self._on_joined = on_lost, on_joined

    async def start_template(self) -> None:
        """Listen for workers and spawn the template: its imports run beside the caller's work."""
        self.calls.bind(asyncio.get_running_loop())
        self._server = await listen(self.socket_path, self)
        await self.template.spawn()

    async def startup(self, judge: FirstWorkers = lambda pids, size: None) -> None:
        """Once the template is ready, fork as many workers as the cores for `judge` to see
        before the rest fork (it raises to stop there); then keep a template running."""
        if self._server is None:
            await self.start_template()
        await self.template.ready()
        await self._top_up(usable_cores())
        judge([worker.pid for worker in self.workers.values()], self.size)
        await self._top_up()
        self.template.supervise(self._top_up)
        if self.untrusted_size and self.scratch.max_bytes:
            self._scratch_watch = asyncio.ensure_future(self.scratch.run())

    async def _top_up(self, most: int | None = None) -> None:
        missing = self.table.missing(self.size, self.untrusted_size)[:most]
        await asyncio.gather(*(self.template.fork(untrusted) for untrusted in missing))

    def health(self) -> tuple[int, int]:
        return len(self.workers), self.size

    def pids(self) -> list[int]:
        return self.template.pids() + [worker.pid for worker in self.workers.values()]

    def send(
        self,
        worker: WorkerHandle,
        request: Request,
        payload: bytes = b"",
        model: str = "",
        timeout_s: float | None = None,
    ) -> Waiter:
        """Send one request; the future gets its reply and payload (for callers without a task)."""
        return self.calls.send(worker, request, payload, model=model, timeout_s=timeout_s)

    async def call(
        self,
        worker: WorkerHandle,
        request: Request,
        expect: type[ReplyT],
        payload: bytes = b"",
        model: str = "",
        timeout_s: float | None = None,
    ) -> tuple[ReplyT, bytes]:
        """Send one request and await its reply of type `expect`, or its failure raised."""
        return await self.calls.call(
            worker, request, expect, payload, model=model, timeout_s=timeout_s
        )

    # what a worker's connection tells -----------------------------------------------------

    def joined(self, hello: Hello, transport: asyncio.WriteTransport, pid: int) -> WorkerHandle:
        self.table.admit(hello, pid)
        worker = WorkerHandle(hello.worker_id, pid, transport, time.monotonic(), pidfd=pidfd(pid))
        worker.untrusted, worker.devices = hello.untrusted, hello.devices
        self.table.join(worker)
        self._on_joined()
        return worker

    def replied(self, worker: WorkerHandle, frame: Frame) -> None:
        """Give a reply to its call; recycle a worker keeping memory while idle."""
        if frame.request_id == UNASKED:
            return self._heard(worker, decode_reply(frame.header))
        reply = self.calls.answer(worker, frame)
        if reply is not None:
            self._count_kept(worker, reply)

    def _heard(self, worker: WorkerHandle, said: Reply) -> None:
        """Output, or word that the worker keeps memory past its limit: then replace it."""
        if not isinstance(said, Grown):
            return self.output.heard(worker, said)
        worker.grown = said
        asyncio.get_running_loop().call_later(GROWN_GRACE_S, self.kill, worker)
        if not worker.pending:
            self.kill(worker)

    def reply_cap(self, worker: WorkerHandle, request_id: int) -> int:
        return self.calls.cap(worker, request_id)

    def disconnected(self, worker: WorkerHandle) -> None:
        """Drop the worker within this callback, so nothing is sent to it in between, and end
        its process, which may live on (hung, or its socket's end left to a child)."""
        if not worker.alive:  # dropped already
            return
        worker.alive = False
        self.output.forget(worker.worker_id)
        self._end_process(worker)
        self.table.leave(worker)
        worker.transport.close()
        if self._closing:
            worker.fail_pending("stopped")
            return
        lost_requests = len(worker.pending)
        worker.died_running = self._died_running(worker)
        worker.fail_pending("died")
        self._report_exit(worker, lost_requests)
        self._on_lost(worker)
        task = asyncio.ensure_future(self._after_loss(worker))
        self._replacements.add(task)
        task.add_done_callback(self._replacements.discard)

    def _died_running(self, worker: WorkerHandle) -> running.Record:
        """What it ran as it died, unless asked to; if grown, what kept the most."""
        if worker.grown is not None and worker.grown.model:
            model = worker.grown.model
            return running.Record(frozenset({model}), crashed=(running.BATCH, model))
        if worker.scratch is not None:
            return running.Record(frozenset(), aboard=True)
        if worker.replaced_on_purpose:
            return running.Record(frozenset())
        record = running.read_running(self.run_dir, worker.worker_id)
        loads = {model for _, model, _, kind, _ in worker.pending.values() if kind is Loaded}
        if record.loading not in loads:  # the worker's word alone
            record = record._replace(loading="")
        if record.crashed is None and worker.killed_for_hanging in record.batches:
            record = record._replace(crashed=(running.BATCH, worker.killed_for_hanging))
        if record.dump:
            logger.warning(
                "worker %d (pid %d) died:\n%s", worker.worker_id, worker.pid, record.dump
            )
        return record

    # recycling and replacing --------------------------------------------------------------

    def _count_kept(self, worker: WorkerHandle, reply: Reply) -> None:
        if isinstance(reply, Unloaded) and reply.kept >= RECYCLE_KEPT_BYTES:
            worker.kept_bytes = reply.kept
        elif isinstance(reply, Loaded):
            worker.kept_bytes = 0  # it holds a model again
        if (worker.kept_bytes or worker.grown) and not worker.pending:
            # after its caller has taken the reply
            asyncio.get_running_loop().call_soon(self._recycle, worker)

    def _recycle(self, worker: WorkerHandle) -> None:
        """Replace an idle worker holding unexplained memory: only a fresh fork gives it back."""
        if not worker.pending:
            self.kill(worker)

    def retire(self, worker: WorkerHandle) -> None:
        """Replace a sandboxed worker another tenant's models are to use: no tenant's models
        follow another's in one process."""
        worker.retiring = True
        self.kill(worker)

    def _report_exit(self, worker: WorkerHandle, lost_requests: int) -> None:
        detail: dict[str, object] = {"pid": worker.pid, "lost_requests": lost_requests}
        if worker.kept_bytes:
            detail["kept_bytes"] = worker.kept_bytes
        reason = "recycled" if worker.kept_bytes or worker.retiring else "died"
        if grown := worker.grown:
            reason = "grown"
            detail |= {"grown_bytes": grown.bytes, "limit_bytes": grown.limit}
            detail |= {"model": grown.model, "model_kept_bytes": grown.kept}
        if scratch := worker.scratch:
            reason = "scratch_full"
            detail |= {"scratch_bytes": scratch.bytes, "scratch_entries": scratch.entries}
            detail |= {"limit_bytes": self.scratch.max_bytes}
        self.events.emit("worker_exit", worker=worker.worker_id, reason=reason, detail=detail)

    async def _after_loss(self, worker: WorkerHandle) -> None:
        """Remove the lost worker's scratch folder and view, then replace it."""
        scratch = scratch_path(self.run_dir, worker.pid)
        await asyncio.to_thread(shutil.rmtree, scratch, ignore_errors=True)
        running.forget(self.run_dir, worker.worker_id)
        if self.views is not None:
            await asyncio.to_thread(self.views.drop, worker.pid)
        await self._replace(worker)

    async def _replace(self, worker: WorkerHandle) -> None:
        young = (
            not worker.replaced_on_purpose and time.monotonic() - worker.started_at < YOUNG_DEATH_S
        )
        deaths = self._deaths.get(worker.worker_id, 0) + 1 if young else 0
        await asyncio.sleep(backoff_s(deaths) if deaths > 1 else 0.0)
        if self._closing or worker.untrusted not in self.table.missing(
            self.size, self.untrusted_size
        ):
            return  # the template's restart topped the pool up first
        try:
            replacement = await self.template.fork(worker.untrusted)
        except (OSError, Unavailable) as error:  # the supervisor restarts the template
            logger.warning(
                "replacing worker %d waits for the template: %s", worker.worker_id, error
            )
            return
        self._deaths[replacement.worker_id] = deaths

    def _missed(self, worker: WorkerHandle, hanging: str) -> None:
        """A call past its deadline: its worker may hang for ever."""
        worker.killed_for_hanging = hanging
        self.kill(worker)

    def kill(self, worker: WorkerHandle) -> None:
        """SIGKILL a worker and drop it now, not once its socket ends."""
        self.disconnected(worker)

    def _end_process(self, worker: WorkerHandle) -> None:
        if worker.pidfd < 0:
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(worker.pidfd, signal.SIGKILL)
        os.close(worker.pidfd)
        worker.pidfd = -1

    async def shutdown(self) -> None:
        self._closing = True
        self.calls.close()
        if self._scratch_watch is not None:
            self._scratch_watch.cancel()
        for worker in list(self.workers.values()):
            self.kill(worker)  # one stuck under the GIL never reads its socket's end
        await self.template.stop()
        if self._server is not None:
            self._server.close()
        if self.views is not None:
            self.views.close()


def pidfd(pid: int) -> int:
    """A handle on process `pid` that no later process given the same pid can take over."""
    try:
        return os.pidfd_open(pid)
    except OSError as error:
        raise ConnectionError(f"worker process {pid} exited before its hello was read") from error
