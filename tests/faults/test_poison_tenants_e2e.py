"""A tenant whose models keep killing workers is held back whole: holding each model back
after its own deaths would let a tenant of many such models kill workers without end."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from helpers.loopback import wait_for
from helpers.serving import Servers
from test_poison_models_e2e import PATIENCE_S, POISONED_HANDLER, deaths, poison

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = json.dumps(testing.iris_rows(1))
JSON = {"content-type": "application/json"}
POISONED = [f"tenants/noisy/poisoned-{n}" for n in range(4)]
QUIET = "tenants/quiet/good.joblib"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, serve: Servers) -> testing.RunningServer:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / QUIET)
    testing.iris_logreg(root / "tenants/noisy/good.joblib")
    for name in POISONED:
        (root / name).mkdir(parents=True)
        (root / name / "handler.py").write_text(POISONED_HANDLER)
    return serve(root, workers=1, tenant_from="name:2")


@pytest.fixture
def client(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


def answers(client: httpx.Client, model: str = QUIET) -> int:
    return client.post(f"/models/{model}/invoke", content=ROWS, headers=JSON).status_code


def test_a_tenant_whose_models_killed_four_workers_loads_no_more_models(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    """Two models held back at two deaths each, then the tenant: its third poisoned model is
    refused 429 with a Retry-After, before it can kill, while the other tenant answers; GET
    /tenants says for how long."""
    assert answers(client) == 200
    before = deaths(server)
    for model in POISONED[:2]:
        for _ in range(2):
            assert poison(client, model).status_code == 503
            wait_for(lambda: answers(client) == 200, "the quiet tenant to answer", PATIENCE_S)
    assert deaths(server) == before + 4
    for model in (POISONED[2], "tenants/noisy/good.joblib"):
        refused = poison(client, model)
        assert refused.status_code == 429, refused.text
        assert "tenant tenants/noisy is held back" in refused.json()["message"], refused.text
        assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert deaths(server) == before + 4
    assert answers(client) == 200
    shown = {t: client.get(f"/tenants/tenants/{t}").json() for t in ("noisy", "quiet")}
    assert 1 <= shown["noisy"]["heldBackS"] <= 60 and shown["quiet"]["heldBackS"] == 0
    assert shown["noisy"]["rejections"]["TenantHeldBack"] == 2
    held = [e for e in server.events("failure") if e.get("reason") == "tenant_held_back"]
    assert [e["detail"]["tenant"] for e in held] == ["tenants/noisy"], held
