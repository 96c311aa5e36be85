"""One front process as the main process runs it: started, its reports folded, restarted if it
dies.

A front that dies is restarted with the latest table, after a backoff that doubles with each
quick death in a row; after `MAX_QUICK_DEATHS` the slot stays empty, with a failure event. The
other fronts still serve the port; with none left, the server stops (processes.py).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import Callable

from modelhost.fronts.front import READY, first_of
from modelhost.fronts.messages import Report, Unpacker
from modelhost.records.events import EventLog
from modelhost.workers.pool.supervisor import backoff_s

logger = logging.getLogger("modelhost")

START_TIMEOUT_S = 30.0
QUICK_DEATH_S = 10.0  # a front that dies sooner after its start is dying at start
MAX_QUICK_DEATHS = 5
READ_BYTES = 1 << 16

Fold = Callable[[Report, int], None]  # a front's report, and its number


def exit_reason(code: int) -> str:
    """The front_exit event's reason: killed by a signal, or exited with a code."""
    return "signal" if code < 0 else "exit"


def exit_text(code: int) -> str:
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:  # a number the signal module has no name for
        return f"killed by signal {-code}"


class FrontSlot:
    """Front number `front`: the process running it now, and its restarts."""

    def __init__(
        self,
        front: int,
        argv: list[str],
        events: EventLog | None = None,
        clock: Callable[[], float] = time.monotonic,
        backoff: Callable[[int], float] = backoff_s,
    ) -> None:
        self.front, self.events, self.clock, self.backoff = front, events, clock, backoff
        self.argv = [sys.executable, "-m", "modelhost.fronts", str(front), *argv]
        self.process: asyncio.subprocess.Process | None = None
        self.started_at = 0.0
        self.quick_deaths = 0  # in a row
        self.given_up = False

    async def start(self, table: bytes) -> None:
        """Start the front with `table` on its stdin; RuntimeError if it exits before it listens."""
        self.started_at = self.clock()  # a front that cannot even be spawned dies at start
        self.process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        assert process.stdin is not None and process.stdout is not None
        if table:
            process.stdin.write(table)
        line = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
        if line != READY:
            raise RuntimeError(f"front {self.front} exited before it listened: {line!r}")
        if self.events is not None:
            self.events.emit("front_start", reason="start", detail=self._detail())

    def _detail(self, **more: int) -> dict[str, int]:
        assert self.process is not None
        return {"front": self.front, "pid": self.process.pid, **more}

    async def tend(
        self, fold: Fold | None, table: Callable[[], bytes], stop: asyncio.Event
    ) -> None:
        """Fold the front's reports while it runs, and start it again when it dies, until `stop`."""
        while self.process is not None:
            await self._fold(self.process, fold)
            if fold is not None:
                fold(Report([]), self.front)  # it is answering nothing any more
            code = await self.process.wait()
            if stop.is_set():
                return
            if not self._died(code):
                self.given_up = True
                return
            await first_of(asyncio.sleep(self.backoff(self.quick_deaths)), stop.wait())
            if stop.is_set():
                return
            await self._restart(table())
            if stop.is_set() and self.process.returncode is None:
                self.process.send_signal(signal.SIGTERM)  # started as the server drained

    async def _fold(self, process: asyncio.subprocess.Process, fold: Fold | None) -> None:
        """Fold what the front answered itself into the main process's counts, to its end."""
        assert process.stdout is not None
        unpacker = Unpacker()
        while data := await process.stdout.read(READ_BYTES):
            for message in unpacker.feed(data):
                if isinstance(message, Report) and fold is not None:
                    fold(message, self.front)

    def _died(self, code: int) -> bool:
        """Record the death; False where the front keeps dying at start and is given up."""
        quick = self.clock() - self.started_at < QUICK_DEATH_S
        self.quick_deaths = self.quick_deaths + 1 if quick else 0
        if self.events is not None:
            self.events.emit("front_exit", reason=exit_reason(code), detail=self._detail(code=code))
        if self.quick_deaths < MAX_QUICK_DEATHS:
            logger.warning("front %d %s; starting it again", self.front, exit_text(code))
            return True
        logger.error(
            "front %d %s, %d times in a row within %g s of its start; it is not started "
            "again (its stderr above says why it died)",
            self.front,
            exit_text(code),
            self.quick_deaths,
            QUICK_DEATH_S,
        )
        if self.events is not None:
            self.events.emit("failure", reason="front_dies_at_start", detail=self._detail())
        return False

    async def _restart(self, table: bytes) -> None:
        """Start the front again; one that fails to listen is left to die as a quick death."""
        try:
            await self.start(table)
        except (OSError, RuntimeError) as error:
            logger.error("front %d failed to start: %s", self.front, error)
        except TimeoutError:
            assert self.process is not None
            self.process.kill()
