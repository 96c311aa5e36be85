"""TorchServe's management calls on the host's models, for its REST and gRPC APIs alike.

A path names a version as `{model}/{version}`, or the default as `{model}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from modelhost.errors import (
    BadRequestBody,
    DownloadFailed,
    ModelAlreadyLoaded,
    ModelApiDisabled,
    ModelhostError,
    ModelNotFound,
    ModelVersionNotFound,
)
from modelhost.host import ModelHost
from modelhost.host.calls import Invocation
from modelhost.host.journal import JOURNAL_FILE, Journal
from modelhost.host.listing import IN_MEMORY, REGISTERED, Listing
from modelhost.host.registry import Registered
from modelhost.names import echo, model_name, name_from_url
from modelhost.observe.describe import iso_time
from modelhost.protocols.pages import decode_token, encode_token, page_size
from modelhost.protocols.params import check_param, is_negative_number, is_whole_number
from modelhost.protocols.registration import (
    boolean,
    check_registration,
    count,
    missing_handler,
    registration_settings,
)
from modelhost.protocols.snapshot import snapshot_registrations
from modelhost.records.statistics import ModelStatistics
from modelhost.scheduler import ModelSchedule

logger = logging.getLogger("modelhost")

MODEL_VERSION = "1.0"  # of a model registered without versions
REGISTERED_OR_IN_MEMORY = (IN_MEMORY, REGISTERED)  # what TorchServe calls registered
ACCEPTED = "Processing worker updates..."  # TorchServe's words


class Answer(NamedTuple):
    message: str
    code: int = 200


class Target(NamedTuple):
    """A version of a model, and the name the host holds it under."""

    model: str
    version: str
    name: str


class Described(NamedTuple):
    target: Target
    url: str
    response_timeout_s: float
    startup_timeout_s: float


class TorchServeModels:
    def __init__(self, host: ModelHost, model_api: bool = True) -> None:
        self.host = host
        self.model_api = model_api  # registering and unregistering through the API
        self._loads: set[asyncio.Task[Any]] = set()  # asynchronous registrations

    async def register(self, params: Mapping[str, str]) -> Answer:
        self._check_model_api("register")
        url = params.get("url")
        if url is None:
            raise BadRequestBody("Parameter url is required.")
        if not url:  # TorchServe's 404 for `url=`
            raise ModelNotFound("empty url: give the url of an archive in the model store")
        check_param("url", url)
        check_registration(params)
        settings = registration_settings(params)
        workers = count(params.get("initial_workers"), "initial_workers")
        synchronous = boolean(params.get("synchronous"), "synchronous", default=True)
        name, read = await self._model_name(params.get("model_name"), url)
        if self.host.is_registered(name) and self.host.versions_of(name) is None:
            raise ModelAlreadyLoaded(
                f"Model version {MODEL_VERSION} is already registered for model {name}"
            )
        registered = await self._fetch(name, url, settings, read)
        version = registered.version
        if journal := self.host.journal:
            journal.record(name, version, params)
        low, high = registered.workers
        workers = low or workers  # TorchServe's order: the archive's minWorkers first
        if workers == 0:
            return Answer(
                f'Model "{name}" Version: {version} registered with 0 initial workers. '
                "It loads on its first request."
            )
        started = self.host.scale_workers(registered.name, workers, high)
        if not synchronous:
            self._run_in_background(started)
            return Answer(ACCEPTED, 202)
        try:
            copies = await started
        except ModelhostError:  # TorchServe unregisters a model its initial workers failed
            await self.host.unregister_version(name, version)
            if journal := self.host.journal:
                journal.forget(name, version)
            raise
        return Answer(f'Model "{name}" Version: {version} registered with {copies} initial workers')

    async def _model_name(self, given: str | None, url: str) -> tuple[str, str | None]:
        """`model_name`, else the archive's modelName, as TorchServe's; and the archive's
        version where that read it."""
        if given:
            return model_name(given), None
        with archive_at(name_from_url(url), url):
            return await self.host.archive_identity(url)

    async def _fetch(
        self, name: str, url: str, settings: dict[str, Any], version: str | None = None
    ) -> Registered:
        """Register and fetch the archive's version, as TorchServe does."""
        with archive_at(name, url):
            registered = await self.host.register_version(name, url, settings, version)
        missing = missing_handler(settings.get("handler"), registered.artifact.path)
        if missing:
            await self.host.unregister(registered.name)
            raise BadRequestBody(
                f"cannot register model {name}: its archive holds no {echo(missing)}, the file "
                "the handler names; give a Python file of the archive, or leave handler out"
            )
        return registered

    def list_models(self, limit: str | None, token: str | None) -> dict[str, Any]:
        """Registered and loaded models, a page after a cursor or TorchServe's offset."""
        size = page_size(unless_negative(limit))
        listing = self.host.model_names()
        after = start_after(listing, token)
        names = self._page(listing, after, size + 1) if after is not None else []
        body: dict[str, Any] = {
            "models": [
                {"modelName": m, "modelUrl": self.host.given_url(n)} for n, m in names[:size]
            ]
        }
        if len(names) > size:
            body["nextPageToken"] = encode_token(names[size - 1][0])
        return body

    def _page(self, listing: Listing, after: str, limit: int) -> list[tuple[str, str]]:
        """Up to `limit` (host name, model) pairs after `after`, a model once."""
        page: list[tuple[str, str]] = []
        while len(page) < limit:
            names = listing.page(after, limit, REGISTERED_OR_IN_MEMORY)
            page += [(n, m) for n in names if (m := self._listed_as(n))]
            if len(names) < limit:
                break
            after = names[-1]
        return page[:limit]

    def _listed_as(self, name: str) -> str:
        """The model a name is listed as; "" for a version not the default."""
        model, version = self.host.owner_of(name) or (name, "")
        versions = self.host.versions_of(model)
        return model if versions is None or versions.default == version else ""

    def describe(self, path: str) -> list[dict[str, Any]]:
        """The default version, the version named, or every version (`{model}/all`)."""
        path = model_name(path.rstrip("/"))
        base = path.removesuffix("/all")
        every = self._versions(base) if base != path else None
        targets = every or [self.target(path)]
        return [self._description(target) for target in targets]

    async def describe_customized(self, path: str) -> list[dict[str, Any]]:
        """`?customized=true`: with the handler's `customizedMetadata`."""
        model = model_name(path.rstrip("/"))
        if model.endswith("/all") and self._versions(model.removesuffix("/all")):
            return self.describe(path)  # TorchServe describes every version plainly
        asked = Invocation(b"", "application/octet-stream", "*/*", {"describe": "True"})
        result = await self.host.invoke(self.target(model).name, asked)
        descriptions = self.describe(path)
        if result.body:
            descriptions[0]["customizedMetadata"] = json_object(result.body)
        return descriptions

    def _versions(self, model: str) -> list[Target] | None:
        versions = self.host.versions_of(model)
        if versions is not None:
            return [Target(model, v, n) for v, n in versions.names.items()]
        return [Target(model, MODEL_VERSION, model)] if self.host.is_registered(model) else None

    def _description(self, target: Target) -> dict[str, Any]:
        statistics = self.host.model_statistics(target.name)
        schedule = self.host.schedule_of(target.name)
        queue_size = self.host.scheduling.job_queue_size
        own = self.host.manifests.of(target.name)
        described = Described(
            target,
            self.host.given_url(target.name),
            own.response_timeout_s or self.host.scheduling.response_timeout_s,
            own.load_timeout_s or self.host.pool.load_timeout_s,
        )
        return describe(statistics, schedule, described, queue_size)

    def set_default(self, path: str) -> str:
        target = self.target(path, version_required=True)
        if self.host.versions_of(target.model) is not None:
            self.host.set_default(target.model, target.version)
        return (
            f'Default version successfully updated for model "{target.model}" to "{target.version}"'
        )

    async def unregister(self, path: str) -> str:
        """Unregister a version; as in TorchServe, the default stays while others exist."""
        self._check_model_api("unregister")
        target = self.target(path)
        if self.host.versions_of(target.model) is not None:
            await self.host.unregister_version(target.model, target.version)
        else:
            await self.host.unregister(target.name)
        if journal := self.host.journal:
            journal.forget(target.model, target.version)
        return f'Model "{target.model}" unregistered'

    async def scale(
        self, path: str, version: str | None, low: int | None, high: int, synchronous: bool
    ) -> Answer:
        """Set the range of copies of the version named; `low` None: not given."""
        target, named = self._scaled(path, version)
        if high and low is not None and low > high:
            raise BadRequestBody(f"min_worker {low} is above max_worker {high}; lower min_worker")
        if not synchronous:
            self._run_in_background(self.host.scale_workers(target.name, low, high))
            return Answer(ACCEPTED, 202)
        copies = await self.host.scale_workers(target.name, low, high)
        named_version = f", version: {target.version}" if named else ""  # TorchServe's words
        return Answer(f"Workers scaled to {copies} for model: {target.model}{named_version}")

    def _scaled(self, path: str, version: str | None) -> tuple[Target, bool]:
        """The version a scale call names, in its path or `model_version`, and whether named."""
        target = self.target(path)
        if target.model != path.rstrip("/"):
            return target, True
        if version:
            return self.target(f"{target.model}/{version}", version_required=True), True
        return target, False

    def _check_model_api(self, verb: str) -> None:
        if not self.model_api:
            raise ModelApiDisabled(
                f"Model API disabled: this server does not {verb} models through its management "
                "API (enable_model_api is false, TorchServe's default with a config.properties); "
                "set enable_model_api=true in config.properties, or pass --model-api"
            )

    def target(self, path: str, version_required: bool = False) -> Target:
        """The registered model and version a path names."""
        path = model_name(path.rstrip("/"))  # TorchServe ignores a trailing slash
        versions = self.host.versions_of(path)
        if versions is not None and not version_required:
            return Target(path, versions.default, self.host.name_of(path, versions.default))
        model, _, version = path.rpartition("/")
        if self.host.versions_of(model) is not None:
            return Target(model, version, self.host.name_of(model, version))
        if self.host.is_registered(path) and not version_required:
            return Target(path, MODEL_VERSION, path)  # a name may hold '/'
        if model and self.host.is_registered(model):
            if version != MODEL_VERSION:
                raise ModelVersionNotFound(
                    f"Model version {echo(version)} does not exist for model {model}: it has "
                    f"one version, {MODEL_VERSION}"
                )
            return Target(model, version, model)
        raise ModelNotFound(f"Model not found: {path}")

    def _run_in_background(self, call: Awaitable[object]) -> None:
        task = asyncio.ensure_future(self._quietly(call))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _quietly(self, call: Awaitable[object]) -> None:
        with contextlib.suppress(ModelhostError):  # the failure is an event
            await call


def describe(
    model: ModelStatistics, schedule: ModelSchedule, described: Described, queue_size: int
) -> dict[str, Any]:
    """TorchServe's description of a version."""
    started = iso_time(model.loaded_at)
    workers = [
        {
            "id": str(worker.worker_id),
            "startTime": started,
            "status": "READY" if model.state == "loaded" else "LOADING",
            "memoryUsage": model.memory_bytes,
            "pid": worker.pid,
            "gpu": False,
        }
        for worker in model.workers
    ]
    return {
        "modelName": described.target.model,
        "modelVersion": described.target.version,
        "modelUrl": described.url,
        "runtime": "python",
        "minWorkers": schedule.min_workers,
        "maxWorkers": schedule.max_workers,
        "batchSize": schedule.batch_size,
        "maxBatchDelay": round(schedule.max_batch_delay_ms),
        "responseTimeout": seconds(described.response_timeout_s),
        "startupTimeout": seconds(described.startup_timeout_s),
        "loadedAtStartup": model.loaded_at_startup,
        "workers": workers,
        "jobQueueStatus": {
            "remainingCapacity": max(queue_size - model.queued, 0),
            "pendingRequests": model.queued,
        },
    }


def seconds(value: float) -> float:
    """An int where whole, as TorchServe's."""
    return int(value) if float(value).is_integer() else value


@contextlib.contextmanager
def archive_at(name: str, url: str) -> Iterator[None]:
    """For a url naming nothing, TorchServe's answers: 404 `Model not found at: {url}` for a
    name in the store, 400 `Failed to download archive` for a URL."""
    try:
        yield
    except ModelNotFound as error:
        refused = DownloadFailed if "://" in url else ModelNotFound
        raise refused(
            f"cannot register model {name}: the url {echo(url)} names no archive ({error}); "
            "give the url of an archive in the model store"
        ) from None


def json_object(body: bytes) -> dict[str, Any]:
    """A handler's answer as a JSON object; {} for anything else, as TorchServe."""
    try:
        value = json.loads(body)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def start_after(listing: Listing, token: str | None) -> str | None:
    """The name a page starts after, from a cursor or offset; None for one past the end."""
    if not token or is_negative_number(token):  # TorchServe starts a negative offset at 0
        return ""
    if is_whole_number(token):
        return listing.name_before(int(token))
    return decode_token(token)


def unless_negative(limit: str | None) -> str | None:
    """TorchServe reads a negative limit as none given: its default page size."""
    return None if limit and is_negative_number(limit) else limit


async def restore_registered(host: ModelHost, cache_dir: Path, model_snapshot: str = "") -> None:
    """Register again what `--restore-registered` kept, then the snapshot's models."""
    snapshot = snapshot_registrations(model_snapshot) if model_snapshot else []
    journal = Journal(cache_dir / JOURNAL_FILE)
    host.keep_journal(journal)
    models = TorchServeModels(host)
    for entry in journal.take():
        if not await _registered(models, {**entry.params, "synchronous": "true"}):
            journal.keep(entry)
    for params in snapshot:
        if host.versions_of(params["model_name"]) is None:
            await _registered(models, params)


async def _registered(models: TorchServeModels, params: Mapping[str, str]) -> bool:
    """Whether `params` registered their model; a failure is logged."""
    try:
        await models.register(params)
    except ModelhostError as error:
        logger.error("could not restore model %s: %s", params.get("model_name"), error)
        return False
    return True
