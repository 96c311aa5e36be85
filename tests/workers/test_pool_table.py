"""Which hellos the worker table admits: only the one each fork awaits, from the process that
connected, of the kind it was forked as."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest

from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Hello
from modelhost.workers.pool.table import WorkerTable


def awaiting(*worker_ids: int, untrusted: tuple[int, ...] = ()) -> WorkerTable:
    loop = asyncio.new_event_loop()
    table = WorkerTable()
    for worker_id in worker_ids:
        table.forking[worker_id] = loop.create_future()
    table.untrusted_forks.update(untrusted)
    loop.close()
    return table


def test_the_awaited_hello_from_its_own_process_is_admitted() -> None:
    awaiting(3, untrusted=(3,)).admit(Hello(3, 1000, 0, untrusted=True), pid=1000)


@pytest.mark.parametrize(
    ("hello", "pid", "refusal"),
    [
        (Hello(9, 1000, 0), 1000, "names worker 9, which no fork awaits"),
        (Hello(3, 1000, 0, untrusted=True), 1000, "of the kind it was not forked as"),
        (Hello(3, 1, 0), 1000, "claims pid 1,"),
        (Hello(3, 2000, 0), 2000, "from a worker already joined"),
    ],
)
def test_a_hello_no_fork_sent_is_refused(hello: Hello, pid: int, refusal: str) -> None:
    table = awaiting(3)
    table.join(WorkerHandle(2, 2000, mock.Mock(), 0.0))
    with pytest.raises(ConnectionError, match=refusal):
        table.admit(hello, pid)


def test_a_second_hello_for_a_joined_worker_is_refused() -> None:
    table = awaiting(3)
    table.join(WorkerHandle(3, 1000, mock.Mock(), 0.0))
    with pytest.raises(ConnectionError, match="which no fork awaits"):
        table.admit(Hello(3, 1001, 0), pid=1001)
