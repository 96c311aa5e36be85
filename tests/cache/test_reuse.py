"""Online byte stack distances equal the brute-force walk of the recency stack."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.reuse import MIN_POSITIONS, StackDistances

NAMES = st.sampled_from([f"m{i}" for i in range(12)])
SIZES = st.integers(min_value=1, max_value=1000)
# a use (name, size) or a forget (name, None)
STEPS = st.lists(st.tuples(NAMES, st.one_of(SIZES, st.none())), max_size=300)


def brute_force(steps: list[tuple[str, int | None]]) -> list[float]:
    """Walk the recency stack: the sizes of the distinct objects since the last use, plus its
    own size now."""
    stack: list[str] = []  # most recent last
    sizes: dict[str, int] = {}
    distances: list[float] = []
    for name, size in steps:
        if size is None:
            if name in stack:
                stack.remove(name)
            continue
        if name in stack:
            since = stack[stack.index(name) + 1 :]
            distances.append(float(size + sum(sizes[other] for other in since)))
            stack.remove(name)
        else:
            distances.append(math.inf)
        stack.append(name)
        sizes[name] = size
    return distances


def online(steps: list[tuple[str, int | None]], positions: int = MIN_POSITIONS) -> list[float]:
    distances = StackDistances(positions)
    found = []
    for name, size in steps:
        if size is None:
            distances.forget(name)
        else:
            found.append(distances.use(name, size))
    return found


@settings(max_examples=300, deadline=None)
@given(STEPS, st.integers(min_value=1, max_value=16))
def test_distances_equal_the_recency_stack_walk(
    steps: list[tuple[str, int | None]], positions: int
) -> None:
    """With trees small enough that the stream renumbers them again and again."""
    assert online(steps, positions) == brute_force(steps)


def test_a_long_stream_renumbers_and_keeps_its_distances() -> None:
    """Far more uses than the tree has positions, over more names than it starts with."""
    names = [f"m{i % (MIN_POSITIONS + 7)}" for i in range(5 * MIN_POSITIONS)]
    steps: list[tuple[str, int | None]] = [(n, 1 + len(n)) for n in names]
    found = online(steps)
    assert found == brute_force(steps)
    assert found[-1] == sum(1 + len(f"m{i}") for i in range(MIN_POSITIONS + 7))


def test_tracking_is_as_large_as_the_names_tracked() -> None:
    distances = StackDistances()
    for i in range(10 * MIN_POSITIONS):
        distances.use(f"m{i}", 1)
        distances.forget(f"m{i - 3}")
    assert len(distances) == 3
    assert distances.positions <= MIN_POSITIONS


GROUPED = st.lists(st.tuples(NAMES, SIZES, st.integers(min_value=0, max_value=1)), max_size=200)


@settings(max_examples=200, deadline=None)
@given(GROUPED, st.integers(min_value=1, max_value=16))
def test_each_groups_bytes_count_at_its_weight(
    steps: list[tuple[str, int, int]], positions: int
) -> None:
    """A name may change group between uses (a sampled name turns frequent)."""
    weights = [1.0, 8.0]
    distances = StackDistances(groups=2, min_positions=positions)
    distances.weights = weights
    stack: list[str] = []
    latest: dict[str, tuple[int, int]] = {}  # name: (size, group)
    for name, size, group in steps:
        found = distances.use(name, size, group)
        if name in stack:
            since = stack[stack.index(name) + 1 :]
            expected = size + sum(weights[latest[o][1]] * latest[o][0] for o in since)
            assert found == expected
            stack.remove(name)
        else:
            assert found == math.inf
        stack.append(name)
        latest[name] = (size, group)
