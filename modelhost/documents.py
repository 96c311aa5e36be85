"""JSON documents read from request bytes, refused with a 400 that says what was wrong."""

from __future__ import annotations

import json
from typing import Any

from modelhost.errors import BadRequestBody, NestedTooDeep


def json_object(
    data: bytes, what: str = "the body", expected: str = "a JSON object"
) -> dict[str, Any]:
    """`data` as a JSON object; `what` names it in the refusal, `expected` says what it must be."""
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise BadRequestBody(f"{what} is not valid JSON: {error}") from None
    except RecursionError:
        raise NestedTooDeep from None
    if not isinstance(document, dict):
        raise BadRequestBody(f"expected {expected}")
    return document
