"""`modelhost serve` that tallies how requests reach the models' queues: for benchmarks only.

It counts the requests put in a queue in each turn of the event loop, and the size of each batch
taken out, and appends both as a JSON line to TRACE_FILE at each SIGUSR1 (then starts again).
GRPC_SERVERS, if not 0, replaces the number of grpc.aio servers sharing the inference port.

    python benchmarks/serve_traced.py /tmp/trace.jsonl 0 --model-store DIR --grpc-port 8001
    python benchmarks/grpc_batches.py grpc:16 rest:16
"""

from __future__ import annotations

import asyncio
import collections
import json
import signal
import sys
from pathlib import Path
from typing import Any


class Tally:
    """Requests queued per turn of the loop, batch sizes. A turn's first request schedules the
    callback that closes it: one run each turn would keep the loop from ever sleeping, and its
    CPU, not the requests', would fill the core (and starve h2corn's thread beside it)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.in_turn = 0
        self.per_turn: collections.Counter[int] = collections.Counter()
        self.batches: collections.Counter[int] = collections.Counter()
        self.loop: asyncio.AbstractEventLoop | None = None

    def queued(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
            self.loop.add_signal_handler(signal.SIGUSR1, self.write)
        if not self.in_turn:
            self.loop.call_soon(self._close_turn)
        self.in_turn += 1

    def _close_turn(self) -> None:
        if self.in_turn:
            self.per_turn[self.in_turn] += 1
        self.in_turn = 0

    def write(self) -> None:
        self._close_turn()
        line = {"queued_per_turn": self.per_turn, "batch_sizes": self.batches}
        with self.out.open("a") as out:
            out.write(json.dumps(line) + "\n")
        self.per_turn.clear()
        self.batches.clear()


def trace(tally: Tally) -> None:
    from modelhost.scheduler.batcher import BatchQueue
    from modelhost.scheduler.dispatch import Dispatcher

    submit, take = Dispatcher.submit, BatchQueue.take

    def traced_submit(self: Dispatcher, job: Any) -> None:
        tally.queued()
        submit(self, job)

    def traced_take(self: BatchQueue[Any]) -> list[Any]:
        batch: list[Any] = take(self)
        tally.batches[len(batch)] += 1
        return batch

    Dispatcher.submit = traced_submit
    BatchQueue.take = traced_take


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: serve_traced.py TRACE_FILE GRPC_SERVERS SERVE-ARGS...")
    trace(Tally(Path(sys.argv[1])))
    if int(sys.argv[2]):
        import modelhost.rpc.services

        modelhost.rpc.services.ACCEPTING_SERVERS = int(sys.argv[2])
    from modelhost.cli.main import main as modelhost_main

    sys.argv = ["modelhost", "serve", *sys.argv[3:]]
    modelhost_main()


if __name__ == "__main__":
    main()
