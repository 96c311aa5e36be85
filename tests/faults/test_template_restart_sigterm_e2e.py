"""Workers that die while the template is being started again are replaced once it is ready:
nothing is written to the dead template, and a SIGTERM in that moment stops the server cleanly
with no task's exception left unretrieved in the log."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest
from helpers.loopback import wait_for

from modelhost import testing

pytestmark = pytest.mark.e2e

WORKERS = 2


def test_sigterm_while_the_template_restarts_stops_cleanly(tmp_path: Path) -> None:
    """The template and the workers die together; once the pool has seen them die (the
    template's successor is starting), the server is sent SIGTERM."""
    store = tmp_path / "store"
    testing.iris_logreg(store / "a.joblib")
    args = testing.serve_args(store, tmp_path / "cache", workers=WORKERS)
    server = testing.RunningServer(args, tmp_path).start()
    try:
        template = template_of(server.pid)
        workers = template.children()
        kill_all_at_once(server.pid, [template, *workers])
        wait_for(lambda: len(server.events("worker_exit")) > WORKERS, "the workers' deaths")
        os.kill(server.pid, signal.SIGTERM)
    finally:
        code = server.stop()
    log = server.log_text()
    assert "Task exception was never retrieved" not in log, log
    assert "Traceback" not in log, log
    assert code == 0
    assert not server.leaked_pids


def test_workers_lost_while_the_template_restarts_are_replaced(tmp_path: Path) -> None:
    """Same deaths, no SIGTERM: the pool is whole again once the new template is ready."""
    store = tmp_path / "store"
    testing.iris_logreg(store / "a.joblib")
    args = testing.serve_args(store, tmp_path / "cache", workers=WORKERS)
    with testing.RunningServer(args, tmp_path) as server:
        template = template_of(server.pid)
        workers = template.children()
        kill_all_at_once(server.pid, [template, *workers])
        wait_for(lambda: len(server.events("worker_start")) == 2 * WORKERS, "the replacements")
        assert len(template_of(server.pid).children()) == WORKERS
    assert "Traceback" not in server.log_text(), server.log_text()


def kill_all_at_once(frontend_pid: int, processes: list[psutil.Process]) -> None:
    """SIGKILL the processes while the frontend is stopped, so that it learns of every death
    in one turn of its loop, before it has started the template again."""
    os.kill(frontend_pid, signal.SIGSTOP)
    try:
        for process in processes:
            process.kill()
        wait_for(lambda: all(map(dead, processes)), "the killed processes to die", 5)
    finally:
        os.kill(frontend_pid, signal.SIGCONT)


def dead(process: psutil.Process) -> bool:
    """Gone, or a zombie its parent (the stopped frontend) has yet to reap."""
    try:
        return bool(process.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def template_of(frontend_pid: int) -> psutil.Process:
    """The frontend's worker template process (the one running `modelhost.workers.template`)."""
    for child in psutil.Process(frontend_pid).children():
        try:
            if "modelhost.workers.template" in child.cmdline():
                return child
        except psutil.Error:
            continue
    raise AssertionError(f"the frontend {frontend_pid} has no live worker template")
