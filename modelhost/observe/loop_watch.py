"""A stalled event loop, logged with the stack it is stuck on.

Code that never yields stops every request while the process looks healthy, so a thread
watches a heartbeat the loop keeps and says where it stuck.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

logger = logging.getLogger("modelhost.loop")

STALL_S = 10.0  # far above any callback's run
BEAT_S = 0.5


class LoopWatch:
    """Watches `loop` from a thread; `on_stall` runs once a stall."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_stall: Callable[[], None] = lambda: None,
        stall_s: float = STALL_S,
        beat_s: float = BEAT_S,
    ) -> None:
        self.loop, self.on_stall = loop, on_stall
        self.stall_s, self.beat_s = stall_s, beat_s
        self.beat_at = time.monotonic()
        self._loop_thread = threading.get_ident()  # built on the loop's thread
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="loop-watch", daemon=True)
        self._beat_handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._beat()
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._beat_handle is not None:
            self._beat_handle.cancel()
        self._thread.join()

    def _beat(self) -> None:
        self.beat_at = time.monotonic()
        self._beat_handle = self.loop.call_later(self.beat_s, self._beat)

    def _watch(self) -> None:
        stalled = False
        while not self._stopping.wait(self.beat_s):
            silent_s = time.monotonic() - self.beat_at
            if silent_s > self.stall_s and not stalled:
                self._report(silent_s)
            stalled = silent_s > self.stall_s

    def _report(self, silent_s: float) -> None:
        frame = sys._current_frames().get(self._loop_thread)
        stack = "".join(traceback.format_stack(frame)) if frame else "(the thread has ended)\n"
        logger.error(
            "the event loop has not run for %.0f s: no request is answered until it does. "
            "It is stuck at (most recent call last):\n%s"
            "This is a bug; report it with this stack.",
            silent_s,
            stack,
        )
        self.on_stall()
