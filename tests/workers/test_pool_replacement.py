"""A lost worker is replaced once: where the template's restart topped the pool up before the
lost worker's own replacement came, that replacement forks nothing (the faults benchmark met a
pool of two running three workers after a template kill beside a worker's death)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any, cast

from modelhost.records.events import EventLog
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.pool import WorkerPool


def test_a_worker_lost_as_the_template_restarts_is_replaced_once(tmp_path: Path) -> None:
    forked: list[int] = []

    async def scenario() -> int:
        pool = WorkerPool(2, 1, tmp_path, EventLog())
        ids = itertools.count(3)

        async def fork(untrusted: bool = False) -> WorkerHandle:
            worker = WorkerHandle(next(ids), 0, cast(Any, None), 0.0)
            pool.table.join(worker)
            forked.append(worker.worker_id)
            return worker

        pool.template.fork = fork  # type: ignore[method-assign]
        pool.table.join(WorkerHandle(1, 0, cast(Any, None), 0.0))  # worker 2 has just died
        await pool._top_up()  # the restarted template's top-up
        await pool._replace(WorkerHandle(2, 0, cast(Any, None), 0.0))  # worker 2's own
        return len(pool.workers)

    assert asyncio.run(scenario()) == 2
    assert forked == [3]
