"""The Open Inference Protocol's GRPCInferenceService, answered as the REST routes answer.

Each method fills in its `Call`, which rpc/calls.py observes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from importlib import metadata
from typing import Any

from google.protobuf import json_format

from modelhost.errors import ModelhostError, ModelNotFound, NotServed
from modelhost.host import Invocation, ModelHost, State
from modelhost.names import model_name
from modelhost.observe.usage import ModelUsage
from modelhost.protocols.health import Health
from modelhost.protocols.not_served import SETTINGS, SHARED_MEMORY
from modelhost.protocols.oip import OipModels, check_load_parameters, missing
from modelhost.protocols.params import check_param
from modelhost.protocols.tenants import KeptReads, TenantRule
from modelhost.rpc.access import Access
from modelhost.rpc.calls import Call, Calls, Context, metadata_of
from modelhost.rpc.messages import OIP_SERVICE, message
from modelhost.rpc.stubs import method_path
from modelhost.rpc.tensors import fill_response, request_body
from modelhost.workers.answers import check_response_size
from modelhost.workers.oip_media import (
    MODEL_NAME_PARAM,
    MODEL_VERSION_PARAM,
    OIP_MEDIA_TYPE,
    oip_media_type,
)

EXTENSIONS = ("classification", "model_configuration", "model_repository", "statistics")
FINAL = "triton_final_response"  # Triton's mark on a request's last streamed answer
FINAL_ANSWER = {FINAL: {"bool_param": True}}


class OipServicer:
    def __init__(
        self,
        host: ModelHost,
        access: Access,
        health: Health,
        max_response_bytes: int = 0,
        tenants: TenantRule | None = None,
        usage: ModelUsage | None = None,
        calls: Calls | None = None,
    ) -> None:
        self.host = host
        self.calls = calls or Calls()
        self.usage = usage or ModelUsage()
        self.models = OipModels(host)
        self.tenants = tenants
        self.access = access
        self.reads = KeptReads(tenants, access.authorize, metadata_of)
        self.health = health
        self.max_response_bytes = max_response_bytes

    # health and metadata ----------------------------------------------------------------

    async def ServerLive(self, request: Any, context: Context, call: Call) -> Any:
        return message("inference.ServerLiveResponse")(live=True)

    async def ServerReady(self, request: Any, context: Context, call: Call) -> Any:
        ready = self.health.ready
        return message("inference.ServerReadyResponse")(ready=ready)

    async def ServerMetadata(self, request: Any, context: Context, call: Call) -> Any:
        return message("inference.ServerMetadataResponse")(
            name="modelhost", version=metadata.version("modelhost"), extensions=EXTENSIONS
        )

    async def ModelReady(self, request: Any, context: Context, call: Call) -> Any:
        name = call.model = model_name(request.name)
        self.reads.model(context, name)
        held = self.models.held(name, request.version)
        ready = self.models.state(held) is State.LOADED
        if not ready and not await self.models.exists(held):
            raise ModelNotFound(missing(name))
        return message("inference.ModelReadyResponse")(ready=ready)

    async def ModelMetadata(self, request: Any, context: Context, call: Call) -> Any:
        name = call.model = model_name(request.name)
        self.reads.model(context, name)
        held = self.models.held(name, request.version)
        if not await self.models.exists(held):
            raise ModelNotFound(missing(name))
        return message("inference.ModelMetadataResponse")(**self.models.metadata(name, held))

    async def ModelConfig(self, request: Any, context: Context, call: Call) -> Any:
        name = call.model = model_name(request.name)
        self.reads.model(context, name)
        held = self.models.held(name, request.version)
        if not await self.models.exists(held):
            raise ModelNotFound(missing(name))
        config = {"config": self.models.config(name, held)}
        return json_format.ParseDict(config, message("inference.ModelConfigResponse")())

    # inference --------------------------------------------------------------------------

    async def ModelInfer(self, request: Any, context: Context, call: Call) -> Any:
        call.invocation = True
        name = call.model = model_name(request.model_name)
        version = request.model_version
        held = self.models.held(name, version)
        body, header_length = request_body(request)
        call.bytes_in = len(body)
        tenant = self._tenant(name, context)
        call.caller_tenant = tenant or None
        invocation = Invocation(
            body=body,
            content_type=oip_media_type(header_length),
            accept=OIP_MEDIA_TYPE,
            params={MODEL_NAME_PARAM: name, MODEL_VERSION_PARAM: version},
            tenant=tenant,
        )
        result = await self.host.invoke(held, invocation)
        check_response_size(len(result.body), self.max_response_bytes)
        call.result = result
        response = message("inference.ModelInferResponse")()
        raw = len(request.raw_input_contents) > 0
        fill_response(response, result.body, result.content_type, raw)
        return response

    async def ModelStreamInfer(
        self, requests: AsyncIterator[Any], context: Context
    ) -> AsyncIterator[Any]:
        """In order; a failure is its answer's error_message."""
        route = method_path(OIP_SERVICE, "ModelStreamInfer")
        async for response in self.calls.each_answered(
            route, requests, context, self._streamed, _stream_failed
        ):
            yield response

    async def _streamed(self, request: Any, context: Context, call: Call) -> Any:
        response = await self.ModelInfer(request, context, call)
        response.parameters[FINAL].bool_param = True
        return message("inference.ModelStreamInferResponse")(infer_response=response)

    def _tenant(self, model: str, context: Context) -> str:
        """The caller's tenant, from the call's metadata ("": tenants are off)."""
        if self.tenants is None:
            return ""
        return self.tenants.of(model, metadata_of(context))

    async def ModelStatistics(self, request: Any, context: Context, call: Call) -> Any:
        if not request.name:
            self.reads.across(context)
            stats = self.models.every_statistics(self.usage.for_model)
        else:
            name = call.model = model_name(request.name)
            self.reads.model(context, name)
            held = self.models.held(name, request.version)
            if not await self.models.exists(held):
                raise ModelNotFound(missing(name))
            stats = [self.models.statistics(held, self.usage.for_model)]
        answer = message("inference.ModelStatisticsResponse")()
        return json_format.ParseDict({"model_stats": stats}, answer)

    async def _no_shared_memory(self, request: Any, context: Context, call: Call) -> Any:
        raise NotServed(SHARED_MEMORY)

    SystemSharedMemoryStatus = SystemSharedMemoryRegister = _no_shared_memory
    SystemSharedMemoryUnregister = CudaSharedMemoryStatus = _no_shared_memory
    CudaSharedMemoryRegister = CudaSharedMemoryUnregister = _no_shared_memory

    async def _no_settings(self, request: Any, context: Context, call: Call) -> Any:
        raise NotServed(SETTINGS)

    TraceSetting = LogSettings = _no_settings

    # model repository -------------------------------------------------------------------

    async def RepositoryIndex(self, request: Any, context: Context, call: Call) -> Any:
        self.reads.across(context)
        if request.repository_name:
            raise NotServed(
                "'repository_name' specification is not supported: modelhost serves one "
                "repository, its model store; leave repository_name empty"
            )
        response = message("inference.RepositoryIndexResponse")()
        async for page in self.models.index(request.ready):
            for entry in page:
                response.models.add(**entry)
            await asyncio.sleep(0)  # let other requests through
        return response

    async def RepositoryModelLoad(self, request: Any, context: Context, call: Call) -> Any:
        self.access.authorize(context)
        name = call.model = model_name(_model_of(request))
        check_load_parameters(request.parameters)
        url = _url_of(request)
        if url:
            check_param("parameters.url", url)
        await self.models.load(name, url or None)
        return message("inference.RepositoryModelLoadResponse")(model_name=name, isLoaded=True)

    async def RepositoryModelUnload(self, request: Any, context: Context, call: Call) -> Any:
        self.access.authorize(context)
        name = call.model = model_name(_model_of(request))
        await self.models.unload(name)
        return message("inference.RepositoryModelUnloadResponse")(model_name=name, isUnloaded=True)


def _model_of(request: Any) -> str:
    """Triton names the model in field 2; KServe in field 1, Triton's repository name."""
    return str(request.model_name or request.repository_name)


def _url_of(request: Any) -> str:
    parameter = request.parameters.get("url")
    return str(parameter.string_param) if parameter is not None else ""


def _stream_failed(request: Any, error: ModelhostError) -> Any:
    failed = {"id": request.id, "model_name": request.model_name, "parameters": FINAL_ANSWER}
    return message("inference.ModelStreamInferResponse")(
        error_message=str(error), infer_response=failed
    )
