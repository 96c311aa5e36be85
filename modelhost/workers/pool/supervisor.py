"""The template process as the frontend runs it: spawned, asked for workers, restarted if it dies.

The template's own code is `modelhost.workers.template`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from modelhost.errors import ModelhostError, Unavailable
from modelhost.records.events import EventLog
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.pool.table import WorkerTable

logger = logging.getLogger("modelhost.workers")

WORKER_START_TIMEOUT_S = 60.0
TEMPLATE_STOP_TIMEOUT_S = 5.0
MAX_BACKOFF_S = 10.0


def backoff_s(failures: int) -> float:
    """The wait before another try, doubling with each failure in a row."""
    return min(MAX_BACKOFF_S, 0.1 * 2**failures) if failures else 0.0


def template_argv(
    socket_path: str, threads: int, preload_runtimes: tuple[str, ...], untrusted: bool
) -> list[str]:
    """The template's command line (`modelhost.workers.template` reads it); `untrusted`: it
    forks workers for untrusted models too."""
    argv = [sys.executable, "-m", "modelhost.workers.template", socket_path, str(threads)]
    argv.append(",".join(preload_runtimes))
    return argv + (["untrusted"] if untrusted else [])


class TemplateSupervisor:
    """Keeps one template process running, and forks workers from it into the table."""

    def __init__(
        self,
        argv: list[str],
        environment: dict[str, str] | None,
        table: WorkerTable,
        events: EventLog,
    ) -> None:
        self.argv, self.environment = argv, environment  # None: the frontend's
        self.table, self.events = table, events
        self.process: asyncio.subprocess.Process | None = None
        self.is_ready = False  # the process has done its imports: it reads its stdin
        self._worker_ids = itertools.count(1)
        self._watch: asyncio.Task[None] | None = None

    async def spawn(self) -> None:
        """Start the template; its imports run beside the caller's work."""
        self.is_ready = False
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self.environment,
        )

    async def ready(self) -> None:
        """Wait for the template to finish its imports."""
        assert self.process is not None and self.process.stdout is not None
        ready = await asyncio.wait_for(self.process.stdout.readline(), WORKER_START_TIMEOUT_S)
        if ready.strip() != b"ready":
            raise ModelhostError("the worker template process failed to start; see the log above")
        self.is_ready = True

    def supervise(self, top_up: Callable[[], Awaitable[None]]) -> None:
        """From now on, restart the template whenever it dies, then `top_up` the pool."""
        self._watch = asyncio.ensure_future(self._restart_on_death(top_up))

    async def _restart_on_death(self, top_up: Callable[[], Awaitable[None]]) -> None:
        failures = 0
        while True:
            assert self.process is not None
            code = await self.process.wait()
            self.events.emit("worker_exit", reason="template_died", detail={"code": code})
            await asyncio.sleep(backoff_s(failures))
            try:
                await self.spawn()
                await self.ready()
                await top_up()
                failures = 0
            except (ModelhostError, OSError, asyncio.TimeoutError) as error:
                failures += 1
                logger.error("restarting the worker template failed: %s", error)

    async def fork(self, untrusted: bool = False) -> WorkerHandle:
        """Ask the template for a worker (`untrusted`: sandboxed, for untrusted models), and
        wait for its hello."""
        template, worker_id = self.process, next(self._worker_ids)
        if template is None or template.stdin is None or has_exited(template, template.stdin):
            # the supervisor tops the pool up once a successor starts
            raise Unavailable(f"the worker template has exited before forking worker {worker_id}")
        waiter: asyncio.Future[WorkerHandle] = asyncio.get_running_loop().create_future()
        self.table.forking[worker_id] = waiter
        if untrusted:
            self.table.untrusted_forks.add(worker_id)
        try:
            await order(template.stdin, f"{worker_id} untrusted" if untrusted else str(worker_id))
            worker = await hello_unless_exited(waiter, template, worker_id)
        finally:
            self.table.forking.pop(worker_id, None)
            self.table.untrusted_forks.discard(worker_id)
        self.events.emit(
            "worker_start", worker=worker_id, reason="start", detail={"pid": worker.pid}
        )
        return worker

    def pids(self) -> list[int]:
        return [self.process.pid] if self.process else []

    async def stop(self) -> None:
        """Stop watching, then end the template: closing its stdin ends its loop, and one
        still importing (a start refused early) has forked nobody, so it is killed at once."""
        if self._watch is not None:
            self._watch.cancel()
        template = self.process
        if template is None or template.returncode is not None:
            return
        assert template.stdin is not None
        template.stdin.close()
        with contextlib.suppress(asyncio.TimeoutError):
            waited_s = TEMPLATE_STOP_TIMEOUT_S if self.is_ready else 0.0
            await asyncio.wait_for(template.wait(), waited_s)
        if template.returncode is None:
            template.kill()
            await template.wait()  # reaped: else a zombie outlives the server


def has_exited(template: asyncio.subprocess.Process, stdin: asyncio.StreamWriter) -> bool:
    return template.returncode is not None or stdin.is_closing()


async def order(stdin: asyncio.StreamWriter, line: str) -> None:
    """Ask the template for a worker: its id, and its kind."""
    worker_id = line.partition(" ")[0]
    try:
        stdin.write(f"{line}\n".encode())
        await stdin.drain()
    except (RuntimeError, ConnectionError) as error:
        raise Unavailable(
            f"the worker template has exited before forking worker {worker_id}"
        ) from error


async def hello_unless_exited(
    waiter: asyncio.Future[WorkerHandle], template: asyncio.subprocess.Process, worker_id: int
) -> WorkerHandle:
    """The forked worker once it says hello, unless the template exits or hangs first."""
    exited: asyncio.Future[Any] = asyncio.ensure_future(template.wait())
    try:
        await asyncio.wait(
            {waiter, exited}, timeout=WORKER_START_TIMEOUT_S, return_when="FIRST_COMPLETED"
        )
    finally:
        exited.cancel()
    if not waiter.done():
        raise Unavailable(f"the worker template forked no worker {worker_id}: it died or hangs")
    return waiter.result()
