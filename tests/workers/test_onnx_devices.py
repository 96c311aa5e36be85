"""ONNX models on a device: the CUDA execution provider only where onnxruntime has it, a sleep
that drops the device's session and keeps the CPU's, a wake that makes it again."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelhost import testing
from modelhost.workers.device_moves import worker_devices
from modelhost.workers.handlers.onnx import OnnxHandler, providers_for
from modelhost.workers.messages import Infer, Item, Load, ToDevice, ToHost
from modelhost.workers.worker import Worker

ort = pytest.importorskip("onnxruntime", reason="pip install 'modelhost[onnx]'")

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
ROWS = testing.iris_rows(3)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return testing.onnx_iris(tmp_path_factory.mktemp("onnx") / "model.onnx")


def test_a_cuda_device_gets_the_cuda_provider_then_the_cpus() -> None:
    (cuda, options), cpu = providers_for("cuda:1", [CUDA, CPU])
    assert (cuda, options["device_id"], cpu) == (CUDA, 1, CPU)


def test_without_the_cuda_provider_or_on_the_cpu_only_the_cpus() -> None:
    assert providers_for("cuda:0", [CPU]) == [CPU]
    assert providers_for("cuda:0", ["AzureExecutionProvider", CPU]) == [CPU]
    assert providers_for("cpu", [CUDA, CPU]) == [CPU]


class Sessions:
    """onnxruntime as a build with the CUDA provider would be: the sessions asked for, each
    made on the CPU (this machine's build has no CUDA)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked: list[list[Any]] = []
        self.real = ort.InferenceSession
        monkeypatch.setattr(ort, "get_available_providers", lambda: [CUDA, CPU])
        monkeypatch.setattr(ort, "InferenceSession", self.session)

    def session(self, path: str, options: Any, providers: list[Any]) -> Any:
        self.asked.append(providers)
        return self.real(path, options, providers=[CPU])

    def cuda_sessions(self) -> int:
        return sum(1 for providers in self.asked if providers[0][0] == CUDA)


def test_a_handler_is_device_capable_only_where_onnxruntime_has_cuda(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not OnnxHandler(model).device_capable  # this build: CPU only
    Sessions(monkeypatch)
    assert OnnxHandler(model).device_capable


def test_sleep_drops_the_device_session_and_a_wake_makes_a_new_one(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = Sessions(monkeypatch)
    handler = OnnxHandler(model)
    rows = np.array(ROWS)
    on_cpu = handler.predict(rows, "predict")
    handler.to_device("cuda:0")
    assert sessions.cuda_sessions() == 1
    assert np.array_equal(handler.predict(rows, "predict"), on_cpu)
    handler.to_device("cpu")  # asleep: the session made at load answers, none is made
    assert len(sessions.asked) == 2
    assert np.array_equal(handler.predict(rows, "predict"), on_cpu)
    handler.to_device("cuda:0")
    assert sessions.cuda_sessions() == 2


@pytest.fixture
def worker() -> Iterator[Worker]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        yield Worker(ours, 1, threads=1, devices=worker_devices("fake:1x10MiB+1MiB"))


def answer(worker: Worker, model: str) -> object:
    body = json.dumps(ROWS).encode()
    item = Item("application/json", "application/json", {}, len(body))
    _, payload = worker.infer(Infer(model, (item,)), body)
    return json.loads(payload)


def test_a_worker_loads_onnx_for_the_cpu_where_onnxruntime_has_no_cuda(
    worker: Worker, model: Path
) -> None:
    assert not worker.load(Load(model="m", path=str(model))).device_capable


def test_on_a_fake_device_onnx_is_charged_its_files_bytes_and_sleeps_loaded(
    worker: Worker, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Sessions(monkeypatch)
    loaded = worker.load(Load(model="m", path=str(model)))
    assert loaded.device_capable and loaded.tensor_bytes == model.stat().st_size
    before = answer(worker, "m")
    moved = worker._serve(ToDevice("m", "cuda:0"), b"")[0]
    assert moved.device_bytes == model.stat().st_size
    worker._serve(ToHost("m"), b"")
    assert answer(worker, "m") == before


MiB = 2**20


class Arena:
    """A handler outside torch's allocator: its move grows the process's memory on the device
    by the driver's count (NVML), which the test holds in `used`."""

    torch_allocator, device_capable = False, True

    def __init__(self, used: list[int], size: int) -> None:
        self.used, self.size = used, size

    def to_device(self, device: str) -> None:
        self.used[0] += self.size if device != "cpu" else -self.size

    def tensor_bytes(self) -> int:
        return 3 * MiB  # the file: less than the arena takes


def cuda_device(monkeypatch: pytest.MonkeyPatch, used: list[int]) -> Any:
    from types import SimpleNamespace

    from modelhost.workers import devices

    monkeypatch.setattr(devices, "nvml_process_bytes", lambda index: used[0])
    cuda = SimpleNamespace(memory_allocated=lambda index: 0, empty_cache=lambda: None)
    return devices.CudaDevice(SimpleNamespace(cuda=cuda), 0)


def test_a_cuda_move_outside_torchs_allocator_is_charged_the_drivers_growth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    used = [300 * MiB]  # the context and other models
    device = cuda_device(monkeypatch, used)
    assert device.move_in(Arena(used, 7 * MiB)) == 7 * MiB


def test_without_nvml_such_a_move_is_charged_its_files_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    used = [0]  # NVML's 0: not installed
    device = cuda_device(monkeypatch, [0])
    assert device.move_in(Arena(used, 7 * MiB)) == 3 * MiB


def test_a_first_call_outside_torchs_allocator_is_measured_by_the_driver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """onnxruntime's arena keeps what a run took, so the driver's count after the call is
    its peak; torch's peak counters never see it."""
    from modelhost.workers.device_moves import DeviceMoves

    used = [300 * MiB]
    moves = DeviceMoves({"cuda:0": cuda_device(monkeypatch, used)})
    moves.contexts.add("cuda:0")  # made already
    arena = Arena(used, 7 * MiB)
    moves.to_device("m", arena, "cuda:0")  # type: ignore[arg-type]
    with moves.call("m") as grown:
        used[0] += 2 * MiB  # the activations, left in the arena
    assert grown.bytes == 2 * MiB


def cuda_missing() -> str:
    """Why the CUDA test cannot run here; empty where it can."""
    if CUDA not in ort.get_available_providers():
        return "needs onnxruntime-gpu (this onnxruntime has no CUDAExecutionProvider)"
    try:
        import torch
    except ImportError:
        return "needs torch, through which a worker finds its CUDA devices"
    return "" if torch.cuda.is_available() else "needs a CUDA device (torch sees none)"


CUDA_MISSING = cuda_missing()


@pytest.mark.cuda
@pytest.mark.skipif(bool(CUDA_MISSING), reason=CUDA_MISSING or "CUDA is here")
def test_onnx_on_cuda_answers_the_same_and_is_charged_its_arena(model: Path) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        cuda = Worker(ours, 1, threads=1, devices=worker_devices("cuda:0"))
        assert cuda.load(Load(model="m", path=str(model))).device_capable
        on_cpu = answer(cuda, "m")
        moved = cuda._serve(ToDevice("m", "cuda:0"), b"")[0]
        assert moved.device_bytes > 0
        assert np.allclose(np.asarray(answer(cuda, "m")), np.asarray(on_cpu), atol=1e-5)
        cuda._serve(ToHost("m"), b"")
        assert answer(cuda, "m") == on_cpu
