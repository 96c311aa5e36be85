"""The observability routes: metrics, events and the dashboard, as open as `GET /models`."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from modelhost.cache.curve import WINDOWS_S
from modelhost.errors import BadRequestBody, TenantNotFound, TooManyStreams
from modelhost.host.sizing import DEFAULT_WINDOW
from modelhost.http.openapi import OpenApiRoute
from modelhost.names import echo
from modelhost.observe.describe import describe_sizing
from modelhost.observe.observer import Observer
from modelhost.observe.tenants import TenantTable
from modelhost.protocols.pages import decode_token, encode_token, page_size_in
from modelhost.protocols.params import is_whole_number
from modelhost.protocols.tenants import OPEN_READS, KeptReads
from modelhost.records.events import Event
from modelhost.records.statistics import TenantHoldings

RECONNECT_MS = 1000
ALIVE = {"status": "alive"}
VARY_ACCEPT = {"Vary": "Accept"}
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@functools.cache
def dashboard_html() -> bytes:
    return resources.files("modelhost.observe").joinpath("dashboard.html").read_bytes()


def build_metrics_app(observer: Observer) -> Starlette:
    """GET /metrics on TorchServe's metrics_address, with its API description."""
    served = [Route("/metrics", ObserveRoutes(observer).metrics_port, methods=["GET"])]
    return Starlette(routes=[*served, OpenApiRoute(served, "metrics")])


class ObserveRoutes:
    def __init__(self, observer: Observer, reads: KeptReads[Request] | None = None) -> None:
        self.observer = observer
        self.reads = reads or OPEN_READS

    def routes(self) -> list[Route]:
        return [
            Route("/", self.dashboard, methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
            Route("/events", self.events, methods=["GET"]),
            Route("/sizing", self.sizing, methods=["GET"]),
            Route("/tenants", self.tenants, methods=["GET"]),
            Route("/tenants/{tenant:path}", self.tenant, methods=["GET"]),
        ]

    async def dashboard(self, request: Request) -> Response:
        """The dashboard to a browser; to any other client KServe's v1 liveness, which its
        REST client reads at `/`."""
        if "text/html" in request.headers.get("accept", ""):
            return HTMLResponse(dashboard_html(), headers=VARY_ACCEPT)
        return JSONResponse(ALIVE, headers=VARY_ACCEPT)

    async def metrics(self, request: Request) -> Response:
        self.reads.across(request)
        return Response(self.observer.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def metrics_port(self, request: Request) -> Response:
        """/metrics on TorchServe's metrics_address: its names too, and its `name[]` filter."""
        names = request.query_params.getlist("name[]")
        text = self.observer.metrics_port_text(names)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    async def sizing(self, request: Request) -> Response:
        """The live miss-ratio curve, of the hour or `?window=day`."""
        self.reads.across(request)
        window = request.query_params.get("window", DEFAULT_WINDOW)
        if window not in WINDOWS_S:
            raise BadRequestBody(
                f"unknown window {echo(window)}: give one of {', '.join(WINDOWS_S)}"
            )
        statistics = self.observer.host.sizing.statistics(window)
        return JSONResponse(describe_sizing(statistics))

    async def tenants(self, request: Request) -> Response:
        """A page of the tenants counted, in name order."""
        self.reads.across(request)
        table = self.tenant_table()
        query = request.query_params
        limit = page_size_in(query, "limit", "page_size")
        token = query.get("next_page_token") or query.get("nextPageToken")
        names = table.page(decode_token(token) if token else "", limit + 1)
        held = self.observer.host.tenant_holdings()
        body: dict[str, Any] = {
            "tenants": [describe_tenant(table, name, held) for name in names[:limit]]
        }
        if len(names) > limit:  # a next page
            body["nextPageToken"] = body["next_page_token"] = encode_token(names[limit - 1])
        return JSONResponse(body)

    async def tenant(self, request: Request) -> Response:
        name = request.path_params["tenant"]
        self.reads.tenant(request, name)
        table = self.tenant_table()
        if table.get(name) is None:
            raise TenantNotFound(
                f"no request of tenant {echo(name)} has been counted (the table keeps the "
                f"{table.max_tenants} tenants seen last); GET /tenants lists them"
            )
        return JSONResponse(describe_tenant(table, name, self.observer.host.tenant_holdings()))

    def tenant_table(self) -> TenantTable:
        table = self.observer.tenant_table()
        if table is None:
            raise TenantNotFound(
                "tenants are off, so every request is counted as the server's own; start the "
                "server with --tenant-from (header, name:N or token) to count each tenant"
            )
        return table

    async def events(self, request: Request) -> Response:
        """Server-sent events; `?model=` filters, `Last-Event-ID` resumes."""
        model = request.query_params.get("model") or None
        if model is None:
            self.reads.across(request)
        else:
            self.reads.model(request, model)
        stream, tenant = self.observer.stream, self.reads.reader(request)
        if refusal := stream.refusal(tenant):
            raise TooManyStreams(refusal)
        after = last_event_id(request)
        frames = sse_frames(stream.follow(after, model, tenant))
        return StreamingResponse(frames, media_type="text/event-stream", headers=SSE_HEADERS)


def describe_tenant(table: TenantTable, name: str, held: TenantHoldings) -> dict[str, Any]:
    figures = table.get(name)
    assert figures is not None
    return {
        "tenant": name,
        **figures.describe(),
        "memoryBytes": held.memory_bytes.get(name, 0),
        "diskBytes": held.disk_bytes.get(name, 0),
        "heldBackS": held.held_back_s.get(name, 0),
    }


def last_event_id(request: Request) -> int | None:
    """Where a stream resumes: the header, else the query's parameter, named when refused."""
    text, given = request.headers.get("last-event-id"), "Last-Event-ID"
    if not text:
        text, given = request.query_params.get("last_event_id"), "last_event_id"
    if not text:
        return None
    if not is_whole_number(text):
        raise BadRequestBody(f"invalid {given} {echo(text)}: give the id of an event received")
    return int(text)


async def sse_frames(events: AsyncIterator[Event | None]) -> AsyncIterator[str]:
    """`id:` and `data:` lines per event, a comment as heartbeat."""
    yield f"retry: {RECONNECT_MS}\n\n"
    async for event in events:
        if event is None:
            yield ": keep-alive\n\n"
        else:
            yield f"id: {event.id}\ndata: {event.to_json()}\n\n"
