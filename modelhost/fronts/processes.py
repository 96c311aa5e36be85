"""The main process's side: the port bound for sharing, the Unix socket, the front processes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import AsyncIterator, Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from modelhost.errors import ConfigError
from modelhost.fronts.listeners import (
    bound_port,
    check_unshared,
    lone_socket,
    refusal,
    reuse_port_sockets,
    unix_listener,
)
from modelhost.fronts.messages import RouteChanges, Table, changes, pack
from modelhost.fronts.supervisor import FrontSlot

if TYPE_CHECKING:
    from modelhost.http.front_routes import Routing

logger = logging.getLogger("modelhost")
T = TypeVar("T")

UPSTREAM_FILE = "fronts.sock"
EXIT_TIMEOUT_S = 5.0  # after the main process drained: the fronts' last connections close
PUBLISH_S = 0.05  # how often the host's state is read for a new table
REPUBLISH_S = 1.0  # every model is looked at anew this often
# tables' most of the main process's time, and walks of every model's
PUBLISH_SHARE, REPUBLISH_SHARE = 0.1, 0.01


class Fronts:
    """`count` front processes on the port; the main process holds it and serves their relays."""

    def __init__(self, count: int, host: str, port: int, run_dir: Path) -> None:
        self.count, self.host, self.port = count, host, port
        self.upstream = str(run_dir / UPSTREAM_FILE)
        self.held: list[socket.socket] = []  # the port's, bound without listening
        self.sockets: list[socket.socket] = []  # the main server's: the Unix socket
        self.slots: list[FrontSlot] = []
        self.table = Table({})  # the newest: a restarted front starts with it
        # the table before, and the models that may differ (None: any)
        self.since: tuple[Table, Collection[str] | None] = (self.table, None)
        self.routing: Routing | None = None  # None: every request is relayed
        self.tasks: list[asyncio.Task[None]] = []  # tending each front: reports, restarts
        self.stopping = asyncio.Event()  # set at drain or stop: no front is started again
        self.publishing: asyncio.Task[None] | None = None
        self.drained_at: float | None = None  # loop time of SIGTERM's drain
        self.drain_timeout_s = EXIT_TIMEOUT_S  # the server's drain_timeout_s
        self.on_none_left: Callable[[], None] = lambda: None  # every front given up

    @property
    def processes(self) -> list[asyncio.subprocess.Process]:
        """The front processes running or last run, one a slot."""
        return [slot.process for slot in self.slots if slot.process is not None]

    async def start(self) -> None:
        """Hold the port, bind the Unix socket, then start the fronts, each listening on return."""
        if self.port:  # port 0 is a fresh port of the kernel's choosing
            bind_or_refuse(self.host, self.port, check_unshared, f" for --fronts {self.count}")
        self.held = bind_or_refuse(self.host, self.port, hold_port)
        self.port = bound_port(self.held)
        self.sockets = [unix_listener(self.upstream)]
        events = self.routing.host.events if self.routing is not None else None
        argv = [self.host, str(self.port), self.upstream]
        self.slots = [FrontSlot(front, argv, events) for front in range(1, self.count + 1)]
        for slot in self.slots:
            await slot.start(b"")
        pids = ", ".join(str(process.pid) for process in self.processes)
        logger.info("%s", started_line(self.count, self.port, pids))
        loop = asyncio.get_running_loop()
        if self.routing is not None:
            self.publishing = loop.create_task(self._publish(self.routing))
        fold = self.routing.fold if self.routing is not None else None
        self.tasks += [
            loop.create_task(slot.tend(fold, lambda: pack(self.table), self.stopping))
            for slot in self.slots
        ]
        for task in self.tasks:
            task.add_done_callback(self._ended)

    def _ended(self, _: asyncio.Task[None]) -> None:
        if not self.stopping.is_set() and all(slot.given_up for slot in self.slots):
            logger.critical(
                "every front was given up: nothing takes port %d's connections", self.port
            )
            self.on_none_left()

    async def _publish(self, routing: Routing) -> None:
        """Send each front the table's changes, PUBLISH_S late at most, or as the share allows."""
        walked, pause_s, every_s = 0.0, PUBLISH_S, REPUBLISH_S
        held: dict[asyncio.subprocess.Process, Table] = {}  # what each front was last sent
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            if whole := started - walked >= every_s:
                routing.recheck()
            if built := routing.dirty or whole:
                table = routing.table()
                if table != self.table:  # else it is not sent again
                    self.since, self.table = (self.table, routing.looked_at), table
            held = self._send_changes(held)
            if built:  # paced by the building and the sending
                spent_s = loop.time() - started
                pause_s = max(PUBLISH_S, spent_s / PUBLISH_SHARE)
                if whole:
                    walked, every_s = started, max(REPUBLISH_S, spent_s / REPUBLISH_SHARE)
            await asyncio.sleep(pause_s)

    def _send_changes(
        self, held: dict[asyncio.subprocess.Process, Table]
    ) -> dict[asyncio.subprocess.Process, Table]:
        """Write each front, once it read the last, what its table lacks."""
        packed: dict[int, bytes] = {}  # by table held
        for process in self.processes:
            stdin, had = process.stdin, held.get(process)
            if had is self.table:
                continue
            if stdin is None or stdin.is_closing():
                continue  # gone: a restart gets the newest
            if stdin.transport.get_write_buffer_size():
                continue  # the last is unread: the changes since go later
            if id(had) not in packed:
                packed[id(had)] = pack(self._changes(had))
            stdin.write(packed[id(had)])
            held[process] = self.table
        return {process: held[process] for process in self.processes if process in held}

    def _changes(self, had: Table | None) -> Table | RouteChanges:
        """What a front holding `had` needs."""
        if had is None:
            return self.table
        before, names = self.since
        return changes(had, self.table, names if had is before else None)

    def drain(self) -> None:
        """Stop the fronts taking connections; those they hold drain."""
        self.drained_at = asyncio.get_running_loop().time()
        self.stopping.set()
        for process in self.processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)

    async def stop(self) -> None:
        """Let draining fronts finish their direct hits (within the drain's time), then close
        their stdin (they exit), and kill those still running; their last reports are folded."""
        self.stopping.set()
        if self.drained_at is not None:
            left_s = self.drained_at + self.drain_timeout_s - asyncio.get_running_loop().time()
            await asyncio.wait(
                [asyncio.ensure_future(p.wait()) for p in self.processes], timeout=max(0.0, left_s)
            )
        for process in self.processes:
            if process.stdin is not None:
                process.stdin.close()
        for process in self.processes:
            try:
                await asyncio.wait_for(process.wait(), EXIT_TIMEOUT_S)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self.publishing is not None:
            self.publishing.cancel()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=EXIT_TIMEOUT_S)  # the last reports
        for task in self.tasks:
            task.cancel()


def started_line(fronts: int, port: int, pids: str) -> str:
    return (
        f"{fronts} front processes take port {port}'s connections (pids {pids}); the main "
        "process answers what they relay"
    )


def hold_port(host: str, port: int) -> list[socket.socket]:
    """The port bound, not listening: the fronts take its connections."""
    return reuse_port_sockets(host, port, listen=False)


def fronts_for(
    count: int, host: str, port: int, run_dir: Path, tls: bool, *, main_only: str = ""
) -> Fronts | None:
    """The front processes on the main port, if `count` (--fronts) is above 1 and no setting
    (`main_only`: which) needs the main process for every request."""
    if count == 1:
        return None
    if main_only:
        warning = "--fronts %d starts no front: every request goes to the main process with %s"
        logger.warning(warning, count, main_only)
        return None
    if tls:
        raise ConfigError(
            f"--fronts {count} relays plain HTTP only: serve HTTPS with --fronts 1, or end TLS "
            "in a proxy in front"
        )
    return Fronts(count, host, port, run_dir)


def bind_or_refuse(host: str, port: int, bind: Callable[[str, int], T], why: str = "") -> T:
    """`bind(host, port)`, or a ConfigError saying why it failed and what to change."""
    try:
        return bind(host, port)
    except OSError as error:
        raise ConfigError(refusal(host, port, "--port", error, why)) from None


@contextlib.asynccontextmanager
async def running(
    fronts: Fronts | None, host: str, port: int
) -> AsyncIterator[list[socket.socket]]:
    """The main server's sockets, bound now, while `fronts` run (None: none)."""
    if fronts is None:
        sockets = bind_or_refuse(host, port, lone_socket)
        try:
            yield sockets
        finally:
            close_all(sockets)
        return
    try:
        await fronts.start()
        yield fronts.sockets
    finally:
        await fronts.stop()
        close_all(fronts.sockets + fronts.held)


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.close()


def is_relayed(transport: asyncio.BaseTransport) -> bool:
    """Whether a connection came from a front: over the Unix socket, not TCP."""
    sock = transport.get_extra_info("socket")
    return sock is not None and sock.family == socket.AF_UNIX
