"""Events: a record of everything the cache and the workers did, and why.

Each event is written once as a JSON line to the ``modelhost.events`` logger and kept in memory:
the last few per model (for ``GET /models/{model}``) and a ring of recent ones for the whole server.
Events are numbered from 1 in the order they happen (the ``id`` of ``GET /events``), and every
subscriber (metrics, the event stream) is called with each one as it is emitted.
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
from typing import Any

logger = logging.getLogger("modelhost.events")
errors_logger = logging.getLogger("modelhost.observe")

EVENTS_PER_MODEL = 10
# names with a per-model history; beyond this the least recently active is forgotten, so requests
# for ever new (nonexistent) names cannot grow memory without bound
MAX_MODELS_WITH_EVENTS = 10_000
RECENT_EVENTS = 1000


@dataclass(frozen=True)
class Event:
    """One thing the cache or a worker did, with its model, bytes, duration and reason."""

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

LOGGED = re.compile(r"\{.*\"kind\".*\}")  # an event in a log line, or in an /events data line


def events_in(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The events among `lines`: a server's log (each event's JSON line, whatever the logging
    format puts before it), or what `GET /events` streamed."""
    for line in lines:
        if found := LOGGED.search(line):
            yield json.loads(found.group(0))


class EventLog:
    """Where the core emits events: the recent ones, a short history per model, and subscribers."""

    def __init__(
        self, clock: Callable[[], float] = time.time, max_models: int = MAX_MODELS_WITH_EVENTS
    ) -> None:
        self._clock = clock
        self.max_models = max_models
        self._by_model: OrderedDict[str, deque[Event]] = OrderedDict()
        self.recent: deque[Event] = deque(maxlen=RECENT_EVENTS)
        self._ids = itertools.count(1)
        self._subscribers: list[Subscriber] = []

    def emit(
        self, kind: str, model: str | None = None, *, per_model: bool = True, **fields: Any
    ) -> Event:
        """Log and publish an event; keep it in `model`'s history unless `per_model` is False (a
        name the store does not have gets none: a scan of made-up names holds nothing)."""
        event = Event(
            kind=kind, model=model, time=round(self._clock(), 3), id=next(self._ids), **fields
        )
        logger.info(event.to_json())
        self.recent.append(event)
        if model is not None and per_model:
            self._remember(model, event)
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:  # observing must never break what is observed
                errors_logger.exception("event subscriber %r failed on %s", subscriber, event)
        return event

    def _remember(self, model: str, event: Event) -> None:
        """Keep `event` in `model`'s history, the most recently active `max_models` only."""
        history = self._by_model.pop(model, None) or deque(maxlen=EVENTS_PER_MODEL)
        history.append(event)
        self._by_model[model] = history
        if len(self._by_model) > self.max_models:
            self._by_model.popitem(last=False)

    def models_with_events(self) -> int:
        return len(self._by_model)

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call `subscriber` with every event from now on; returns the call that stops it."""
        self._subscribers.append(subscriber)
        return lambda: self._unsubscribe(subscriber)

    def _unsubscribe(self, subscriber: Subscriber) -> None:
        with suppress(ValueError):
            self._subscribers.remove(subscriber)

    def since(self, event_id: int) -> list[Event]:
        """The recent events after `event_id`, oldest first (as many as the ring still holds)."""
        return [event for event in self.recent if event.id > event_id]

    def for_model(self, model: str) -> list[Event]:
        return list(self._by_model.get(model, ()))
