"""Events are numbered in order, subscribers see each one as it is emitted, and a failing
subscriber never breaks what emitted it."""

from __future__ import annotations

import json
import logging
import tracemalloc

import pytest

from modelhost.records.events import (
    HISTORY_BYTES,
    RECENT_BYTES,
    RECENT_EVENTS,
    Event,
    EventLog,
    events_in,
)


def test_events_are_numbered_from_one_in_order() -> None:
    log = EventLog(clock=lambda: 1.0)
    ids = [log.emit("load", f"m{i}").id for i in range(3)]
    assert ids == [1, 2, 3]
    assert '"id":3' in log.recent[-1].to_json()


def test_subscribers_see_every_event_until_they_unsubscribe() -> None:
    log = EventLog()
    seen: list[Event] = []
    unsubscribe = log.subscribe(seen.append)
    log.emit("load", "a")
    log.emit("evict", "a", reason="lru")
    unsubscribe()
    log.emit("load", "b")
    assert [(e.kind, e.model) for e in seen] == [("load", "a"), ("evict", "a")]
    unsubscribe()  # twice is harmless


def test_failing_subscriber_spares_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failing subscriber is logged and the others still see the event."""
    log = EventLog()
    seen: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("metrics bug")

    log.subscribe(broken)
    log.subscribe(seen.append)
    with caplog.at_level(logging.ERROR, logger="modelhost.observe"):
        event = log.emit("load", "a")
    assert seen == [event]
    assert "metrics bug" in caplog.text


def test_since_gives_later_events() -> None:
    """`since` gives the events after an id while the ring holds them."""
    log = EventLog()
    for i in range(RECENT_EVENTS + 5):
        log.emit("load", f"m{i}")
    last = RECENT_EVENTS + 5
    assert [e.id for e in log.since(last - 3)] == [last - 2, last - 1, last]
    assert log.since(0)[0].id == 6  # the five oldest have left the ring


def test_events_read_back_from_log_and_stream() -> None:
    """Events are read back from a log and from an events stream."""
    log = EventLog(clock=lambda: 1.0)
    emitted = [log.emit("load", "a", bytes=5, detail={"loader_ms": 2.5}), log.emit("evict", "a")]
    lines = [
        "2026-11-25 06:00:00 INFO modelhost.events " + emitted[0].to_json(),
        '{"time":1.0,"model":"a","route":"/models/{model}/invoke","status":200}',  # access log
        "id: 2",
        "data: " + emitted[1].to_json(),
    ]
    assert list(events_in(lines)) == [json.loads(event.to_json()) for event in emitted]


def test_a_line_that_only_quotes_an_event_is_none() -> None:
    """A model's output logged under its worker may quote an event's JSON; it is no event."""
    event = EventLog(clock=lambda: 1.0).emit("evict", "m").to_json()
    lines = [f"2026-11-30 05:00:00,000 INFO modelhost.workers: worker 3 says: {event}", event]
    assert list(events_in(lines)) == [json.loads(event)]


def test_histories_stay_under_byte_cap() -> None:
    """Histories stay under their byte cap after 25000 models with long details (three caps' worth).

    A failure's detail may carry a long error: the histories of ever new names are capped in
    bytes, as the frontend measures them, not only in names."""
    log = EventLog(clock=lambda: 1.0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(25_000):
            error = "no such file " + "x" * 2000 + str(i)
            log.emit("failure", f"tenant-{i}/model.tar.gz", reason="load", detail={"error": error})
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert log.history_bytes <= HISTORY_BYTES
    assert held <= HISTORY_BYTES + RECENT_BYTES
    assert [e.kind for e in log.for_model("tenant-24999/model.tar.gz")] == ["failure"]


def test_the_recent_ring_is_capped_in_bytes_too() -> None:
    log = EventLog(clock=lambda: 1.0)
    for i in range(RECENT_EVENTS):
        log.emit("failure", f"m{i}", detail={"error": "x" * 100_000})
    assert log.recent_bytes <= RECENT_BYTES
    assert log.since(0)[-1].model == f"m{RECENT_EVENTS - 1}"


def test_model_in_use_keeps_its_history() -> None:
    """A model in use keeps its history while new names pass."""
    log = EventLog(clock=lambda: 1.0, max_history_bytes=64 * 1024)
    for i in range(5_000):
        log.emit("failure", f"nonexistent/{i}", detail={"error": "x" * 200})
        if i % 20 == 0:
            log.emit("load", "tenants/real.joblib")
    assert log.history_bytes <= 64 * 1024
    assert log.for_model("tenants/real.joblib")[-1].kind == "load"
    assert log.for_model("nonexistent/0") == []
