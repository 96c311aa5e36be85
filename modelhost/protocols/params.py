"""Caps on headers and query parameters, far below the worker frame's, before the core sees them.

A value over the frame's cap would kill the worker and every model on it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from modelhost.config.tenancy import MAX_TENANT_CHARS as MAX_TENANT_CHARS
from modelhost.errors import HeaderTooLarge, ParameterTooLarge

MAX_HEADER_CHARS = 4096  # of each header passed on
MAX_PARAM_CHARS = 4096  # of each query parameter, and of a model's URL
MAX_QUERY_CHARS = 16384
NONE_SENT = itertools.repeat("")  # a header's value when it is not sent


def is_whole_number(text: str) -> bool:
    """ASCII digits, no more than `int` converts: `str.isdigit` also takes '²'."""
    return text.isascii() and text.isdigit() and len(text) <= MAX_PARAM_CHARS


def is_negative_number(text: str) -> bool:
    """A minus sign and ASCII digits: TorchServe reads some negative values as defaults."""
    return text.startswith("-") and is_whole_number(text[1:])


def check_headers(headers: Mapping[str, str], names: Sequence[str]) -> None:
    if max(map(len, map(headers.get, names, NONE_SENT))) <= MAX_HEADER_CHARS:  # in C: every call
        return
    for name in names:
        size = len(headers.get(name, ""))
        if size > MAX_HEADER_CHARS:
            raise HeaderTooLarge(
                f"the {name} header is {size} characters long but at most {MAX_HEADER_CHARS} "
                "are accepted; send a shorter one"
            )


def check_query(query: str) -> None:
    if len(query) > MAX_QUERY_CHARS:
        raise ParameterTooLarge(
            f"the query string is {len(query)} characters long but at most {MAX_QUERY_CHARS} "
            "are accepted; send fewer or shorter parameters"
        )


def check_param(name: str, value: str) -> str:
    if len(value) > MAX_PARAM_CHARS:
        raise ParameterTooLarge(
            f"the parameter {name[:100]!r} is {len(value)} characters long but at most "
            f"{MAX_PARAM_CHARS} are accepted; send a shorter one"
        )
    return value
