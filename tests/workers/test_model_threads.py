"""A model's manifest may set its runtime's threads: read by the frontend, sent with the load,
given to the handler in place of the worker's count."""

from __future__ import annotations

import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from modelhost import testing
from modelhost.cache.entries import Artifact
from modelhost.config import THREAD_VARIABLES
from modelhost.errors import ModelLoadError
from modelhost.host.manifests import Manifests
from modelhost.manifest import parse_manifest
from modelhost.records.events import EventLog
from modelhost.resources import usable_cores
from modelhost.workers.handlers.torch import intra_op_threads
from modelhost.workers.messages import Load
from modelhost.workers.template import limit_threads
from modelhost.workers.worker import Worker


def test_the_manifest_takes_a_whole_number_of_threads() -> None:
    assert parse_manifest({"threads": 2}).threads == 2
    with pytest.raises(ModelLoadError, match="threads must be a whole number of at least 1"):
        parse_manifest({"threads": 0})


def test_the_load_request_carries_the_manifests_threads(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    testing.iris_logreg(folder / "model.joblib")
    (folder / "modelhost.toml").write_text("threads = 3\n")
    manifests = Manifests(EventLog(), frozenset())
    artifact = Artifact("model", folder, 1)
    manifests.read("model", artifact)
    assert manifests.load_request("model", artifact).threads == 3
    (folder / "modelhost.toml").unlink()
    manifests.read("model", artifact)
    assert manifests.load_request("model", artifact).threads == 0  # the worker's own


def test_torch_model_gets_its_threads(tmp_path: Path, torch_installed: None) -> None:
    """A torch model gets the threads its load asks for."""
    path = testing.torch_iris(tmp_path / "model.pt")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = Worker(ours, worker_id=1, threads=1)
        worker.load(Load(model="own", path=str(path), threads=2))
        worker.load(Load(model="default", path=str(path)))
        threads = [getattr(worker.models[name], "threads", None) for name in ("own", "default")]
        for name in list(worker.models):
            worker.models.pop(name).close()
    assert threads == [min(2, usable_cores()), 1]


class FakeTorch:
    """torch's thread count, kept per calling thread as torch keeps it; counts the calls that
    run at once on more than one thread."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.busy_threads = self.most_busy = 0

    def get_num_threads(self) -> int:
        return getattr(self._local, "threads", 2)

    def set_num_threads(self, threads: int) -> None:
        self._local.threads = threads

    def run(self, threads: int) -> None:
        with intra_op_threads(self, threads):
            with self._lock:
                self.busy_threads += self.get_num_threads()
                self.most_busy = max(self.most_busy, self.busy_threads)
            time.sleep(0.02)
            with self._lock:
                self.busy_threads -= self.get_num_threads()


@pytest.mark.parametrize(("threads", "most"), [(2, 2), (1, 4)])
def test_calls_at_once_stay_within_the_workers_threads(threads: int, most: int) -> None:
    """Four calls at once on a worker of two cores: a model on two intra-op threads runs one
    call at a time (2 threads busy, not 8); on one thread, all four run (4 threads)."""
    torch = FakeTorch()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: torch.run(threads), range(8)))
    assert torch.most_busy == most
    assert torch.get_num_threads() == 2  # each caller got its own count back


def test_a_models_threads_stop_at_the_usable_cores(tmp_path: Path) -> None:
    """A manifest's count past the cores would start that many runtime threads beside every
    other model on the worker: the load gets the usable cores instead."""
    path = testing.lightgbm_iris(tmp_path / "model.txt")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = Worker(ours, worker_id=1, threads=1)
        worker.load(Load(model="own", path=str(path), threads=1_000_000))
        threads = getattr(worker.models["own"], "_threads", None)
        worker.models.pop("own").close()
    assert threads == usable_cores()


def test_the_workers_threads_past_the_cores_give_the_runtimes_the_cores(tmp_path: Path) -> None:
    """`--threads-per-worker 1000000` started LightGBM with a million threads, which crashed
    the worker at every load: its runtimes get the usable cores, its batches the count."""
    path = testing.lightgbm_iris(tmp_path / "model.txt")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = Worker(ours, worker_id=1, threads=1_000_000)
        worker.load(Load(model="default", path=str(path)))
        threads = getattr(worker.models["default"], "_threads", None)
        worker.models.pop("default").close()
    assert threads == usable_cores()


def test_the_thread_variables_stop_at_the_usable_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in THREAD_VARIABLES:  # empty counts as unset, and monkeypatch restores it
        monkeypatch.setenv(variable, "")
    limit_threads(1_000_000)
    assert {os.environ[variable] for variable in THREAD_VARIABLES} == {str(usable_cores())}
