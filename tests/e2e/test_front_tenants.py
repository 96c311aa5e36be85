"""`--fronts 2` with tenants on starts no front: every request needs the main process, which
holds each tenant's rate, cap, queue and counts, so it keeps the port alone and says why
(docs/tenants.md, "The limits of fairness")."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from helpers.fronts import front_pids
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

MODEL = "iris.pkl"
BURST = 2  # the capped tenant's, with a rate slow enough that no test waits for a refill
TENANTS_FILE = f'[tenants."capped"]\nrate = 0.001\nburst = {BURST}\n'


@pytest.fixture(scope="module")
def server(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> testing.RunningServer:
    tenants_file = tmp_path_factory.mktemp("tenants") / "tenants.toml"
    tenants_file.write_text(TENANTS_FILE)
    return serve(
        store,
        workers=1,
        fronts=2,
        memory_budget="2GiB",
        tenant_from="header",
        tenants_file=tenants_file,
    )


def test_no_front_starts_and_the_log_says_why(server: testing.RunningServer) -> None:
    assert front_pids(server) == []
    line = "--fronts 2 starts no front: tenants (--tenant-from) need the main process"
    assert line in server.log_text()


def test_each_request_is_its_tenants(server: testing.RunningServer) -> None:
    """Counted under its tenant, answered with the tenant's header, and held to its rate."""
    with httpx.Client(base_url=server.url, timeout=60) as client:

        def invoke(tenant: str) -> httpx.Response:
            headers = {"x-modelhost-tenant": tenant}
            return client.post(
                f"/models/{MODEL}/invoke", json=testing.iris_rows(1), headers=headers
            )

        walker = [invoke("walker") for _ in range(3)]
        capped = [invoke("capped") for _ in range(BURST + 1)]
        counted = client.get("/tenants/walker").json()
    assert [r.status_code for r in walker] == [200] * 3
    assert {r.headers["x-modelhost-tenant"] for r in walker} == {"walker"}
    assert counted["requests"] == 3
    assert [r.status_code for r in capped] == [200] * BURST + [429]
    assert json.loads(capped[-1].text)["type"] == "RateLimited"
