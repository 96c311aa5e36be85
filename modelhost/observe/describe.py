"""What GET /models and GET /models/{model} say about a model: its statistics as JSON."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from modelhost.observe.device_series import describe_devices
from modelhost.records.events import Event
from modelhost.records.statistics import (
    HostStatistics,
    ModelStatistics,
    SizingStatistics,
    WorkerStatistics,
)
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
    } | ({"loadProgress": _progress(model.load_progress)} if model.load_progress else {})


def _progress(event: Event) -> dict[str, Any]:
    """A load under way: its phase, and bytes of the total where it has them."""
    progress: dict[str, Any] = {"phase": event.reason, "since": iso_time(event.time)}
    if event.bytes is not None:
        progress["bytes"] = event.bytes
    if "total_bytes" in event.detail:
        progress["totalBytes"] = event.detail["total_bytes"]
    return progress


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
        "devices": describe_devices(host.devices),
        "workers": [_worker(w) for w in host.workers],
        "sizing": describe_sizing(host.sizing) if host.sizing else None,
    }


def describe_sizing(s: SizingStatistics) -> dict[str, Any]:
    """GET /sizing, and /stats's `sizing`: the live curve and what it says about the budget."""
    return {
        "window": s.window,
        "curvePolicy": "lru",
        "evictionPolicy": s.policy,
        "budgetBytes": s.budget_bytes,
        "roomBytes": s.room_bytes,
        "fixedBytes": s.fixed_bytes,
        "observedHitRatio": s.observed_hit_ratio,
        "predictedHitRatio": s.predicted_hit_ratio,
        "memoryNeededBytes": {f"{t:g}": _finite(b) for t, b in s.budget_needed.items()},
        "hitRatioAtBudget": {f"{f:g}": r for f, r in s.hit_ratio_at_factor.items()},
        "instancesNeeded": {f"{t:g}": _finite(n, 3) for t, n in s.instances_needed.items()},
        "curve": [
            {
                "roomBytes": p.room_bytes,
                "budgetBytes": p.room_bytes + s.fixed_bytes,
                "hitRatio": p.hit_ratio,
            }
            for p in s.curve
        ],
        "sample": {"names": s.sampled_names, "rate": s.sample_rate},
        "requests": s.requests,
        "hotModels": [
            {
                "model": hot.name,
                "share": hot.share,
                "requests": hot.requests,
                "instanceRequests": hot.instance_requests,
            }
            for hot in s.hot_models
        ],
        "thrash": {
            "thrashing": s.thrashing,
            "earlyReturns": s.early_returns,
            "cacheAgeS": s.cache_age_s,
        },
    }


def _finite(value: float, digits: int = 0) -> float | None:
    """JSON has no infinity: None says no budget reaches the target."""
    if math.isinf(value):
        return None
    return round(value, digits) if digits else round(value)


def _worker(worker: WorkerStatistics) -> dict[str, Any]:
    return {"id": worker.worker_id, "pid": worker.pid, "inFlight": worker.in_flight}
