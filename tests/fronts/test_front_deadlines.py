"""A front's deadlines: each pending request expires once, at its own deadline, in its order."""

from __future__ import annotations

import asyncio
from functools import partial

from modelhost.fronts.deadlines import Deadlines


async def expired_in_order(timeouts_s: list[float], removed: set[int]) -> list[int]:
    deadlines, expired = Deadlines(), []
    keys = [deadlines.add(t, partial(expired.append, n)) for n, t in enumerate(timeouts_s)]
    for n in removed:
        deadlines.remove(keys[n])
    await asyncio.sleep(max(timeouts_s) + 0.05)
    return expired


def test_each_pending_request_expires_once() -> None:
    assert asyncio.run(expired_in_order([0.01, 0.02, 0.02], removed=set())) == [0, 1, 2]


def test_a_removed_request_never_expires() -> None:
    assert asyncio.run(expired_in_order([0.01, 0.02, 0.03], removed={0, 2})) == [1]


def test_a_lowered_timeout_expires_before_longer_deadlines_set_earlier() -> None:
    """The timer waits for the first deadline only while they come in order."""

    async def lowered() -> tuple[list[int], list[int]]:
        deadlines, expired = Deadlines(), []
        deadlines.add(0.3, partial(expired.append, 0))
        deadlines.add(0.02, partial(expired.append, 1))
        await asyncio.sleep(0.15)
        early = list(expired)
        await asyncio.sleep(0.25)
        return early, expired

    assert asyncio.run(lowered()) == ([1], [1, 0])
