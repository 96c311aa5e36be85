"""How a model's recent events give its index state once it has left memory."""

from __future__ import annotations

import pytest

from modelhost.protocols.repository import last_outcome
from modelhost.records.events import Event

LOAD_FAILED = Event("failure", "m", reason="load", detail={"error": "could not load model m"})


@pytest.mark.parametrize(
    ("kinds", "outcome"),
    [
        ([], (None, "")),
        ([Event("download", "m")], (None, "")),
        ([Event("load", "m"), Event("unload", "m", reason="idle")], ("UNAVAILABLE", "unloaded")),
        ([Event("load", "m"), Event("evict", "m")], ("UNAVAILABLE", "unloaded")),
        ([Event("load", "m"), LOAD_FAILED], ("UNAVAILABLE", "could not load model m")),
        ([LOAD_FAILED, Event("load", "m"), Event("unload", "m")], ("UNAVAILABLE", "unloaded")),
        (
            [Event("load", "m"), Event("failure", "m", reason="manifest")],
            ("UNAVAILABLE", "unloaded"),
        ),
    ],
    ids=["none", "fetched only", "unloaded", "evicted", "failed", "failed then unloaded", "other"],
)
def test_the_last_load_or_unload_decides(kinds: list[Event], outcome: tuple[str, str]) -> None:
    assert last_outcome(kinds) == outcome
