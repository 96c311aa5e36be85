"""TorchServe's gRPC inference and management services, answered as its REST API answers.

Sequences (`sequence_id`) are echoed, not kept. A unary method fills in its observed `Call`
(rpc/calls.py); a streaming one observes each answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from modelhost.errors import BadRequestBody, ModelhostError, ModelVersionNotFound
from modelhost.host import Invocation, ModelHost
from modelhost.names import echo, model_name
from modelhost.protocols.health import Health
from modelhost.protocols.params import check_param
from modelhost.protocols.tenants import KeptReads, TenantRule
from modelhost.protocols.torchserve import MODEL_VERSION, TorchServeModels
from modelhost.rpc.access import Access
from modelhost.rpc.calls import Call, Calls, Context, metadata_of
from modelhost.rpc.messages import TS_INFERENCE_SERVICE, message
from modelhost.rpc.status import code_of
from modelhost.rpc.stubs import method_path
from modelhost.workers.answers import check_response_size

BODY_KEYS = ("data", "body")  # as TorchServe's handlers read them
JSON = "application/json"
_INFERENCE = "org.pytorch.serve.grpc.inference."
_MANAGEMENT = "org.pytorch.serve.grpc.management."


class TorchServeInference:
    def __init__(
        self,
        host: ModelHost,
        calls: Calls,
        health: Health,
        max_response_bytes: int = 0,
        tenants: TenantRule | None = None,
    ) -> None:
        self.host = host
        self.calls = calls
        self.health = health
        self.max_response_bytes = max_response_bytes
        self.tenants = tenants

    async def Ping(self, request: Any, context: Context, call: Call) -> Any:
        words = "Healthy" if self.health.healthy() else "Unhealthy"
        health = json.dumps({"status": words}, indent=2)  # as TorchServe's
        return message(_INFERENCE + "TorchServeHealthResponse")(health=health)

    async def Predictions(self, request: Any, context: Context, call: Call) -> Any:
        return await self._predict(request, context, call)

    async def StreamPredictions(self, request: Any, context: Context) -> AsyncIterator[Any]:
        """A handler's answer as a stream of one message, as TorchServe sends it."""
        route = _inference("StreamPredictions")
        async with self.calls.observed(route, context, True) as call:
            response = await self._predict(request, context, call)
            self.calls.answered(call, context)
        yield response

    async def StreamPredictions2(
        self, requests: AsyncIterator[Any], context: Context
    ) -> AsyncIterator[Any]:
        """One answer per request, in order; a failure carries its status and the stream goes on."""
        route = _inference("StreamPredictions2")
        async for response in self.calls.each_answered(
            route, requests, context, self._predict, _failed
        ):
            yield response

    async def _predict(self, request: Any, context: Context, call: Call) -> Any:
        call.invocation = True
        name = call.model = self._invoked(model_name(request.model_name), request.model_version)
        body, params = body_and_params(dict(request.input))
        call.bytes_in = len(body)
        tenant = self._tenant(request.model_name, context)
        call.caller_tenant = tenant or None
        result = await self.host.invoke(name, Invocation(body, JSON, JSON, params, tenant))
        check_response_size(len(result.body), self.max_response_bytes)
        call.result = result
        response = message(_INFERENCE + "PredictionResponse")(prediction=result.body)
        if request.HasField("sequence_id"):
            response.sequence_id = request.sequence_id
        return response

    def _tenant(self, model: str, context: Context) -> str:
        """The caller's tenant, from the call's metadata ("": tenants are off)."""
        if self.tenants is None:
            return ""
        return self.tenants.of(model, metadata_of(context))

    def _invoked(self, model: str, version: str) -> str:
        if not version:
            return model
        if self.host.versions_of(model) is not None:
            return self.host.name_of(model, version)
        if version != MODEL_VERSION:
            raise ModelVersionNotFound(
                f"Model version {echo(version)} does not exist for model {model}: it has one "
                f"version, {MODEL_VERSION}"
            )
        return model


def body_and_params(entries: dict[str, bytes]) -> tuple[bytes, dict[str, str]]:
    """The body entry, and the other entries as text parameters."""
    key = next((k for k in BODY_KEYS if k in entries), None)
    if key is None and len(entries) == 1:
        key = next(iter(entries))
    if key is None:
        raise BadRequestBody(
            "the input map holds no body: put it under 'data' (as TorchServe's clients do)"
        )
    params = {}
    for name, value in entries.items():
        if name != key:
            try:
                params[name] = value.decode()
            except UnicodeDecodeError:
                raise BadRequestBody(
                    f"input {echo(name)} is not text: only 'data' may hold binary data"
                ) from None
            check_param(name, params[name])
    return entries[key], params


def _failed(request: Any, error: ModelhostError) -> Any:
    status = message("google.rpc.Status")(code=code_of(error).value[0], message=str(error))
    response = message(_INFERENCE + "PredictionResponse")(status=status)
    if request.HasField("sequence_id"):
        response.sequence_id = request.sequence_id
    return response


class TorchServeManagementServicer:
    """ManagementAPIsService: each answers TorchServe's `msg`, the REST answer's message or JSON."""

    def __init__(
        self,
        host: ModelHost,
        access: Access,
        model_api: bool = True,
        tenants: TenantRule | None = None,
    ) -> None:
        self.models = TorchServeModels(host, model_api)
        self.access = access
        self.reads = KeptReads(tenants, access.authorize, metadata_of)  # the operator's API

    async def RegisterModel(self, request: Any, context: Context, call: Call) -> Any:
        self.access.authorize(context)
        params = registration_params(request)
        call.model = params.get("model_name")
        return _response((await self.models.register(params)).message)

    async def ScaleWorker(self, request: Any, context: Context, call: Call) -> Any:
        """TorchServe's defaults: one worker at least, and at most the least."""
        self.access.authorize(context)
        call.model = request.model_name
        low = request.min_worker or 1
        high = request.max_worker or low
        answer = await self.models.scale(
            request.model_name, request.model_version or None, low, high, request.synchronous
        )
        return _response(answer.message)

    async def SetDefault(self, request: Any, context: Context, call: Call) -> Any:
        self.access.authorize(context)
        call.model = request.model_name
        path = _path(request.model_name, request.model_version)
        return _response(self.models.set_default(path))

    async def UnregisterModel(self, request: Any, context: Context, call: Call) -> Any:
        self.access.authorize(context)
        if not request.model_name:
            raise BadRequestBody("model_name is required: name the model to unregister")
        call.model = request.model_name
        path = _path(request.model_name, request.model_version)
        return _response(await self.models.unregister(path))

    async def DescribeModel(self, request: Any, context: Context, call: Call) -> Any:
        call.model = request.model_name
        self.reads.across(context)
        path = _path(request.model_name, request.model_version)
        if request.customized:
            return _response(json.dumps(await self.models.describe_customized(path), indent=2))
        return _response(json.dumps(self.models.describe(path), indent=2))

    async def ListModels(self, request: Any, context: Context, call: Call) -> Any:
        """A page of the models; the next token is an offset, as the int32 field holds."""
        self.reads.across(context)
        limit = str(request.limit) if request.limit else None
        offset = max(0, request.next_page_token)
        body = self.models.list_models(limit, str(offset))
        if "nextPageToken" in body:
            body["nextPageToken"] = str(offset + len(body["models"]))
        return _response(json.dumps(body, indent=2))


def registration_params(request: Any) -> dict[str, str]:
    """A RegisterModelRequest as REST parameters; a field at its zero value is not given."""
    params = {
        "url": request.url,
        "model_name": request.model_name,
        "handler": request.handler,
        "runtime": request.runtime,
        "initial_workers": str(request.initial_workers or ""),
        "synchronous": "true" if request.synchronous else "false",
        "s3_sse_kms": "true" if request.s3_sse_kms else "",
    }
    for field in ("batch_size", "max_batch_delay", "response_timeout", "startup_timeout"):
        if getattr(request, field):
            params[field] = str(getattr(request, field))
    return {key: value for key, value in params.items() if value}


def _path(model: str, version: str) -> str:
    return f"{model}/{version}" if version else model


def _response(text: str) -> Any:
    return message(_MANAGEMENT + "ManagementResponse")(msg=text)


def _inference(method: str) -> str:
    return method_path(TS_INFERENCE_SERVICE, method)
