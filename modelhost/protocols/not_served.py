"""Triton's calls modelhost lacks, and what to do instead."""

from __future__ import annotations

SHARED_MEMORY = (
    "shared memory is not served: send tensors in the request, as tritonclient's "
    "InferInput.set_data_from_numpy does"
)
SETTINGS = (
    "trace and log settings are not served: modelhost logs as set when it starts "
    "(--log-level, --access-log)"
)
MODEL_TRACE = "/trace/setting"
PREFIXES = {
    "/v2/systemsharedmemory/": SHARED_MEMORY,
    "/v2/cudasharedmemory/": SHARED_MEMORY,
    "/v2/trace/": SETTINGS,
    "/v2/logging": SETTINGS,
}


def not_served(path: str) -> str | None:
    """Why a REST path is not served, or None."""
    if path.startswith("/v2/models/") and path.endswith(MODEL_TRACE):
        return SETTINGS
    return next((why for prefix, why in PREFIXES.items() if path.startswith(prefix)), None)
