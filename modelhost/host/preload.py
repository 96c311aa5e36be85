"""The models a server loads as it starts: pinned ones and those `load_models` names."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from modelhost.cache.stores import Store
from modelhost.errors import ModelhostError
from modelhost.host.model_host import ModelHost

logger = logging.getLogger("modelhost")

MAR = ".mar"


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
            if source.lower().endswith(MAR):
                name = await registered_archive(host, name, source)
            elif source:
                host.residency.set_source(name, stores.normalize(source))
                host.registry.given_as(name, source)
            if name:
                names.append(name)
    return names


async def every_key(store: Store) -> list[str]:
    """Every model the store holds, for load_models=ALL, which loads them all anyway."""
    keys: list[str] = []
    while page := await store.list_keys(keys[-1] if keys else ""):
        keys += page
    return keys


def named_source(entry: str) -> tuple[str, str]:
    """An entry's name ("" for an archive that names itself) and URL."""
    name, _, source = entry.partition("=")
    if not source and name.lower().endswith(MAR):
        return "", name
    return name, source


async def registered_archive(host: ModelHost, name: str, url: str) -> str:
    """Register a `.mar` as TorchServe does at start: under `name`, else its manifest's
    modelName (else its file's name), at its modelVersion; the name it is held under, or ""."""
    try:
        named, version = await host.archive_identity(url)
        return (await host.register_version(name or named, url, None, version)).name
    except ModelhostError as error:
        logger.error("could not register model %s at start: %s", name or url, error)
        return ""
