"""The order in which waiting loads take free workers (the fair queue's own properties are
tested in tests/test_fair.py)."""

from __future__ import annotations

import asyncio
from collections import Counter
from contextlib import ExitStack
from typing import Any

from host.fakes import ManualClock
from host.machine import Interleavings
from modelhost.host.load_order import LoadOrder, Place


def anything_loads(name: str) -> bool:
    return True


def going(order: LoadOrder, places: list[tuple[str, Place]]) -> list[str]:
    """The names of the waiting loads that may take a free worker now."""
    return [place.name for _, place in places if order.may_go(place, anything_loads)]


def test_one_tenant_s_loads_go_first_come_first_served() -> None:
    order = LoadOrder()
    with ExitStack() as stack:
        places = [("", stack.enter_context(order.waiting_for("", f"m{i}"))) for i in range(3)]
        assert going(order, places) == ["m0"]
        order.took("", places[0][1], worker_id=1)
        assert going(order, places[1:]) == ["m1"]


def test_a_second_tenant_s_load_goes_before_the_first_tenant_s_queue() -> None:
    order = LoadOrder(clock=ManualClock())
    with ExitStack() as stack:
        burst = [("a", stack.enter_context(order.waiting_for("a", f"a{i}"))) for i in range(5)]
        order.took("a", burst[0][1], worker_id=1)
        late = ("b", stack.enter_context(order.waiting_for("b", "b0")))
        assert going(order, [*burst[1:], late]) == ["b0"]


def test_a_load_that_can_use_no_free_worker_lets_the_next_go() -> None:
    order = LoadOrder()
    with ExitStack() as stack:
        first = stack.enter_context(order.waiting_for("", "sandboxed"))
        second = stack.enter_context(order.waiting_for("", "plain"))
        assert order.may_go(second, lambda name: name != "sandboxed")
        order.took("", second, worker_id=1)
        assert order.may_go(first, anything_loads)


def test_a_load_that_gave_up_leaves_the_queue() -> None:
    order = LoadOrder()
    with order.waiting_for("", "m0") as first:
        pass
    assert not first.taken and order.waiting == 0
    with order.waiting_for("", "m1") as second:
        assert order.may_go(second, anything_loads)


def test_workers_go_to_the_tenants_by_their_weights_and_load_times() -> None:
    clock = ManualClock()
    order = LoadOrder(weight={"light": 1.0, "heavy": 2.0}.__getitem__, clock=clock)
    served: Counter[str] = Counter()
    with ExitStack() as stack:
        waiting = [
            (tenant, stack.enter_context(order.waiting_for(tenant, f"{tenant}{i}")))
            for i in range(40)
            for tenant in ("light", "heavy")
        ]
        for _ in range(30):  # one worker: a load at a time, each a second long
            tenant, place = next(
                (tenant, place) for tenant, place in waiting if order.may_go(place, anything_loads)
            )
            waiting.remove((tenant, place))
            order.took(tenant, place, worker_id=1)
            clock.now += 1.0
            order.released(worker_id=1)
            served[tenant] += 1
    assert abs(served["heavy"] - 2 * served["light"]) <= 2, served


def test_workers_freed_at_once_each_go_to_a_waiting_load() -> None:
    machine = Interleavings()
    copies = machine.host.copies
    try:
        held = [machine.loop.run_until_complete(copies.claim_loader(f"m{i}", "a")) for i in (0, 1)]
        waiting: list[asyncio.Task[Any]] = []
        for name, tenant in (("x", "a"), ("y", "b")):
            machine.start(copies.claim_loader(name, tenant), waiting)
        assert not any(task.done() for task in waiting)
        for worker in held:  # both in one step
            copies.release_loader(worker)
        machine.settle()
        assert all(task.done() for task in waiting)
    finally:
        machine.teardown()


def test_a_copy_does_not_take_a_freed_worker_from_a_waiting_load() -> None:
    """A hot model's extra copy would take the worker that a cold model's load waits for: the
    load goes first, since the cold model's requests have no copy at all."""
    machine = Interleavings()
    copies = machine.host.copies
    try:
        machine.run_steps([("request", {"name": "a"}), ("answer_a_call", {"index": 0})])
        held = [machine.loop.run_until_complete(copies.claim_loader(f"m{i}", "a")) for i in (0, 1)]
        waiting: list[asyncio.Task[Any]] = []
        machine.start(copies.claim_loader("x", "b"), waiting)
        [resident] = [copies.memory.get("a")]
        assert resident is not None
        [freed] = [worker for worker in held if worker.worker_id not in resident.workers]
        copies.release_loader(freed)
        assert copies.start("a", "scale_out", limit=2) is None
        machine.settle()
        assert waiting[0].done() and waiting[0].result() is freed
    finally:
        machine.teardown()
