"""A task under way counts until it ends, not until its done-callback runs a turn later."""

from __future__ import annotations

import asyncio

from modelhost.host.under_way import UnderWay


async def _answer(value: int) -> int:
    return value


def test_an_ended_task_is_not_under_way_before_its_callback_runs() -> None:
    async def scenario() -> None:
        under_way: UnderWay[int] = UnderWay()
        first = under_way.start("m", _answer(1))
        assert under_way.get("m") is first and "m" in under_way
        await asyncio.sleep(0)  # first ends; its done-callback is scheduled, not run
        assert first.done() and under_way.get("m") is None and "m" not in under_way

    asyncio.run(scenario())


def test_an_earlier_tasks_end_does_not_forget_a_later_one() -> None:
    async def scenario() -> None:
        under_way: UnderWay[int] = UnderWay()
        first = under_way.start("m", _answer(1))
        await asyncio.sleep(0)  # first ends; its callback is scheduled, not run
        second = under_way.start("m", asyncio.sleep(1, result=2))
        await asyncio.sleep(0)  # first's callback runs
        assert first.done() and under_way.get("m") is second
        second.cancel()

    asyncio.run(scenario())
