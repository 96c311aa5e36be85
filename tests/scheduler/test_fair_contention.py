"""The fair queue between a tenant served alone and the contention that a second tenant starts:
service runs concurrently here, several requests in flight, their ends in any order."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from test_fair import MAX_COST_MS, Served, service, windows

from modelhost.fair import FairQueue, Ticket

# each step: one tenant's request arrives, one waiting request starts, or one running ends
step = st.one_of(
    st.tuples(st.just("push"), st.integers(1, MAX_COST_MS)),
    st.tuples(st.just("start"), st.just(0)),
    st.tuples(st.just("end"), st.integers(0, 7)),
)


class Concurrent:
    """A queue served by up to `slots` requests at once, its record of what started when."""

    def __init__(self, slots: int, weight: dict[str, float], free: bool = False) -> None:
        self.queue: FairQueue[int] = FairQueue(10_000, weight=weight.__getitem__, limit=slots)
        self.free = free  # an arrival takes a free slot first, as the server's requests do
        self.ids = itertools.count()
        self.cost_of: dict[int, int] = {}
        self.running: list[tuple[Ticket, int]] = []
        self.served: list[Served] = []

    def play(self, tenants: tuple[str, ...], steps: list[tuple[str, int]]) -> None:
        for op, arg in steps:
            if op == "push":  # one request of each tenant, of `arg` cost
                for tenant in tenants:
                    self.cost_of[item := next(self.ids)] = arg
                    self.arrive(tenant, item)
            elif op == "start":
                self.start()
            elif self.running:
                self.end(arg % len(self.running))

    def arrive(self, tenant: str, item: int) -> None:
        ticket = self.queue.take_free(tenant) if self.free else None
        if ticket is None:
            self.queue.push(tenant, item)
            return
        self.running.append((ticket, item))
        self.served.append(Served(tenant, self.cost_of[item], set(), set()))

    def start(self) -> None:
        if len(self.running) >= self.queue.limit:
            return
        backlogged = set(self.queue.statistics().waiting)
        if (picked := self.queue.pop()) is None:
            return
        item, ticket = picked
        self.running.append((ticket, item))
        stays = set(self.queue.statistics().waiting)
        self.served.append(Served(ticket.tenant, self.cost_of[item], backlogged, stays))

    def end(self, index: int) -> None:
        ticket, item = self.running.pop(index)
        self.queue.complete(ticket, self.cost_of[item])

    def drain(self) -> None:
        while self.running or self.queue.waiting:
            self.start()
            if self.running:
                self.end(0)


def assert_shares(served: list[Served], weight: dict[str, float], slots: int) -> None:
    """Over any stretch where a and b both wait, each gets its weighted share of the two's
    service, less what was in flight when the stretch began and one request more."""
    bound = (slots + 1) * MAX_COST_MS
    for f, g in (("a", "b"), ("b", "a")):
        for window in windows(served, f, g):
            got_f, got_g = service(window, f), service(window, g)
            share_f = (got_f + got_g) * weight[f] / (weight[f] + weight[g])
            assert got_f >= share_f - bound - 1e-9, (f, got_f, got_g)


serving = st.one_of(
    st.tuples(st.just("start"), st.just(0)), st.tuples(st.just("end"), st.integers(0, 7))
)


@settings(max_examples=200, deadline=None)
@given(
    alone=st.lists(step, max_size=120),
    arrivals=st.lists(st.integers(1, MAX_COST_MS), min_size=1, max_size=30),
    together=st.lists(serving, max_size=80),
    slots=st.integers(1, 4),
    weight_a=st.sampled_from((1.0, 2.0, 4.0)),
)
def test_a_tenant_long_alone_then_joined_gets_its_share(
    alone: list[tuple[str, int]],
    arrivals: list[int],
    together: list[tuple[str, int]],
    slots: int,
    weight_a: float,
) -> None:
    """a is served alone, its requests in flight as b's arrive beside more of a's; from then on,
    over any stretch where both wait, each gets its weighted share of the two's service, less
    what was in flight when the stretch began and one request more: the time alone neither
    owes nor earns."""
    weight = {"a": weight_a, "b": 1.0}
    run = Concurrent(slots, weight)
    run.play(("a",), alone)
    joined = len(run.served)
    run.play(("a", "b"), [("push", cost) for cost in arrivals] + together)
    run.drain()
    assert_shares(run.served[joined:], weight, slots)


@settings(max_examples=100, deadline=None)
@given(
    steps=st.lists(st.tuples(st.sampled_from("ab"), step), max_size=150),
    slots=st.integers(1, 4),
)
def test_running_counts_hold_through_every_switch(
    steps: list[tuple[str, tuple[str, int]]], slots: int
) -> None:
    """Whatever the switches between one tenant alone and two, the queue's running and waiting
    counts are the requests really running and waiting, and every request ends once."""
    run = Concurrent(slots, {"a": 1.0, "b": 1.0})
    for tenant, one in steps:
        run.play((tenant,), [one])
        running: dict[str, int] = {}
        for ticket, _ in run.running:
            running[ticket.tenant] = running.get(ticket.tenant, 0) + 1
        assert run.queue.statistics().running == running
    run.drain()
    assert run.queue.statistics() == ({}, {})
    assert len(run.served) == next(run.ids)


@settings(max_examples=200, deadline=None)
@given(
    arrivals=st.lists(st.tuples(st.sampled_from(("a", "b", "ab")), step), max_size=150),
    slots=st.integers(1, 4),
    weight_a=st.sampled_from((1.0, 2.0, 4.0)),
)
def test_requests_taking_free_slots_leave_each_tenant_its_share(
    arrivals: list[tuple[str, tuple[str, int]]], slots: int, weight_a: float
) -> None:
    """As the server's requests do, each takes a free slot while nothing waits, or waits its
    turn: each still gets its weighted share (`assert_shares`), and every count holds."""
    weight = {"a": weight_a, "b": 1.0}
    run = Concurrent(slots, weight, free=True)
    for tenants, one in arrivals:
        run.play(tuple(tenants), [one])
    run.drain()
    assert_shares(run.served, weight, slots)
    assert run.queue.statistics() == ({}, {}) and run.queue.in_flight == 0
    assert len(run.served) == next(run.ids)
