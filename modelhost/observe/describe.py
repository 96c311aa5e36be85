"""What GET /models and GET /models/{model} say about a model."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from modelhost.cache.memory import State
from modelhost.observe.events import Event

if TYPE_CHECKING:
    from modelhost.host import ModelHost


def _iso(epoch_s: float | None) -> str | None:
    if not epoch_s:
        return None
    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="milliseconds")


def _event(event: Event) -> dict[str, Any]:
    record = {k: v for k, v in vars(event).items() if v not in (None, {}, "")}
    record["time"] = _iso(event.time)
    return record


def describe_model(host: ModelHost, name: str) -> dict[str, Any]:
    resident = host.memory.get(name)
    artifact = host.disk.artifacts.get(name)
    workers = [host.pool.workers.get(w) for w in (resident.workers if resident else [])]
    dispatcher = host.dispatchers.get(name)
    state = resident.state.value if resident else "on_disk" if artifact else "remote"
    last_used = (
        (time.time() - (host.clock() - resident.last_used))
        if resident
        else (artifact.last_used if artifact else None)
    )
    return {
        "modelName": name,
        "modelUrl": host.source_of(name),
        "state": state,
        "memoryBytes": resident.bytes if resident and resident.state is State.LOADED else 0,
        "diskBytes": artifact.bytes if artifact else 0,
        "workers": [{"id": w.worker_id, "pid": w.pid} for w in workers if w is not None],
        "queued": len(dispatcher.queue) if dispatcher else 0,
        "pinned": bool(resident and resident.pinned) or name in host.pinned,
        "hits": resident.hits if resident else 0,
        "inFlight": resident.in_flight if resident else 0,
        "lastUsed": _iso(last_used),
        "loadedAt": _iso(resident.loaded_at) if resident else None,
        "loadTimeMs": round(resident.load_ms, 2) if resident and resident.load_ms else None,
        "events": [_event(event) for event in host.events.for_model(name)],
    }
