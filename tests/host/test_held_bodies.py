"""The room for request bodies: the tenant holding the most is refused, the others pass."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost.errors import TenantQueueFull
from modelhost.host.held_bodies import HeldBodies

MiB = 2**20


def test_past_the_room_the_tenant_holding_the_most_is_refused_and_others_pass() -> None:
    bodies = HeldBodies(10 * MiB)
    for _ in range(3):
        bodies.hold("noisy", 3 * MiB)
    with pytest.raises(TenantQueueFull, match=r"tenant noisy holds 9\.0 MiB .* the most"):
        bodies.hold("noisy", 3 * MiB)
    bodies.hold("quiet", 2 * MiB)  # past the room, but not the most
    assert (bodies.total, bodies.by_tenant) == (11 * MiB, {"noisy": 9 * MiB, "quiet": 2 * MiB})
    bodies.release("noisy", 3 * MiB)
    bodies.hold("noisy", 1 * MiB)  # back within the room


def test_a_tenant_alone_is_refused_only_past_the_room() -> None:
    bodies = HeldBodies(4 * MiB)
    bodies.hold("", 4 * MiB)
    with pytest.raises(TenantQueueFull, match=r"tenant \(default\)"):
        bodies.hold("", 1)
    bodies.release("", 4 * MiB)
    assert (bodies.total, bodies.by_tenant) == (0, {})


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 8)), max_size=40))
def test_past_the_room_only_tenants_holding_less_than_the_most_pass(
    requests: list[tuple[str, int]],
) -> None:
    """However requests come, the total passes the room only by a tenant's first body or by
    tenants that held less than another did, and releasing all leaves nothing."""
    bodies = HeldBodies(10)
    held: list[tuple[str, int]] = []
    for tenant, size in requests:
        before = dict(bodies.by_tenant)
        try:
            bodies.hold(tenant, size)
        except TenantQueueFull:
            others = [n for other, n in before.items() if other != tenant]
            had = before.get(tenant, 0)
            assert bodies.total + size > 10 and had and had >= max(others, default=0)
            continue
        held.append((tenant, size))
        if bodies.total > 10 and before.get(tenant, 0):
            assert before[tenant] < max(before.values())
    for tenant, size in held:
        bodies.release(tenant, size)
    assert (bodies.total, bodies.by_tenant) == (0, {})


def test_a_tenant_holding_none_is_let_in_whatever_its_body() -> None:
    """A body larger than the room alone (--max-request-size above the allowance) is served."""
    bodies = HeldBodies(4 * MiB)
    bodies.hold("a", 6 * MiB)
    bodies.hold("b", 1 * MiB)
    with pytest.raises(TenantQueueFull):
        bodies.hold("a", 1)
