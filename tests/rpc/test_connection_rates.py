"""The token bucket of connections for each address, on a clock that moves only when told."""

from __future__ import annotations

from modelhost.rpc.admission import ConnectionRate


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate() -> None:
    clock = Clock()
    rate = ConnectionRate(per_s=2.0, burst=4, clock=clock)
    assert [rate.allow("10.0.0.1") for _ in range(5)] == [True] * 4 + [False]
    clock.now += 1.0
    assert [rate.allow("10.0.0.1") for _ in range(3)] == [True, True, False]


def test_addresses_have_buckets_of_their_own() -> None:
    rate = ConnectionRate(per_s=1.0, burst=1, clock=Clock())
    assert rate.allow("10.0.0.1") and rate.allow("10.0.0.2")
    assert not rate.allow("10.0.0.1")


def test_a_bucket_refills_no_further_than_its_burst() -> None:
    clock = Clock()
    rate = ConnectionRate(per_s=1.0, burst=2, clock=clock)
    rate.allow("10.0.0.1")
    clock.now += 60.0
    assert [rate.allow("10.0.0.1") for _ in range(3)] == [True, True, False]


def test_an_address_that_broke_a_limit_waits_for_tokens() -> None:
    clock = Clock()
    rate = ConnectionRate(per_s=1.0, burst=8, clock=clock)
    rate.penalise("10.0.0.1")
    assert not rate.allow("10.0.0.1")
    clock.now += 1.0
    assert rate.allow("10.0.0.1")


def test_buckets_kept_are_bounded() -> None:
    rate = ConnectionRate(per_s=1.0, burst=1, clock=Clock(), max_addresses=8)
    for index in range(100):
        rate.allow(f"10.0.0.{index}")
        assert len(rate.buckets) <= 8


def test_refilled_buckets_are_forgotten_before_an_empty_one() -> None:
    clock = Clock()
    rate = ConnectionRate(per_s=1.0, burst=1, clock=clock, max_addresses=4)
    for address in ("a", "b", "c"):
        rate.allow(address)
    clock.now += 10.0
    rate.allow("d")
    rate.allow("e")
    assert set(rate.buckets) == {"d", "e"}
    assert not rate.allow("d")
