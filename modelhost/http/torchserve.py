"""TorchServe's management API (register, describe, unregister, list), served on its own port as
TorchServe serves it (8081), with TorchServe's status codes and JSON shapes. The main port keeps
SageMaker's management calls, which share the paths but not the shapes (see docs/decisions.md).

A registered model has the versions its archives name (`host/registry.py`); a path names one
as `{model}/{version}`, or the default as `{model}`. A model that was not registered has one
version, "1.0". `initial_workers` says whether to load a version now (1 or more) or on its
first request (0, TorchServe's default), and
`PUT /models/{model}?min_worker=N&max_worker=M` loads it on N workers and caps its scale-out at M.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from pathlib import PurePosixPath
from typing import Any, NamedTuple

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from modelhost.errors import BadRequestBody, ModelAlreadyLoaded, ModelhostError, ModelNotFound
from modelhost.host.listing import IN_MEMORY, REGISTERED, Listing
from modelhost.host.registry import Registered
from modelhost.http.cross_site import CrossSiteGuard, state_changing
from modelhost.http.errors import handle_http_exception, handle_modelhost_error
from modelhost.http.invocations import TORCHSERVE_VERSION
from modelhost.http.last_resort import LastResort, Unhandled
from modelhost.http.openapi import OpenApiRoute
from modelhost.http.params import check_param, is_negative_number, is_whole_number
from modelhost.http.registration import (
    boolean,
    check_registration,
    count,
    missing_handler,
    registration_settings,
)
from modelhost.http.routes import (
    SageMakerRoutes,
    decode_token,
    encode_token,
    page_size,
)
from modelhost.names import echo, model_name
from modelhost.observe.describe import iso_time
from modelhost.records.statistics import ModelStatistics
from modelhost.scheduler import ModelSchedule
from modelhost.urls import redact_url

MODEL_VERSION = TORCHSERVE_VERSION
TORCHSERVE, MMS = "torchserve", "mms"
MANAGEMENT_APIS = (TORCHSERVE, MMS)  # whose shapes the management API answers in
ARCHIVE_SUFFIXES = (".mar", ".tar.gz", ".tgz", ".tar", ".zip")
REGISTERED_OR_IN_MEMORY = (IN_MEMORY, REGISTERED)  # what TorchServe calls registered
SET_DEFAULT = "/set-default"


def build_management_app(
    routes: SageMakerRoutes, unhandled: Unhandled | None = None, api: str = TORCHSERVE
) -> LastResort:
    """The management app, answering as TorchServe's API or MMS's (`api`); its calls that change
    state are refused to pages of other origins (http/cross_site.py)."""
    served = TorchServeManagement(routes, api).routes()
    unhandled = unhandled or Unhandled()
    app = Starlette(
        routes=[*served, OpenApiRoute(served, "torchserve")],
        middleware=[Middleware(CrossSiteGuard, routes=state_changing(served))],
        exception_handlers={
            ModelhostError: handle_modelhost_error,
            HTTPException: handle_http_exception,
            Exception: unhandled.framework_handler,
        },
    )
    return LastResort(app, unhandled)


class TorchServeManagement:
    """TorchServe's management calls; with `api="mms"`, MMS's shapes where they differ."""

    def __init__(self, routes: SageMakerRoutes, api: str = TORCHSERVE) -> None:
        if api not in MANAGEMENT_APIS:
            raise ValueError(f"api must be one of {MANAGEMENT_APIS}, not {api!r}")
        self.api = api
        self.http = routes
        self.host = routes.host
        self._loads: set[asyncio.Task[Any]] = set()  # asynchronous registrations under way

    def routes(self) -> list[Route]:
        return [
            Route("/models", self.register, methods=["POST"]),
            Route("/models", self.list_models, methods=["GET"]),
            Route("/models/{model:path}", self.describe, methods=["GET"]),
            Route("/models/{model:path}", self.unregister, methods=["DELETE"]),
            Route("/models/{model:path}", self.scale, methods=["PUT"]),
        ]

    async def register(self, request: Request) -> Response:
        """`?url=…&model_name=…&initial_workers=N&synchronous=true|false&runtime=python`."""
        self.http.authorize(request)
        query = request.query_params
        url = query.get("url")
        if not url:
            raise BadRequestBody("Parameter url is required.")
        check_param("url", url)
        check_registration(query)
        settings = registration_settings(query)
        name = model_name(query.get("model_name") or name_from_url(url))
        workers = count(query.get("initial_workers"), "initial_workers")
        synchronous = boolean(query.get("synchronous"), "synchronous", default=True)
        if self.host.is_registered(name) and name not in self.host.registry.versions:
            raise ModelAlreadyLoaded(
                f"Model version {MODEL_VERSION} is already registered for model {name}"
            )
        registered = await self._fetch(name, url, settings)
        version = registered.version
        if workers == 0:
            return status(
                f'Model "{name}" Version: {version} registered with 0 initial workers. '
                "It loads on its first request."
            )
        if not synchronous:
            self._load_in_background(registered.name)
            return status("Processing worker updates...", 202)
        await self.host.ensure_loaded(registered.name)
        return status(
            f'Model "{name}" Version: {version} registered with {workers} initial workers'
        )

    async def _fetch(self, name: str, url: str, settings: dict[str, Any]) -> Registered:
        """Register the version of the model that its archive holds, with its settings, and
        fetch the archive, as TorchServe does; 400 if there is none, or if it lacks the handler
        file named."""
        try:
            registered = await self.host.registry.register_version(name, url, settings)
        except ModelNotFound as error:
            raise BadRequestBody(
                f"cannot register model {name}: the url {echo(url)} names no archive ({error}); "
                "give the url of an archive in the model store"
            ) from None
        missing = missing_handler(settings.get("handler"), registered.artifact)
        if missing:
            await self.host.unregister(registered.name)
            raise BadRequestBody(
                f"cannot register model {name}: its archive holds no {echo(missing)}, the file "
                "the handler names; give a Python file of the archive, or leave handler out"
            )
        return registered

    async def list_models(self, request: Request) -> Response:
        """Registered models (and those in memory), `limit` at a time. `nextPageToken` is a
        cursor (the last name listed); an offset, what TorchServe itself returns, is read too."""
        query = request.query_params
        limit = page_size(unless_negative(query.get("limit")))
        listing = self.host.model_names()
        after = start_after(listing, query.get("next_page_token"))
        names = self._page(listing, after, limit + 1) if after is not None else []
        body: dict[str, Any] = {
            "models": [
                {"modelName": m, "modelUrl": self.host.source_of(n)} for n, m in names[:limit]
            ]
        }
        if len(names) > limit:
            body["nextPageToken"] = encode_token(names[limit - 1][0])
        return JSONResponse(body)

    def _page(self, listing: Listing, after: str, limit: int) -> list[tuple[str, str]]:
        """Up to `limit` (name in the host, model) pairs after `after`: a model with versions
        is listed once, at its default version's name."""
        page: list[tuple[str, str]] = []
        while len(page) < limit:
            names = listing.page(after, limit, REGISTERED_OR_IN_MEMORY)
            page += [(n, m) for n in names if (m := self._listed_as(n))]
            if len(names) < limit:
                break
            after = names[-1]
        return page[:limit]

    def _listed_as(self, name: str) -> str:
        """The model a name is listed as: itself, or the model it is the default version of;
        "" for another version."""
        model, version = self.host.registry.owners.get(name, (name, ""))
        versions = self.host.registry.versions.get(model)
        return model if versions is None or versions.default == version else ""

    async def describe(self, request: Request) -> Response:
        """A list of descriptions, as TorchServe answers: of the default version, of the version
        named, or of every version (`/models/{model}/all`); MMS answers the first object."""
        path = model_name(request.path_params["model"].rstrip("/"))
        base = path.removesuffix("/all")
        every = self._versions(base) if base != path else None
        targets = every or [self._target(path)]
        descriptions = [self._description(target) for target in targets]
        return JSONResponse(descriptions[0] if self.api == MMS else descriptions)

    def _versions(self, model: str) -> list[Target] | None:
        """Every version of `model`, if it is registered; None if not."""
        versions = self.host.registry.versions.get(model)
        if versions is not None:
            return [Target(model, v, n) for v, n in versions.names.items()]
        return [Target(model, MODEL_VERSION, model)] if self.host.is_registered(model) else None

    def _description(self, target: Target) -> dict[str, Any]:
        statistics = self.host.model_statistics(target.name)
        schedule = self.host.scaling.schedule_of(target.name)
        return describe(statistics, schedule, target.model, target.version)

    def set_default(self, request: Request) -> Response:
        """Make the version named the default: what a request naming no version gets."""
        path = request.path_params["model"].removesuffix(SET_DEFAULT)
        target = self._target(path, version_required=True)
        if target.model in self.host.registry.versions:
            self.host.registry.set_default(target.model, target.version)
        return status(
            f'Default version successfully updated for model "{target.model}" to "{target.version}"'
        )

    async def unregister(self, request: Request) -> Response:
        """Unregister the version named, or the default; the default stays while other
        versions exist, as in TorchServe."""
        self.http.authorize(request)
        target = self._target(request.path_params["model"])
        if target.model in self.host.registry.versions:
            await self.host.registry.unregister_version(target.model, target.version)
        else:
            await self.host.unregister(target.name)
        return status(f'Model "{target.model}" unregistered')

    async def scale(self, request: Request) -> Response:
        """`?min_worker=N&max_worker=M&synchronous=true|false`: the model's range of copies.
        `PUT /models/{model}/{version}/set-default` comes here too: the paths overlap."""
        self.http.authorize(request)
        if request.path_params["model"].endswith(SET_DEFAULT):
            return self.set_default(request)
        query = request.query_params
        target, named = self._scaled(request.path_params["model"], query.get("model_version"))
        name = target.name
        low, high = (
            count(query.get("min_worker"), "min_worker"),
            count(query.get("max_worker"), "max_worker"),
        )
        if high and low > high:
            raise BadRequestBody(f"min_worker {low} is above max_worker {high}; lower min_worker")
        if query.get("synchronous", "false").lower() != "true":
            self._run_in_background(self.host.scale_workers(name, low, high))
            return status("Processing worker updates...", 202)
        copies = await self.host.scale_workers(name, low, high)
        version = f", version: {target.version}" if named else ""  # TorchServe's words
        return status(f"Workers scaled to {copies} for model: {target.model}{version}")

    def _scaled(self, path: str, version: str | None) -> tuple[Target, bool]:
        """The version a scale call names, in its path or else in TorchServe's `model_version`
        (the default if neither), and whether one was named."""
        target = self._target(path)
        if target.model != path.rstrip("/"):
            return target, True
        if version:
            return self._target(f"{target.model}/{version}", version_required=True), True
        return target, False

    def _target(self, path: str, version_required: bool = False) -> Target:
        """The registered model and version a path names, as `{model}` (its default version) or
        TorchServe's `{model}/{version}`; a trailing slash is ignored, as TorchServe ignores it."""
        path = model_name(path.rstrip("/"))  # an invalid name says what a valid one is
        registry = self.host.registry
        if path in registry.versions and not version_required:
            default = registry.versions[path].default
            return Target(path, default, registry.name_of(path, default))
        model, _, version = path.rpartition("/")
        if model in registry.versions:
            return Target(model, version, registry.name_of(model, version))
        if self.host.is_registered(path) and not version_required:
            return Target(path, MODEL_VERSION, path)  # a name may hold '/': the whole path wins
        if model and self.host.is_registered(model):
            if version != MODEL_VERSION:
                raise ModelNotFound(
                    f"Model version {echo(version)} does not exist for model {model}: it has "
                    f"one version, {MODEL_VERSION}"
                )
            return Target(model, version, model)
        raise ModelNotFound(f"Model not found: {path}")

    def _load_in_background(self, name: str) -> None:
        self._run_in_background(self.host.ensure_loaded(name))

    def _run_in_background(self, call: Awaitable[object]) -> None:
        task = asyncio.ensure_future(self._quietly(call))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _quietly(self, call: Awaitable[object]) -> None:
        with contextlib.suppress(ModelhostError):  # the failure is an event, as every load's
            await call


class Target(NamedTuple):
    """A version of a model a path names, and the name the host holds it under."""

    model: str
    version: str
    name: str


def describe(
    model: ModelStatistics, schedule: ModelSchedule, name: str, version: str
) -> dict[str, Any]:
    """TorchServe's description of version `version` of model `name`, from the host's
    statistics of it and the scheduling in effect for it."""
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
        "modelName": name,
        "modelVersion": version,
        "modelUrl": redact_url(model.url),
        "runtime": "python",
        "minWorkers": schedule.min_workers,
        "maxWorkers": schedule.max_workers,
        "batchSize": schedule.batch_size,
        "maxBatchDelay": round(schedule.max_batch_delay_ms),
        "loadedAtStartup": False,
        "workers": workers,
    }


def name_from_url(url: str) -> str:
    """TorchServe's default model name: the archive's file name without its extension."""
    base = PurePosixPath(url.partition("?")[0].rstrip("/")).name  # a presigned URL's query
    for suffix in ARCHIVE_SUFFIXES:
        if base.lower().endswith(suffix):
            return base[: -len(suffix)] or base
    return base.rsplit(".", 1)[0] or base


def start_after(listing: Listing, token: str | None) -> str | None:
    """The name a page starts after, from a cursor or an offset; None for an offset past the
    end. An offset is found by position, not by walking the names before it."""
    if not token or is_negative_number(token):  # TorchServe starts a negative offset at 0
        return ""
    if is_whole_number(token):
        return listing.name_before(int(token))
    return decode_token(token)


def unless_negative(limit: str | None) -> str | None:
    """TorchServe reads a negative limit as none given: its default page size."""
    return None if limit and is_negative_number(limit) else limit


def status(message: str, code: int = 200) -> JSONResponse:
    return JSONResponse({"status": message}, code)
