"""TorchServe handlers on a device: their `model` and `device` moved as BaseHandler sets them.

A handler loads on the CPU (its context says `gpu_id` None, as TorchServe's does on a machine
without GPUs); a move then carries its module and sets `device`, `map_location` and the
context's `gpu_id` as TorchServe would have for that device, so its own preprocess follows.
"""

from __future__ import annotations

import sys
from typing import Any

from modelhost.workers.handlers.torch import module_bytes


def torch_service(entry: Any) -> Any | None:
    """The handler object behind the entry point, where it holds a torch module as `model`."""
    service = getattr(entry, "__self__", None)
    torch = sys.modules.get("torch")
    model = getattr(service, "model", None)
    if torch is None or not isinstance(model, torch.nn.Module) or not hasattr(service, "device"):
        return None
    return service


def move(service: Any, properties: dict[str, Any], device: str) -> None:
    """Move the handler's module to `device` (a torch name), and say so where it looks."""
    torch = sys.modules["torch"]
    service.model = service.model.to(device)
    service.device = torch.device(device)
    on_cpu = device == "cpu"
    service.map_location = "cpu" if on_cpu else "cuda"
    properties["gpu_id"] = None if on_cpu else int(device.partition(":")[2] or 0)


def weights_bytes(service: Any) -> int:
    return module_bytes(service.model)
