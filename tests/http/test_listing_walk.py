"""Walking a listing page by page while models come and go between pages lists every name that
stayed known throughout exactly once, in order, and never a name twice: GET /models (each state
filter) and TorchServe's list, with the tokens each returns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from helpers.counting_host import CountingDisk, answer, counting_host
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.memory import Resident, State
from modelhost.host import ModelHost
from modelhost.http.routes import HttpSettings, SageMakerRoutes
from modelhost.http.torchserve import TorchServeManagement

NAMES = [f"n{i:02d}" for i in range(30)]
PLACES = ("memory", "disk", "registered")

name = st.sampled_from(NAMES)
place = st.sampled_from(PLACES)
change = st.tuples(st.booleans(), place, name)  # (add or remove, where, which)


def add(host: ModelHost, where: str, model: str) -> None:
    if where == "memory":
        host.memory.residents.setdefault(model, Resident(model, 1, state=State.LOADED))
    elif where == "disk":
        disk: CountingDisk = host.disk  # type: ignore[assignment]
        disk.add(model)
    else:
        host.residency.sources[model] = f"file:///{model}"


def remove(host: ModelHost, where: str, model: str) -> None:
    if where == "memory":
        host.memory.residents.pop(model, None)
    elif where == "disk":
        disk: CountingDisk = host.disk  # type: ignore[assignment]
        disk.discard(model)
    else:
        host.residency.sources.pop(model, None)


def known(host: ModelHost, places: tuple[str, ...]) -> set[str]:
    disk: CountingDisk = host.disk  # type: ignore[assignment]
    found = {
        "memory": set(dict(host.memory.residents)),
        "disk": set(disk.index),
        "registered": set(dict(host.residency.sources)),
    }
    return set().union(*(found[p] for p in places))


Lister = Callable[[ModelHost, int, str | None], tuple[list[str], str | None]]


def sagemaker_pages(state: str | None) -> Lister:
    def page(host: ModelHost, limit: int, token: str | None) -> tuple[list[str], str | None]:
        query: dict[str, Any] = {"limit": limit}
        query |= {"next_page_token": token} if token else {}
        query |= {"state": state} if state else {}
        routes = SageMakerRoutes(host, HttpSettings(1 << 20, ""))
        status, body = answer(routes.list_models, "/models", query)
        assert status == 200, body
        return [m["modelName"] for m in body["models"]], body.get("next_page_token")

    return page


def torchserve_page(host: ModelHost, limit: int, token: str | None) -> tuple[list[str], str | None]:
    query: dict[str, Any] = {"limit": limit} | ({"next_page_token": token} if token else {})
    torchserve = TorchServeManagement(SageMakerRoutes(host, HttpSettings(1 << 20, "")))
    status, body = answer(torchserve.list_models, "/models", query)
    assert status == 200, body
    return [m["modelName"] for m in body["models"]], body.get("nextPageToken")


LISTINGS: dict[str, tuple[Lister, tuple[str, ...]]] = {
    "all": (sagemaker_pages(None), PLACES),
    "loaded": (sagemaker_pages("loaded"), ("memory",)),
    "on_disk": (sagemaker_pages("on_disk"), ("disk",)),
    "registered": (sagemaker_pages("registered"), ("registered",)),
    "torchserve": (torchserve_page, ("memory", "registered")),
}


@pytest.mark.parametrize("listing", sorted(LISTINGS))
@settings(max_examples=150, deadline=None)
@given(
    start=st.lists(st.tuples(place, name), min_size=3, max_size=60),
    limit=st.integers(1, 4),
    changes=st.lists(st.lists(change, min_size=1, max_size=4), max_size=40),
)
def test_walk_lists_each_name_once(
    listing: str,
    start: list[tuple[str, str]],
    limit: int,
    changes: list[list[tuple[bool, str, str]]],
) -> None:
    """A walk lists each name once while names come and go."""
    lister, places = LISTINGS[listing]
    host, _ = counting_host()
    for where, model in start:
        add(host, where, model)
    stayed = known(host, places)
    listed: list[str] = []
    names, token = lister(host, limit, None)
    for step in range(len(NAMES) * 2):
        listed += names
        assert len(names) <= limit
        if token is None:
            break
        for adding, where, model in changes[step] if step < len(changes) else []:
            (add if adding else remove)(host, where, model)
        stayed &= known(host, places)
        names, token = lister(host, limit, token)
    assert token is None
    assert listed == sorted(set(listed)), "a name twice, or out of order"
    assert stayed <= set(listed), "a name known throughout was skipped"
