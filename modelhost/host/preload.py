"""The models a server loads as it starts: pinned ones and those `load_models` names."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from modelhost.cache.stores import Store
from modelhost.errors import ModelhostError
from modelhost.host.model_host import ModelHost
from modelhost.names import name_from_url

logger = logging.getLogger("modelhost")


async def preload(host: ModelHost, pinned: Iterable[str], load_models: Iterable[str]) -> None:
    """Load pinned and start-up models; a failure is logged, not fatal."""
    for name in (*pinned, *await preload_names(host, load_models)):
        try:
            await host.load(name)
        except ModelhostError as error:
            logger.error("could not preload model %s: %s", name, error)
        else:
            host.registry.preloaded(name)


async def preload_names(host: ModelHost, load_models: Iterable[str]) -> list[str]:
    """The models `load_models` names: ALL (any case, as TorchServe), names, or name=URL."""
    stores, names = host.disk.stores, []
    for entry in load_models:
        try:
            entries = await every_key(stores.default) if entry.upper() == "ALL" else [entry]
        except ModelhostError as error:
            logger.error("could not list the models to preload: %s", error)
            continue
        for name, source in map(named_source, entries):
            if source:
                host.residency.set_source(name, stores.normalize(source))
                host.registry.given_as(name, source)
            names.append(name)
    return names


async def every_key(store: Store) -> list[str]:
    """Every model the store holds, for load_models=ALL, which loads them all anyway."""
    keys: list[str] = []
    while page := await store.list_keys(keys[-1] if keys else ""):
        keys += page
    return keys


def named_source(entry: str) -> tuple[str, str]:
    """An entry's name and URL; TorchServe names a `.mar` after its file, without `.mar`."""
    name, _, source = entry.partition("=")
    if not source and name.lower().endswith(".mar"):
        return name_from_url(name), name
    return name, source
