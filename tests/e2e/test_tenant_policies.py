"""The tenants file on real servers: a mistake is refused at start with its line; on a running
server an edit changes a tenant's rate on every protocol, and a bad edit keeps the last good file
with an event."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.serving import Servers

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


def write(path: Path, text: str) -> None:
    """Replace the file as an editor does."""
    staged = path.with_suffix(".new")
    staged.write_text(text)
    os.replace(staged, path)


def wait_for_events(server: testing.RunningServer, kind: str, n: int) -> list[dict[str, Any]]:
    """The server's events of `kind` once there are `n` (the file is polled each second)."""
    for _ in range(300):
        found = server.events(kind)
        if len(found) >= n:
            return found
        time.sleep(0.1)
    return server.events(kind)


class Served:
    def __init__(self, server: testing.RunningServer, tenants_file: Path) -> None:
        self.server, self.tenants_file = server, tenants_file
        self.http = httpx.Client(base_url=server.url, timeout=30)
        self.calls = calls(self.http)


@pytest.fixture(scope="module")
def served(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tenants_file = tmp_path_factory.mktemp("tenants") / "tenants.toml"
    write(tenants_file, "[default]\nweight = 1\n")
    server = serve(store, workers=1, tenant_from="header", tenants_file=tenants_file)
    result = Served(server, tenants_file)
    yield result
    result.http.close()


def test_editing_the_file_changes_a_tenants_rate(served: Served) -> None:
    """No rate, then a rate of one request in a hundred seconds for one tenant a protocol: each
    protocol's second request is 429 with the wait in Retry-After, other tenants are served;
    the rate removed, they are served again."""
    for protocol, call in served.calls.items():
        assert [call(f"t-{protocol}").status_code for _ in range(3)] == [200] * 3
    write(served.tenants_file, LIMITED)
    loaded = wait_for_events(served.server, "tenants_file_loaded", 2)
    assert loaded[-1]["detail"]["tenants"] == 3
    for protocol, call in served.calls.items():
        assert call(f"t-{protocol}").status_code == 200  # the burst: one request
        refused = call(f"t-{protocol}")
        assert refused.status_code == 429, (protocol, refused.text)
        assert 50 <= int(refused.headers["retry-after"]) <= 100, protocol
        assert f"tenant t-{protocol} sent more than its rate of 0.01" in refused.text
        assert call("someone-else").status_code == 200
    write(served.tenants_file, "[default]\nweight = 1\n")
    wait_for_events(served.server, "tenants_file_loaded", 3)
    for protocol, call in served.calls.items():
        assert call(f"t-{protocol}").status_code == 200, protocol


def test_a_bad_edit_keeps_the_last_good_file(served: Served) -> None:
    """A mistake on line 4 is refused with an event naming the line and a warning in the log;
    the limits of the last good file still hold."""
    write(served.tenants_file, LIMITED)
    loaded = len(wait_for_events(served.server, "tenants_file_loaded", 1))
    loaded = len(wait_for_events(served.server, "tenants_file_loaded", loaded + 1))
    call = served.calls["invocations"]
    call("t-invocations")  # the burst, if the last test left it whole
    write(served.tenants_file, LIMITED.replace("weight = 1", "weight = 1\nrates = 5"))
    rejected = wait_for_events(served.server, "tenants_file_rejected", 1)
    assert rejected, served.server.log_text()[-2000:]
    assert "tenants.toml, line 3: unknown key rates" in rejected[-1]["detail"]["error"]
    assert "the tenants file is refused, the last good one stays" in served.server.log_text()
    assert call("t-invocations").status_code == 429
    assert len(served.server.events("tenants_file_loaded")) == loaded


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
