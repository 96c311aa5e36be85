"""Loads that failed because of their artifact: the error is answered again while the store
has the same version, for a minute at most."""

from __future__ import annotations

import asyncio

import pytest

from modelhost.errors import ModelLoadError, StoreUnavailable
from modelhost.host.failed_loads import FailedLoads


class Store:
    """The artifact's version, and how often it was asked."""

    def __init__(self, version: str = "v1") -> None:
        self.version, self.asked = version, 0

    async def __call__(self) -> str:
        self.asked += 1
        if self.version == "down":
            raise StoreUnavailable("the store is down")
        return self.version


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def failed(clock: Clock, store: Store, name: str = "m") -> FailedLoads:
    loads = FailedLoads(ttl_s=60, max_keys=3, clock=clock)
    asyncio.run(loads.remember(name, store, ModelLoadError("could not load model m: junk")))
    store.asked = 0
    return loads


def check(loads: FailedLoads, store: Store, name: str = "m") -> None:
    asyncio.run(loads.check(name, store))


def test_same_version_gets_the_error_again() -> None:
    """Within the TTL the error is answered again, asking the store only its version."""
    clock, store = Clock(), Store()
    loads = failed(clock, store)
    for now in (1.0, 30.0, 59.9):
        clock.now = now
        with pytest.raises(ModelLoadError, match="junk .*same version"):
            check(loads, store)
    assert store.asked == 3  # a HEAD or a stat each time, never the download


def test_a_new_version_is_loaded_at_once() -> None:
    clock, store = Clock(), Store()
    loads = failed(clock, store)
    store.version = "v2"
    check(loads, store)
    store.version = "v1"
    check(loads, store)  # forgotten: even the old version is tried again


def test_load_is_retried_after_the_ttl() -> None:
    """Past the TTL the load runs again without asking the store."""
    clock, store = Clock(), Store()
    loads = failed(clock, store)
    clock.now = 60.0
    check(loads, store)
    assert store.asked == 0


def test_a_store_that_cannot_say_lets_the_load_run() -> None:
    clock, store = Clock(), Store("down")
    loads = failed(clock, store)
    check(loads, store)  # nothing was remembered
    store.version = "v1"
    loads = failed(clock, store)
    store.version = "down"
    check(loads, store)


def test_the_most_recent_names_are_kept() -> None:
    clock, store = Clock(), Store()
    loads = failed(clock, store, "a")
    for name in ("b", "c", "d"):
        asyncio.run(loads.remember(name, store, ModelLoadError(name)))
    check(loads, store, "a")  # the oldest of four went
    with pytest.raises(ModelLoadError):
        check(loads, store, "d")
