"""A task under way counts until it ends, not until its done-callback runs a turn later."""

from __future__ import annotations

import asyncio

from modelhost.host.under_way import UnderWay


async def _answer(value: int) -> int:
    return value


def test_ended_task_is_not_under_way() -> None:
    """A task stops counting when it ends, before its done-callback runs."""

    async def scenario() -> None:
        under_way: UnderWay[int] = UnderWay()
        first = under_way.start("m", _answer(1))
        assert under_way.get("m") is first and "m" in under_way
        await asyncio.sleep(0)  # first ends; its done-callback is scheduled, not run
        assert first.done() and under_way.get("m") is None and "m" not in under_way

    asyncio.run(scenario())


def test_earlier_end_keeps_later_task() -> None:
    """An earlier task's late callback does not forget a later task."""

    async def scenario() -> None:
        under_way: UnderWay[int] = UnderWay()
        first = under_way.start("m", _answer(1))
        await asyncio.sleep(0)  # first ends; its callback is scheduled, not run
        second = under_way.start("m", asyncio.sleep(1, result=2))
        await asyncio.sleep(0)  # first's callback runs
        assert first.done() and under_way.get("m") is second
        second.cancel()

    asyncio.run(scenario())
