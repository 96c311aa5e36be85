"""What GET /models and GET /models/{model} say about a model: its statistics as JSON."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from modelhost.records.events import Event
from modelhost.records.statistics import HostStatistics, ModelStatistics, WorkerStatistics
from modelhost.urls import redact_url


def iso_time(epoch_s: float | None) -> str | None:
    if not epoch_s:
        return None
    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="milliseconds")


def _event(event: Event) -> dict[str, Any]:
    record = {k: v for k, v in vars(event).items() if v not in (None, {}, "")}
    record["time"] = iso_time(event.time)
    return record


def model_description(model: ModelStatistics) -> dict[str, Any]:
    return {
        "modelName": model.name,
        "modelUrl": redact_url(model.url),
        "state": model.state,
        "memoryBytes": model.memory_bytes,
        "diskBytes": model.disk_bytes,
        "workers": [{"id": w.worker_id, "pid": w.pid} for w in model.workers],
        "queued": model.queued,
        "pinned": model.pinned,
        "hits": model.hits,
        "inFlight": model.in_flight,
        "lastUsed": iso_time(model.last_used),
        "loadedAt": iso_time(model.loaded_at),
        "loadTimeMs": round(model.load_ms, 2) if model.load_ms else None,
        "loadReserveBytes": model.load_reserve_bytes,
        "events": [_event(event) for event in model.events],
    }


def describe_host(host: HostStatistics) -> dict[str, Any]:
    """GET /stats: the budgets and what holds them, for operators and tests."""
    memory = host.memory
    return {
        "memory": {
            "budgetBytes": memory.budget_bytes,
            "baselineBytes": memory.baseline_bytes,
            "committedBytes": memory.committed_bytes,
            "headroomBytes": memory.headroom_bytes,
            "pssBytes": memory.pss_bytes,
            "frontendBytes": memory.frontend_bytes,
            "frontendAllowanceBytes": memory.frontend_allowance_bytes,
            "loadedModels": memory.models.get("loaded", 0),
        },
        "disk": {
            "budgetBytes": host.disk.budget_bytes,
            "usedBytes": host.disk.used_bytes,
            "artifacts": host.disk.artifacts,
        },
        "workers": [_worker(w) for w in host.workers],
    }


def _worker(worker: WorkerStatistics) -> dict[str, Any]:
    return {"id": worker.worker_id, "pid": worker.pid, "inFlight": worker.in_flight}
