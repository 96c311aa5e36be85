"""TorchServe's and Triton's calls modelhost lacks, and what to do instead."""

from __future__ import annotations

MOVING = "docs/migrating-torchserve.md#6-what-does-not-carry-over"
WORKFLOWS = (
    f"TorchServe's workflows are not served: call each model's /predictions/{{model}} ({MOVING})"
)
SHARED_MEMORY = (
    "shared memory is not served: send tensors in the request, as tritonclient's "
    "InferInput.set_data_from_numpy does"
)
SETTINGS = (
    "trace and log settings are not served: modelhost logs as set when it starts "
    "(--log-level, --access-log)"
)
GENERATION = (
    "Triton's generate extension is not served: send the model's tensors to "
    "/v2/models/{model}/infer"
)
MODEL_SUFFIXES = {  # of /v2/models/{model}/...
    "/trace/setting": SETTINGS,
    "/generate": GENERATION,
    "/generate_stream": GENERATION,
}
PREFIXES = {
    "/wfpredict/": WORKFLOWS,
    "/workflows": WORKFLOWS,
    "/v2/systemsharedmemory/": SHARED_MEMORY,
    "/v2/cudasharedmemory/": SHARED_MEMORY,
    "/v2/trace/": SETTINGS,
    "/v2/logging": SETTINGS,
}


def not_served(path: str) -> str | None:
    """Why a REST path is not served, or None."""
    if path.startswith("/v2/models/"):
        suffix = next((why for end, why in MODEL_SUFFIXES.items() if path.endswith(end)), None)
        if suffix is not None:
            return suffix
    return next((why for prefix, why in PREFIXES.items() if path.startswith(prefix)), None)
