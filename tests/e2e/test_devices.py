"""Devices end to end: a real server whose workers have a fake device, its allocator as large as
the device budget, so a move past the budget would fail the request with the worker's
out-of-memory error. Models move there on first use, sleep in host memory when the device is
full, wake by a copy, and say which tier answered."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from helpers.devices import ROW, in_process, sized_torch, tensor_bytes
from helpers.fronts import hit_with_the_main_process_stopped, raw_request
from helpers.serving import Servers, invoke

from modelhost import testing

MiB = 2**20
SIZE = 12 * MiB
CONTEXT = 2 * MiB
KERNELS = 6 * MiB  # what the fake's driver loads at a worker's first call, as CUDA's does
BUDGET = 30 * MiB  # a context and two models
MODELS = [f"m{i}.pt" for i in range(4)]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("device-store")
    for i, name in enumerate(MODELS):
        sized_torch(root / name, SIZE, seed=i)
    sized_torch(root / "big.pt", BUDGET, seed=9)
    sized_torch(root / "pinned/model.pt", SIZE, seed=7)
    (root / "pinned/modelhost.toml").write_text('device = "cpu"\n')
    testing.onnx_iris(root / "iris.onnx")
    return root


def one_device(store: Path, serve: Servers, fake: str, **settings: object) -> testing.RunningServer:
    """One worker over one fake device, `--fake-devices fake`, all of it the budget."""
    return serve(
        store,
        workers=1,
        memory_budget="3GiB",
        preload_runtimes="torch",
        fake_devices=fake,
        device_budget="100%",
        eviction_policy="lru",
        admission="none",
        **settings,
    )


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers) -> testing.RunningServer:
    return one_device(store, serve, f"1x{BUDGET}+{CONTEXT}", access_log="-")  # into its log


@pytest.fixture
def client(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


def device(client: httpx.Client) -> dict[str, int]:
    devices = client.get("/stats").json()["devices"]
    assert [d["name"] for d in devices] == ["cuda:0"]
    return dict(devices[0])


def unload_all(client: httpx.Client) -> None:
    for name in [*MODELS, "pinned"]:
        client.delete(f"/models/{name}")


def test_a_model_moves_to_the_device_on_first_use_and_is_served_there(
    client: httpx.Client, store: Path, server: testing.RunningServer
) -> None:
    unload_all(client)
    first = invoke(client, "m0.pt", ROW)
    again = invoke(client, "m0.pt", ROW)
    assert first.status_code == again.status_code == 200
    assert first.headers["x-modelhost-tier"] == "disk"
    assert again.headers["x-modelhost-tier"] == "device"
    assert json.loads(again.content)["predictions"][0] == pytest.approx(in_process(store / "m0.pt"))
    placed = [e for e in server.events("place") if e["model"] == "m0.pt"]
    assert placed and placed[-1]["detail"]["device"] == "cuda:0"
    check = [e for e in server.events("device_check") if e["model"] == "m0.pt"][-1]
    assert check["bytes"] == check["detail"]["charged_bytes"]  # the driver's count agrees
    figures = device(client)
    assert figures["models"] == 1
    assert figures["usedBytes"] == CONTEXT + tensor_bytes(SIZE)
    assert figures["budgetBytes"] == BUDGET


def test_a_full_device_sends_a_model_to_sleep_in_host_memory_and_wakes_it_by_a_copy(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    unload_all(client)
    for name in ("m0.pt", "m1.pt", "m2.pt"):  # two fit: m2 sends m0, the least recent, to sleep
        assert invoke(client, name, ROW).status_code == 200
    slept = [e["model"] for e in server.events("sleep")]
    assert slept[-1:] == ["m0.pt"]
    assert client.get("/models/m0.pt").json()["state"] == "loaded"  # asleep, still loaded
    woken = invoke(client, "m0.pt", ROW)
    assert woken.headers["x-modelhost-tier"] == "host"
    assert "wake;dur=" in woken.headers["server-timing"]
    assert [e["model"] for e in server.events("wake")][-1:] == ["m0.pt"]
    figures = device(client)
    assert figures["wakes"] >= 1 and figures["evictions"] >= 2
    assert figures["usedBytes"] <= figures["budgetBytes"]


def test_device_memory_never_passes_its_budget_under_churn_from_16_clients(
    client: httpx.Client, store: Path, server: testing.RunningServer
) -> None:
    expected = {name: in_process(store / name) for name in MODELS}
    names = random.Random(0).choices(MODELS, weights=[8, 4, 2, 1], k=160)

    def call(name: str) -> tuple[str, int, object]:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            response = invoke(http, name, ROW)
        return name, response.status_code, json.loads(response.content)["predictions"][0]

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(call, names))
    failed = [(name, status, body) for name, status, body in answers if status != 200]
    assert failed == []  # the fake allocator refuses a move past the budget: a 500
    for name, _, body in answers:
        assert body == pytest.approx(expected[name])
    assert device(client)["usedBytes"] <= BUDGET


def test_what_the_driver_holds_past_the_allocator_is_charged_to_the_workers_context(
    store: Path, serve: Servers
) -> None:
    """The kernels a first call loads are the driver's, unseen by the allocator: once counted,
    the next model sends one to sleep rather than meeting a device fuller than its ledger."""
    kernels = one_device(store, serve, f"1x{BUDGET}+{CONTEXT}+{KERNELS}")
    with httpx.Client(base_url=kernels.url, timeout=60) as http:
        for name in ("m0.pt", "m1.pt"):
            assert invoke(http, name, ROW).status_code == 200
            assert invoke(http, name, ROW).headers["x-modelhost-tier"] == "device"
        figures = device(http)
    assert [e for e in kernels.events("failure") if e.get("reason") == "device_move"] == []
    assert [e["model"] for e in kernels.events("sleep")] == ["m0.pt"]
    assert figures["contextBytes"] == CONTEXT + KERNELS
    assert figures["usedBytes"] == CONTEXT + KERNELS + tensor_bytes(SIZE)


def test_the_access_log_names_the_tier_that_answered(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    """Each line's `tier` is the response's X-Modelhost-Tier: a load, the device, a wake."""
    unload_all(client)
    names = ["m0.pt", "m0.pt", "m1.pt", "m2.pt", "m0.pt"]  # m2 sends m0 to sleep; m0 wakes
    since = time.time()  # earlier tests' lines may still trail
    said = [invoke(client, name, ROW).headers["x-modelhost-tier"] for name in names]
    assert {"disk", "device", "host"} <= set(said)
    assert logged_tiers(server, since, len(names)) == list(zip(names, said, strict=True))


def logged_tiers(server: testing.RunningServer, since: float, n: int) -> list[tuple[str, str]]:
    """The models and tiers of invocations that came after `since`, once there are `n` (a
    line is written on a thread of the server's own, so it may trail its response)."""
    deadline = time.monotonic() + 30
    while True:
        lines = [json.loads(x) for x in server.log_text().splitlines() if '"route"' in x]
        new = [r for r in lines if r.get("cache") and r["time"] >= round(since, 3)]
        answered = [(r["model"], r.get("tier", "")) for r in new]
        if len(answered) >= n or time.monotonic() > deadline:
            return answered
        time.sleep(0.05)


def test_a_model_pinned_to_the_cpu_never_moves(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    for _ in range(2):
        response = invoke(client, "pinned", ROW)
        assert response.status_code == 200
    assert response.headers["x-modelhost-tier"] == "host"
    assert not [e for e in server.events("place") if e["model"] == "pinned"]


def test_onnx_stays_on_the_cpu_where_onnxruntime_has_no_cuda_provider(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    """This machine's onnxruntime is the CPU build: the model is host-only, never charged to
    the fake device, however much room it has."""
    unload_all(client)
    before = device(client)
    said = [invoke(client, "iris.onnx", ROW).headers["x-modelhost-tier"] for _ in range(2)]
    assert said == ["disk", "host"]
    assert not [e for e in server.events("place") if e["model"] == "iris.onnx"]
    after = device(client)
    assert (after["models"], after["usedBytes"]) == (0, before["usedBytes"])


def test_a_model_larger_than_the_device_budget_is_507_naming_the_device(
    client: httpx.Client,
) -> None:
    response = invoke(client, "big.pt", ROW)
    assert response.status_code == 507
    assert "cuda:0" in response.json()["message"]
    assert "--device-budget" in response.json()["message"]


def test_metrics_show_each_device(client: httpx.Client) -> None:
    invoke(client, "m1.pt", ROW)
    text = client.get("/metrics").text
    documented = set(
        re.findall(r"modelhost_device_\w+", (REPO / "docs/observability.md").read_text())
    )
    assert documented and {name for name in documented if name not in text} == set()
    for series in (
        'modelhost_device_budget_bytes{device="cuda:0"}',
        'modelhost_device_used_bytes{device="cuda:0"}',
        'modelhost_device_models{device="cuda:0"}',
        'modelhost_device_wakes_total{device="cuda:0"}',
        'modelhost_device_evictions_total{device="cuda:0"}',
    ):
        assert series in text


def test_devices_naming_a_device_the_workers_cannot_use_refuses_to_start(
    store: Path, serve: Servers
) -> None:
    with pytest.raises(RuntimeError, match=r"--devices names cuda:7(.|\n)*auto or none"):
        serve(store, workers=1, devices="cuda:7")


def test_a_device_budget_smaller_than_the_device_is_the_budget(store: Path, serve: Servers) -> None:
    smaller = serve(store, workers=1, fake_devices="2x1GiB+2MiB", device_budget="50%")
    with httpx.Client(base_url=smaller.url, timeout=60) as http:
        devices = http.get("/stats").json()["devices"]
    assert [(d["name"], d["budgetBytes"]) for d in devices] == [
        ("cuda:0", 2**29),
        ("cuda:1", 2**29),
    ]


def test_the_dashboard_shows_each_device(server: testing.RunningServer) -> None:
    from helpers.browser import chromium_page
    from observe_tools import require_tool

    chromium = require_tool("chromium", "chromium")
    with httpx.Client(base_url=server.url, timeout=60) as http:
        assert invoke(http, "m1.pt", ROW).status_code == 200
    args = ["--no-sandbox", "--headless=new"]
    with chromium_page(chromium, args, width=1366) as (page, problems):
        page.goto(server.url + "/")
        page.wait_for_selector("#devices tbody tr", timeout=15_000)
        cells = page.locator("#devices tbody tr td").all_inner_texts()
        assert problems == []
    assert cells[0] == "cuda:0" and cells[2] == "30.0 MiB"


Devices = list[dict[str, int]]


def under_load(
    server: testing.RunningServer, store: Path, name: str, done: Callable[[Devices], bool]
) -> Devices:
    """Invoke `name` from 16 clients until `done` holds of /stats' devices (a copy moves on a
    request after it loaded), every answer checked; the devices then."""
    expected = in_process(store / name)

    def call(_: int) -> tuple[int, object]:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            response = invoke(http, name, ROW)
        return response.status_code, json.loads(response.content)["predictions"][0]

    with httpx.Client(base_url=server.url, timeout=60) as http, ThreadPoolExecutor(16) as pool:
        for _ in range(40):
            answers = list(pool.map(call, range(64)))
            assert all(status == 200 for status, _ in answers)
            assert all(body == pytest.approx(expected) for _, body in answers)
            devices: Devices = http.get("/stats").json()["devices"]
            if done(devices):
                break
    assert all(d["usedBytes"] <= d["budgetBytes"] for d in devices)
    return devices


def told(server: testing.RunningServer) -> list[tuple[str, str, int]]:
    """What its models' events say, for a failure's message."""
    events = [e for e in server.events() if e.get("model")]
    return [(e["kind"], e.get("reason"), e.get("worker")) for e in events]


def two_copies(
    store: Path, serve: Servers, devices: int, **settings: object
) -> testing.RunningServer:
    """Two workers, each holding a copy of a model, over `devices` fake devices."""
    return serve(
        store,
        workers=2,
        workers_per_model=2,  # its copy at once: whether load scales it out is timing's
        threads_per_worker=1,
        memory_budget="3GiB",
        preload_runtimes="torch",
        fake_devices=f"{devices}x{BUDGET}+{CONTEXT}",
        device_budget="100%",
        admission="none",
        **settings,
    )


def test_a_hot_models_copies_go_to_both_devices(store: Path, serve: Servers) -> None:
    two = two_copies(store, serve, devices=2)
    devices = under_load(two, store, "m0.pt", lambda ds: all(d["models"] == 1 for d in ds))
    assert [(d["name"], d["models"]) for d in devices] == [("cuda:0", 1), ("cuda:1", 1)], told(two)
    placed = {(e["detail"]["device"], e["worker"]) for e in two.events("place")}
    assert {device for device, _ in placed} == {"cuda:0", "cuda:1"}
    assert len({worker for _, worker in placed}) == 2


@pytest.fixture(scope="module")
def shared(store: Path, serve: Servers) -> testing.RunningServer:
    """Two workers sharing one device: room for both contexts and two copies of a model."""
    return two_copies(
        store, serve, devices=1, workers_per_device=2, batch_size=32, device_batch_size=2
    )


def test_workers_per_device_puts_two_copies_of_a_hot_model_on_one_device(
    store: Path, shared: testing.RunningServer
) -> None:
    devices = under_load(shared, store, "m1.pt", lambda ds: ds[0]["models"] == 2)
    assert [(d["name"], d["models"]) for d in devices] == [("cuda:0", 2)], told(shared)
    assert devices[0]["contextBytes"] == 2 * CONTEXT


def test_a_model_on_a_device_batches_by_the_device_batch_size(
    store: Path, shared: testing.RunningServer
) -> None:
    """16 clients queue behind one slot: its batches fill to the device's size, never past."""
    for _ in range(10):  # until a batch has formed: the clients may not overlap at first
        under_load(shared, store, "m2.pt", lambda ds: True)
        if largest_batch(shared) >= 2:
            break
    assert largest_batch(shared) == 2


def largest_batch(server: testing.RunningServer) -> float:
    text = httpx.get(server.url + "/metrics", timeout=60).text
    (line,) = [line for line in text.splitlines() if line.startswith("modelhost_batch_size_max ")]
    return float(line.split()[1])


JSON = "content-type: application/json"


def test_fronts_answer_cpu_models_and_relay_device_ones(store: Path, serve: Servers) -> None:
    """With devices, a front still answers hits on models that stay on the CPU (a CPU runtime, or
    pinned there); one on a device waits for it, so the main process answers it."""
    server = one_device(store, serve, f"1x{BUDGET}+{CONTEXT}", fronts=2)
    names = ["iris.onnx", "pinned", "m0.pt"]
    with httpx.Client(base_url=server.url, timeout=60) as http:
        tiers = [invoke(http, name, ROW).headers["x-modelhost-tier"] for name in names * 2]
    assert tiers[3:] == ["host", "host", "device"]
    hits = {
        name: raw_request(f"/models/{name}/invoke", json.dumps(ROW).encode(), JSON)
        for name in names
    }
    for name in ["iris.onnx", "pinned"]:
        answered = hit_with_the_main_process_stopped(server, hits[name])
        assert answered.startswith(b"HTTP/1.1 200 OK"), (name, answered)
    assert hit_with_the_main_process_stopped(server, hits["m0.pt"], tries=1) == b""
