"""A worker's own cost a batch for handing out its inference slot (workers/gather.py): batches of
one tenant (tenants off), and of two tenants in turn, each run at once by a handler that does
nothing. `--checkout` runs another commit's package to compare. Under `valgrind --tool=callgrind`
the difference of two `--batches` counts gives instructions a batch, which a busy machine does
not move.

    python benchmarks/gather_cost.py
    python benchmarks/gather_cost.py --checkout /tmp/base --commit abc1234
    valgrind --tool=callgrind python benchmarks/gather_cost.py --batches 1000 --rounds 1
"""

from __future__ import annotations

import argparse
import time

from _common import add_checkout, use_checkout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    add_checkout(parser)
    args = parser.parse_args()
    use_checkout(args)
    from modelhost.workers.gather import Gathering
    from modelhost.workers.messages import Answered, Infer, Item

    item = Item("application/json", "application/json", {}, 2)
    answered = (Answered((), 0.1), b"")
    one = [Infer("m", (item,))]
    try:
        two = [Infer("m", (item,), tenant=t) for t in ("a", "b")]  # type: ignore[call-arg]
    except TypeError:  # a checkout whose batches name no tenant
        two = one
    for label, batches in (("one tenant", one), ("two tenants", two)):
        gathering = Gathering(1, lambda model: 8, lambda request, payload: answered)
        best = min(_timed(gathering, batches, args.batches) for _ in range(args.rounds))
        print(f"{label}: {best * 1e9:.0f} ns a batch (best of {args.rounds})")


def _timed(gathering: object, batches: list[object], count: int) -> float:
    infer = gathering.infer  # type: ignore[attr-defined]
    turns = len(batches)
    started = time.perf_counter()
    for index in range(count):
        infer(batches[index % turns], b"[]")
    return (time.perf_counter() - started) / count


if __name__ == "__main__":
    main()
