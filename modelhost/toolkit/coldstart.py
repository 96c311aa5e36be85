"""The cold-start step: one request for a model not loaded, with the server's own timing."""

from __future__ import annotations

import time
from typing import Any

from modelhost.observe.exchange import parse_server_timing
from modelhost.protocols.answer_headers import CACHE, TIMING
from modelhost.toolkit.payloads import Payload
from modelhost.toolkit.traffic import Target


def cold_start(
    target: Target, model: str | None, payload: Payload, timeout_s: float = 120.0
) -> dict[str, Any]:
    import httpx

    url, headers = target.request_for(model)
    headers["Content-Type"] = payload.content_type
    began = time.perf_counter()
    response = httpx.post(url, content=payload.body, headers=headers, timeout=timeout_s)
    elapsed_ms = (time.perf_counter() - began) * 1000
    return {
        "model": model or "",
        "status": response.status_code,
        "first_answer_ms": round(elapsed_ms, 3),
        "cache": response.headers.get(CACHE, ""),
        "server_timing_ms": parse_server_timing(response.headers.get(TIMING, "")),
    }
