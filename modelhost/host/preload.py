"""The models a server loads as it starts: pinned ones and those `load_models` names."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from modelhost.errors import ModelhostError
from modelhost.host.model_host import ModelHost

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
    """The models `load_models` names: ALL, names, or name=URL."""
    stores, names = host.disk.stores, []
    for entry in load_models:
        name, _, source = entry.partition("=")
        if source:
            host.residency.set_source(name, stores.normalize(source))
        try:
            names.extend(await stores.default.list_keys() if name == "ALL" else [name])
        except ModelhostError as error:
            logger.error("could not list the models to preload: %s", error)
    return names
