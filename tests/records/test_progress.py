"""Load progress: a download reported by quarters, and each load's latest phase until it ends."""

from __future__ import annotations

from modelhost.records.events import EventLog
from modelhost.records.progress import MAX_LOADS, DownloadProgress, LoadProgress, report


def test_a_download_is_reported_at_its_start_and_each_quarter() -> None:
    events = EventLog()
    progress = DownloadProgress(events, "m")
    progress.start(1000)
    for received in (100, 250, 260, 700, 1000):
        progress(received)
    reported = [(e.bytes, e.detail) for e in events.recent]
    assert reported == [(n, {"total_bytes": 1000}) for n in (0, 250, 700, 1000)]
    assert events.for_model("m") == []  # the model's history keeps what happened, not this


def test_an_unknown_total_is_reported_by_steps_of_bytes() -> None:
    events = EventLog()
    progress = DownloadProgress(events, "m")
    progress.start(None)
    progress(1)
    progress(progress.step_bytes)
    assert [(e.bytes, e.detail) for e in events.recent] == [(0, {}), (progress.step_bytes, {})]


def test_the_latest_phase_lasts_until_the_load_ends() -> None:
    events = EventLog()
    loads = LoadProgress(events)
    report(events, "m", "downloading", 0, 10)
    report(events, "m", "loading")
    assert loads.of("m") is not None and loads.of("m").reason == "loading"
    events.emit("load", "m")
    assert loads.of("m") is None


def test_loads_that_never_end_are_capped() -> None:
    events = EventLog()
    loads = LoadProgress(events)
    for index in range(MAX_LOADS + 1):
        report(events, f"m{index}", "loading")
    assert len(loads.latest) == MAX_LOADS and loads.of("m0") is None
