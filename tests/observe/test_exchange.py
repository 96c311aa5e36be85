"""Reading an invocation's latency parts and an error's reason back from the response."""

from __future__ import annotations

import pytest

from modelhost.observe.exchange import Exchange, error_reason, parse_server_timing, server_timing


def test_server_timing_parts_become_milliseconds_by_name() -> None:
    header = "queue;dur=0.020, download;dur=812.5, load;dur=4.113, infer;dur=0.610"
    assert parse_server_timing(header) == {
        "queue": 0.02,
        "download": 812.5,
        "load": 4.113,
        "infer": 0.61,
    }


@pytest.mark.parametrize(
    "timings_ms",
    [
        {"queue": 0.0204, "download": 812.5, "load": 4.1126, "infer": 0.6099},  # the usual four
        {"infer": 0.6099, "queue": 0.0204, "download": 812.5, "load": 4.1126},  # in another order
        {"queue": 1.0},
        {},
    ],
)
def test_server_timing_writes_each_part_as_parsed_back(timings_ms: dict[str, float]) -> None:
    header = server_timing(timings_ms)
    assert list(parse_server_timing(header)) == list(timings_ms)
    assert parse_server_timing(header) == {part: round(ms, 3) for part, ms in timings_ms.items()}
    assert header == ", ".join(f"{part};dur={ms:.3f}" for part, ms in timings_ms.items())


@pytest.mark.parametrize("header", ["", "cache", "db;desc=x", "load;dur=abc", ";dur=1"])
def test_parts_without_a_duration_are_skipped(header: str) -> None:
    assert parse_server_timing(header) == {}


def test_load_wait_is_download_plus_load() -> None:
    exchange = Exchange(
        time=0.0,
        method="POST",
        route="/r",
        status=200,
        duration_s=0.1,
        bytes_in=0,
        bytes_out=0,
        timings_ms={"download": 5, "load": 2},
    )
    assert exchange.load_wait_ms == 7


def test_rejection_is_named_by_type_or_status() -> None:
    """A rejection is named by the error type, else by the status."""
    assert error_reason(507, "InsufficientMemory") == "InsufficientMemory"
    assert error_reason(404, None) == "NotFound"
    assert error_reason(405, None) == "MethodNotAllowed"
    assert error_reason(599, None) == "HTTP599"
