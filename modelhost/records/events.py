"""Events: what the cache and the workers did, and why.

What stays in memory is capped in bytes, so new names cannot grow the frontend.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

logger = logging.getLogger("modelhost.events")
errors_logger = logging.getLogger("modelhost.observe")

EVENTS_PER_MODEL = 10
MAX_MODELS_WITH_EVENTS = 10_000
RECENT_EVENTS = 1000
HISTORY_BYTES = 16 * 2**20
RECENT_BYTES = 4 * 2**20
EVENT_BYTES = 400  # beyond its JSON line, as tracemalloc counts it
DETAIL_BYTES = 200
HISTORY_ENTRY_BYTES = 200


@dataclass(frozen=True)
class Event:
    kind: str  # download unpack load unload evict delete failure worker_start worker_exit budget
    model: str | None = None
    bytes: int | None = None
    duration_ms: float | None = None
    reason: str = ""
    worker: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    time: float = 0.0
    id: int = 0

    def to_json(self) -> str:
        record = {key: value for key, value in asdict(self).items() if value not in (None, {}, "")}
        return json.dumps(record, separators=(",", ":"), default=str)


Subscriber = Callable[[Event], None]

LOGGED = re.compile(r"\{.*\"kind\".*\}")
SAID = re.compile(r" worker \d+ says: ")


def worker_said(worker_id: int, line: str) -> str:
    """A sandboxed worker's output line as logged; `events_in` skips it."""
    return f"worker {worker_id} says: {line}"


def events_in(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """From a server's log or a `GET /events` stream."""
    for line in lines:
        if (found := LOGGED.search(line)) and not SAID.search(line, 0, found.start()):
            yield json.loads(found.group(0))


class EventLog:
    """A ring, a history per model, and subscribers."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        max_models: int = MAX_MODELS_WITH_EVENTS,
        max_history_bytes: int = HISTORY_BYTES,
    ) -> None:
        self._clock = clock
        self.max_models, self.max_history_bytes = max_models, max_history_bytes
        # tuples, since a deque's fixed cost dwarfs a few events
        self._by_model: OrderedDict[str, tuple[Sized, ...]] = OrderedDict()
        self.history_bytes = 0
        self._recent: deque[Sized] = deque()
        self.recent_bytes = 0
        self._ids = itertools.count(1)
        self._subscribers: list[Subscriber] = []

    @property
    def recent(self) -> list[Event]:
        return [sized.event for sized in self._recent]

    def emit(
        self, kind: str, model: str | None = None, *, per_model: bool = True, **fields: Any
    ) -> Event:
        """`per_model=False` for a name the store lacks, so a scan of names keeps nothing."""
        event = Event(
            kind=kind, model=model, time=round(self._clock(), 3), id=next(self._ids), **fields
        )
        line = event.to_json()
        logger.info(line)
        sized = Sized(event, EVENT_BYTES + (DETAIL_BYTES if event.detail else 0) + len(line))
        self._keep_recent(sized)
        if model is not None and per_model:
            self._remember(model, sized)
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:  # observing must never break what is observed
                errors_logger.exception("event subscriber %r failed on %s", subscriber, event)
        return event

    def _keep_recent(self, sized: Sized) -> None:
        self._recent.append(sized)
        self.recent_bytes += sized.bytes
        while len(self._recent) > RECENT_EVENTS or self.recent_bytes > RECENT_BYTES:
            self.recent_bytes -= self._recent.popleft().bytes

    def _remember(self, model: str, sized: Sized) -> None:
        history = self._forget(model)[-(EVENTS_PER_MODEL - 1) :] + (sized,)
        self._by_model[model] = history
        self.history_bytes += _bytes_of(history)
        while self._by_model and (
            len(self._by_model) > self.max_models or self.history_bytes > self.max_history_bytes
        ):
            self._forget(next(iter(self._by_model)))

    def _forget(self, model: str) -> tuple[Sized, ...]:
        history = self._by_model.pop(model, ())
        self.history_bytes -= _bytes_of(history) if history else 0
        return history

    def models_with_events(self) -> int:
        return len(self._by_model)

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Returns the call that stops it."""
        self._subscribers.append(subscriber)
        return lambda: self._unsubscribe(subscriber)

    def _unsubscribe(self, subscriber: Subscriber) -> None:
        with suppress(ValueError):
            self._subscribers.remove(subscriber)

    def since(self, event_id: int) -> list[Event]:
        return [sized.event for sized in self._recent if sized.event.id > event_id]

    def for_model(self, model: str) -> list[Event]:
        return [sized.event for sized in self._by_model.get(model, ())]


class Sized(NamedTuple):
    event: Event
    bytes: int


def _bytes_of(history: tuple[Sized, ...]) -> int:
    return HISTORY_ENTRY_BYTES + sum(sized.bytes for sized in history)
