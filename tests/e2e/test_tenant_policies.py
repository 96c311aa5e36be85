"""The tenants file on real servers: a mistake is refused at start with its line; on a running
server an edit changes a tenant's rate on every protocol, and a bad edit keeps the last good file
with an event; a tenant at its cap waits while others run."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from helpers.handlers import gated_handler_folder
from helpers.reloads import reloaded, write
from helpers.serving import Servers
from tritonclient.grpc import service_pb2, service_pb2_grpc

from modelhost import testing

pytestmark = pytest.mark.e2e

MODEL = "tenants/t004.joblib"
ROWS = testing.iris_rows(1)
OIP_BODY = {"inputs": [{"name": "input-0", "datatype": "FP64", "shape": [1, 4], "data": ROWS[0]}]}
TENANT_HEADER = "x-modelhost-tenant"
LIMITED = """\
[default]
weight = 1

# one request in a hundred seconds: the second is refused however slow the machine
[tenants."t-invocations"]
rate = 0.01

[tenants."t-predictions"]
rate = 0.01

[tenants."t-oip"]
rate = 0.01

[tenants."t-grpc"]
rate = 0.01
"""


def calls(http: httpx.Client) -> dict[str, Callable[[str], httpx.Response]]:
    """SageMaker's, TorchServe's and the Open Inference Protocol's invocation, by tenant."""
    target = {"x-amzn-sagemaker-target-model": MODEL}
    return {
        "invocations": lambda tenant: http.post(
            "/invocations", json=ROWS, headers={**target, TENANT_HEADER: tenant}
        ),
        "predictions": lambda tenant: http.post(
            f"/predictions/{MODEL}", json=ROWS, headers={TENANT_HEADER: tenant}
        ),
        "oip": lambda tenant: http.post(
            f"/v2/models/{MODEL}/infer", json=OIP_BODY, headers={TENANT_HEADER: tenant}
        ),
    }


RELOADS = ("tenants_file_loaded", "tenants_file_rejected")


class Served:
    def __init__(self, server: testing.RunningServer, tenants_file: Path, grpc_port: int) -> None:
        self.server, self.tenants_file = server, tenants_file
        self.http = httpx.Client(base_url=server.url, timeout=30)
        self.calls = calls(self.http)
        self.grpc = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")

    def reload(self, text: str) -> dict[str, Any]:
        return reloaded(self.server, self.tenants_file, text, RELOADS)

    def infer_grpc(self, tenant: str) -> Any:
        """OIP's ModelInfer over gRPC for `tenant`."""
        request = service_pb2.ModelInferRequest(model_name=MODEL)
        tensor = request.inputs.add(name="input-0", datatype="FP64", shape=[1, 4])
        tensor.contents.fp64_contents.extend(ROWS[0])
        stub = service_pb2_grpc.GRPCInferenceServiceStub(self.grpc)
        return stub.ModelInfer.with_call(request, metadata=((TENANT_HEADER, tenant),))


@pytest.fixture(scope="module")
def served(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tenants_file = tmp_path_factory.mktemp("tenants") / "tenants.toml"
    write(tenants_file, "[default]\nweight = 1\n")
    grpc_port = testing.free_port()
    server = serve(
        store, workers=1, tenant_from="header", tenants_file=tenants_file, grpc_port=grpc_port
    )
    result = Served(server, tenants_file, grpc_port)
    yield result
    result.http.close()
    result.grpc.close()


def test_editing_the_file_changes_a_tenants_rate(served: Served) -> None:
    """No rate, then a rate of one request in a hundred seconds for one tenant a protocol: each
    protocol's second request is 429 with the wait in Retry-After, other tenants are served;
    the rate removed, they are served again."""
    for protocol, call in served.calls.items():
        assert [call(f"t-{protocol}").status_code for _ in range(3)] == [200] * 3
    loaded = served.reload(LIMITED)
    assert (loaded["kind"], loaded["detail"]["tenants"]) == ("tenants_file_loaded", 4)
    for protocol, call in served.calls.items():
        assert call(f"t-{protocol}").status_code == 200  # the burst: one request
        refused = call(f"t-{protocol}")
        assert refused.status_code == 429, (protocol, refused.text)
        assert 50 <= int(refused.headers["retry-after"]) <= 100, protocol
        assert f"tenant t-{protocol} sent more than its rate of 0.01" in refused.text
        assert call("someone-else").status_code == 200
    assert served.reload("[default]\nweight = 1\n")["kind"] == "tenants_file_loaded"
    for protocol, call in served.calls.items():
        assert call(f"t-{protocol}").status_code == 200, protocol


def test_a_grpc_call_past_the_rate_is_told_when_to_retry(served: Served) -> None:
    """Over gRPC the refusal is RESOURCE_EXHAUSTED, the wait in a retry-after trailer."""
    assert served.reload(LIMITED)["kind"] == "tenants_file_loaded"
    served.infer_grpc("t-grpc")
    with pytest.raises(grpc.RpcError) as refused:
        served.infer_grpc("t-grpc")
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "tenant t-grpc sent more than its rate" in str(refused.value.details())
    trailers = dict(refused.value.trailing_metadata() or ())
    assert 50 <= int(trailers["retry-after"]) <= 100


def test_a_bad_edit_keeps_the_last_good_file(served: Served) -> None:
    """A mistake on line 4 is refused with an event naming the line and a warning in the log;
    the limits of the last good file still hold."""
    served.reload("[default]\nweight = 1\n")
    assert served.reload(LIMITED)["kind"] == "tenants_file_loaded"
    call = served.calls["invocations"]
    assert call("t-invocations").status_code == 200  # the burst
    rejected = served.reload(LIMITED.replace("weight = 1", "weight = 1\nrates = 5"))
    assert rejected["kind"] == "tenants_file_rejected"
    assert "tenants.toml, line 3: unknown key rates" in rejected["detail"]["error"]
    assert "the tenants file is refused, the last good one stays" in served.server.log_text()
    assert call("t-invocations").status_code == 429


def test_a_bad_tenants_file_is_refused_at_start(store: Path, tmp_path: Path) -> None:
    tenants_file = tmp_path / "tenants.toml"
    tenants_file.write_text('[tenants."a"]\nmemory_max = "1GiB"\nmemory_min = "2GiB"\n')
    command = [
        *(sys.executable, "-m", "modelhost", "serve"),
        *testing.serve_args(store, tmp_path / "cache", port=testing.free_port()),
        *("--tenant-from", "header", "--tenants-file", str(tenants_file)),
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2, finished.stderr
    assert f"{tenants_file}, line 3: memory_min (2.0 GiB) is above memory_max" in finished.stderr
    assert "lower memory_min or raise memory_max" in finished.stderr


GATED = "gated"
CAPPED = '[tenants."capped"]\nmax_concurrency = 1\n'


def invoke_gated(client: httpx.Client, tenant: str, body: str) -> httpx.Response:
    headers = {"content-type": "application/json", TENANT_HEADER: tenant}
    return client.post(f"/models/{GATED}/invoke", content=body, headers=headers)


def in_flight(client: httpx.Client) -> int:
    response = client.get(f"/models/{GATED}")
    return int(response.json()["inFlight"]) if response.status_code == 200 else 0


def wait_until(check: Callable[[], bool]) -> None:
    for _ in range(1500):
        if check():
            return
        time.sleep(0.02)
    raise AssertionError("the server never reached the state the test waits for")


def gated_server(
    serve: Servers, folder: Path, tenants: str, **settings: object
) -> tuple[testing.RunningServer, Path, Path]:
    """A server of one worker thread and 8 slots, the gated model and tenants by header under
    `tenants` (a tenants file); the server, its gate and its tenants file."""
    gate, tenants_file = folder / "gate", folder / "tenants.toml"
    gated_handler_folder(folder / "store" / GATED, gate)
    write(tenants_file, tenants)
    server = serve(
        folder / "store",
        **{"workers": 1, "threads_per_worker": 1, "max_concurrency": 8},
        **{"tenant_from": "header", "tenants_file": tenants_file, **settings},
    )
    return server, gate, tenants_file


def test_a_tenant_at_its_cap_waits_while_slots_are_free(serve: Servers, tmp_path: Path) -> None:
    """capped may run one request at once in a server of 8 slots: with one held at the gate, its
    next waits in its queue (of one), so the one after that is 429 at once; another tenant's
    request still runs beside the held one."""
    server, gate, _ = gated_server(serve, tmp_path, CAPPED, job_queue_size=1)
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        concurrent.futures.ThreadPoolExecutor(4) as pool,
    ):
        held = pool.submit(invoke_gated, client, "capped", "1")
        wait_until(lambda: in_flight(client) == 1)
        behind = [pool.submit(invoke_gated, client, "capped", str(n)) for n in (2, 3)]
        wait_until(lambda: any(future.done() for future in behind))
        refused = next(future.result() for future in behind if future.done())
        assert refused.status_code == 429, refused.text
        assert refused.json()["type"] == "TenantQueueFull"
        beside = pool.submit(invoke_gated, client, "other", "4")
        wait_until(lambda: in_flight(client) == 2)  # the other tenant's, not capped's next
        gate.touch()
        answered = [future.result().status_code for future in (held, *behind, beside)]
    assert sorted(answered) == [200, 200, 200, 429]


def test_a_capped_tenant_leaves_room_in_a_shared_models_queue(
    serve: Servers, tmp_path: Path
) -> None:
    """tenants.md's way to keep one tenant from filling a model's queue of two: every tenant
    capped at one request, the flood of one waits in its own queue (then 429), and another
    tenant's request still finds room in the model's."""
    every_one = "[default]\nmax_concurrency = 1\n"
    server, gate, _ = gated_server(serve, tmp_path, every_one, job_queue_size=2, batch_size=1)
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        concurrent.futures.ThreadPoolExecutor(8) as pool,
    ):
        held = pool.submit(invoke_gated, client, "noisy", "1")
        wait_until(lambda: in_flight(client) == 1)
        flood = [pool.submit(invoke_gated, client, "noisy", str(n)) for n in (2, 3, 4)]
        wait_until(lambda: any(future.done() for future in flood))
        quiet = pool.submit(invoke_gated, client, "quiet", "5")
        wait_until(lambda: in_flight(client) == 2)
        gate.touch()
        answered = [future.result() for future in (held, *flood, quiet)]
    refused = [answer.json()["type"] for answer in answered if answer.status_code != 200]
    assert refused == ["TenantQueueFull"] and answered[-1].status_code == 200


def test_a_raised_cap_lets_the_tenants_waiting_requests_run(serve: Servers, tmp_path: Path) -> None:
    """capped holds one request at the gate and two wait for its cap of one; raised to three by
    an edit of the file, the two run at once, not when the held one ends."""
    server, gate, tenants_file = gated_server(serve, tmp_path, CAPPED)
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        concurrent.futures.ThreadPoolExecutor(4) as pool,
    ):
        held = pool.submit(invoke_gated, client, "capped", "1")
        wait_until(lambda: in_flight(client) == 1)
        behind = [pool.submit(invoke_gated, client, "capped", str(n)) for n in (2, 3)]
        time.sleep(0.5)
        assert in_flight(client) == 1  # they wait for the cap
        write(tenants_file, CAPPED.replace("1", "3"))
        wait_until(lambda: in_flight(client) == 3)
        gate.touch()
        answered = [future.result().status_code for future in (held, *behind)]
    assert answered == [200, 200, 200]


def test_a_request_past_its_deadline_holds_its_slot_while_its_batch_runs(
    serve: Servers, tmp_path: Path
) -> None:
    """capped (a cap of one, a queue of one) has a request running at the gate past the response
    timeout: it is answered 504, but its batch still runs in the worker, so the model still
    counts it in flight and the tenant is still at its cap: its next request waits, and the one
    after that is 429 at once."""
    server, gate, _ = gated_server(
        serve,
        tmp_path,
        CAPPED,
        job_queue_size=1,
        default_response_timeout_s=3,
        load_models=GATED,  # the timeout below is the batch's, not the load's
    )
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        first = invoke_gated(client, "capped", "1")
        assert first.status_code == 504 and "running in a worker" in first.text, first.text
        assert in_flight(client) == 1
        second = pool.submit(invoke_gated, client, "capped", "2")
        time.sleep(0.3)
        third = invoke_gated(client, "capped", "3")
        gate.touch()
        second.result()
    assert third.status_code == 429 and third.json()["type"] == "TenantQueueFull", third.text
