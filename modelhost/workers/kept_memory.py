"""Memory a worker keeps past its models, and whose batches kept it (decisions.md, "A worker
keeping memory past its models is replaced")."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

from modelhost.records.memory import trim_heap
from modelhost.workers.messages import Grown

KEPT_VARIABLE = "MODELHOST_WORKER_MAX_GROWTH_BYTES"  # worker_max_growth, to the template
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
MOST_OOM_SCORE = "1000"
CONFIRM_AFTER_S = 0.2  # the batch answered, its inputs freed


def kept_environment(max_bytes: int) -> dict[str, str]:
    return {KEPT_VARIABLE: str(max_bytes)} if max_bytes else {}


class KeptMemory:
    """Anonymous resident memory, read after each batch, its rises charged to the batch's model."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._statm = _open_statm() if max_bytes else -1  # opened before any sandbox
        self.idle_bytes = self.models_bytes = self._last_bytes = 0
        self.kept_by: dict[str, int] = {}
        self.confirming = False
        self.say: Callable[[Grown], None] = lambda grown: None

    def start(self) -> None:
        """The worker rehearsed and idle, before any model."""
        if self._statm >= 0:
            self.idle_bytes = self._last_bytes = self.anonymous_bytes()

    def settled(self, models_bytes: int, unloaded: str = "") -> None:
        """A load or an unload ended: what it moved is a footprint."""
        self.models_bytes = models_bytes
        self.kept_by.pop(unloaded, None)
        if self._statm >= 0:
            self._last_bytes = self.anonymous_bytes()

    def after_batch(self, model: str) -> None:
        """Charge a rise to `model`; past the limit, confirm it in a moment."""
        if not self.idle_bytes:  # no limit, or rehearsing
            return
        now = self.anonymous_bytes()
        if now > self._last_bytes:
            self.kept_by[model] = self.kept_by.get(model, 0) + now - self._last_bytes
        self._last_bytes = now
        if self._past_limit(now) and not self.confirming:
            self.confirming = True
            timer = threading.Timer(CONFIRM_AFTER_S, self._confirmed)
            timer.daemon = True
            timer.start()

    def confirm(self) -> Grown | None:
        """What to say if, freed heap returned, it is still past the limit."""
        trim_heap()
        grown = self._past_limit(self.anonymous_bytes())
        if not grown:
            self.confirming = False
            return None
        culprit = max(self.kept_by, key=self.kept_by.__getitem__, default="")
        return Grown(grown, self.max_bytes, culprit, self.kept_by.get(culprit, 0))

    def anonymous_bytes(self) -> int:
        """Resident less file and shared pages; 0 once a model's code closed the file."""
        try:
            fields = os.pread(self._statm, 128, 0).split()
            return (int(fields[1]) - int(fields[2])) * PAGE_BYTES
        except (OSError, ValueError, IndexError):
            return 0

    def _past_limit(self, now: int) -> int:
        """Held past the idle worker and its models, if over the limit; else 0."""
        grown = now - self.idle_bytes - self.models_bytes
        return grown if grown > self.max_bytes else 0

    def _confirmed(self) -> None:
        if grown := self.confirm():
            self.say(grown)


def raise_oom_score() -> None:
    """The kernel's OOM killer takes this worker before the frontend."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
        adj.write(MOST_OOM_SCORE)


def _open_statm() -> int:
    try:
        return os.open("/proc/self/statm", os.O_RDONLY)
    except OSError:  # no /proc: no limit
        return -1
