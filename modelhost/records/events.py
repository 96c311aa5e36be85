"""Events: a record of everything the cache and the workers did, and why.

Each event is written once as a JSON line to the ``modelhost.events`` logger and kept in memory:
the last few per model (for ``GET /models/{model}``) and a ring of recent ones for the whole server.
Both are capped in bytes, each event counted at its JSON line's length and its objects' overhead,
so that ever new names (and long error details) cannot grow the frontend past its allowance.
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
from typing import Any, NamedTuple

logger = logging.getLogger("modelhost.events")
errors_logger = logging.getLogger("modelhost.observe")

EVENTS_PER_MODEL = 10
# names with a per-model history; beyond this the least recently active is forgotten, so requests
# for ever new (nonexistent) names cannot grow memory without bound
MAX_MODELS_WITH_EVENTS = 10_000
RECENT_EVENTS = 1000
HISTORY_BYTES = 16 * 2**20  # the per-model histories, all together
RECENT_BYTES = 4 * 2**20  # the ring of recent events
EVENT_BYTES = 400  # an event's objects beyond its JSON line's characters (tracemalloc)
DETAIL_BYTES = 200  # and its detail's dict, when it has one
HISTORY_ENTRY_BYTES = 200  # a model's place in the histories: its link and its tuple


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
        self,
        clock: Callable[[], float] = time.time,
        max_models: int = MAX_MODELS_WITH_EVENTS,
        max_history_bytes: int = HISTORY_BYTES,
    ) -> None:
        self._clock = clock
        self.max_models, self.max_history_bytes = max_models, max_history_bytes
        # a tuple, not a deque: a few events cost a few words, where a deque costs hundreds
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
        """Log and publish an event; keep it in `model`'s history unless `per_model` is False (a
        name the store does not have gets none: a scan of made-up names holds nothing)."""
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
        """Add to the ring, dropping the oldest past its count or its bytes."""
        self._recent.append(sized)
        self.recent_bytes += sized.bytes
        while len(self._recent) > RECENT_EVENTS or self.recent_bytes > RECENT_BYTES:
            self.recent_bytes -= self._recent.popleft().bytes

    def _remember(self, model: str, sized: Sized) -> None:
        """Keep `sized` in `model`'s history; the least recently active are forgotten past
        `max_models` or `max_history_bytes`."""
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
        """Call `subscriber` with every event from now on; returns the call that stops it."""
        self._subscribers.append(subscriber)
        return lambda: self._unsubscribe(subscriber)

    def _unsubscribe(self, subscriber: Subscriber) -> None:
        with suppress(ValueError):
            self._subscribers.remove(subscriber)

    def since(self, event_id: int) -> list[Event]:
        """The recent events after `event_id`, oldest first (as many as the ring still holds)."""
        return [sized.event for sized in self._recent if sized.event.id > event_id]

    def for_model(self, model: str) -> list[Event]:
        return [sized.event for sized in self._by_model.get(model, ())]


class Sized(NamedTuple):
    """An event kept in memory, with what it costs there."""

    event: Event
    bytes: int


def _bytes_of(history: tuple[Sized, ...]) -> int:
    return HISTORY_ENTRY_BYTES + sum(sized.bytes for sized in history)
