"""How an Open Inference Protocol body crosses from the frontend to a worker and back.

The frontend never decodes an OIP body: it labels it with this media type, carrying the length
of the JSON header when the body has binary tensor data after it (the
`Inference-Header-Content-Length` of the binary tensor data extension). A worker answers in kind.
No numpy here: the frontend imports this module.
"""

from __future__ import annotations

OIP_MEDIA_TYPE = "application/vnd.modelhost.oip"
HEADER_LENGTH = "header-length"
MODEL_NAME_PARAM = "oip_model_name"  # Invocation params the frontend sets for the reply header
MODEL_VERSION_PARAM = "oip_model_version"


def oip_media_type(header_length: int | None = None) -> str:
    """The media type of an OIP body, with its JSON header's length when binary data follows."""
    return (
        OIP_MEDIA_TYPE
        if header_length is None
        else f"{OIP_MEDIA_TYPE}; {HEADER_LENGTH}={header_length}"
    )


def is_oip(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == OIP_MEDIA_TYPE


def header_length_of(content_type: str) -> int | None:
    """The `header-length` parameter of an OIP media type, or None when the body is all JSON."""
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == HEADER_LENGTH:
            return int(value.strip())
    return None
