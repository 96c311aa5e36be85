"""A worker's moves to its fake devices and back: measured by the allocator, a context made once
per device, refused past the device's memory, undone by an unload; and CUDA where there is one."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers.devices import ROW, sized_torch, tensor_bytes

from modelhost.errors import ModelhostError
from modelhost.workers.device_moves import worker_devices
from modelhost.workers.devices import FakeDevice, open_devices
from modelhost.workers.messages import Infer, Item, Load, ToDevice, ToHost, Unload
from modelhost.workers.worker import Worker

MiB = 2**20
SIZE = 4 * MiB


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("sized")
    return [sized_torch(root / f"m{i}.pt", SIZE, seed=i) for i in range(3)]


@pytest.fixture
def worker() -> Iterator[Worker]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        yield Worker(ours, 1, threads=1, devices=worker_devices("fake:2x10MiB+1MiB"))


def fake(worker: Worker, name: str = "cuda:0") -> FakeDevice:
    device = worker.devices.devices[name]
    assert isinstance(device, FakeDevice)
    return device


def answer(worker: Worker, model: str, rows: object = ROW) -> object:
    body = json.dumps(rows).encode()
    item = Item("application/json", "application/json", {}, len(body))
    _, payload = worker.infer(Infer(model, (item,)), body)
    return json.loads(payload)


def test_a_torch_model_loads_as_device_capable_where_the_worker_has_devices(
    worker: Worker, models: list[Path]
) -> None:
    assert worker.load(Load(model="m", path=str(models[0]))).device_capable


def test_a_move_is_measured_by_the_allocator_and_the_context_is_reported_once(
    worker: Worker, models: list[Path]
) -> None:
    for i, path in enumerate(models[:2]):
        worker.load(Load(model=f"m{i}", path=str(path)))
    first = worker._serve(ToDevice("m0", "cuda:0"), b"")[0]
    second = worker._serve(ToDevice("m1", "cuda:0"), b"")[0]
    assert (first.device_bytes, first.context_bytes) == (tensor_bytes(SIZE), MiB)
    assert (second.device_bytes, second.context_bytes) == (tensor_bytes(SIZE), 0)
    assert fake(worker).allocated_bytes == 2 * tensor_bytes(SIZE)


def test_a_model_answers_the_same_on_its_device_and_after_it_sleeps(
    worker: Worker, models: list[Path]
) -> None:
    worker.load(Load(model="m", path=str(models[0])))
    on_host = answer(worker, "m")
    worker._serve(ToDevice("m", "cuda:1"), b"")
    assert answer(worker, "m") == on_host
    worker._serve(ToHost("m"), b"")
    assert fake(worker, "cuda:1").allocated_bytes == 0
    assert answer(worker, "m") == on_host


def test_the_fake_allocator_refuses_past_the_devices_memory(
    worker: Worker, models: list[Path]
) -> None:
    for i, path in enumerate(models):
        worker.load(Load(model=f"m{i}", path=str(path)))
    worker._serve(ToDevice("m0", "cuda:0"), b"")
    worker._serve(ToDevice("m1", "cuda:0"), b"")
    with pytest.raises(ModelhostError, match="out of memory"):
        worker._serve(ToDevice("m2", "cuda:0"), b"")  # 1 MiB context + 3 x 4 MiB > 10 MiB


def test_an_unload_takes_the_model_off_its_device(worker: Worker, models: list[Path]) -> None:
    worker.load(Load(model="m", path=str(models[0])))
    worker._serve(ToDevice("m", "cuda:0"), b"")
    worker.unload(Unload("m"))
    assert fake(worker).allocated_bytes == 0


def test_a_runtime_without_devices_is_refused_a_move(worker: Worker, tmp_path: Path) -> None:
    from modelhost import testing

    worker.load(Load(model="iris", path=str(testing.iris_logreg(tmp_path / "iris.joblib"))))
    with pytest.raises(ModelhostError, match="cannot use one"):
        worker._serve(ToDevice("iris", "cuda:0"), b"")


def test_none_and_auto_without_cuda_open_no_devices() -> None:
    assert open_devices("none") == {}
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: auto finds it")
    assert open_devices("auto") == {}


@pytest.mark.cuda
@pytest.mark.skipif(
    not pytest.importorskip("torch").cuda.is_available(),
    reason="needs a CUDA device (torch.cuda.is_available() is false here)",
)
def test_a_move_to_cuda_is_charged_its_allocation(models: list[Path]) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = Worker(ours, 1, threads=1, devices=worker_devices("cuda:0"))
        worker.load(Load(model="m", path=str(models[0])))
        on_host = answer(worker, "m")
        moved = worker._serve(ToDevice("m", "cuda:0"), b"")[0]
        assert moved.device_bytes >= tensor_bytes(SIZE)
        assert np.allclose(np.asarray(answer(worker, "m")), np.asarray(on_host), atol=1e-5)


def test_a_torchserve_handler_moves_its_model_and_answers_the_same(
    worker: Worker, tmp_path: Path
) -> None:
    pytest.importorskip("ts", reason="pip install 'modelhost[torchserve-handlers]'")
    from modelhost.testing import torchserve

    archive = torchserve.custom_handler_mar(tmp_path / "rows.mar", seed=7)
    folder = torchserve.unpacked(archive, tmp_path / "rows")
    loaded = worker.load(Load(model="rows.mar", path=str(folder)))
    assert loaded.device_capable and loaded.tensor_bytes > 0
    before = answer(worker, "rows.mar", ROW[0])  # a row a request, as its handler takes them
    moved = worker._serve(ToDevice("rows.mar", "cuda:0"), b"")[0]
    assert moved.device_bytes == loaded.tensor_bytes
    assert answer(worker, "rows.mar", ROW[0]) == before


def test_a_models_first_call_on_its_device_reports_what_its_activations_took(
    worker: Worker, models: list[Path]
) -> None:
    worker.load(Load(model="m", path=str(models[0])))
    worker._serve(ToDevice("m", "cuda:0"), b"")
    fake(worker).first_call_bytes = 3 * MiB  # the allocator's peak past the weights
    body = json.dumps(ROW).encode()
    item = Item("application/json", "application/json", {}, len(body))
    first, _ = worker.infer(Infer("m", (item,)), body)
    second, _ = worker.infer(Infer("m", (item,)), body)
    assert (first.device_grown, second.device_grown) == (3 * MiB, 0)


def test_a_first_call_and_a_move_out_report_the_drivers_count(
    worker: Worker, models: list[Path]
) -> None:
    worker.load(Load(model="m", path=str(models[0])))
    moved = worker._serve(ToDevice("m", "cuda:0"), b"")[0]
    fake(worker).kernel_bytes = 2 * MiB  # loaded by the first call, unseen by the allocator
    body = json.dumps(ROW).encode()
    item = Item("application/json", "application/json", {}, len(body))
    first, _ = worker.infer(Infer("m", (item,)), body)
    slept = worker._serve(ToHost("m"), b"")[0]
    assert first.device_process == MiB + moved.device_bytes + 2 * MiB
    assert (moved.models_bytes, first.device_models) == (moved.device_bytes,) * 2
    assert (slept.process_bytes, slept.models_bytes) == (MiB + 2 * MiB, 0)


class FakeCuda:
    """torch.cuda's counters as CudaDevice reads them, moved by the test."""

    def __init__(self) -> None:
        self.allocated, self.reserved, self.peak, self.emptied = 0, 0, 0, 0

    def memory_allocated(self, index: int) -> int:
        return self.allocated

    def memory_reserved(self, index: int) -> int:
        return self.reserved

    def max_memory_allocated(self, index: int) -> int:
        return self.peak

    def reset_peak_memory_stats(self, index: int) -> None:
        self.peak = self.allocated

    def empty_cache(self) -> None:
        self.emptied += 1


class Weights:
    """A handler's weights that land in the fake CUDA allocator when moved."""

    torch_allocator = True

    def __init__(self, cuda: FakeCuda, size: int, segments: int = 0) -> None:
        self.cuda, self.size, self.where = cuda, size, "cpu"
        self.segments = segments  # the allocator's segments taken for them, if any

    def to_device(self, device: str) -> None:
        sign = 1 if device != "cpu" else -1
        self.cuda.allocated += sign * self.size
        self.cuda.reserved += sign * self.segments
        self.where = device

    def tensor_bytes(self) -> int:
        return self.size


def test_a_cuda_move_is_charged_the_allocators_growth_and_gives_its_cache_back() -> None:
    from types import SimpleNamespace

    from modelhost.workers.devices import CudaDevice

    cuda = FakeCuda()
    device = CudaDevice(SimpleNamespace(cuda=cuda), 0)
    weights = Weights(cuda, 5 * MiB)
    assert device.move_in(weights) == 5 * MiB and weights.where == "cuda:0"
    base = device.start_peak()
    cuda.peak = base + 2 * MiB  # the first call's activations
    assert device.peak_bytes() - base == 2 * MiB
    device.move_out(weights, 5 * MiB)
    assert (weights.where, cuda.allocated, cuda.emptied) == ("cpu", 0, 1)


def test_a_cuda_move_is_charged_the_segments_it_took_where_they_pass_its_tensors() -> None:
    """On the H200 a 192 MiB classifier took 220 MiB of segments, all of which the driver
    counts; where cached segments held it, its tensors' bytes are the least it holds."""
    from types import SimpleNamespace

    from modelhost.workers.devices import CudaDevice

    cuda = FakeCuda()
    device = CudaDevice(SimpleNamespace(cuda=cuda), 0)
    assert device.move_in(Weights(cuda, 192 * MiB, segments=220 * MiB)) == 220 * MiB
    assert device.move_in(Weights(cuda, 5 * MiB, segments=0)) == 5 * MiB


def test_a_move_during_a_first_call_spoils_its_measure_and_the_next_call_measures(
    worker: Worker, models: list[Path]
) -> None:
    for name, path in (("m", models[0]), ("other", models[1])):
        worker.load(Load(model=name, path=str(path)))
    worker._serve(ToDevice("m", "cuda:0"), b"")
    with worker.devices.call("m") as spoiled:
        worker._serve(ToDevice("other", "cuda:0"), b"")  # on the unloader thread, meanwhile
    with worker.devices.call("m") as measured:
        fake(worker).first_call_bytes = MiB
    assert (spoiled.bytes, measured.bytes) == (0, MiB)


def test_a_move_waits_for_its_models_calls_under_way(
    worker: Worker, models: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Else a call finds its inputs on the device and its weights on the host (the H200's
    churn: "Expected all tensors to be on the same device")."""
    worker.load(Load(model="m", path=str(models[0])))
    order = recorded_moves(worker, monkeypatch)
    with worker.devices.call("m"):
        mover = threading.Thread(target=worker._serve, args=(ToDevice("m", "cuda:0"), b""))
        mover.start()
        mover.join(0.2)
        order.append("call ends")
    mover.join()
    assert order == ["call ends", "moved"]


def test_a_call_waits_for_its_models_move_under_way(
    worker: Worker, models: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    worker.load(Load(model="m", path=str(models[0])))
    order = recorded_moves(worker, monkeypatch, release := threading.Event())
    mover = threading.Thread(target=worker._serve, args=(ToDevice("m", "cuda:0"), b""))
    mover.start()
    while not order:  # the move has begun
        time.sleep(0.001)

    def call() -> None:
        with worker.devices.call("m"):
            order.append("call")

    caller = threading.Thread(target=call)
    caller.start()
    caller.join(0.2)
    release.set()
    mover.join()
    caller.join()
    assert order == ["moving", "moved", "call"]


def recorded_moves(
    worker: Worker, monkeypatch: pytest.MonkeyPatch, release: threading.Event | None = None
) -> list[str]:
    """The order of the model's moves, each held until `release` if given."""
    handler, order = worker.models["m"], []
    move = handler.to_device

    def recorded(device: str) -> None:
        if release is not None:
            order.append("moving")
            release.wait(10)
        move(device)
        order.append("moved")

    monkeypatch.setattr(handler, "to_device", recorded)
    return order


def test_a_spoiled_first_call_still_reports_the_drivers_count(
    worker: Worker, models: list[Path]
) -> None:
    """Under churn most first calls are spoiled: the kernels they load are charged anyway."""
    for name, path in (("m", models[0]), ("other", models[1])):
        worker.load(Load(model=name, path=str(path)))
    moved = worker._serve(ToDevice("m", "cuda:0"), b"")[0]
    fake(worker).kernel_bytes = MiB // 2
    with worker.devices.call("m") as spoiled:
        other = worker._serve(ToDevice("other", "cuda:0"), b"")[0]
    weights = moved.device_bytes + other.device_bytes
    assert spoiled.bytes == 0
    assert (spoiled.process_bytes, spoiled.models_bytes) == (MiB + MiB // 2 + weights, weights)


def test_a_later_call_reports_the_drivers_count_where_it_changed(
    worker: Worker, models: list[Path]
) -> None:
    """A larger batch than the first call's leaves more in the allocator's cache, which the
    driver counts: the ledger hears of it after that call, not at the next move."""
    worker.load(Load(model="m", path=str(models[0])))
    moved = worker._serve(ToDevice("m", "cuda:0"), b"")[0]
    body = json.dumps(ROW).encode()
    item = Item("application/json", "application/json", {}, len(body))
    counts = []
    for cache_bytes in (0, 0, MiB):
        fake(worker).kernel_bytes = cache_bytes
        counts.append(worker.infer(Infer("m", (item,)), body)[0].device_process)
    assert counts == [MiB + moved.device_bytes, 0, 2 * MiB + moved.device_bytes]


def test_nvml_is_initialised_once_a_process_as_each_call_now_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from modelhost.workers import devices

    inits = []
    me = SimpleNamespace(pid=os.getpid(), usedGpuMemory=5 * MiB)
    fake = SimpleNamespace(
        nvmlInit=lambda: inits.append(1),
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetComputeRunningProcesses=lambda handle: [me],
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    devices.nvml.cache_clear()
    try:
        assert [devices.nvml_process_bytes(0) for _ in range(3)] == [5 * MiB] * 3
        assert len(inits) == 1
    finally:
        devices.nvml.cache_clear()  # the fake stays out of later tests
