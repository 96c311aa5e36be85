"""OIP's REST inference: its paths, and its answers as the main process and the fronts write
them, apart from the routes so that a front process reads them without importing the host."""

from __future__ import annotations

from starlette.responses import JSONResponse, Response

from modelhost.errors import BadRequestBody, ModelhostError, UnsupportedMediaType
from modelhost.http.errors import status_headers
from modelhost.names import echo
from modelhost.observe.exchange import server_timing
from modelhost.protocols.params import is_whole_number
from modelhost.protocols.status import status_of
from modelhost.workers.oip_media import header_length_of, is_oip

MODEL_PATH = "/v2/models/{model:path}"
INFER = MODEL_PATH + "/infer"
VERSION_INFER = MODEL_PATH + "/versions/{version}/infer"
HEADER_LENGTH_HEADER = "inference-header-content-length"
VERSIONS = "/versions/"


def infer_path_of(path: str) -> tuple[str, str, str] | None:
    """The route, model and version ("" if none) of an inference path, as the routes match it:
    the versioned route first, its model up to the last `/versions/`."""
    if not path.startswith("/v2/models/") or not path.endswith("/infer"):
        return None
    model = path[len("/v2/models/") : -len("/infer")]
    head, marker, version = model.rpartition(VERSIONS)
    if marker and head and version and "/" not in version:
        return VERSION_INFER, head, version
    return INFER, model, ""


def check_encoding(text: str | None) -> None:
    """Refuse a compressed body: it would reach the worker compressed."""
    if text and text.strip().lower() != "identity":
        raise UnsupportedMediaType(
            f"Content-Encoding {echo(text)} is not accepted: send the inference request "
            "uncompressed (tritonclient: leave request_compression_algorithm out)"
        )


def header_length(text: str | None, body_bytes: int) -> int | None:
    """The Inference-Header-Content-Length header's value; BadRequestBody where it is wrong."""
    if text is None:
        return None
    if not is_whole_number(text.strip()) or int(text) > body_bytes:
        raise BadRequestBody(
            f"Inference-Header-Content-Length {echo(text)} must be the byte length of the JSON "
            f"header at the start of the {body_bytes}-byte body"
        )
    return int(text)


def oip_reply(
    body: bytes, content_type: str, cache: str, tier: str, timings_ms: dict[str, float]
) -> Response:
    """The worker's reply, binary data with the extension's header."""
    headers = {
        "X-Modelhost-Cache": cache,
        "X-Modelhost-Tier": tier,
        "Server-Timing": server_timing(timings_ms),
    }
    response = Response(body, media_type=content_type, headers=headers)
    if is_oip(content_type):
        response.headers["content-type"] = "application/octet-stream"
        length = header_length_of(content_type)
        if length is not None:
            response.headers[HEADER_LENGTH_HEADER] = str(length)
    return response


def oip_error(error: ModelhostError) -> Response:
    """The protocol's `{"error": message}` for a core exception."""
    status = status_of(error)
    return JSONResponse({"error": str(error)}, status, status_headers(status, error.retry_after_s))
