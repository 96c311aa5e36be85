"""A sandboxed worker's scratch folder, the one place its models may write, is bounded: a model
filling it has its worker replaced, and one that keeps doing it is held back, before the disk
the other tenants' downloads and the log share fills."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

pytestmark = pytest.mark.e2e

FILE_MIB = 100

# allocates FILE_MIB of disk a request in its temporary folder, and keeps the files
FILLING_HANDLER = f'''"""Answers, and keeps a file of each request in its temporary folder."""

import os
import tempfile


def handle(data, context):
    if data is None:
        return None
    for _ in data:
        descriptor, _ = tempfile.mkstemp()
        os.posix_fallocate(descriptor, 0, {FILE_MIB} << 20)
        os.close(descriptor)
    return [{{"kept": len(os.listdir(tempfile.gettempdir()))}} for _ in data]
'''


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    (root / "noisy" / "fills").mkdir(parents=True)
    (root / "noisy" / "fills" / "handler.py").write_text(FILLING_HANDLER)
    return root


def test_a_model_filling_its_scratch_folder_is_replaced_then_held_back(
    store: Path, serve: Servers
) -> None:
    """Past the default 1 GiB, about eleven requests' worth, the worker goes with its folder
    (its watch reads the folder every second); at the second time the model is held back."""
    env = os.environ | {"MODELHOST_REFUSE_PICKLE": "true"}
    server = serve(store, workers=1, tenant_from="name:1", env=env)
    answers = []
    with httpx.Client(base_url=server.url, timeout=60) as client:
        while len(answers) < 80 and (not answers or answers[-1].status_code in (200, 503)):
            answers.append(client.post("/models/noisy/fills/invoke", content=b"x"))
            time.sleep(0.2)  # a model writing steadily, not faster than the watch reads
    assert [answer.status_code for answer in answers[:8]] == [200] * 8, answers
    refused = answers[-1]
    assert refused.status_code == 500 and "held back" in refused.json()["message"], refused.text
    full = [e for e in server.events("worker_exit") if e["reason"] == "scratch_full"]
    assert len(full) == 2, full
    assert all(e["detail"]["scratch_bytes"] > 1 << 30 for e in full), full
    held = [e["model"] for e in server.events("failure") if e.get("reason") == "held_back"]
    assert held == ["noisy/fills"]
