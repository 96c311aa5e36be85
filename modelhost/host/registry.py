"""Registration: models loaded from a URL of their own (`POST /models`, TorchServe's register),
their versions, and the check of a loaded model's artifact against the store when it is due.

A model registered through TorchServe's API has versions, each read from its archive's manifest
(`modelVersion`). Each version is a model of its own in the host, under a name of its own: the
first version registered takes the model's name, a later one `{model}/{version}`. The memory and
disk tiers, the listings, events and metrics see those names and nothing else; the registry maps
a model and a version to them, and keeps each model's default version (the first registered,
until `set_default`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelhost.cache.disk import Artifact
from modelhost.cache.memory import State
from modelhost.errors import (
    BadRequestBody,
    Forbidden,
    InvalidModelName,
    ModelAlreadyLoaded,
    ModelhostError,
    ModelNotFound,
)
from modelhost.host.calls import LoadOutcome
from modelhost.host.residency import Residency
from modelhost.host.under_way import UnderWay
from modelhost.manifest import MAR_MANIFEST, find_manifest
from modelhost.names import echo, model_name

DEFAULT_VERSION = "1.0"  # TorchServe's, for an archive whose manifest names none
PROBE = ".version-of-"  # the name an archive is fetched under to read its version


@dataclass
class Versions:
    """The versions of one registered model: the name each is held under, and the default."""

    default: str
    names: dict[str, str] = field(default_factory=dict)  # version → name in the host

    @property
    def default_name(self) -> str:
        return self.names[self.default]


@dataclass(frozen=True)
class Registered:
    """A version just registered: the name it is held under, its version and its artifact."""

    name: str
    version: str
    artifact: Artifact


class Registry:
    """Owns the models registered by URL and their versions, and revalidates loaded ones
    against their store."""

    def __init__(self, residency: Residency) -> None:
        self.residency = residency
        self.versions: dict[str, Versions] = {}  # model → its versions
        self.owners: dict[str, tuple[str, str]] = {}  # name in the host → (model, version)
        self._revalidations: UnderWay[None] = UnderWay()
        self._probes = itertools.count()

    async def register_and_load(self, name: str, url: str) -> LoadOutcome:
        """POST /models: load `name` from `url`, which `allowed_urls` must admit."""
        r = self.residency
        if name in r.memory.residents or name in r.loads:
            raise ModelAlreadyLoaded(
                f"model {name} is already loaded; DELETE /models/{name} first to load it again"
            )
        r.set_source(name, r.disk.stores.admit(url))
        return await r.ensure_loaded(name)

    def register(self, name: str, url: str) -> None:
        """Remember `url` as the source of `name` without loading it (TorchServe's 0 workers)."""
        if self.is_registered(name):
            raise ModelAlreadyLoaded(
                f"model {name} is already registered; unregister it first to register it again"
            )
        self.residency.set_source(name, self.residency.disk.stores.admit(url))

    async def register_version(
        self, model: str, url: str, settings: Mapping[str, Any] | None = None
    ) -> Registered:
        """Register the version of `model` that the archive at `url` holds, and fetch it without
        loading it, as TorchServe does: a URL that names nothing fails now. `settings` are
        manifest fields the version's loads take over its archive's."""
        if model not in self.versions:
            artifact = await self._fetch(model, url, settings)
            version = archive_version(artifact.path)
            try:
                check_version(model, version)
            except BadRequestBody:
                self._forget(model)
                raise
            self.versions[model] = Versions(version)
            return self._add(model, version, model, artifact)
        version = check_version(model, await self._read_version(model, url))
        self._check_new(model, version)
        name = f"{model}/{version}"
        artifact = await self._fetch(name, url, settings)
        return self._add(model, version, name, artifact)

    def _add(self, model: str, version: str, name: str, artifact: Artifact) -> Registered:
        self.versions[model].names[version] = name
        self.owners[name] = (model, version)
        return Registered(name, version, artifact)

    def _check_new(self, model: str, version: str) -> None:
        if version in self.versions[model].names:
            raise ModelAlreadyLoaded(
                f"Model version {version} is already registered for model {model}; unregister "
                f"it first (DELETE /models/{model}/{version}) to register it again"
            )

    async def _read_version(self, model: str, url: str) -> str:
        """The version in the archive at `url`, fetched aside under a name of its own."""
        probe = f"{model}/{PROBE}{next(self._probes)}"
        disk = self.residency.disk
        try:
            found = await disk.materialize(probe, disk.stores.admit(url))
            return archive_version(found.artifact.path)
        finally:
            disk.delete(probe, reason="version_read")

    async def _fetch(self, name: str, url: str, settings: Mapping[str, Any] | None) -> Artifact:
        self.register(name, url)
        self.residency.manifests.give(name, settings or {})
        try:
            found = await self.residency.disk.materialize(name, self.residency.sources[name])
        except ModelhostError:
            self._forget(name)
            raise
        return found.artifact

    async def unregister(self, name: str) -> None:
        """Unload `name` if it is loaded, and forget the URL (and version) it was registered
        with."""
        resident = self.residency.memory.get(name)
        if resident is not None and resident.state is State.LOADED:
            await self.residency.unload(name)
        self._forget(name)

    async def unregister_version(self, model: str, version: str | None) -> str:
        """Unregister `version` of `model` (None: its default), as TorchServe does: the default
        stays while other versions exist. The name it was held under."""
        versions = self.versions[model]
        version = version or versions.default
        name = self.name_of(model, version)
        if version == versions.default and len(versions.names) > 1:
            others = sorted(set(versions.names) - {version})
            raise Forbidden(
                f"Cannot remove default version {version} for model {model}: make another "
                f"version the default first (PUT /models/{model}/{others[0]}/set-default)"
            )
        await self.unregister(name)
        return name

    def _forget(self, name: str) -> None:
        self.residency.forget_source(name)
        self.residency.manifests.give(name, {})
        model, version = self.owners.pop(name, (None, None))
        versions = self.versions.get(model) if model else None
        if versions is None or version is None:
            return
        versions.names.pop(version, None)
        if not versions.names:
            del self.versions[model]  # type: ignore[arg-type]

    def set_default(self, model: str, version: str) -> None:
        """Make `version` of `model` the one a request that names no version gets."""
        self.name_of(model, version)
        self.versions[model].default = version

    def name_of(self, model: str, version: str) -> str:
        """The name `version` of a registered `model` is held under; 404 if it has none."""
        name = self.versions[model].names.get(version)
        if name is None:
            known = ", ".join(sorted(self.versions[model].names))
            raise ModelNotFound(
                f"Model version {echo(version)} does not exist for model {model}; name one of "
                f"its versions: {known}"
            )
        return name

    def resolve(self, path: str) -> str:
        """The name a request's `m` or `m/v` means: m's default version or its version v, for a
        model with versions; any other name means itself."""
        if not self.versions:
            return path
        versions = self.versions.get(path)
        if versions is not None:
            return versions.default_name
        model, _, version = path.rpartition("/")
        versions = self.versions.get(model)
        return versions.names.get(version, path) if versions else path

    def is_registered(self, name: str) -> bool:
        """Registered with a URL, loaded or loading: what TorchServe's API calls registered."""
        r = self.residency
        return name in r.sources or name in r.memory.residents or name in r.loads

    def revalidate_in_background(self, name: str) -> None:
        """Check a loaded model's artifact against the store when due; unload it if replaced."""
        if name in self._revalidations or not self.residency.disk.revalidation.due(name):
            return
        self._revalidations.start(name, self._revalidate_loaded(name))

    async def _revalidate_loaded(self, name: str) -> None:
        if await self.residency.disk.revalidation.check(name):
            with contextlib.suppress(ModelhostError):
                await self.residency.unload(name, reason="stale")


def archive_version(artifact: Path) -> str:
    """The `modelVersion` of a TorchServe archive's manifest; `1.0` for any other artifact."""
    manifest = find_manifest(artifact)
    if manifest is None or not manifest.as_posix().endswith(MAR_MANIFEST.as_posix()):
        return DEFAULT_VERSION
    try:
        model = json.loads(manifest.read_text()).get("model") or {}
    except (ValueError, UnicodeDecodeError, AttributeError):
        return DEFAULT_VERSION  # the load says what is wrong with the manifest
    version = model.get("modelVersion") if isinstance(model, dict) else None
    return str(version) if version else DEFAULT_VERSION


def check_version(model: str, version: str) -> str:
    """`version`, if it can name a model's version in a path (`/models/{model}/{version}`)."""
    try:
        model_name(f"{model}/{version}")
        valid = "/" not in version
    except InvalidModelName:
        valid = False
    if not valid:
        raise BadRequestBody(
            f"cannot register model {model}: its archive's modelVersion {echo(version)} cannot "
            "be part of a path; rebuild the archive with a version such as 2.0"
        )
    return version
