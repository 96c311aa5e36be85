"""Registration: models loaded from a URL of their own (`POST /models`, TorchServe's register),
and the check of a loaded model's artifact against the store when it is due."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from modelhost.cache.disk import Artifact
from modelhost.cache.memory import State
from modelhost.errors import ModelAlreadyLoaded, ModelhostError
from modelhost.host.calls import LoadOutcome
from modelhost.host.residency import Residency
from modelhost.host.under_way import UnderWay


class Registry:
    """Owns the models registered by URL, and revalidates loaded ones against their store."""

    def __init__(self, residency: Residency) -> None:
        self.residency = residency
        self._revalidations: UnderWay[None] = UnderWay()

    async def register_and_load(self, name: str, url: str) -> LoadOutcome:
        """POST /models: load `name` from `url`, which `allowed_urls` must admit."""
        r = self.residency
        if name in r.memory.residents or name in r.loads:
            raise ModelAlreadyLoaded(
                f"model {name} is already loaded; DELETE /models/{name} first to load it again"
            )
        r.sources[name] = r.disk.stores.admit(url)
        return await r.ensure_loaded(name)

    def register(self, name: str, url: str) -> None:
        """Remember `url` as the source of `name` without loading it (TorchServe's 0 workers)."""
        if self.is_registered(name):
            raise ModelAlreadyLoaded(
                f"model {name} is already registered; unregister it first to register it again"
            )
        self.residency.sources[name] = self.residency.disk.stores.admit(url)

    async def register_fetched(
        self, name: str, url: str, settings: Mapping[str, Any] | None = None
    ) -> Artifact:
        """Register `name` and fetch its artifact to disk without loading it, as TorchServe
        fetches an archive when it registers it: a URL that names nothing fails now.
        `settings` are manifest fields the model's loads take over its artifact's."""
        self.register(name, url)
        if settings:
            self.residency.manifests.given[name] = dict(settings)
        try:
            found = await self.residency.disk.materialize(name, self.residency.sources[name])
        except ModelhostError:
            self._forget(name)
            raise
        return found.artifact

    async def unregister(self, name: str) -> None:
        """Unload `name` if it is loaded, and forget the URL it was registered with."""
        resident = self.residency.memory.get(name)
        if resident is not None and resident.state is State.LOADED:
            await self.residency.unload(name)
        self._forget(name)

    def _forget(self, name: str) -> None:
        self.residency.sources.pop(name, None)
        self.residency.manifests.given.pop(name, None)

    def is_registered(self, name: str) -> bool:
        """Registered with a URL, loaded or loading: what TorchServe's API calls registered."""
        r = self.residency
        return name in r.sources or name in r.memory.residents or name in r.loads

    def revalidate_in_background(self, name: str) -> None:
        """Check a loaded model's artifact against the store when due; unload it if replaced."""
        if name in self._revalidations or not self.residency.disk.revalidation_due(name):
            return
        self._revalidations.start(name, self._revalidate_loaded(name))

    async def _revalidate_loaded(self, name: str) -> None:
        if await self.residency.disk.revalidate(name):
            with contextlib.suppress(ModelhostError):
                await self.residency.unload(name, reason="stale")
