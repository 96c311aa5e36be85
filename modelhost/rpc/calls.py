"""Each RPC observed as an HTTP request, and core exceptions turned into its status.

An RPC is recorded as a POST to its method's path with HTTP's status, so dashboards and
`simulate` read both alike; its `protocol` label, grpc, tells them apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

from modelhost.errors import ModelhostError
from modelhost.host import Result
from modelhost.observe.exchange import Exchange, server_timing
from modelhost.observe.observer import Observer
from modelhost.protocols.status import status_of
from modelhost.protocols.tenants import TenantRule
from modelhost.rpc.status import code_of, trailers_of

Context: TypeAlias = Any  # grpc.aio.ServicerContext: grpcio ships no type hints
CANCELLED_STATUS = 499  # nginx's number for a client gone


Trailers: TypeAlias = tuple[tuple[str, str], ...]


class Call:
    """One RPC, filled in as it is answered."""

    def __init__(self, route: str, invocation: bool, instance: Trailers = ()) -> None:
        self.route, self.invocation, self.instance = route, invocation, instance
        self.arrived, self.started = time.time(), time.perf_counter()
        self.status = 500  # what an unexpected exception leaves
        self.error: str | None = None
        self.model: str | None = None
        self.tenant: str | None = None
        self.result: Result | None = None
        self.bytes_in = self.bytes_out = 0

    def identify(self, tenants: TenantRule | None, model: str, context: Context) -> str:
        """The caller's tenant under `tenants`, from the call's metadata ("": tenants are off)."""
        if tenants is None:
            return ""
        self.tenant = tenants.of(model, dict(context.invocation_metadata() or ()))
        return self.tenant

    def answered(self, result: Result, context: Context) -> None:
        """Where the answer came from and where its time went, as trailers."""
        self.result, self.bytes_out = result, len(result.body)
        context.set_trailing_metadata(
            (
                ("server-timing", server_timing(result.timings_ms)),
                ("x-modelhost-cache", result.cache),
                ("x-modelhost-tier", result.tier),
                *self.instance,
                *((("x-modelhost-tenant", self.tenant),) if self.tenant else ()),
            )
        )

    def done(self) -> Exchange:
        result = self.result
        return Exchange(
            time=self.arrived,
            method="POST",
            route=self.route,
            status=self.status,
            duration_s=time.perf_counter() - self.started,
            bytes_in=self.bytes_in,
            bytes_out=self.bytes_out,
            invocation=self.invocation,
            model=self.model,
            cache=result.cache if result else None,
            timings_ms=result.timings_ms if result else {},
            error=self.error,
            tenant=self.tenant,
            protocol="grpc",
        )


class Calls:
    """Where every servicer's calls are observed."""

    def __init__(self, observer: Observer | None = None, instance_id: str = "") -> None:
        self.observer = observer
        self.instance: Trailers = (("x-modelhost-instance", instance_id),) if instance_id else ()

    @contextlib.asynccontextmanager
    async def observed(
        self, route: str, context: Context, invocation: bool = False, abort: bool = True
    ) -> AsyncIterator[Call]:
        """The call, recorded when it ends; a core exception aborts with its status.

        Without `abort` it is raised on, for a stream's answer to carry."""
        call = Call(route, invocation, self.instance)
        if self.observer is not None:
            self.observer.metrics.in_flight.inc()
        try:
            yield call
            call.status = 200
        except ModelhostError as error:
            call.status, call.error = status_of(error), type(error).__name__
            if not abort:
                raise
            context.set_trailing_metadata((*trailers_of(error), *self.instance))
            await context.abort(code_of(error), str(error))
        except asyncio.CancelledError:
            call.status, call.error = CANCELLED_STATUS, "Cancelled"
            raise
        finally:
            if self.observer is not None:
                self.observer.metrics.in_flight.dec()
                self.observer.record(call.done())
