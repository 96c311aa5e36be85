"""The devices a worker may put models on: CUDA through torch, or a fake for tests.

The frontend's config names them in one spec: `none`, `auto`, `cuda:0,cuda:1`, or `fake:2x1GiB`
(or `fake:2x1GiB+8MiB+4MiB`: a context's size, and what a first call adds), the fake whose
allocator tests control. A device measures what a model takes there by its allocator's counts
before and after the move.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from typing import Any, ClassVar, Protocol

from modelhost.errors import ConfigError, ModelhostError
from modelhost.units import parse_size
from modelhost.workers.messages import DeviceInfo

DEVICES_VARIABLE = "MODELHOST_WORKER_DEVICES"  # the spec, from the frontend to the template
# a CUDA context with torch's kernels, until NVML measures this worker's own
CUDA_CONTEXT_ESTIMATE_BYTES = 512 * 2**20
NVIDIA_DRIVER = "/dev/nvidiactl"  # present where NVIDIA's driver is loaded


class DeviceOutOfMemory(ModelhostError):
    """The device's allocator refused: the frontend's budget let through more than it holds."""


class Mover(Protocol):
    """What a handler on a device offers: its weights moved, and their size for the fake."""

    torch_allocator: ClassVar[bool]  # else the driver's count measures its moves

    def to_device(self, device: str) -> None: ...

    def tensor_bytes(self) -> int: ...


class Device(Protocol):
    name: str
    torch_name: str  # where the handler's tensors go

    def info(self) -> DeviceInfo: ...

    def open_context(self) -> int:
        """Make this worker's context on the device; the bytes it took."""

    def move_in(self, handler: Mover) -> int:
        """Move the handler's weights here; the bytes the allocator grew by."""

    def move_out(self, handler: Mover, charged_bytes: int) -> None:
        """Move them back to host memory and return the device's cached blocks."""

    def process_bytes(self) -> int:
        """This process's memory on the device by the driver's count (NVML); 0 where unknown."""

    def start_peak(self) -> int:
        """Start counting the allocator's peak; the bytes allocated now."""

    def peak_bytes(self) -> int:
        """The allocator's most since `start_peak`."""


class FakeDevice:
    """A device on the CPU whose allocator counts the tensors moved to it, up to its size."""

    torch_name = "cpu"

    def __init__(
        self, name: str, total_bytes: int, context_bytes: int, kernel_bytes: int = 0
    ) -> None:
        self.name, self.total_bytes, self.context_bytes = name, total_bytes, context_bytes
        self.kernel_bytes = kernel_bytes  # loaded by the first call, as CUDA's kernels
        self.allocated_bytes = 0
        self.contexts = 0
        self.first_call_bytes = 0
        self.called = False

    def info(self) -> DeviceInfo:
        return DeviceInfo(self.name, self.total_bytes, self.context_bytes)

    def open_context(self) -> int:
        self.contexts += 1
        return self.context_bytes

    def move_in(self, handler: Mover) -> int:
        size = handler.tensor_bytes()
        free = self.total_bytes - self.process_bytes()
        if size > free:
            raise DeviceOutOfMemory(
                f"{self.name} is out of memory: {size} bytes asked, {free} free of "
                f"{self.total_bytes}"
            )
        handler.to_device(self.torch_name)
        self.allocated_bytes += size
        return size

    def move_out(self, handler: Mover, charged_bytes: int) -> None:
        handler.to_device("cpu")
        self.allocated_bytes -= charged_bytes

    def start_peak(self) -> int:
        self.called = True
        return self.allocated_bytes

    def process_bytes(self) -> int:
        kernels = self.kernel_bytes if self.called else 0
        return self.context_bytes * self.contexts + kernels + self.allocated_bytes

    def peak_bytes(self) -> int:
        """A test sets `first_call_bytes`: what a first call takes past the weights."""
        return self.allocated_bytes + self.first_call_bytes


class CudaDevice:
    """A CUDA device through torch.cuda; NVML, where installed, measures the context."""

    def __init__(self, torch: Any, index: int) -> None:
        self.torch, self.index = torch, index
        self.name = self.torch_name = f"cuda:{index}"

    def info(self) -> DeviceInfo:
        """Its size by NVML where installed: asking torch would start CUDA in every worker."""
        total = nvml_total_bytes(self.index)
        if not total:
            total = self.torch.cuda.get_device_properties(self.index).total_memory
        return DeviceInfo(self.name, int(total), CUDA_CONTEXT_ESTIMATE_BYTES)

    def open_context(self) -> int:
        ones = self.torch.ones(8, 8, device=self.name)  # the context, the allocator's first block
        ones @ ones  # and cuBLAS, as any first call loads it
        self.torch.cuda.synchronize(self.index)
        return nvml_process_bytes(self.index) or CUDA_CONTEXT_ESTIMATE_BYTES

    def move_in(self, handler: Mover) -> int:
        if not handler.torch_allocator:
            return self._move_in_by_driver(handler)
        cuda = self.torch.cuda
        allocated, reserved = cuda.memory_allocated(self.index), cuda.memory_reserved(self.index)
        handler.to_device(self.name)
        # the driver counts the segments taken, which pass the tensors' bytes where fresh
        grown = cuda.memory_reserved(self.index) - reserved
        return int(max(grown, cuda.memory_allocated(self.index) - allocated))

    def _move_in_by_driver(self, handler: Mover) -> int:
        """A runtime with an allocator of its own (onnxruntime's arena), measured by NVML;
        without NVML, charged its weights' bytes."""
        before = nvml_process_bytes(self.index)
        handler.to_device(self.name)
        after = nvml_process_bytes(self.index)
        return max(0, after - before) if after else handler.tensor_bytes()

    def move_out(self, handler: Mover, charged_bytes: int) -> None:
        handler.to_device("cpu")
        self.torch.cuda.empty_cache()  # else the cached blocks stay the worker's on the device

    def process_bytes(self) -> int:
        return nvml_process_bytes(self.index)

    def start_peak(self) -> int:
        self.torch.cuda.reset_peak_memory_stats(self.index)
        return int(self.torch.cuda.memory_allocated(self.index))

    def peak_bytes(self) -> int:
        return int(self.torch.cuda.max_memory_allocated(self.index))


@functools.cache
def nvml() -> Any:
    """pynvml, initialised once a process; None without it."""
    try:
        import pynvml
    except ImportError:
        return None
    pynvml.nvmlInit()
    return pynvml


os.register_at_fork(after_in_child=nvml.cache_clear)


def nvml_total_bytes(index: int) -> int:
    """The device's memory as NVML reports it; 0 without NVML."""
    if (pynvml := nvml()) is None:
        return 0
    return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).total)


def nvml_process_bytes(index: int) -> int:
    """This process's device memory as NVML reports it; 0 without NVML."""
    if (pynvml := nvml()) is None:
        return 0
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    processes = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    return sum(p.usedGpuMemory or 0 for p in processes if p.pid == os.getpid())


def devices_environment(devices: str, fake_devices: str) -> dict[str, str]:
    """The variable that gives the template the devices' spec: the fake's, if set."""
    if fake_devices:
        fake_devices_of(fake_devices)  # refused here, not in every worker
        return {DEVICES_VARIABLE: f"fake:{fake_devices}"}
    if devices not in ("auto", "none", ""):
        parse_cuda_names(devices)
    return {DEVICES_VARIABLE: devices}


def named_devices(devices: str) -> list[str]:
    """The devices --devices names one by one; none for auto and none."""
    if devices in ("auto", "none", ""):
        return []
    return [f"cuda:{index}" for index in parse_cuda_names(devices)]


def open_devices(spec: str) -> dict[str, Device]:
    """The devices a spec names; `auto`, every CUDA device torch sees, where a driver is."""
    spec = spec.strip()
    if spec in ("", "none"):
        return {}
    if spec.startswith("fake:"):
        return fake_devices_of(spec.removeprefix("fake:"))
    torch = sys.modules.get("torch")
    if spec == "auto":
        if torch is None and not os.path.exists(NVIDIA_DRIVER):
            return {}  # no driver: no need to import torch to find no device
        torch = torch or optional_torch()
        if torch is None or not torch.cuda.is_available():
            return {}
        return cuda_devices(torch, range(torch.cuda.device_count()))
    torch = torch or optional_torch()
    if torch is None:
        return {}  # the frontend says which are missing
    present = torch.cuda.device_count() if torch.cuda.is_available() else 0
    named = parse_cuda_names(spec)
    return cuda_devices(torch, [index for index in named if index < present])


def optional_torch() -> Any:
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def cuda_devices(torch: Any, indexes: Any) -> dict[str, Device]:
    """Those named that torch sees; the frontend refuses to start if one is missing."""
    devices = [CudaDevice(torch, index) for index in indexes]
    return {device.name: device for device in devices}


def parse_cuda_names(spec: str) -> list[int]:
    """`cuda:0,cuda:1` as device indexes."""
    indexes = []
    for name in spec.split(","):
        kind, _, index = name.strip().partition(":")
        if kind != "cuda" or not index.isdigit():
            raise ConfigError(f"--devices: {name!r} is not a device; use auto, none or cuda:N,...")
        indexes.append(int(index))
    return indexes


def fake_devices_of(spec: str) -> dict[str, Device]:
    """`2x1GiB+8MiB+4MiB`: two fake devices of 1 GiB, each worker's context 8 MiB, 12 after
    its first call."""
    sizes, *extras = spec.split("+")
    count, _, size = sizes.partition("x")
    if not count.isdigit() or len(extras) > 2:
        raise ConfigError(
            f"--fake-devices: {spec!r} is not COUNTxSIZE[+CONTEXT[+KERNELS]], e.g. 2x1GiB"
        )
    total = parse_size(size)
    context_bytes, kernel_bytes = (parse_size(extra) for extra in [*extras, "0", "0"][:2])
    devices = [
        FakeDevice(f"cuda:{i}", total, context_bytes, kernel_bytes) for i in range(int(count))
    ]
    return {device.name: device for device in devices}
