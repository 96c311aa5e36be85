"""Caps on the headers passed on to a handler: each within the cap passes, the first over it is
named in the refusal."""

from __future__ import annotations

import pytest

from modelhost.errors import HeaderTooLarge
from modelhost.protocols.params import MAX_HEADER_CHARS, check_headers

NAMES = ("content-type", "accept", "x-a")


def test_headers_within_the_cap_pass() -> None:
    headers = {"content-type": "x" * MAX_HEADER_CHARS, "accept": "", "other": "y" * 10**5}
    check_headers(headers, NAMES)
    check_headers({}, NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_header_over_the_cap_is_refused_by_name(name: str) -> None:
    headers = {"content-type": "a", name: "x" * (MAX_HEADER_CHARS + 1)}
    with pytest.raises(HeaderTooLarge, match=f"the {name} header is {MAX_HEADER_CHARS + 1} "):
        check_headers(headers, NAMES)


def test_the_first_header_over_the_cap_is_named() -> None:
    headers = {"accept": "x" * (MAX_HEADER_CHARS + 5), "x-a": "x" * (MAX_HEADER_CHARS + 1)}
    with pytest.raises(HeaderTooLarge, match="the accept header"):
        check_headers(headers, NAMES)
