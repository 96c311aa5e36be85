"""A worker's CPU a request when several senders each keep one batch of a model in flight.

One `Worker` of one inference slot holds iris; N threads stand for the senders (the main
process, the fronts), each sending a batch of --requests requests and the next once answered
and --round-trip-us later (the reply's and the next frame's way, the GIL let go meanwhile).
It reports the process's CPU a request and the requests a handler call. The frames' reading and
writing are left out: they cost the same whether the worker merges the batches or not.

    python benchmarks/worker_senders.py                          # this checkout
    python benchmarks/worker_senders.py --checkout /tmp/base     # another, to compare
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import add_checkout, markdown_table, use_checkout

HEADER = ["senders", "req/s", "worker CPU µs/req", "requests a handler call"]
ROW = b"[[5.1, 3.5, 1.4, 0.2]]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--senders", type=int, nargs="+", default=[1, 2, 4, 8, 15])
    parser.add_argument("--requests", type=int, default=1, help="a sender's batch")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds a row")
    parser.add_argument("--round-trip-us", type=float, default=100.0)
    add_checkout(parser)
    args = parser.parse_args()
    use_checkout(args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="modelhost-senders-") as scratch:
        worker, calls = _worker(Path(scratch))
        for senders in args.senders:
            rows.append(_row(worker, calls, senders, args))
            print(markdown_table(HEADER, rows[-1:]).splitlines()[-1], flush=True)
    print(markdown_table(HEADER, rows))


def _worker(scratch: Path) -> tuple[Any, list[int]]:
    """A worker of one slot holding iris, and its handler's call count."""
    from modelhost import testing
    from modelhost.workers.messages import Load
    from modelhost.workers.worker import Worker

    path = testing.iris_logreg(scratch / "iris.pkl")
    worker = Worker(socket.socketpair()[0], 1, threads=1)
    sized = {"max_batch_size": 32} if "max_batch_size" in Load.__struct_fields__ else {}
    worker.load(Load(model="iris", path=str(path), **sized))
    handler, calls = worker.models["iris"], [0]
    infer_batch = handler.infer_batch

    def counted(requests: Any) -> Any:
        calls[0] += 1
        return infer_batch(requests)

    handler.infer_batch = counted  # type: ignore[method-assign]
    return worker, calls


def _row(worker: Any, calls: list[int], senders: int, args: argparse.Namespace) -> list[str]:
    from modelhost.workers.messages import Infer, Item

    size, round_trip_s = args.requests, args.round_trip_us / 1e6
    item = Item("application/json", "application/json", {}, len(ROW))
    request, payload = Infer("iris", (item,) * size), ROW * size
    done, stopping = [0] * senders, threading.Event()

    def send(index: int) -> None:
        while not stopping.is_set():
            worker.infer_in_slot(request, payload)
            done[index] += size
            time.sleep(round_trip_s)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # warm
    requests, handled, cpu_s, started = sum(done), calls[0], time.process_time(), time.monotonic()
    time.sleep(args.duration)
    requests, handled = sum(done) - requests, calls[0] - handled
    cpu_s, wall_s = time.process_time() - cpu_s, time.monotonic() - started
    stopping.set()
    for thread in threads:
        thread.join()
    per_call = f"{requests / handled:.2f}" if handled else "-"
    return [str(senders), f"{requests / wall_s:,.0f}", f"{cpu_s / requests * 1e6:.0f}", per_call]


if __name__ == "__main__":
    main()
