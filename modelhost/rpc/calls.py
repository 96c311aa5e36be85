"""Each RPC observed as an HTTP request, and core exceptions turned into its status.

An RPC is recorded as a POST to its method's path with HTTP's status, so dashboards and
`simulate` read both alike; its `protocol` label, grpc, tells them apart. A unary method is
observed around its handler, as REST's middleware observes a route.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

from modelhost.errors import ModelhostError
from modelhost.host import Result
from modelhost.observe.exchange import Exchange, server_timing
from modelhost.observe.observer import Observer
from modelhost.protocols.answer_headers import CACHE, INSTANCE, TENANT, TIER, TIMING
from modelhost.protocols.status import status_of
from modelhost.rpc.status import code_of, trailers_of

Context: TypeAlias = Any  # grpc.aio.ServicerContext: grpcio ships no type hints
CANCELLED_STATUS = 499  # nginx's number for a client gone


Trailers: TypeAlias = tuple[tuple[str, str], ...]
Method: TypeAlias = Callable[[Any, Context, "Call"], Awaitable[Any]]
Handler: TypeAlias = Callable[[Any, Context], Awaitable[Any]]


def metadata_of(context: Context) -> dict[str, Any]:
    """A call's metadata; the last of a repeated key, as HTTP's headers."""
    return dict(context.invocation_metadata() or ())


class Call:
    """One RPC, filled in by its servicer as it is answered."""

    def __init__(self, route: str, invocation: bool = False) -> None:
        self.route, self.invocation = route, invocation
        self.arrived, self.started = time.time(), time.perf_counter()
        self.status = 500  # what an unexpected exception leaves
        self.error: str | None = None
        self.model: str | None = None
        self.caller_tenant: str | None = None  # None: tenants are off
        self.result: Result | None = None
        self.bytes_in = 0

    def done(self) -> Exchange:
        result = self.result
        return Exchange(
            time=self.arrived,
            method="POST",
            route=self.route,
            status=self.status,
            duration_s=time.perf_counter() - self.started,
            bytes_in=self.bytes_in,
            bytes_out=len(result.body) if result else 0,
            invocation=self.invocation,
            model=self.model,
            cache=result.cache if result else None,
            tier=result.tier if result else None,
            timings_ms=result.timings_ms if result else {},
            model_bytes=result.model_bytes if result else None,
            error=self.error,
            tenant=self.caller_tenant,
            protocol="grpc",
        )


class Calls:
    """Where every servicer's calls are observed."""

    def __init__(self, observer: Observer | None = None, instance_id: str = "") -> None:
        self.observer = observer
        self.instance: Trailers = ((INSTANCE, instance_id),) if instance_id else ()

    def observing(self, route: str, method: Method) -> Handler:
        """`method` as grpc's handler of `route`: each call observed and its answer's trailers
        set, outside the servicer's walk."""

        async def handler(request: Any, context: Context) -> Any:
            async with self.observed(route, context) as call:
                response = await method(request, context, call)
                self.answered(call, context)
                return response

        return handler

    def answered(self, call: Call, context: Context) -> None:
        if call.result is not None:
            context.set_trailing_metadata(self.told(call.result, call.caller_tenant))

    def told(self, result: Result, tenant: str | None) -> Trailers:
        """Where an invocation's model came from and where its time went, as trailers."""
        return (
            (TIMING, server_timing(result.timings_ms)),
            (CACHE, result.cache),
            (TIER, result.tier),
            *self.instance,
            *(((TENANT, tenant),) if tenant else ()),
        )

    async def each_answered(
        self,
        route: str,
        requests: AsyncIterator[Any],
        context: Context,
        answer: Method,
        failed: Callable[[Any, ModelhostError], Any],
    ) -> AsyncIterator[Any]:
        """A stream's requests answered in order, each observed as a call; a core exception is
        `failed`'s answer, and the stream goes on."""
        async for request in requests:
            try:
                async with self.observed(route, context, True, abort=False) as call:
                    response = await answer(request, context, call)
                    self.answered(call, context)
            except ModelhostError as error:
                response = failed(request, error)
            yield response

    def observed(
        self, route: str, context: Context, invocation: bool = False, abort: bool = True
    ) -> Observed:
        """The call, recorded when it ends; a core exception aborts with its status.

        Without `abort` it is raised on, for a stream's answer to carry."""
        return Observed(self, Call(route, invocation), context, abort)


class Observed:
    """Calls.observed's context: a class, not a generator's, being on every call's path."""

    def __init__(self, calls: Calls, call: Call, context: Context, abort: bool) -> None:
        self.calls, self.call, self.context, self.abort = calls, call, context, abort

    async def __aenter__(self) -> Call:
        if self.calls.observer is not None:
            self.calls.observer.metrics.in_flight.inc()
        return self.call

    async def __aexit__(self, kind: type[BaseException] | None, error: Any, trace: Any) -> None:
        call, observer = self.call, self.calls.observer
        try:
            if error is None:
                call.status = 200
            elif isinstance(error, ModelhostError):
                call.status, call.error = status_of(error), type(error).__name__
                call.result = loaded = error.loaded
                if self.abort:
                    told = self.calls.instance if loaded is None else self.calls.told(loaded, None)
                    trailers = (*trailers_of(error), *told)
                    self.context.set_trailing_metadata(trailers)
                    await self.context.abort(code_of(error), str(error))
            elif isinstance(error, asyncio.CancelledError):
                call.status, call.error = CANCELLED_STATUS, "Cancelled"
        finally:
            if observer is not None:
                observer.metrics.in_flight.dec()
                observer.record(call.done())
