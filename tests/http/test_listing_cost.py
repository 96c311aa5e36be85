"""A listing page costs what it returns: GET /models (SageMaker's shape, ours) and TorchServe's list
read about as many names as the page holds from a host of 100,000 names, a state filter reads
only its own place, and the OIP repository index streams. Counted with fakes, never timed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from helpers.counting_host import Places, answer, counting_host

from modelhost.host import ModelHost
from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes
from modelhost.http.torchserve import TorchServeManagement

N = 100_000
RESIDENTS = 300
LIMIT = 10


def big_host() -> tuple[ModelHost, Places]:
    """100,000 names on disk, every other one registered too, 300 loaded (among them)."""
    on_disk = [f"m{i:06d}" for i in range(N)]
    loaded = [f"m{i:06d}" for i in range(0, N, N // RESIDENTS)][:RESIDENTS]
    return counting_host(loaded=loaded, on_disk=on_disk, registered=on_disk[::2])


def sagemaker(host: ModelHost) -> SageMakerRoutes:
    return SageMakerRoutes(host, HttpSettings(1 << 20, ""))


def read_at_most(places: Places, names: int, memory_walks: int = 1) -> None:
    """The disk tier and the registrations handed out at most `names` each; the memory tier, a
    few hundred names bounded by the budget, at most `memory_walks` walks."""
    assert places.disk.names <= names, places.disk.names
    assert places.registered.names <= names, places.registered.names
    assert places.memory.names <= memory_walks * RESIDENTS, places.memory.names


def test_a_page_of_models_reads_what_it_returns() -> None:
    host, places = big_host()
    status, first = answer(sagemaker(host).list_models, "/models", {"limit": LIMIT})
    assert status == 200
    assert [m["modelName"] for m in first["models"]] == [f"m{i:06d}" for i in range(LIMIT)]
    read_at_most(places, 2 * (LIMIT + 1))
    places.reset()
    token = first["next_page_token"]
    _, second = answer(
        sagemaker(host).list_models, "/models", {"limit": LIMIT, "next_page_token": token}
    )
    assert second["models"][0]["modelName"] == f"m{LIMIT:06d}"
    read_at_most(places, 2 * (LIMIT + 1))


def test_deep_page_reads_as_little() -> None:
    """The last page has no token and a page deep in reads as little."""
    host, places = big_host()
    _, page = answer(sagemaker(host).list_models, "/models", {"limit": 1000})
    for _ in range(3):
        token = page["next_page_token"]
        places.reset()
        _, page = answer(
            sagemaker(host).list_models, "/models", {"limit": 1000, "next_page_token": token}
        )
        read_at_most(places, 2 * 1001)
    host2, _ = counting_host(on_disk=["a", "b"])
    _, whole = answer(sagemaker(host2).list_models, "/models", {"limit": 2})
    assert [m["modelName"] for m in whole["models"]] == ["a", "b"]
    assert "next_page_token" not in whole and "nextPageToken" not in whole


def test_state_loaded_reads_the_memory_tier_only() -> None:
    host, places = big_host()
    _, page = answer(sagemaker(host).list_models, "/models", {"state": "loaded", "limit": 1000})
    listed = [m["modelName"] for m in page["models"]]
    assert listed == sorted(host.memory.residents)
    assert {m["state"] for m in page["models"]} == {"loaded"}
    assert places.disk.names == 0 and places.registered.names == 0


def test_a_loaded_filter_leaves_out_models_still_loading() -> None:
    host, _ = counting_host(loaded=["b"], loading=["a"], on_disk=["a", "b", "c"])
    _, page = answer(sagemaker(host).list_models, "/models", {"state": "loaded"})
    assert [m["modelName"] for m in page["models"]] == ["b"]


def test_state_filters_read_their_own_place() -> None:
    """State on disk and registered read their own place only."""
    host, places = big_host()
    _, page = answer(sagemaker(host).list_models, "/models", {"state": "on_disk", "limit": LIMIT})
    assert len(page["models"]) == LIMIT
    assert places.memory.names == 0 and places.registered.names == 0
    assert places.disk.names <= LIMIT + 1
    places.reset()
    _, page = answer(sagemaker(host).list_models, "/models", {"state": "registered", "limit": 5})
    assert [m["modelName"] for m in page["models"]] == [f"m{i:06d}" for i in range(0, 10, 2)]
    assert places.memory.names == 0 and places.disk.names == 0
    assert places.registered.names <= 6


def test_an_unknown_state_is_400_naming_the_states() -> None:
    host, _ = counting_host()
    response = call_app(build_app(sagemaker(host)), "GET", "/models", params={"state": "warm"})
    assert response.status_code == 400
    assert "loaded, on_disk, registered" in response.json()["message"]


def test_torchserve_pages_read_what_they_return() -> None:
    """TorchServe pages read what they return and tokens round trip."""
    host, places = big_host()
    torchserve = TorchServeManagement(sagemaker(host))
    _, first = answer(torchserve.list_models, "/models", {"limit": LIMIT})
    assert [m["modelName"] for m in first["models"]] == [f"m{i:06d}" for i in range(0, 20, 2)]
    read_at_most(places, 2 * (LIMIT + 1))
    places.reset()
    query = {"limit": LIMIT, "next_page_token": first["nextPageToken"]}
    _, second = answer(torchserve.list_models, "/models", query)
    assert second["models"][0]["modelName"] == f"m{2 * LIMIT:06d}"
    read_at_most(places, 2 * (LIMIT + 1))


def test_torchserve_offset_is_read_by_position() -> None:
    """A TorchServe offset is read by position, not by walking.

    TorchServe's own tokens are offsets; one deep in the list reads a few names to find its
    place (by position in the ordered registrations), then the page."""
    host, places = big_host()
    torchserve = TorchServeManagement(sagemaker(host))
    query = {"limit": LIMIT, "next_page_token": "40000"}
    _, page = answer(torchserve.list_models, "/models", query)
    registered = sorted(set(host.residency.sources) | set(host.memory.residents))
    places.reset()
    _, page = answer(torchserve.list_models, "/models", query)
    assert [m["modelName"] for m in page["models"]] == registered[40_000 : 40_000 + LIMIT]
    read_at_most(places, 2 * (LIMIT + 1) + 64, memory_walks=2)
    _, past = answer(torchserve.list_models, "/models", {"next_page_token": str(10 * N)})
    assert past == {"models": []}


def call_app(app: Any, method: str, path: str, **kw: Any) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app, client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.request(method, path, **kw)

    return asyncio.run(send())


def test_oip_index_reads_memory_tier_only() -> None:
    """The OIP index of ready models reads the memory tier only."""
    host, places = big_host()
    response = call_app(
        build_app(sagemaker(host)), "POST", "/v2/repository/index", json={"ready": True}
    )
    assert response.status_code == 200
    entries = response.json()
    assert [e["name"] for e in entries] == sorted(host.memory.residents)
    assert {e["state"] for e in entries} == {"READY"}
    assert places.disk.names == 0 and places.registered.names == 0


def body_messages(app: Any, path: str, body: bytes) -> list[bytes]:
    """The body parts of one POST, as the ASGI server would send them."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"localhost"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 40000),
        "server": ("localhost", 80),
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
    }
    parts: list[bytes] = []
    received = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return received.pop(0) if received else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            parts.append(message["body"])

    asyncio.run(app(scope, receive, send))
    return parts


def test_the_oip_index_of_every_model_streams_in_parts() -> None:
    """The whole index, the store's names among the host's, is sent a part at a time, not built
    whole first; the store hands out each name about once."""
    names = [f"m{i:05d}" for i in range(20_000)]
    host, places = counting_host(on_disk=names[::2], loaded=names[:3], stored=names[1::2])
    parts = body_messages(build_app(sagemaker(host)), "/v2/repository/index", b"{}")
    assert len(parts) > 5
    entries = json.loads(b"".join(parts))
    assert [e["name"] for e in entries] == names
    assert [e.get("state") for e in entries[:4]] == ["READY"] * 3 + [None]
    assert places.store.names <= 2 * len(names) // 2 + 1000, places.store.names
