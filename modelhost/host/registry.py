"""Models registered from a URL of their own, their versions, and revalidation.

Each TorchServe version is a model of its own: the first takes the model's name, a later one
`{model}/{version}`. Only the registry knows a name is a version.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from modelhost.cache.disk import Artifact
from modelhost.cache.memory import State
from modelhost.errors import (
    DefaultVersionKept,
    InvalidArchive,
    InvalidModelName,
    ModelAlreadyLoaded,
    ModelhostError,
    ModelLoadError,
    ModelVersionNotFound,
)
from modelhost.host.calls import LoadOutcome
from modelhost.host.residency import Residency
from modelhost.host.under_way import UnderWay
from modelhost.manifest import MAR_MANIFEST, find_manifest, mar_workers, read_mar
from modelhost.names import echo, model_name, name_from_url
from modelhost.urls import redact_url

DEFAULT_VERSION = "1.0"  # TorchServe's
T = TypeVar("T")
PROBE = ".version-of-"


@dataclass
class Versions:
    default: str
    names: dict[str, str] = field(default_factory=dict)  # version → name in the host

    @property
    def default_name(self) -> str:
        return self.names[self.default]


@dataclass(frozen=True)
class Registered:
    name: str
    version: str
    artifact: Artifact
    workers: tuple[int, int] = (0, 0)  # its model-config.yaml's (minWorkers, maxWorkers)


class Registry:
    def __init__(self, residency: Residency) -> None:
        self.residency = residency
        self.versions: dict[str, Versions] = {}
        self.owners: dict[str, tuple[str, str]] = {}  # name in the host → (model, version)
        self.given: dict[str, str] = {}  # name → URL registered
        self.at_startup: set[str] = set()  # preloaded, until unregistered
        self._revalidations: UnderWay[None] = UnderWay()
        self._probes = itertools.count()

    async def register_and_load(self, name: str, url: str) -> LoadOutcome:
        """POST /models: load `name` from `url`; a load that fails leaves `name` as it was."""
        self.check_not_held(name)
        r = self.residency
        before, source = r.sources.get(name), r.disk.stores.admit(url)
        r.set_source(name, source)
        try:
            return await r.ensure_loaded(name)
        except BaseException:
            if not r.held(name):
                self._restore(name, before, source)
            raise

    def check_not_held(self, name: str) -> None:
        if self.residency.held(name):
            raise ModelAlreadyLoaded(
                f"model {name} is already loaded; DELETE /models/{name} first to load it again"
            )

    def _restore(self, name: str, before: str | None, failed: str) -> None:
        """Give `name` back its source, and drop the entry fetched from `failed`."""
        r = self.residency
        if before is None:
            r.forget_source(name)
        else:
            r.set_source(name, before)
        if r.source_of(name) != failed:
            r.disk.delete(name, reason="load_failed")

    def register(self, name: str, url: str) -> None:
        """Remember `url` as the source of `name` without loading it."""
        if self.is_registered(name):
            raise ModelAlreadyLoaded(
                f"model {name} is already registered; unregister it first to register it again"
            )
        self.residency.set_source(name, self.residency.disk.stores.admit(url))
        self.given_as(name, url)

    def given_as(self, name: str, url: str) -> None:
        self.given[name] = url

    def given_url(self, name: str) -> str:
        """The URL registered, else the store's key."""
        if name in self.given:
            return redact_url(self.given[name])
        source = self.residency.sources.get(name)
        return redact_url(source) if source else name  # a store model's name is its key

    async def register_version(
        self,
        model: str,
        url: str,
        settings: Mapping[str, Any] | None = None,
        version: str | None = None,
    ) -> Registered:
        """Register and fetch the version of `model` at `url`, so a bad URL fails now;
        `version`: the archive's, where already read."""
        if model not in self.versions:
            artifact = await self._fetch(model, url, settings)
            try:
                version = check_version(model, archive_version(model, artifact.path))
                self._read_manifest(model, artifact)
            except ModelhostError:
                self._forget(model)
                raise
            self.versions[model] = Versions(version)
            return self._add(model, version, model, artifact)
        version = check_version(model, version or await self._read_version(model, url))
        self._check_new(model, version)
        name = f"{model}/{version}"
        artifact = await self._fetch(name, url, settings)
        try:
            self._read_manifest(name, artifact)
        except ModelhostError:
            self._forget(name)
            raise
        return self._add(model, version, name, artifact)

    def _read_manifest(self, name: str, artifact: Artifact) -> None:
        """Now, so describe shows its batching before it loads, as TorchServe's."""
        self.residency.manifests.read(name, artifact)

    def _add(self, model: str, version: str, name: str, artifact: Artifact) -> Registered:
        self.versions[model].names[version] = name
        self.owners[name] = (model, version)
        return Registered(name, version, artifact, mar_workers(artifact.path))

    def _check_new(self, model: str, version: str) -> None:
        if version in self.versions[model].names:
            raise ModelAlreadyLoaded(
                f"Model version {version} is already registered for model {model}; unregister "
                f"it first (DELETE /models/{model}/{version}) to register it again"
            )

    async def archive_identity(self, url: str) -> tuple[str, str]:
        """The archive's modelName (else its file's name) and modelVersion, in one read."""
        named = model_name(name_from_url(url))
        return await self._read(named, url, functools.partial(archive_identity, named))

    async def _read_version(self, model: str, url: str) -> str:
        return await self._read(model, url, functools.partial(archive_version, model))

    async def _read(self, model: str, url: str, read: Callable[[Path], T]) -> T:
        probe = f"{model}/{PROBE}{next(self._probes)}"
        disk = self.residency.disk
        try:
            found = await disk.materialize(probe, disk.stores.admit(url))
            return read(found.artifact.path)
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
        resident = self.residency.memory.get(name)
        if resident is not None and resident.state is State.LOADED:
            await self.residency.unload(name)
        self._forget(name)
        self.at_startup.discard(name)

    async def unregister_version(self, model: str, version: str | None) -> str:
        """Unregister `version` (None: the default, which stays while others exist)."""
        versions = self.versions[model]
        version = version or versions.default
        name = self.name_of(model, version)
        if version == versions.default and len(versions.names) > 1:
            others = sorted(set(versions.names) - {version})
            raise DefaultVersionKept(
                f"Cannot remove default version {version} for model {model}: make another "
                f"version the default first (PUT /models/{model}/{others[0]}/set-default)"
            )
        await self.unregister(name)
        return name

    def _forget(self, name: str) -> None:
        self.residency.forget_source(name)
        self.residency.manifests.give(name, {})
        self.given.pop(name, None)
        model, version = self.owners.pop(name, (None, None))
        versions = self.versions.get(model) if model else None
        if versions is None or version is None:
            return
        versions.names.pop(version, None)
        if not versions.names:
            del self.versions[model]  # type: ignore[arg-type]

    def set_default(self, model: str, version: str) -> None:
        self.name_of(model, version)
        self.versions[model].default = version

    def name_of(self, model: str, version: str) -> str:
        name = self.versions[model].names.get(version)
        if name is None:
            known = ", ".join(sorted(self.versions[model].names))
            raise ModelVersionNotFound(
                f"Model version {echo(version)} does not exist for model {model}; name one of "
                f"its versions: {known}"
            )
        return name

    def resolve(self, path: str) -> str:
        """The name a request's `m` or `m/v` means."""
        if not self.versions:
            return path
        versions = self.versions.get(path)
        if versions is not None:
            return versions.default_name
        model, _, version = path.rpartition("/")
        versions = self.versions.get(model)
        return versions.names.get(version, path) if versions else path

    def invoked(self, path: str) -> str:
        """As `resolve`; ModelVersionNotFound, naming the versions, for a model without `v`."""
        model, _, version = path.rpartition("/")
        if path not in self.versions and model in self.versions:
            return self.name_of(model, version)
        return self.resolve(path)

    def version_named(self, path: str) -> tuple[str, str] | None:
        """(model, version) for a request's `m/v` naming a registered version, else None."""
        model, _, version = path.rpartition("/")
        versions = self.versions.get(model)
        return (model, version) if versions and version in versions.names else None

    def preloaded(self, name: str) -> None:
        self.at_startup.add(name)

    def is_registered(self, name: str) -> bool:
        """Registered with a URL, loaded or loading."""
        r = self.residency
        return name in r.sources or r.held(name)

    def revalidate_in_background(self, name: str) -> None:
        """Unload a loaded model if the store's artifact was replaced; checked when due."""
        # `due` first: off by default, it answers at once, on every hit
        if not self.residency.disk.revalidation.due(name) or name in self._revalidations:
            return
        self._revalidations.start(name, self._revalidate_loaded(name))

    async def _revalidate_loaded(self, name: str) -> None:
        if await self.residency.disk.revalidation.check(name):
            with contextlib.suppress(ModelhostError):
                await self.residency.unload(name, reason="stale")
            self.residency.signatures.forget(name)


def archive_version(model: str, artifact: Path) -> str:
    """A TorchServe archive's `modelVersion`; `1.0` if none."""
    return mar_field(model, artifact, "modelVersion") or DEFAULT_VERSION


def archive_identity(model: str, artifact: Path) -> tuple[str, str]:
    """A TorchServe archive's `modelName` (else `model`) and `modelVersion`."""
    name = mar_field(model, artifact, "modelName")
    try:
        named = model_name(name) if name else model
    except InvalidModelName as error:
        raise InvalidArchive(f"cannot register {model}: its archive's modelName: {error}") from None
    return named, archive_version(model, artifact)


def mar_field(model: str, artifact: Path, field: str) -> str:
    """A field of a MAR manifest's "model"; "" for other artifacts."""
    manifest = find_manifest(artifact)
    if manifest is None or not manifest.as_posix().endswith(MAR_MANIFEST.as_posix()):
        return ""
    try:
        value = read_mar(manifest)["model"].get(field)
    except ModelLoadError as error:  # TorchServe's 400
        raise InvalidArchive(f"cannot register model {model}: {error}") from None
    return str(value) if value else ""


def check_version(model: str, version: str) -> str:
    """`version`, if it can be part of `/models/{model}/{version}`."""
    try:
        model_name(f"{model}/{version}")
        valid = "/" not in version
    except InvalidModelName:
        valid = False
    if not valid:
        raise InvalidArchive(
            f"cannot register model {model}: its archive's modelVersion {echo(version)} cannot "
            "be part of a path; rebuild the archive with a version such as 2.0"
        )
    return version
