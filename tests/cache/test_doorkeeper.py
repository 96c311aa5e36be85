"""The doorkeeper: which names were seen before, in fixed memory, forgetting all at capacity."""

from __future__ import annotations

from modelhost.cache.doorkeeper import Doorkeeper


def test_a_name_is_new_once_then_seen() -> None:
    keeper = Doorkeeper(bits=1 << 12, capacity=256)
    assert not keeper.seen("a")
    assert keeper.seen("a") and keeper.seen("a")
    assert not keeper.seen("b")


def test_names_are_forgotten_at_capacity() -> None:
    """Names are forgotten together once capacity new names were recorded."""
    keeper = Doorkeeper(bits=1 << 12, capacity=256)
    names = [f"m{i:05d}" for i in range(256)]
    assert not any(keeper.seen(name) for name in names[:-1])
    assert all(keeper.seen(name) for name in names[:-1])  # all remembered, none forgotten
    assert not keeper.seen(names[-1])  # the 256th: the filter starts again
    assert not keeper.seen(names[0])


def test_names_never_recorded_pass_as_seen_rarely_at_capacity() -> None:
    keeper = Doorkeeper()
    for i in range(keeper.capacity - 1):
        keeper.seen(f"tenant-{i}")
    false = sum(keeper.seen(f"other-{i}") for i in range(2000))
    assert false < 2000 * 0.05  # a false "seen" writes one copy early, nothing worse


def test_memory_does_not_grow_with_names() -> None:
    """Its memory does not grow with the names it sees."""
    keeper = Doorkeeper(bits=1 << 12, capacity=256)
    before = len(keeper.bits)
    for i in range(10_000):
        keeper.seen(str(i))
    assert len(keeper.bits) == before


def test_filling_name_survives_clearing() -> None:
    """The name that fills it is remembered after the clearing."""
    keeper = Doorkeeper(bits=1 << 12, capacity=4)
    for name in "abcd":
        keeper.seen(name)
    assert keeper.seen("d") and not keeper.seen("a")
