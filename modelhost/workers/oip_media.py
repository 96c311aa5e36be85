"""The media type an Open Inference Protocol body crosses to a worker under, undecoded.

No numpy here: the frontend imports this module.
"""

from __future__ import annotations

OIP_MEDIA_TYPE = "application/vnd.modelhost.oip"
HEADER_LENGTH = "header-length"
MODEL_NAME_PARAM = "oip_model_name"  # for the reply header
MODEL_VERSION_PARAM = "oip_model_version"


def oip_media_type(header_length: int | None = None) -> str:
    """The media type, with the JSON header's length when binary data follows."""
    return (
        OIP_MEDIA_TYPE
        if header_length is None
        else f"{OIP_MEDIA_TYPE}; {HEADER_LENGTH}={header_length}"
    )


def is_oip(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == OIP_MEDIA_TYPE


def header_length_of(content_type: str) -> int | None:
    """The `header-length` parameter, or None when the body is all JSON."""
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == HEADER_LENGTH:
            return int(value.strip())
    return None
