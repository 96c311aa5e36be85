"""How far each load under way has come: its `progress` events (downloading, unpacking, queued
for a worker, loading), the latest of which `GET /models/{model}` shows until the load ends."""

from __future__ import annotations

from collections import OrderedDict

from modelhost.records.events import Event, EventLog

PROGRESS = "progress"
DOWNLOADING, UNPACKING, QUEUED, LOADING = "downloading", "unpacking", "queued", "loading"
ENDED = frozenset({"load", "failure", "unload", "evict"})  # what ends a load's progress
MAX_LOADS = 1024  # loads whose progress is kept; a load that never ends cannot grow it
UNKNOWN_TOTAL_STEP_BYTES = 64 * 2**20


def report(
    events: EventLog, name: str, phase: str, done: int | None = None, total: int | None = None
) -> None:
    """One progress event; kept out of the model's history, which keeps what happened."""
    detail = {"total_bytes": total} if total is not None else {}
    events.emit(PROGRESS, name, per_model=False, reason=phase, bytes=done, detail=detail)


class DownloadProgress:
    """Reports a download as it starts, then as it passes each quarter of its total."""

    def __init__(self, events: EventLog, name: str) -> None:
        self.events, self.name = events, name
        self.total: int | None = None
        self.step_bytes = self.due_bytes = UNKNOWN_TOTAL_STEP_BYTES

    def start(self, total: int | None) -> None:
        """A try begins, of `total` bytes if the store said."""
        self.total = total
        self.step_bytes = max(1, total // 4) if total else UNKNOWN_TOTAL_STEP_BYTES
        self.due_bytes = 0
        self(0)

    def __call__(self, received: int) -> None:
        if received >= self.due_bytes:
            report(self.events, self.name, DOWNLOADING, received, self.total)
            self.due_bytes = received + self.step_bytes


class LoadProgress:
    """The latest progress event of each load under way."""

    def __init__(self, events: EventLog) -> None:
        self.latest: OrderedDict[str, Event] = OrderedDict()
        self.stop = events.subscribe(self.on_event)

    def on_event(self, event: Event) -> None:
        if event.model is None:
            return
        if event.kind == PROGRESS:
            self.latest.pop(event.model, None)
            self.latest[event.model] = event
            if len(self.latest) > MAX_LOADS:
                self.latest.popitem(last=False)
        elif event.kind in ENDED:
            self.latest.pop(event.model, None)

    def of(self, name: str) -> Event | None:
        return self.latest.get(name)
