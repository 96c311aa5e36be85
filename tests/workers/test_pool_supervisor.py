"""The template's supervisor, against stand-in template processes: a worker asked of a template
that is missing, has exited or dies before forking fails at once with Unavailable, and leaves no
fork awaited in the table."""

from __future__ import annotations

import asyncio
import signal
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


# imports for a while, then ends by itself once its stdin closes, as the real template does
STILL_IMPORTING = "import sys, time; time.sleep(1.0); print('ready', flush=True); sys.stdin.read()"


def stop_code(before_ready: bool) -> int | None:
    """The exit code of a stand-in template stopped before, or after, it said ready."""

    async def scenario() -> int | None:
        argv = [sys.executable, "-c", STILL_IMPORTING]
        supervisor = TemplateSupervisor(argv, None, WorkerTable(), EventLog())
        await supervisor.spawn()
        if not before_ready:
            await supervisor.ready()
        await supervisor.stop()
        assert supervisor.process is not None
        return supervisor.process.returncode

    return asyncio.run(scenario())


def test_a_template_stopped_while_it_imports_is_killed_not_waited_for() -> None:
    """A start refused early (a bad port, store or certificate) ends at once: a template that
    has not said ready holds nothing and forked nobody."""
    assert stop_code(before_ready=True) == -signal.SIGKILL


def test_a_ready_template_is_let_end_by_itself() -> None:
    assert stop_code(before_ready=False) == 0
