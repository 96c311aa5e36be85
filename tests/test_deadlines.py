"""Deadlines: one timer for many keys with the same timeout. A key expires once, after its
timeout, unless discarded first; expiring keys may add new ones."""

from __future__ import annotations

import asyncio

from modelhost.deadlines import DeadlineGroups, Deadlines


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(scenario: object) -> None:
    asyncio.run(scenario)  # type: ignore[arg-type]


def test_keys_expire_in_order() -> None:
    """Keys expire in order, once each, and discarded ones never."""

    async def scenario() -> None:
        clock, expired = Clock(), []
        deadlines: Deadlines[str] = Deadlines(10.0, expired.append, clock)
        deadlines.add("a")
        clock.now = 1.0
        deadlines.add("b")
        deadlines.add("c")
        deadlines.discard("b")
        clock.now = 10.5  # a is due; c is not
        deadlines._expire()
        assert expired == ["a"] and len(deadlines) == 1
        clock.now = 11.0
        deadlines._expire()
        assert expired == ["a", "c"] and len(deadlines) == 0
        deadlines._expire()  # a timer that fires with nothing due does nothing
        assert expired == ["a", "c"]
        deadlines.close()

    run(scenario())


def test_one_timer_serves_every_key() -> None:
    """One timer serves every key and a key added while expiring gets one."""

    async def scenario() -> None:
        clock, expired = Clock(), []
        deadlines: Deadlines[int] = Deadlines(5.0, lambda key: expired.append(key), clock)
        for key in range(100):
            deadlines.add(key)
        timer = deadlines._timer
        assert timer is not None  # one, set for the oldest key
        for key in range(99):
            deadlines.discard(key)
        assert deadlines._timer is timer

        def again(key: int) -> None:
            expired.append(key)
            if key == 99:
                deadlines.add(100)  # e.g. a retry of the expired call

        deadlines.on_expiry = again
        clock.now = 5.0
        deadlines._expire()
        assert expired == [99] and len(deadlines) == 1 and deadlines._timer is not None
        deadlines.close()

    run(scenario())


def test_key_expires_on_the_event_loop() -> None:
    """A key expires on the event loop after its timeout."""

    async def scenario() -> None:
        expired: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        deadlines: Deadlines[str] = Deadlines(0.01, expired.set_result)
        deadlines.add("late")
        assert await asyncio.wait_for(expired, 10) == "late"

    run(scenario())


def test_each_timeout_keeps_its_own_order() -> None:
    """Keys of different timeouts expire each at its own time, whatever the order added."""

    async def scenario() -> None:
        clock, expired = Clock(), []
        deadlines: DeadlineGroups[str] = DeadlineGroups(10.0, expired.append, clock)
        deadlines.add("long", 100.0)
        deadlines.add("default")
        deadlines.add("short", 1.0)
        clock.now = 5.0
        deadlines.expire_due()
        assert expired == ["short"]
        clock.now = 50.0
        deadlines.expire_due()
        assert expired == ["short", "default"]
        deadlines.discard("long", 100.0)
        clock.now = 500.0
        deadlines.expire_due()
        assert expired == ["short", "default"] and len(deadlines) == 0
        deadlines.close()

    run(scenario())


def test_a_timeout_no_key_waits_on_is_let_go() -> None:
    """Only the default timeout's group outlives its keys, so odd timeouts cost nothing kept."""

    async def scenario() -> None:
        deadlines: DeadlineGroups[str] = DeadlineGroups(10.0, lambda key: None, Clock())
        deadlines.add("a", 3.0)
        deadlines.add("b", 4.0)
        deadlines.discard("a", 3.0)
        deadlines.discard("b", 4.0)
        assert deadlines.timeouts_s() == [10.0]
        deadlines.close()

    run(scenario())


def test_a_stale_group_never_drops_its_successor() -> None:
    """A holder of a group let go (a worker's pending call) cannot drop the one after it."""

    async def scenario() -> None:
        clock, expired = Clock(), []
        deadlines: DeadlineGroups[str] = DeadlineGroups(10.0, expired.append, clock)
        stale = deadlines.add("a", 3.0)
        stale.discard("a")
        deadlines.add("b", 3.0)
        stale.discard("a")
        clock.now = 4.0
        deadlines.expire_due()
        assert expired == ["b"]
        deadlines.close()

    run(scenario())
