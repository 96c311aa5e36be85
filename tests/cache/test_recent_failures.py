"""Failures remembered for a while: recalled under their TTL, the most recent kept. The missing
URLs and the failed loads are two such memories; they differ in when they forget."""

from __future__ import annotations

import pytest

from modelhost.cache.missing import MissingUrls
from modelhost.cache.recent import RecentFailures
from modelhost.errors import ModelNotFound
from modelhost.host.failed_loads import FailedLoads


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_failure_is_recalled_until_its_ttl() -> None:
    clock = Clock()
    recent = RecentFailures(ttl_s=5, clock=clock)
    recent.keep("a", "no such object", version="1:etag")
    clock.now = 4.9
    recalled = recent.recall("a")
    assert recalled is not None
    assert (recalled.message, recalled.version) == ("no such object", "1:etag")
    assert recent.age_s(recalled) == pytest.approx(4.9)
    clock.now = 5.0
    assert recent.recall("a") is None
    clock.now = 0.0
    assert recent.recall("a") is None  # forgotten, not only hidden


def test_the_most_recent_keys_are_kept() -> None:
    recent = RecentFailures(ttl_s=5, max_keys=2, clock=Clock())
    for key in ("a", "b", "a", "c"):  # "a" again: it is recent again
        recent.keep(key, key)
    assert [recent.recall(key) is not None for key in "abc"] == [True, False, True]


def test_a_missing_url_is_answered_again_without_the_store() -> None:
    clock = Clock()
    missing = MissingUrls(ttl_s=5, clock=clock)
    missing.remember("s3://b/m.joblib", ModelNotFound("no object at s3://b/m.joblib"))
    with pytest.raises(ModelNotFound, match="no object at .* under 5 s ago"):
        missing.check("s3://b/m.joblib")
    missing.check("s3://b/other.joblib")
    clock.now = 5.0
    missing.check("s3://b/m.joblib")


@pytest.mark.parametrize("memory", [MissingUrls, FailedLoads])
def test_both_memories_are_recent_failures(memory: type) -> None:
    """One base keeps, bounds and ages them; each says only when its failure is stale."""
    assert issubclass(memory, RecentFailures)
