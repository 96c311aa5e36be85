"""GET /tenants pages through the tenants the observer counted; off, it says how to switch on."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import httpx

from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes
from modelhost.observe.exchange import Exchange
from modelhost.observe.observer import Observer
from modelhost.records.events import Event, EventLog
from modelhost.records.statistics import TenantHoldings

HOLDINGS = TenantHoldings({"t1": 3 * 2**20}, {"t1": 2**20})


def observer(tenants: bool) -> Observer:
    host = SimpleNamespace(events=EventLog(), tenant_holdings=lambda: HOLDINGS)
    return Observer(cast(Any, host), tenants=tenants)


def get(watcher: Observer, path: str) -> httpx.Response:
    app = build_app(SageMakerRoutes(cast(Any, None), HttpSettings(1024, "")), watcher)

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.get(path)

    return asyncio.run(send())


def served(tenant: str | None, status: int = 200) -> Exchange:
    return Exchange(
        time=0.0,
        method="POST",
        route="/invocations",
        status=status,
        duration_s=0.003,
        bytes_in=1,
        bytes_out=1,
        invocation=True,
        model="m",
        cache="hit",
        timings_ms={"infer": 1.5} if status < 400 else {},
        error="QueueFull" if status == 429 else None,
        tenant=tenant,
    )


def test_tenants_off_answer_404_naming_the_setting() -> None:
    watcher = observer(tenants=False)
    watcher.record(served(None))
    for path in ("/tenants", "/tenants/t1"):
        response = get(watcher, path)
        assert response.status_code == 404
        assert response.json()["type"] == "TenantNotFound"
        assert "--tenant-from" in response.json()["message"]


def test_tenants_page_by_cursor_in_name_order() -> None:
    watcher = observer(tenants=True)
    for tenant in ("tenants/t2", "tenants/t0", "tenants/t1", "tenants/t0"):
        watcher.record(served(tenant))
    first = get(watcher, "/tenants?limit=2").json()
    assert [t["tenant"] for t in first["tenants"]] == ["tenants/t0", "tenants/t1"]
    assert first["tenants"][0]["requests"] == 2
    token = first["nextPageToken"]
    rest = get(watcher, f"/tenants?limit=2&next_page_token={token}").json()
    assert [t["tenant"] for t in rest["tenants"]] == ["tenants/t2"]
    assert "nextPageToken" not in rest


def test_one_tenant_by_name_with_its_refusals() -> None:
    watcher = observer(tenants=True)
    watcher.record(served("tenants/t7"))
    watcher.record(served("tenants/t7", status=429))
    body = get(watcher, "/tenants/tenants/t7").json()
    assert body["tenant"] == "tenants/t7"
    assert body["requests"] == 2 and body["rejections"] == {"QueueFull": 1}
    assert body["workerSeconds"] == 0.0015
    missing = get(watcher, "/tenants/tenants/t8")
    assert missing.status_code == 404 and "GET /tenants" in missing.json()["message"]


def test_requests_without_a_tenant_are_not_counted_as_one() -> None:
    watcher = observer(tenants=True)
    watcher.record(served(None))
    assert get(watcher, "/tenants").json() == {"tenants": []}


def test_a_tenant_shows_what_it_holds_and_its_evictions() -> None:
    watcher = observer(tenants=True)
    watcher.record(served("t1"))
    watcher.on_event(Event("evict", "t1/a", detail={"tenant": "t1", "for_tenant": "t2"}))
    watcher.on_event(Event("evict", "t2/b", detail={"tenant": "t2", "for_tenant": "t1"}))
    body = get(watcher, "/tenants/t1").json()
    assert body["memoryBytes"] == 3 * 2**20 and body["diskBytes"] == 2**20
    assert body["evictionsSuffered"] == 1 and body["evictionsCaused"] == 1
    listed = get(watcher, "/tenants").json()["tenants"]
    assert {t["tenant"]: t["evictionsSuffered"] for t in listed} == {"t1": 1, "t2": 1}


def test_a_tenant_shows_the_loads_of_its_models() -> None:
    watcher = observer(tenants=True)
    for model, ms in (("t1/a", 250.0), ("t1/b", 125.0), ("t2/c", 500.0)):
        watcher.on_event(Event("load", model, duration_ms=ms, detail={"tenant": model[:2]}))
    watcher.on_event(Event("load", "shared", duration_ms=9.0))  # the server's own: no tenant
    listed = get(watcher, "/tenants").json()["tenants"]
    assert {t["tenant"]: (t["loads"], t["loadSeconds"]) for t in listed} == {
        "t1": (2, 0.375),
        "t2": (1, 0.5),
    }
