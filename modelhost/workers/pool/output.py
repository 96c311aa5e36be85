"""Sandboxed workers' output, logged under their ids, LINES_PER_S a second at most."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from modelhost.records.events import worker_said
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Output, Reply

logger = logging.getLogger("modelhost.workers")

LINES_PER_S = 100
MAX_LINE_CHARS = 2_000


class OutputLog:
    """Each worker's lines logged and dropped in the current second."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._seconds: dict[int, tuple[int, int, int]] = {}  # worker → second, logged, dropped

    def heard(self, worker: WorkerHandle, output: Reply) -> None:
        """Log an unasked reply, which must be output; ConnectionError for any other."""
        if not isinstance(output, Output):
            raise ConnectionError(f"a worker sent {type(output).__name__} unasked")
        self.said(worker.worker_id, output.text)

    def said(self, worker_id: int, text: str) -> None:
        now = int(self.clock())
        second, logged, dropped = self._seconds.get(worker_id, (now, 0, 0))
        if second != now:
            self.forget(worker_id)
            second, logged, dropped = now, 0, 0
        total = text.count("\n") + (not text.endswith("\n"))  # counted in C: a flood is cheap
        shown = min(total, LINES_PER_S - logged)
        for line in text.split("\n", shown)[:shown]:
            logger.info("%s", worker_said(worker_id, line[:MAX_LINE_CHARS]))
        if total > shown and not dropped:  # at once: the count waits for the second's end
            logger.warning(
                "worker %d: output past %d lines a second is dropped until the next second",
                worker_id,
                LINES_PER_S,
            )
        self._seconds[worker_id] = (second, logged + shown, dropped + total - shown)

    def forget(self, worker_id: int) -> None:
        """Say how many of its lines were dropped, if any."""
        _, _, dropped = self._seconds.pop(worker_id, (0, 0, 0))
        if dropped:
            logger.warning(
                "worker %d: %d lines of its output dropped, past %d a second",
                worker_id,
                dropped,
                LINES_PER_S,
            )
