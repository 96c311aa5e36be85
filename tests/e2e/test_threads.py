"""Threads per worker on a real server: workers x torch's intra-op threads stay within the cores
the server may use, and the workers keep the Hugging Face libraries offline."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

WORKERS = 2
# a handler that tells what torch and the environment give it in the worker that serves it
REPORTER = """
import os

import torch


def handle(data, context):
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE")
    seen = {"torch": torch.get_num_threads(), **{name: os.environ.get(name) for name in names}}
    return [seen for _ in data]
"""
# run the server on the first `cores` of this machine's cores, as a container's cpuset would
PINNED = "import os, sys; os.sched_setaffinity(0, {cores}); os.execv(sys.argv[1], sys.argv[1:])"


@pytest.fixture(scope="module")
def cores() -> set[int]:
    """At most four of the cores this process may use; two at least, so that threads per
    worker differ from what torch would take on its own (every core)."""
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        pytest.skip("one core: every worker gets one thread, as torch alone would take")
    return set(usable[:4])


@pytest.fixture(scope="module")
def http(
    cores: set[int], tmp_path_factory: pytest.TempPathFactory, torch_installed: None
) -> Iterator[httpx.Client]:
    store = tmp_path_factory.mktemp("threads-store")
    (store / "report").mkdir()
    (store / "report" / "handler.py").write_text(REPORTER)
    work = tmp_path_factory.mktemp("threads-server")
    args = testing.serve_args(store, work / "cache", workers=WORKERS, memory_budget="2GiB")
    prefix = [sys.executable, "-c", PINNED.format(cores=sorted(cores))]
    with (
        testing.RunningServer(args, work, prefix=prefix) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        yield client


def report(http: httpx.Client) -> Any:
    response = http.post("/models/report/invoke", content=json.dumps([1]))
    assert response.status_code == 200, response.text
    return response.json()


def test_each_worker_gets_its_core_share(http: httpx.Client, cores: set[int]) -> None:
    """Each worker runs torch on its share of the cores."""
    share = max(1, len(cores) // WORKERS)
    seen = report(http)
    assert seen["torch"] == share
    assert (seen["OMP_NUM_THREADS"], seen["MKL_NUM_THREADS"]) == (str(share), str(share))


def test_hugging_face_runs_offline_one_thread(
    http: httpx.Client,
) -> None:
    """Workers keep the Hugging Face libraries offline and on one thread."""
    seen = report(http)
    assert (seen["HF_HUB_OFFLINE"], seen["TOKENIZERS_PARALLELISM"]) == ("1", "false")
