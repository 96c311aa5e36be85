"""KServe's v1 data plane: a predict body checked as KServe's server checks it, and its words."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from modelhost.errors import BadRequestBody

JSON_TYPES = ("", "application/json", "application/cloudevents+json", "application/ld+json")
SEND = 'send JSON such as {"instances": [[5.1, 3.5, 1.4, 0.2]]}'
_ABSENT = msgspec.Raw(b"")


class _Envelope(msgspec.Struct):
    """The one field KServe checks; msgspec skips the rest unbuilt."""

    instances: msgspec.Raw = _ABSENT


_ENVELOPE = msgspec.json.Decoder(_Envelope)


def check_body(body: bytes, content_type: str) -> None:
    """BadRequestBody where KServe's server refuses a predict body; other types pass as sent."""
    if content_type.split(";", 1)[0].strip().lower() not in JSON_TYPES:
        return
    instances = _instances_of(body)
    if instances is not _ABSENT and not _is_list(instances):
        raise BadRequestBody(f'Expected "instances" to be a list; {SEND}')


def _instances_of(body: bytes) -> Any:
    """The body's `instances` (`_ABSENT`: none); BadRequestBody where the body is no JSON."""
    try:
        if body[:64].lstrip()[:1] == b"{":
            return _ENVELOPE.decode(body).instances
        msgspec.json.decode(body, type=msgspec.Raw)  # its syntax alone
        return _ABSENT
    except msgspec.DecodeError:  # or JSON the workers' codecs read: NaN, a byte-order mark
        return _lenient_instances(body)


def _lenient_instances(body: bytes) -> Any:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise BadRequestBody(f"Unrecognized request format: {error}; {SEND}") from None
    if not isinstance(document, dict):
        return _ABSENT
    return document.get("instances", _ABSENT)


def _is_list(instances: Any) -> bool:
    if isinstance(instances, msgspec.Raw):
        return bytes(instances).startswith(b"[")
    return isinstance(instances, list)


def not_found(name: str, advice: str) -> str:
    return f"Model with name {name} does not exist: {advice}"


def not_ready(name: str, failure: str | None) -> str:
    """KServe's words for a model known but not loaded, and how to load it."""
    why = f"its last load failed ({failure}); " if failure else ""
    return (
        f"Model with name {name} is not ready: {why}it loads on its first "
        f"POST /v1/models/{name}:predict"
    )


def no_explainer(name: str) -> str:
    return (
        f"Model with name {name} has no explainer: KServe's explainers do not run here; call "
        f"POST /v1/models/{name}:predict for its predictions, or POST /explanations/{name} "
        "for a TorchServe handler's explain_handle"
    )
