"""The fair queue's guarantees, as properties over made-up arrivals and costs (serial service:
each request ends before the next starts, as in VTC's model)."""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.errors import QueueFull, TenantQueueFull
from modelhost.fair import FIRST_ESTIMATE_MS, FairQueue, Ticket
from modelhost.protocols.status import status_of

MAX_COST_MS = 10
TENANTS = ("a", "b", "c")

costs = st.integers(1, MAX_COST_MS)
arrival = st.tuples(st.sampled_from(TENANTS), costs)
# each step: some arrivals, then one request served (if any waits)
steps = st.lists(st.lists(arrival, max_size=3), min_size=1, max_size=40)
weights = st.fixed_dictionaries({tenant: st.sampled_from((1.0, 2.0, 4.0)) for tenant in TENANTS})


@dataclass
class Served:
    tenant: str
    cost_ms: int
    backlogged: set[str]  # before this request was picked
    stays: set[str]  # after it was picked: still waiting


@dataclass
class Run:
    queue: FairQueue[int]
    served: list[Served] = field(default_factory=list)

    def serve(self, cost_of: dict[int, int]) -> None:
        backlogged = set(self.queue.statistics().waiting)
        picked = self.queue.pop()
        if picked is None:
            return
        item, ticket = picked
        self.queue.complete(ticket, cost_of[item])
        stays = set(self.queue.statistics().waiting)
        self.served.append(Served(ticket.tenant, cost_of[item], backlogged, stays))


def run(plan: list[list[tuple[str, int]]], weight: dict[str, float]) -> Run:
    """Serve `plan`'s arrivals one step at a time; each tenant's queue holds them all."""
    queue: FairQueue[int] = FairQueue(10_000, weight=weight.__getitem__)
    done, ids, cost_of = Run(queue), itertools.count(), {}
    for arrivals in plan:
        for tenant, cost_ms in arrivals:
            cost_of[item := next(ids)] = cost_ms
            queue.push(tenant, item)
        done.serve(cost_of)
    return done


def windows(served: list[Served], f: str, g: str) -> list[list[Served]]:
    """Every stretch of service through which both f and g waited throughout. A tenant whose
    queue empties is lifted when it returns (it lost its turn by idling), so it must stay."""
    found = []
    for start in range(len(served)):
        for end in range(start, len(served)):
            inner = served[start : end + 1]
            if all({f, g} <= s.backlogged for s in inner) and all(
                {f, g} <= s.stays for s in inner[:-1]
            ):
                found.append(inner)
    return found


def service(window: list[Served], tenant: str) -> int:
    return sum(s.cost_ms for s in window if s.tenant == tenant)


@settings(max_examples=150, deadline=None)
@given(steps, weights)
def test_backlogged_tenant_gets_its_share_less_one_request(
    plan: list[list[tuple[str, int]]], weight: dict[str, float]
) -> None:
    """Over any window where f and g both wait, f gets its weighted share of the two's service,
    less at most one request's largest cost."""
    served = run(plan, weight).served
    for f, g in itertools.permutations(TENANTS, 2):
        for window in windows(served, f, g):
            got_f, got_g = service(window, f), service(window, g)
            share_f = (got_f + got_g) * weight[f] / (weight[f] + weight[g])
            assert got_f >= share_f - MAX_COST_MS - 1e-9, (f, g, got_f, got_g)


@settings(max_examples=60, deadline=None)
@given(st.lists(costs, min_size=30, max_size=200))
def test_weights_1_2_4_served_in_those_ratios(cost_list: list[int]) -> None:
    """Three tenants always waiting, weights 1:2:4: each gets its part of the total within the
    bound the pairwise share implies (one request, plus one per tenant scaled by weight)."""
    weight = {"a": 1.0, "b": 2.0, "c": 4.0}
    plan = [[(tenant, cost) for tenant in TENANTS] for cost in cost_list]
    served = run(plan, weight).served
    total, weights_sum = sum(s.cost_ms for s in served), sum(weight.values())
    for tenant in TENANTS:
        got = service(served, tenant)
        bound = MAX_COST_MS * (1 + len(TENANTS) * weight[tenant] / weights_sum)
        assert abs(got - total * weight[tenant] / weights_sum) <= bound + 1e-9, (tenant, got)


def test_weights_1_2_4_over_a_long_run() -> None:
    """Equal costs, everyone waiting: 700 requests go 100, 200, 400."""
    plan = [[(tenant, 5) for tenant in TENANTS] for _ in range(700)]
    served = run(plan, {"a": 1.0, "b": 2.0, "c": 4.0}).served
    counts = {tenant: sum(s.tenant == tenant for s in served) for tenant in TENANTS}
    assert counts == {"a": 100, "b": 200, "c": 400}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(costs, costs), min_size=10, max_size=100))
def test_idle_tenants_share_goes_to_the_others(pairs: list[tuple[int, int]]) -> None:
    """c sends nothing: every step serves a or b, and they split the service evenly."""
    plan = [[("a", cost_a), ("b", cost_b)] for cost_a, cost_b in pairs]
    served = run(plan, {tenant: 1.0 for tenant in TENANTS}).served
    assert len(served) == len(plan)  # a request served at every step: nothing held back
    got_a, got_b = service(served, "a"), service(served, "b")
    assert abs(got_a - got_b) <= 2 * MAX_COST_MS


def test_idling_earns_no_credit() -> None:
    """a is served alone for a long while; when b arrives, b is not owed that time: the two
    alternate at once rather than b taking every slot until it has caught up."""
    plan = [[("a", 5)] for _ in range(50)] + [[("a", 5), ("b", 5)] for _ in range(20)]
    served = run(plan, {tenant: 1.0 for tenant in TENANTS}).served
    after = served[50:]
    assert abs(service(after, "a") - service(after, "b")) <= MAX_COST_MS


operation = st.one_of(
    st.tuples(st.just("push"), st.sampled_from(TENANTS)),
    st.tuples(st.just("pop"), st.just("")),
    st.tuples(st.just("discard"), st.sampled_from(TENANTS)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(operation, max_size=80), st.integers(0, 4))
def test_every_request_admitted_or_refused_exactly_once(
    operations: list[tuple[str, str]], queue_size: int
) -> None:
    """Pushes are admitted or refused; each admitted one leaves by pop or discard, once."""
    queue: FairQueue[int] = FairQueue(queue_size)
    ids, admitted, refused, left = itertools.count(), set(), set(), []
    waiting: dict[str, list[int]] = {tenant: [] for tenant in TENANTS}
    for op, tenant in operations:
        if op == "push":
            item = next(ids)
            try:
                queue.push(tenant, item)
            except TenantQueueFull:
                refused.add(item)
                assert len(waiting[tenant]) == queue_size
            else:
                admitted.add(item)
                waiting[tenant].append(item)
        elif op == "pop" and (picked := queue.pop()) is not None:
            item, ticket = picked
            queue.complete(ticket, 1.0)
            waiting[ticket.tenant].remove(item)
            left.append(item)
        elif op == "discard" and waiting[tenant]:
            assert queue.discard(tenant, waiting[tenant][0])
            left.append(waiting[tenant].pop(0))
        assert len(queue) == sum(len(items) for items in waiting.values())
    while (picked := queue.pop()) is not None:
        left.append(picked[0])
    assert not admitted & refused and len(admitted | refused) == next(ids)
    assert sorted(left) == sorted(admitted)


def test_full_tenant_queue_answers_429_naming_tenant_and_limit() -> None:
    queue: FairQueue[int] = FairQueue(2)
    queue.push("noisy", 1)
    queue.push("noisy", 2)
    with pytest.raises(TenantQueueFull, match="tenant noisy has 2 .* the limit .* is 2") as info:
        queue.push("noisy", 3)
    assert isinstance(info.value, QueueFull) and status_of(info.value) == 429
    queue.push("quiet", 4)  # another tenant's queue has room


def test_dispatch_charges_an_estimate_and_completion_corrects_it() -> None:
    """The charge at dispatch is the tenant's running mean; the measured cost replaces it."""
    now = [0.0]
    queue: FairQueue[int] = FairQueue(4, clock=lambda: now[0])
    queue.dispatch("b")  # running throughout: a is never alone
    first = queue.dispatch("a")
    queue.complete(first, 8.0)
    assert queue.counter("a") == 8.0
    second = queue.dispatch("a")
    assert second.estimate_ms == 8.0 and queue.counter("a") == 16.0
    now[0] = 0.003  # no measured cost: the time it held its place
    queue.complete(second, None)
    assert queue.counter("a") == pytest.approx(11.0)


def test_refund_takes_back_a_charge() -> None:
    queue: FairQueue[int] = FairQueue(4)
    queue.dispatch("b")
    queue.push("a", 1)
    queue.complete(queue.dispatch("a"), 5.0)
    before = queue.counter("a")
    picked = queue.pop()
    assert picked is not None
    queue.refund(picked[1])
    assert queue.counter("a") == before


def test_a_tenant_back_from_idle_wins_the_tie_its_lift_makes() -> None:
    """Lifted level with a busy tenant, a quiet one goes first: of equal counters, the one with
    fewer requests running."""
    queue: FairQueue[str] = FairQueue(10)
    queue.push("busy", "b1")
    queue.push("busy", "b2")
    busy, _ = queue.pop() or ("", None)
    assert busy == "b1"
    queue.push("quiet", "q1")  # lifted to busy's counter, with nothing running
    assert queue.counter("quiet") == queue.counter("busy")
    assert (queue.pop() or ("", None))[0] == "q1"


def test_a_tenant_alone_is_charged_nothing_until_joined() -> None:
    """Alone, a's requests cost it nothing; one in flight as b arrives is charged in full as it
    ends, from the level the two started at."""
    queue: FairQueue[int] = FairQueue(4)
    queue.complete(queue.dispatch("a"), 8.0)
    in_flight = queue.dispatch("a")
    assert in_flight.estimate_ms == 0.0 and queue.counter("a") == 0.0
    joining = queue.dispatch("b")  # level with a, then charged its estimate
    assert queue.counter("a") == 0.0 and queue.counter("b") == joining.estimate_ms
    queue.complete(in_flight, 5.0)
    assert queue.counter("a") == 5.0


def test_a_lone_tenants_request_ending_unmeasured_in_contention_is_charged_the_mean() -> None:
    """A lone tenant's requests are not timed; one that ends unmeasured once a second tenant
    came is charged the running mean of every request, not nothing."""
    queue: FairQueue[int] = FairQueue(4, clock=lambda: 100.0)
    in_flight = queue.dispatch("a")
    queue.dispatch("b")  # still running as a's ends
    queue.complete(in_flight, None)
    assert queue.counter("a") == FIRST_ESTIMATE_MS


def test_a_tenant_after_a_lone_one_went_idle_is_alone_in_its_turn() -> None:
    """A lone tenant idle is no contention: the next tenant, another or the same, is alone and
    charged nothing; the idle one coming back beside it starts level."""
    queue: FairQueue[int] = FairQueue(4)
    queue.complete(queue.dispatch("a"), 8.0)
    b = queue.dispatch("b")
    assert b.estimate_ms == 0.0 and queue.counter("b") == 0.0
    queue.complete(b, 3.0)
    queue.complete(queue.dispatch("b"), 3.0)
    in_flight = queue.dispatch("b")
    joining = queue.dispatch("a")  # contention: a is charged from b's level
    assert queue.counter("a") == joining.estimate_ms and queue.counter("b") == 0.0
    queue.complete(in_flight, 5.0)
    assert queue.counter("b") == 5.0


request_step = st.one_of(
    st.tuples(st.sampled_from(("dispatch", "take_free")), st.sampled_from(TENANTS)),
    st.tuples(st.just("push"), st.sampled_from(TENANTS)),
    st.tuples(st.sampled_from(("complete", "refund", "pop", "discard")), st.integers(0, 9)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(request_step, max_size=80))
def test_running_counts_follow_every_interleaving(steps: list[tuple[str, object]]) -> None:
    """A tenant alone and tenants in contention count their running requests alike, through
    any order of starts, ends, refunds, waits and withdrawals."""
    queue: FairQueue[int] = FairQueue(100, limit=4)
    running: list[Ticket] = []
    waiting: list[tuple[str, int]] = []
    ids = itertools.count()
    for op, arg in steps:
        if op == "dispatch":
            running.append(queue.dispatch(str(arg)))
        elif op == "take_free":
            free = not waiting and queue.in_flight < queue.limit
            taken = queue.take_free(str(arg))
            assert (taken is not None) == free, "a slot taken past the limit or the queue"
            running.extend([taken] if taken is not None else [])
        elif op == "push":
            waiting.append((str(arg), next(ids)))
            queue.push(*waiting[-1])
        elif op == "pop" and (picked := queue.pop()) is not None:
            waiting = [entry for entry in waiting if entry[1] != picked[0]]
            running.append(picked[1])
        elif op in ("complete", "refund") and running:
            ticket = running.pop(int(str(arg)) % len(running))
            queue.complete(ticket, 2.0) if op == "complete" else queue.refund(ticket)
        elif op == "discard" and waiting:
            assert queue.discard(*waiting.pop(int(str(arg)) % len(waiting)))
        expected = collections.Counter(ticket.tenant for ticket in running)
        assert {tenant: queue.running(tenant) for tenant in TENANTS} == {
            tenant: expected[tenant] for tenant in TENANTS
        }
        assert queue.statistics().running == dict(expected)
        assert queue.in_flight == len(running)
