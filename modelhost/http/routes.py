"""SageMaker's container contract (ping, the multi-model management calls) and /stats.

Natively, a model is listed wherever it is, with its state. Under `sagemaker_contract` the
calls answer as SageMaker documents and MMS answered: loaded models only.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from modelhost.cache.memory import State
from modelhost.documents import json_object
from modelhost.errors import (
    BadRequestBody,
    Forbidden,
    ModelNotFound,
    ModelNotLoaded,
    Unauthorized,
)
from modelhost.host import ModelHost
from modelhost.host.listing import EVERYWHERE, LOADED, STATES
from modelhost.http.middleware import TENANT_KEY
from modelhost.names import echo, model_name
from modelhost.observe.describe import describe_host, model_description
from modelhost.observe.usage import ModelUsage
from modelhost.protocols.access import is_loopback, trusted_as_local
from modelhost.protocols.bodies import body_cut_short, read_within
from modelhost.protocols.health import Health
from modelhost.protocols.keys import MANAGEMENT, TokenKeys, refusal_message
from modelhost.protocols.pages import decode_token, encode_token, page_size_in
from modelhost.protocols.params import check_param
from modelhost.protocols.tenants import KeptReads, TenantRule
from modelhost.units import format_bytes

LOAD_FIELDS = '{"model_name": "...", "url": "..."}'  # SageMaker's load body


def name_advice(name: str) -> str:
    """How to reach a model whose name the store lacks: an invocation's path, or its name."""
    model, _, last = name.rpartition("/")
    if last == "invoke" and model:
        return f"to invoke model {model}, POST /models/{model}/invoke"
    return "check the name (it is the artifact's path relative to the store)"


@dataclass(frozen=True)
class HttpSettings:
    max_request_bytes: int
    single_model: str
    instance_id: str = ""  # empty: the hostname
    management_token: Callable[[], str] = str  # the current one; "": none
    max_response_bytes: int = 0  # 0: no limit
    sagemaker_contract: bool = False
    tenants: TenantRule | None = None  # None: tenants are off
    keys: TokenKeys | None = None  # TorchServe's token authorization; None: off
    model_api: bool = True  # TorchServe's management API may register and unregister
    default_accept: str = "application/json"  # for invocations sent without Accept


class SageMakerRoutes:
    """The handlers of SageMaker's container routes and /stats, bound to the host."""

    def __init__(
        self,
        host: ModelHost,
        settings: HttpSettings,
        usage: ModelUsage | None = None,
        health: Health | None = None,
    ) -> None:
        self.host = host
        self.settings = settings
        self.usage = usage or ModelUsage()
        self.health = health or Health(host)
        self.reads = KeptReads(settings.tenants, self.authorize, _headers)

    # invocation -------------------------------------------------------------------------

    async def ping(self, request: Request) -> Response:
        """200 once ready; 503 while starting, stopping or short of workers."""
        healthy, shortfall = self.health.check()
        body = {"status": "Healthy" if healthy else "Unhealthy"}
        if shortfall:
            body["message"] = shortfall
        return JSONResponse(body, 200 if healthy else 503)

    async def execution_parameters(self, request: Request) -> Response:
        """Batch transform's defaults, in the fields AWS's algorithm containers answer."""
        _, workers = self.host.pool.health()
        return JSONResponse(
            {
                "MaxConcurrentTransforms": max(1, workers),
                "BatchStrategy": "MULTI_RECORD",
                "MaxPayloadInMB": max(1, self.settings.max_request_bytes // 2**20),
            }
        )

    async def read_body(self, request: Request) -> bytes:
        return await bounded_body(request, self.settings.max_request_bytes)

    def tenant_of(self, request: Request, name: str) -> str:
        """The request's tenant, left in the scope for the observer ("": tenants are off)."""
        tenants = self.settings.tenants
        if tenants is None:
            return ""
        tenant = request.scope[TENANT_KEY] = tenants.of(name, _headers(request))
        return tenant

    async def stats(self, request: Request) -> Response:
        self.reads.across(request)
        return JSONResponse(describe_host(self.host.statistics()))

    # management -------------------------------------------------------------------------

    async def load_model(self, request: Request) -> Response:
        self.authorize(request)
        body = await self.read_body(request)
        if not body and "url" in request.query_params:
            raise BadRequestBody(
                f"expected JSON {LOAD_FIELDS}: POST /models?url= is TorchServe's registration, "
                "served on --management-port (set it to serve TorchServe's management API)"
            )
        spec = json_object(body)
        name, url = spec.get("model_name"), spec.get("url")
        if not isinstance(name, str) or not isinstance(url, str):
            raise BadRequestBody(f"expected JSON {LOAD_FIELDS} with both fields as strings")
        model_name(name)
        check_param("url", url)
        try:
            if self.settings.sagemaker_contract:
                await self.host.load_as_told(name, url)
                return JSONResponse({"status": "Workers scaled"})  # MMS's words
            outcome = await self.host.register_and_load(name, url)
        except ModelNotFound:  # the store's words name a key the caller never gave
            raise ModelNotFound(
                f"url {echo(url)} holds no model to load as {name}; check the url: the file or "
                "folder of the artifact (SageMaker: the folder its model.tar.gz is unpacked in)"
            ) from None
        return JSONResponse(
            {
                "status": f"model {name} loaded",
                "modelName": name,
                "loadTimeMs": round(outcome.load_ms, 2),
            }
        )

    async def list_models(self, request: Request) -> Response:
        """A page of the models known, in name order, of one `state` if given."""
        self.reads.across(request)
        if self.settings.sagemaker_contract:
            return self.list_loaded(request)
        query = request.query_params
        limit = page_size_in(query, "limit", "page_size")
        token = query.get("next_page_token") or query.get("nextPageToken")
        places = places_of(query.get("state"))
        names = self.host.model_names().page(
            decode_token(token) if token else "", limit + 1, places
        )
        body: dict[str, Any] = {"models": [self.describe(name) for name in names[:limit]]}
        if len(names) > limit:  # a next page
            body["nextPageToken"] = body["next_page_token"] = encode_token(names[limit - 1])
        return JSONResponse(body)

    def list_loaded(self, request: Request) -> Response:
        """SageMaker's ListModels: a page of the loaded models."""
        query = request.query_params
        limit = page_size_in(query, "max_results", "limit")
        token = query.get("next_page_token")
        after = decode_token(token) if token else ""
        names = self.host.model_names().page(after, limit + 1, (LOADED,))
        body: dict[str, Any] = {"models": [self.entry(name) for name in names[:limit]]}
        if len(names) > limit:
            body["nextPageToken"] = encode_token(names[limit - 1])
        return JSONResponse(body)

    def entry(self, name: str) -> dict[str, str]:
        """A model as SageMaker's ListModels and GetModel show it."""
        return {"modelName": name, "modelUrl": self.host.given_url(name)}

    async def describe_model(self, request: Request) -> Response:
        name = model_in_path(request)
        self.reads.model(request, name)
        if self.settings.sagemaker_contract:
            if self.host.state_of(name) is not State.LOADED:
                raise ModelNotLoaded(f"model {name} is not loaded; POST /models to load it")
            return JSONResponse(self.entry(name))
        description = self.describe(name)
        if description["state"] in ("loaded", "loading"):
            return JSONResponse(description)
        if not await self.host.exists(name):
            raise ModelNotFound(f"model {name} is not in the model store; {name_advice(name)}")
        raise ModelNotLoaded(
            f"model {name} is not loaded (state: {description['state']}); "
            "invoke it or POST /models to load it"
        )

    async def unload_model(self, request: Request) -> Response:
        self.authorize(request)
        name = model_in_path(request)
        if self.settings.sagemaker_contract:
            await self.host.unload_as_told(name)
            return JSONResponse({"status": f'Model "{name}" unregistered'})  # MMS's words
        freed = await self.host.unload(name)
        return JSONResponse(
            {"status": f"model {name} unloaded", "freedBytes": freed, "freed": format_bytes(freed)}
        )

    def describe(self, name: str) -> dict[str, Any]:
        description = model_description(self.host.model_statistics(name))
        return {**description, "counters": self.usage.for_model(name)}

    def authorize(self, request: Request) -> None:
        """Loopback callers may manage models; others only with the configured bearer token.

        A loopback caller whose Host names another machine counts as from elsewhere: DNS
        rebinding makes a browser such a caller.
        """
        if self.settings.keys:
            self.authorize_by_key(request, self.settings.keys)
            return
        address = request.client.host if request.client else ""
        if trusted_as_local(address, request.headers.get("host", "")):
            return
        loopback = is_loopback(address)
        token = self.settings.management_token()
        if not token and loopback:
            raise Forbidden(
                f"management calls from loopback must name this machine in the Host header "
                f"(localhost or an IP address), not {echo(request.headers.get('host', ''))}; "
                "a page whose name resolves to 127.0.0.1 must not manage models (DNS rebinding)"
            )
        if not token:
            raise Forbidden(
                "management calls are allowed from loopback only; configure "
                "management_token to allow them from elsewhere with a bearer token"
            )
        given = request.headers.get("authorization", "")
        if not given.isascii():
            raise Unauthorized(
                "the Authorization header holds non-ASCII characters; send "
                "'Authorization: Bearer <token>' with the configured token"
            )
        if not hmac.compare_digest(given, f"Bearer {token}"):
            raise Unauthorized(
                "management calls from outside this machine need the header "
                "'Authorization: Bearer <token>' with the configured token"
            )

    def authorize_by_key(self, request: Request, keys: TokenKeys) -> None:
        """Under TorchServe's token authorization the management key decides, from anywhere."""
        if not keys.allows(MANAGEMENT, request.headers.get("authorization", "")):
            raise Unauthorized(refusal_message(MANAGEMENT))


def _headers(request: Request) -> dict[str, str]:
    return dict(request.headers.items())  # the last of a repeated header, as invocations read


def model_in_path(request: Request) -> str:
    return model_name(request.path_params["model"])


async def bounded_body(request: Request, limit: int) -> bytes:
    """Every route's body, refused with 413 once it passes `limit` bytes."""
    declared = int(request.headers.get("content-length") or 0)
    try:
        return await read_within(request.stream(), declared, limit)
    except ClientDisconnect:
        raise body_cut_short() from None


def places_of(state: str | None) -> tuple[str, ...]:
    """The places `GET /models?state=` reads names from."""
    if not state:
        return EVERYWHERE
    if state not in STATES:
        raise BadRequestBody(f"invalid state {echo(state)}: give one of {', '.join(STATES)}")
    return (state,)
