"""A failed test's report ends with the tail of each server log it used: CI keeps no files."""

from __future__ import annotations

from collections.abc import Generator, Iterable

import pytest

from helpers.serving import Servers
from modelhost.testing import RunningServer

TAIL_LINES = 40


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for server in servers_among(getattr(item, "funcargs", {}).values()):
            lines = server.log_text().splitlines()[-TAIL_LINES:]
            report.sections.append((f"log of the server at {server.url}", "\n".join(lines)))
    return report


def servers_among(values: Iterable[object]) -> list[RunningServer]:
    """The servers among a test's fixture values, and those its `serve` fixture started."""
    found: dict[int, RunningServer] = {}
    for value in values:
        for server in value.started if isinstance(value, Servers) else [value]:
            if isinstance(server, RunningServer):
                found.setdefault(id(server), server)
    return list(found.values())
