"""The invocation routes' paths and headers, apart from their endpoint, so that a front process
reads them without importing the host (fronts/heads.py)."""

from __future__ import annotations

from modelhost.errors import ModelhostError
from modelhost.http.request_ids import REQUEST_IDS, request_id_header
from modelhost.observe.exchange import server_timing
from modelhost.protocols.answer_headers import CACHE, TIER, TIMING
from modelhost.protocols.status import type_name_of
from modelhost.protocols.torchserve_types import torchserve_type

TARGET_MODEL_HEADER = "x-amzn-sagemaker-target-model"
CUSTOM_ATTRIBUTES_HEADER = "x-amzn-sagemaker-custom-attributes"
CUSTOM_ATTRIBUTES_PARAM = "X-Amzn-SageMaker-Custom-Attributes"
INVOCATIONS = "/invocations"
MODEL_INVOKE = "/models/{model:path}/invoke"
PREDICTIONS = "/predictions/{model:path}"
EXPLANATIONS = "/explanations/{model:path}"  # TorchServe's: the handler's call, explain: True
# what TorchServe hands the model besides POST: any method (curl -T is a PUT)
PREDICTION_METHODS = ("PUT", "GET", "DELETE", "PATCH")
PASSED_ON_HEADERS = ("content-type", "accept", TARGET_MODEL_HEADER, CUSTOM_ATTRIBUTES_HEADER)
CACHE_HEADER, TIER_HEADER, TIMING_HEADER = CACHE.encode(), TIER.encode(), TIMING.encode()


def route_of(path: str) -> tuple[str, str | None] | None:
    """The invocation route a path matches, with the model it names (None: from a header)."""
    if path == INVOCATIONS:
        return INVOCATIONS, None
    if path.startswith("/models/") and path.endswith("/invoke") and len(path) >= 15:
        return MODEL_INVOKE, path[8:-7]
    if path.startswith("/predictions/"):  # /predictions/{model}[/{version}]
        return PREDICTIONS, path[13:]
    if path.startswith("/explanations/"):
        return EXPLANATIONS, path[14:]
    return None


def accept_of(route: str, headers: dict[str, str], default_accept: str) -> str:
    """The type asked for; none or `*/*` is the default, but on TorchServe's routes."""
    accept = headers.get("accept") or default_accept
    return default_accept if accept == "*/*" and not is_torchserve(route) else accept


def handed(route: str, headers: dict[str, str]) -> tuple[dict[str, str] | None, str]:
    """A TorchServe handler's headers and request id (its answer's x-request-id)."""
    if route == PREDICTIONS:
        return headers, REQUEST_IDS.next().decode()
    if route == EXPLANATIONS:
        return {**headers, "explain": "True"}, REQUEST_IDS.next().decode()
    return None, ""


def is_torchserve(route: str) -> bool:
    """Whether `route` is TorchServe's `/predictions` or `/explanations`."""
    return route in (PREDICTIONS, EXPLANATIONS)


def error_type(route: str, error: ModelhostError) -> str:
    """An error body's type on `route`: TorchServe's on its own."""
    return torchserve_type(error) if is_torchserve(route) else type_name_of(error)


def reply_headers(
    content_type: str,
    size: int,
    cache: str,
    tier: str,
    timings_ms: dict[str, float],
    *,
    request_id: str = "",
) -> list[tuple[bytes, bytes]]:
    """An invocation's answer headers, as the main process and the fronts write them."""
    return [
        (b"content-type", content_type.encode("latin-1")),
        (b"content-length", str(size).encode()),
        (CACHE_HEADER, cache.encode()),  # where_from's three, inline on the hot path
        (TIER_HEADER, tier.encode()),
        (TIMING_HEADER, server_timing(timings_ms).encode()),
        request_id_header(request_id),
    ]


def where_from(cache: str, tier: str, timings_ms: dict[str, float]) -> list[tuple[bytes, bytes]]:
    """Where the model came from and where the time went."""
    return [
        (CACHE_HEADER, cache.encode()),
        (TIER_HEADER, tier.encode()),
        (TIMING_HEADER, server_timing(timings_ms).encode()),
    ]
