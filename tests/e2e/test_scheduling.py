"""Queues, limits, deadlines, batching and scale-out on a real server with real workers.

A gated model (an MMS handler that answers only once its gate file exists) holds its worker for
as long as a test needs, so queue depths and batches are set by the test, not by timing.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import joblib
import pytest
from helpers.handlers import gated_handler_folder
from helpers.serving import Servers

from modelhost import testing
from modelhost.rpc.messages import message
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

GATED = "gated"
SLOW_LOAD = "slow-load"  # its load waits at the gate
TS_INFERENCE = "org.pytorch.serve.grpc.inference."
GAVE_WAY = "gave its place to another tenant's request"
# one worker thread, the model on it alone, tenants from the header
ONE_THREAD_TENANTS = dict(
    workers=1, threads_per_worker=1, max_workers_per_model=1, tenant_from="header"
)


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    return tmp_path / "gate"


@pytest.fixture
def store(tmp_path: Path, gate: Path) -> Path:
    root = tmp_path / "store"
    gated_handler_folder(root / GATED, gate)
    gated_handler_folder(root / SLOW_LOAD, gate, gates_load=True)
    testing.iris_logreg(root / "iris.joblib")
    return root


@pytest.fixture
def client_of(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., httpx.Client]]:
    """A client of a server started with the given settings; both close when the test ends."""
    with Servers(tmp_path_factory) as servers:

        def start(**settings: object) -> httpx.Client:
            server = servers(store, **settings)
            return servers.enter_context(httpx.Client(base_url=server.url, timeout=60))

        yield start


def invoke(
    client: httpx.Client, name: str, body: str = "[[5.1, 3.5, 1.4, 0.2]]", tenant: str = ""
) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if tenant:
        headers["x-modelhost-tenant"] = tenant
    return client.post(f"/models/{name}/invoke", content=body, headers=headers)


def describe(client: httpx.Client, name: str) -> dict[str, Any]:
    response = client.get(f"/models/{name}")
    return response.json() if response.status_code == 200 else {}


def wait_until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the server never reached the state the test waits for"
        time.sleep(0.02)


def running_and_queued(client: httpx.Client, running: int, queued: int) -> Callable[[], bool]:
    """The gated model has `running` requests in its workers and `queued` in its queue."""

    def check() -> bool:
        model = describe(client, GATED)
        return bool(model) and (model["inFlight"] - model["queued"], model["queued"]) == (
            running,
            queued,
        )

    return check


def held_at_the_gate(
    pool: concurrent.futures.Executor, client: httpx.Client, body: str
) -> concurrent.futures.Future[httpx.Response]:
    """A request to the gated model, returned once it runs in a worker with none queued behind."""
    held = pool.submit(invoke, client, GATED, body)
    wait_until(running_and_queued(client, 1, 0))
    return held


def queued_behind(
    pool: concurrent.futures.Executor, client: httpx.Client, bodies: list[str]
) -> list[concurrent.futures.Future[httpx.Response]]:
    """Requests to the gated model, returned once all of them wait in its queue behind one."""
    queued = [pool.submit(invoke, client, GATED, body) for body in bodies]
    wait_until(running_and_queued(client, 1, len(queued)))
    return queued


def metric(client: httpx.Client, line_start: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_full_queue_answers_429(client_of: Callable[..., httpx.Client], gate: Path) -> None:
    """A full queue answers 429 with its numbers and recovers."""
    client = client_of(workers=1, threads_per_worker=1, job_queue_size=3, max_workers_per_model=1)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        first = held_at_the_gate(pool, client, "0")
        waiting = queued_behind(pool, client, ["1", "2", "3"])
        refused = invoke(client, GATED, "4")
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
        error = refused.json()
        assert error["type"] == "QueueFull"
        assert (
            "model gated has 3 requests queued, the limit (job_queue_size) is 3" in error["message"]
        )
        gate.touch()
        answers = [future.result() for future in [first, *waiting]]
    assert [a.json()["body"] for a in answers] == ["0", "1", "2", "3"]
    assert invoke(client, GATED, "5").status_code == 200
    assert len(describe(client, GATED)["workers"]) == 1  # max_workers_per_model held it to one
    assert metric(client, 'modelhost_rejections_total{reason="QueueFull"}') == 1


def test_max_concurrency_caps_requests_in_flight_across_models(
    client_of: Callable[..., httpx.Client], gate: Path
) -> None:
    client = client_of(workers=1, threads_per_worker=1, max_concurrency=2)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        held = [pool.submit(invoke, client, GATED, str(i)) for i in (1, 2)]
        wait_until(lambda: describe(client, GATED).get("inFlight") == 2)
        refused = invoke(client, "iris.joblib")  # another model: the cap is the server's
        assert refused.status_code == 429, refused.text
        assert refused.json()["type"] == "ConcurrencyLimit"
        assert "2 requests in flight, the limit (max_concurrency) is 2" in refused.json()["message"]
        gate.touch()
        assert [future.result().status_code for future in held] == [200, 200]
    assert invoke(client, "iris.joblib").status_code == 200
    assert metric(client, 'modelhost_rejections_total{reason="ConcurrencyLimit"}') == 1


def test_requests_waiting_for_a_load_leave_the_server_cap_to_loaded_models(
    client_of: Callable[..., httpx.Client], gate: Path
) -> None:
    """A flood on a cold model waits against that model's queue, not max_concurrency: a loaded
    model still answers, and past job_queue_size the flood's own requests get 429."""
    client = client_of(workers=1, max_concurrency=4, job_queue_size=3)
    assert invoke(client, "iris.joblib").status_code == 200
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        flood = [pool.submit(invoke, client, SLOW_LOAD, str(i)) for i in range(5)]
        wait_until(lambda: sum(future.done() for future in flood) >= 2)
        assert invoke(client, "iris.joblib").status_code == 200
        refused = [future.result() for future in flood if future.done()]
        assert [r.status_code for r in refused] == [429, 429]
        assert {r.json()["type"] for r in refused} == {"QueueFull"}
        assert "3 requests wait for its load" in refused[0].json()["message"]
        assert "(job_queue_size) is 3" in refused[0].json()["message"]
        gate.touch()
        assert sorted(future.result().status_code for future in flood) == [200] * 3 + [429] * 2


def test_a_noisy_tenant_past_its_queue_is_refused_alone(
    client_of: Callable[..., httpx.Client], gate: Path
) -> None:
    """With tenants on, the server's slots are shared: a noisy tenant past job_queue_size waiting
    gets 429 naming it, while a quiet tenant's request waits its turn and is answered."""
    client = client_of(**ONE_THREAD_TENANTS, max_concurrency=2, job_queue_size=2)
    assert invoke(client, "iris.joblib", tenant="quiet").status_code == 200
    with concurrent.futures.ThreadPoolExecutor(7) as pool:
        held = [pool.submit(invoke, client, GATED, str(i), "noisy") for i in range(2)]
        wait_until(lambda: describe(client, GATED).get("inFlight") == 2)  # both slots taken
        flood = [pool.submit(invoke, client, GATED, str(i), "noisy") for i in range(4)]
        wait_until(lambda: sum(future.done() for future in flood) == 2)
        refused = [future.result() for future in flood if future.done()]
        assert [r.json()["type"] for r in refused] == ["TenantQueueFull"] * 2
        assert "tenant noisy" in refused[0].json()["message"]
        quiet = pool.submit(invoke, client, "iris.joblib", tenant="quiet")
        gate.touch()
        assert quiet.result().status_code == 200
        answered = [future.result().status_code for future in held + flood]
    assert sorted(answered) == [200] * 4 + [429] * 2


def test_a_tenant_holding_a_shared_models_queue_gives_way_to_another(
    client_of: Callable[..., httpx.Client], gate: Path
) -> None:
    """A noisy tenant has filled a model's queue; a quiet tenant's request to that model takes
    the place of the noisy one's newest, which gets 429 naming it."""
    client = client_of(**ONE_THREAD_TENANTS, max_concurrency=16, job_queue_size=3)
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        noisy = [pool.submit(invoke, client, GATED, "0", "noisy")]
        wait_until(running_and_queued(client, 1, 0))  # loaded: none waits for the load
        noisy += [pool.submit(invoke, client, GATED, str(i), "noisy") for i in range(1, 5)]
        wait_until(lambda: describe(client, GATED).get("queued") == 3)
        quiet = pool.submit(invoke, client, GATED, "quiet", "quiet")
        wait_until(lambda: quiet.done() or any(GAVE_WAY in text for text in done_texts(noisy)))
        assert not quiet.done(), quiet.result().text
        gate.touch()
        assert quiet.result().status_code == 200
        answers = [future.result() for future in noisy]
    (gave_way,) = [answer for answer in answers if GAVE_WAY in answer.text]
    assert gave_way.status_code == 429 and gave_way.json()["type"] == "QueueFull"
    assert "tenant noisy holds 3 of them" in gave_way.json()["message"]
    assert {answer.status_code for answer in answers} == {200, 429}


def test_a_tenant_holding_a_shared_models_load_gives_way_to_another(
    client_of: Callable[..., httpx.Client], gate: Path
) -> None:
    """A noisy tenant's requests fill the waits for a cold model's load; a quiet tenant's takes
    the place of the noisy one's newest, and the load serves it."""
    client = client_of(workers=1, job_queue_size=3, tenant_from="header")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        noisy = [pool.submit(invoke, client, SLOW_LOAD, str(i), "noisy") for i in range(3)]
        wait_until(lambda: metric(client, "modelhost_http_requests_in_flight") == 4)  # and this
        quiet = pool.submit(invoke, client, SLOW_LOAD, "quiet", "quiet")
        wait_until(lambda: quiet.done() or any(future.done() for future in noisy))
        assert not quiet.done(), quiet.result().text
        gate.touch()
        assert quiet.result().status_code == 200
        answers = [future.result() for future in noisy]
    assert sorted(answer.status_code for answer in answers) == [200, 200, 429]
    assert "tenant noisy holds" in next(a.text for a in answers if a.status_code == 429)


def done_texts(futures: list[concurrent.futures.Future[httpx.Response]]) -> list[str]:
    return [future.result().text for future in futures if future.done()]


def test_request_past_deadline_gets_504(client_of: Callable[..., httpx.Client], gate: Path) -> None:
    """A request past its deadline gets 504 running or queued."""
    client = client_of(
        workers=1, threads_per_worker=1, default_response_timeout_s=1, max_workers_per_model=1
    )
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        running = held_at_the_gate(pool, client, "0")
        queued = pool.submit(invoke, client, GATED, "1")
        late = [running.result(), queued.result()]
    assert [r.status_code for r in late] == [504, 504]
    assert [r.json()["type"] for r in late] == ["DeadlineExceeded"] * 2
    assert "still running in a worker" in late[0].json()["message"]
    assert "still in the queue" in late[1].json()["message"]
    assert "default_response_timeout" in late[0].json()["message"]
    gate.touch()
    assert invoke(client, GATED, "2").json()["body"] == "2"


def test_custom_handlers_receive_the_waiting_requests_as_one_list(
    client_of: Callable[..., httpx.Client], gate: Path
) -> None:
    client = client_of(workers=1, threads_per_worker=1, batch_size=4, max_workers_per_model=1)
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        first = held_at_the_gate(pool, client, "first")
        batch = queued_behind(pool, client, [f"b{i}" for i in range(4)])
        gate.touch()
        assert first.result().json() == {"batch": 1, "body": "first"}
        answers = [future.result().json() for future in batch]
    assert answers == [{"batch": 4, "body": f"b{i}"} for i in range(4)]  # each its own answer


def test_grpc_calls_wait_in_the_queue_rest_requests_wait_in(
    client_of: Callable[..., httpx.Client], gate: Path
) -> None:
    """Two gRPC calls and two REST requests queued behind one: the next batch holds all four."""
    grpc_port = testing.free_port()
    client = client_of(
        workers=1,
        threads_per_worker=1,
        batch_size=4,
        max_workers_per_model=1,
        grpc_port=grpc_port,
    )
    with (
        concurrent.futures.ThreadPoolExecutor(5) as pool,
        grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel,
    ):
        inference: Any = Stub(channel, TS_INFERENCE + "InferenceAPIsService")
        first = held_at_the_gate(pool, client, "first")
        calls = [pool.submit(predict, inference, f"g{i}") for i in range(2)]
        requests = [pool.submit(invoke, client, GATED, f"r{i}") for i in range(2)]
        wait_until(running_and_queued(client, 1, 4))
        gate.touch()
        assert first.result().json() == {"batch": 1, "body": "first"}
        answers = [future.result().json() for future in requests]
        answers += [json.loads(future.result()) for future in calls]
    assert answers == [{"batch": 4, "body": body} for body in ("r0", "r1", "g0", "g1")]


def predict(inference: Any, body: str) -> bytes:
    """TorchServe's gRPC Predictions call to the gated model; its prediction."""
    request = message(TS_INFERENCE + "PredictionsRequest")(
        model_name=GATED, input={"data": body.encode()}
    )
    return bytes(inference.Predictions(request, timeout=60).prediction)


def test_sklearn_batch_isolates_bad_request(
    client_of: Callable[..., httpx.Client], store: Path
) -> None:
    """Scikit-learn predicts a batch as one matrix and isolates a bad request."""
    client = client_of(workers=1, threads_per_worker=1, batch_size=16, max_batch_delay_ms=300)
    assert invoke(client, "iris.joblib").status_code == 200  # loaded: the batch is all hits
    rows = testing.iris_rows(8)
    model = joblib.load(store / "iris.joblib")
    bodies = [f"[{row}]" for row in rows] + ["[[1.0, 2.0, 3.0]]"]  # the last is one value short
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda body: invoke(client, "iris.joblib", body), bodies))
    assert [a.status_code for a in answers] == [200] * 8 + [400]
    assert [a.json()["predictions"][0] for a in answers[:8]] == model.predict(rows).tolist()
    assert "expects 4 features per row, got 3" in answers[8].json()["message"]
    batches = metric(client, "modelhost_batches_total")
    assert metric(client, "modelhost_batched_requests_total") == 10
    assert batches < 10  # some requests shared a batch
    assert metric(client, "modelhost_batch_size_max") > 1


def test_hot_model_scales_out_and_in(client_of: Callable[..., httpx.Client], gate: Path) -> None:
    """A hot model scales out to another worker and back in when idle."""
    client = client_of(workers=2, scale_in_idle_s=1)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = held_at_the_gate(pool, client, "0")
        second = pool.submit(invoke, client, GATED, "1")  # waits: the model takes a second worker
        wait_until(running_and_queued(client, 2, 0))
        assert len(describe(client, GATED)["workers"]) == 2
        gate.touch()
        assert [first.result().status_code, second.result().status_code] == [200, 200]
    # the copy leaves the model's workers before its unload returns and the event is written
    wait_until(lambda: ("unload", "scale_in") in events_of(describe(client, GATED)))
    assert len(describe(client, GATED)["workers"]) == 1
    assert ("load", "scale_out") in events_of(describe(client, GATED))
    assert invoke(client, GATED, "2").status_code == 200  # the remaining copy serves


def events_of(described: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["kind"], e["reason"]) for e in described["events"]]
