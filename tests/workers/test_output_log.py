"""A sandboxed worker's output, logged a line at a time under its id, at most LINES_PER_S a
second: the rest are counted and said once."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from modelhost.workers.messages import Failed, Failure, Output
from modelhost.workers.pool.output import LINES_PER_S, MAX_LINE_CHARS, OutputLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


def test_each_line_is_logged_under_its_worker(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "modelhost.workers")
    OutputLog(Clock()).said(3, 'hello\n{"kind":"evict"}\nlast, unended')
    assert said(caplog) == [
        "worker 3 says: hello",
        'worker 3 says: {"kind":"evict"}',
        "worker 3 says: last, unended",
    ]


def test_a_long_line_is_cut(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "modelhost.workers")
    OutputLog(Clock()).said(1, "x" * (MAX_LINE_CHARS * 3) + "\n")
    assert said(caplog) == ["worker 1 says: " + "x" * MAX_LINE_CHARS]


def test_lines_past_the_rate_are_counted_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "modelhost.workers")
    clock = Clock()
    log = OutputLog(clock)
    log.said(1, "a\n" * (LINES_PER_S - 10))
    log.said(1, "b\n" * 50)  # ten logged, forty dropped
    log.said(2, "c\n")  # another worker's own second
    clock.now += 1
    log.said(1, "d\n")
    lines = said(caplog)
    assert lines.count("worker 1 says: a") == LINES_PER_S - 10
    assert lines.count("worker 1 says: b") == 10
    assert "worker 1: 40 lines of its output dropped, past 100 a second" in lines
    assert lines[-1] == "worker 1 says: d" and "worker 2 says: c" in lines


def test_a_gone_workers_drops_are_said(caplog: pytest.LogCaptureFixture) -> None:
    log = OutputLog(Clock())
    log.said(5, "e\n" * (LINES_PER_S + 1))
    log.forget(5)
    assert said(caplog)[-1] == "worker 5: 1 lines of its output dropped, past 100 a second"


def test_an_unasked_reply_other_than_output_drops_the_worker() -> None:
    worker = SimpleNamespace(worker_id=1)
    log = OutputLog(Clock())
    log.heard(worker, Output("fine\n"))  # type: ignore[arg-type]
    with pytest.raises(ConnectionError, match="Failed unasked"):
        log.heard(worker, Failed(Failure("x", "y")))  # type: ignore[arg-type]


def test_the_first_line_dropped_is_said_at_once(caplog: pytest.LogCaptureFixture) -> None:
    """A flood that then stops is not left unsaid until the worker speaks again."""
    OutputLog(Clock()).said(7, "f\n" * (LINES_PER_S + 5))
    warning = "worker 7: output past 100 lines a second is dropped until the next second"
    assert said(caplog).count(warning) == 1
