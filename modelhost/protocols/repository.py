"""The model repository index as Triton gives it: every model of the store (Triton's
repository) and of the host, loaded or not, a page at a time (`Listing.with_store`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from modelhost.host import ModelHost, State
from modelhost.host.listing import LOADED
from modelhost.names import OIP_VERSION
from modelhost.records.events import Event

PAGE_NAMES = 1000  # names a page, between which others' requests go through
STATES = {State.LOADED: "READY", State.LOADING: "LOADING", State.UNLOADING: "UNLOADING"}
UNAVAILABLE = "UNAVAILABLE"
UNLOADED = "unloaded"  # Triton's reason for a model that left memory
LIFECYCLE = ("load", "unload", "evict")  # events after which a model not in memory was unloaded
FAILED = ("fetch", "load")  # reasons of the failure events that end a load

Entry = dict[str, str]


async def index_pages(host: ModelHost, ready_only: bool) -> AsyncIterator[list[Entry]]:
    """The index a page at a time, in name order; `ready_only`: the READY models alone."""
    after = ""
    while True:
        names = await index_page(host, after, ready_only)
        if names:
            yield [entry(host, name) for name in names]
        if len(names) < PAGE_NAMES:
            return
        after = names[-1]


async def index_page(host: ModelHost, after: str, ready_only: bool) -> list[str]:
    """Up to PAGE_NAMES names after `after`: the host's, and the store's unless `ready_only`."""
    if ready_only:
        return host.model_names().page(after, PAGE_NAMES, (LOADED,))
    return await host.model_names().with_store(after, PAGE_NAMES)


def entry(host: ModelHost, name: str) -> Entry:
    """Its index entry; a model never loaded has its name alone (and a registered version)."""
    owner = host.owner_of(name)
    model, version = owner or (name, OIP_VERSION)
    state, reason = repository_state(host, name)
    if state is None:
        return {"name": model, "version": version} if owner else {"name": model}
    found = {"name": model, "version": version, "state": state}
    return found | {"reason": reason} if reason else found


def repository_state(host: ModelHost, name: str) -> tuple[str | None, str]:
    """Triton's state and reason of a model; (None, "") for one not loaded since the start."""
    state = host.state_of(name)
    if state is not None:
        return STATES[state], ""
    if host.progress.of(name) is not None:  # fetching, before it holds memory
        return STATES[State.LOADING], ""
    failed = host.failed_load(name)
    if failed is not None:
        return UNAVAILABLE, failed
    return last_outcome(host.events.for_model(name))


def last_outcome(events: list[Event]) -> tuple[str | None, str]:
    """How the model's last load ended, from its recent events: failed, or since unloaded."""
    for event in reversed(events):
        if event.kind == "failure" and event.reason in FAILED:
            return UNAVAILABLE, str(event.detail.get("error", ""))
        if event.kind in LIFECYCLE:
            return UNAVAILABLE, UNLOADED
    return None, ""
