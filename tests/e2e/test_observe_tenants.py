"""Each tenant's requests, worker time and refusals, in /metrics and GET /tenants; nothing of it
while tenants are off."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.browser import chromium_page
from helpers.serving import Servers
from observe_tools import require_tool
from prometheus_client.parser import text_string_to_metric_families

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = json.dumps(testing.iris_rows(1)[0])
TENANT_HEADER = "X-Modelhost-Tenant"
REPO = Path(__file__).resolve().parents[2]
TENANT_NAME = re.compile(r"modelhost_tenant_\w+")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
WAIT_MS = 30_000


def invoke(client: httpx.Client, model: str, tenant: str) -> httpx.Response:
    headers = {"content-type": "application/json", TENANT_HEADER: tenant}
    return client.post(f"/models/{model}/invoke", content=ROW, headers=headers)


def scrape(client: httpx.Client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = client.get("/metrics").text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_tenants_off_add_no_series_and_no_listing(server: testing.RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert invoke(client, "tenants/t000.joblib", "a").status_code == 200
        assert "modelhost_tenant" not in client.get("/metrics").text
        listing = client.get("/tenants")
    assert listing.status_code == 404
    assert "--tenant-from" in listing.json()["message"]


@pytest.fixture(scope="module")
def by_header(store: Path, serve: Servers) -> Iterator[httpx.Client]:
    """A server that takes each request's tenant from its X-Modelhost-Tenant header."""
    server = serve(store, workers=1, memory_budget="4GiB", tenant_from="header")
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def test_each_tenant_is_counted_apart(by_header: httpx.Client) -> None:
    """Three requests of tenant a, one of b and one of b's refused, in /metrics and /tenants."""
    client = by_header
    for _ in range(3):
        assert invoke(client, "tenants/t001.joblib", "a").status_code == 200
    assert invoke(client, "tenants/t002.joblib", "b").status_code == 200
    assert invoke(client, "no/such.joblib", "b").status_code == 404
    scraped = scrape(client)
    assert scraped[("modelhost_tenant_requests_total", frozenset({("tenant", "a")}))] == 3
    assert scraped[("modelhost_tenant_requests_total", frozenset({("tenant", "b")}))] == 2
    refused = frozenset({("tenant", "b"), ("reason", "ModelNotFound")})
    assert scraped[("modelhost_tenant_rejections_total", refused)] == 1
    assert scraped[("modelhost_tenant_worker_seconds_total", frozenset({("tenant", "a")}))] > 0
    listed = {t["tenant"]: t for t in client.get("/tenants").json()["tenants"]}
    assert listed["a"]["requests"] == 3 and listed["b"]["rejections"] == {"ModelNotFound": 1}
    assert client.get("/tenants/b").json()["errors"] == 1


def test_oip_refusals_are_counted_by_type(by_header: httpx.Client) -> None:
    """OIP's error body names no type, yet its refusals count by type as the others do."""
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    headers = {TENANT_HEADER: "oip"}
    answer = by_header.post("/v2/models/no/such.joblib/infer", json=body, headers=headers)
    assert answer.status_code == 404
    refused = frozenset({("tenant", "oip"), ("reason", "ModelNotFound")})
    assert scrape(by_header)[("modelhost_tenant_rejections_total", refused)] == 1
    assert by_header.get("/tenants/oip").json()["rejections"] == {"ModelNotFound": 1}


@pytest.mark.parametrize("doc", ["docs/observability.md", "docs/tenants.md"])
def test_docs_query_real_tenant_series(by_header: httpx.Client, doc: str) -> None:
    assert invoke(by_header, "tenants/t003.joblib", "c").status_code == 200
    text = by_header.get("/metrics").text
    exposed = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    exposed |= {f"{name}_{end}" for name in exposed for end in ("bucket", "count", "sum", "total")}
    queried = set(TENANT_NAME.findall((REPO / doc).read_text()))
    assert queried and queried <= exposed


def test_the_dashboard_lists_the_tenants(by_header: httpx.Client) -> None:
    chromium = require_tool("chromium", "chromium")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    assert invoke(by_header, "tenants/t004.joblib", "d").status_code == 200
    with chromium_page(chromium, CHROMIUM_ARGS, width=1366) as (page, problems):
        page.goto(f"{by_header.base_url}/")
        page.wait_for_selector("#tenants-panel:not([hidden])", timeout=WAIT_MS)
        page.wait_for_function(
            "[...document.querySelectorAll('#tenants td:first-child')]"
            ".some(td => td.textContent === 'd')",
            timeout=WAIT_MS,
        )
    assert problems == []
