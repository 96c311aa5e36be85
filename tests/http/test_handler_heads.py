"""A worker's word on its answer's status and headers, as far as a client may be shown it."""

from __future__ import annotations

import pytest

from modelhost.errors import HandlerError
from modelhost.http.handler_heads import handler_head
from modelhost.workers.messages import Custom


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("x-split", "a\r\nset-cookie: stolen=1"),
        ("x-nul", "a\x00b"),
        ("x-wide", "snow ☃"),  # no Latin-1 byte for it
        ("bad name", "1"),
        ("x-colon:", "1"),
        ("", "1"),
        ("Content-Length", "1"),
        ("TRANSFER-ENCODING", "chunked"),
        ("x-modelhost-cache", "hit"),
        ("Server-Timing", "infer;dur=0"),
    ],
)
def test_a_header_that_would_break_the_answer_or_pose_as_the_servers_is_dropped(
    name: str, value: str
) -> None:
    assert handler_head(Custom(200, ((name, value),))) == (200, [])


def test_other_headers_are_shown_lowered_with_their_latin_1_values() -> None:
    custom = Custom(422, (("X-Reason", "bad input\tcafé"), ("x-checked", "yes")))
    assert handler_head(custom) == (
        422,
        [(b"x-reason", "bad input\tcafé".encode("latin-1")), (b"x-checked", b"yes")],
    )


@pytest.mark.parametrize("status", [101, 199, 204, 205, 304, 600, -1])
def test_a_status_no_answer_with_a_body_has_is_a_handler_error(status: int) -> None:
    with pytest.raises(HandlerError, match=str(status)):
        handler_head(Custom(status, ()))
