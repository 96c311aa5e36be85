"""`--fronts 2` with tenants on: a front answers a tenant's hit itself, with the main process's
bytes and the tenant's header, and the main process counts it under that tenant; a tenant with a
rate or a cap and a tenant the rule refuses are the main process's alone
(docs/tenants.md, "Fronts")."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.fronts import (
    connect,
    direct_on_front,
    front_pids,
    hit_with_the_main_process_stopped,
    raw_invoke,
    raw_request,
)
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

MODEL = "iris.pkl"
OWNED = "tenants/t7/iris.pkl"  # tenants/t7's under name:2
BURST = 2  # the capped tenant's, with a rate slow enough that no test waits for a refill
TENANTS_FILE = f"""
[tenants."capped"]
rate = 0.001
burst = {BURST}
[tenants."limited"]
max_concurrency = 4
[tenants."heavy"]
weight = 3
"""
ROWS = json.dumps(testing.iris_rows(1)).encode()
FOLDED_S = 30.0  # a front reports every 100 ms


def hit(model: str, *headers: str) -> bytes:
    return raw_request(f"/models/{model}/invoke", ROWS, "content-type: application/json", *headers)


def masked(answer: bytes) -> list[bytes]:
    """The answer's lines, the date's, the timings' and the request id's values masked: they
    differ by request."""
    return [
        line.split(b":")[0]
        if line.startswith((b"date:", b"server-timing:", b"x-request-id:"))
        else line
        for line in answer.split(b"\r\n")
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("front-tenants-store")
    testing.iris_logreg(root / MODEL)
    testing.iris_logreg(root / OWNED)
    return root


@pytest.fixture(scope="module")
def tenants_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tenants") / "tenants.toml"
    path.write_text(TENANTS_FILE)
    return path


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers, tenants_file: Path) -> testing.RunningServer:
    settings = {"memory_budget": "2GiB", "tenant_from": "header", "tenants_file": tenants_file}
    return serve(store, workers=1, fronts=2, load_models=MODEL, **settings)


@pytest.fixture(scope="module")
def alone(store: Path, serve: Servers, tenants_file: Path) -> testing.RunningServer:
    settings = {"memory_budget": "2GiB", "tenant_from": "header", "tenants_file": tenants_file}
    return serve(store, workers=1, load_models=MODEL, **settings)


@pytest.fixture
def http(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def test_fronts_start_beside_tenants(server: testing.RunningServer) -> None:
    assert len(front_pids(server)) == 2
    assert "starts no front" not in server.log_text()


def oip(rows: list[list[float]]) -> bytes:
    flat = [value for row in rows for value in row]
    tensor = {"name": "input-0", "datatype": "FP64", "shape": [len(rows), len(rows[0])]}
    document = json.dumps({"inputs": [{**tensor, "data": flat}]}).encode()
    return raw_request(f"/v2/models/{MODEL}/infer", document, "content-type: application/json")


REQUESTS = {
    "sagemaker": hit(MODEL),
    "sagemaker refusal": raw_request(
        f"/models/{MODEL}/invoke", b"[[1, 2, 3]]", "content-type: application/json"
    ),
    "torchserve": raw_request(f"/predictions/{MODEL}", ROWS, "content-type: application/json"),
    "oip": oip(testing.iris_rows(1)),
    "oip refusal": oip([[1.0, 2.0, 3.0]]),
}


def with_tenant(request: bytes, tenant: str | None) -> bytes:
    head, _, body = request.partition(b"\r\n\r\n")
    extra = b"" if tenant is None else f"\r\nx-modelhost-tenant: {tenant}".encode()
    return head + extra + b"\r\n\r\n" + body


@pytest.mark.parametrize("kind", REQUESTS)
@pytest.mark.parametrize("tenant", ["walker", "heavy", None])
def test_a_front_answers_a_tenants_hit_as_the_main_process_does(
    server: testing.RunningServer, alone: testing.RunningServer, tenant: str | None, kind: str
) -> None:
    """With the main process stopped, only a front can answer: the bytes a server without
    fronts answers, the tenant's header (the default tenant's without one) included."""
    request = with_tenant(REQUESTS[kind], tenant)
    answered = hit_with_the_main_process_stopped(server, request)
    assert answered, "relayed to the main process"
    assert f"x-modelhost-tenant: {tenant or 'default'}".encode() in answered
    connection = connect(alone)
    try:
        assert masked(raw_invoke(connection, request)) == masked(answered)
    finally:
        connection.close()


@pytest.mark.parametrize("header", ["x-modelhost-tenant: limited", "x-modelhost-tenant: a b"])
def test_a_capped_or_invalid_tenants_hit_is_relayed(
    server: testing.RunningServer, header: str
) -> None:
    """A tenant with a cap (or a rate) has each request counted by the main process; an invalid
    tenant is refused there: with the main process stopped, no answer comes."""
    assert hit_with_the_main_process_stopped(server, hit(MODEL, header), tries=1) == b""


def test_each_request_is_counted_under_its_tenant_and_held_to_its_rate(
    http: httpx.Client,
) -> None:
    def invoke(tenant: str) -> httpx.Response:
        headers = {"x-modelhost-tenant": tenant}
        return http.post(f"/models/{MODEL}/invoke", json=testing.iris_rows(1), headers=headers)

    walker = [invoke("counted") for _ in range(3)]
    capped = [invoke("capped") for _ in range(BURST + 1)]
    assert [r.status_code for r in walker] == [200] * 3
    assert {r.headers["x-modelhost-tenant"] for r in walker} == {"counted"}
    assert [r.status_code for r in capped] == [200] * BURST + [429]
    assert json.loads(capped[-1].text)["type"] == "RateLimited"
    deadline = time.monotonic() + FOLDED_S
    while http.get("/tenants/counted").json().get("requests") != 3:
        assert time.monotonic() < deadline, http.get("/tenants/counted").text
        time.sleep(0.1)
    invalid = http.post(
        f"/models/{MODEL}/invoke", json=[[1, 2, 3, 4]], headers={"x-modelhost-tenant": "a b"}
    )
    assert invalid.status_code == 400, invalid.text


def test_tenants_by_name_are_answered_by_a_front(store: Path, serve: Servers) -> None:
    server = serve(
        store, workers=1, fronts=2, memory_budget="2GiB", tenant_from="name:2", load_models=OWNED
    )
    answered = hit_with_the_main_process_stopped(server, hit(OWNED))
    assert answered.startswith(b"HTTP/1.1 200"), answered
    assert b"x-modelhost-tenant: tenants/t7" in answered


def test_tenants_by_token_are_answered_by_a_front_until_the_token_is_removed(
    store: Path, serve: Servers, tmp_path: Path
) -> None:
    """A front answers a known token's hit under its tenant; an unknown token is 401 on each
    front, and so is a token once it is taken out of the file."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[tokens]\n"secret-token" = "t1"\n"other-token" = "t2"\n')
    server = serve(
        store,
        workers=1,
        fronts=2,
        memory_budget="2GiB",
        load_models=MODEL,
        tenant_from="token",
        tenant_tokens_file=tokens,
    )
    fronts = front_pids(server)
    assert len(fronts) == 2
    secret, nobody = "authorization: Bearer secret-token", "authorization: Bearer nobody"
    answered = hit_with_the_main_process_stopped(server, hit(MODEL, secret))
    assert answered.startswith(b"HTTP/1.1 200"), answered
    assert b"x-modelhost-tenant: t1" in answered
    for front in fronts:
        assert on_a_front(server, hit(MODEL, nobody), front).startswith(b"HTTP/1.1 401")
    staged = tmp_path / "tokens.new"
    staged.write_text('[tokens]\n"other-token" = "t2"\n')
    staged.replace(tokens)
    deadline = time.monotonic() + FOLDED_S
    for front in fronts:  # each front's table changes within a second of the file
        while not on_a_front(server, hit(MODEL, secret), front).startswith(b"HTTP/1.1 401"):
            assert time.monotonic() < deadline, f"front {front} still answers the removed token"
            time.sleep(0.1)


def on_a_front(server: testing.RunningServer, request: bytes, front: int) -> bytes:
    """The answer to `request` sent on a fresh connection front `front` accepted."""
    connection = direct_on_front(server, front)
    try:
        return raw_invoke(connection, request)
    finally:
        connection.close()
