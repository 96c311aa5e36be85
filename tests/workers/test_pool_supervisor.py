"""The template's supervisor, against stand-in template processes: a worker asked of a template
that is missing, has exited or dies before forking fails at once with Unavailable, and leaves no
fork awaited in the table."""

from __future__ import annotations

import asyncio
import sys

import pytest

from modelhost.errors import Unavailable
from modelhost.records.events import EventLog
from modelhost.workers.pool.supervisor import TemplateSupervisor
from modelhost.workers.pool.table import WorkerTable


def fork_from(template_code: str | None, refusal: str) -> WorkerTable:
    """Ask for a worker of a template running `template_code` (None: none spawned); the table."""
    table = WorkerTable()
    argv = [sys.executable, "-c", template_code or ""]

    async def scenario() -> None:
        supervisor = TemplateSupervisor(argv, None, table, EventLog())
        if template_code is not None:
            await supervisor.spawn()
        if template_code == "pass":
            assert supervisor.process is not None
            await supervisor.process.wait()
        try:
            await asyncio.wait_for(supervisor.fork(), 30)
        finally:
            await supervisor.stop()

    with pytest.raises(Unavailable, match=refusal):
        asyncio.run(scenario())
    return table


def test_no_template_forks_nothing() -> None:
    assert not fork_from(None, "exited before forking worker 1").forking


def test_an_exited_template_forks_nothing() -> None:
    assert not fork_from("pass", "exited before forking worker 1").forking


def test_a_template_dying_at_the_order_forks_nothing() -> None:
    table = fork_from("import sys; sys.stdin.readline()", "forked no worker 1: it died")
    assert not table.forking and not table.workers
