"""gRPC's wire as the ASGI front writes it: messages split from a body however it arrives, a
message past the size cap refused from its prefix, grpc-timeout's units, metadata as grpc.aio
shows it, and the status as trailers."""

from __future__ import annotations

import math

import grpc
import pytest

from modelhost.rpc.wire import (
    Aborted,
    Messages,
    MessageTooLarge,
    framed,
    metadata,
    timeout_s,
    trailers,
)


def test_messages_are_split_however_the_body_arrives() -> None:
    body = framed(b"first") + framed(b"") + framed(b"third")
    reader = Messages(most=64)
    found = [message for byte in range(len(body)) for message in reader.feed(body[byte : byte + 1])]
    assert found == [b"first", b"", b"third"]
    assert not reader.partial()


def test_a_body_that_ends_inside_a_message_is_partial() -> None:
    reader = Messages(most=64)
    assert reader.feed(framed(b"whole")[:-1]) == []
    assert reader.partial()


def test_a_message_past_the_cap_is_refused_from_its_prefix() -> None:
    with pytest.raises(MessageTooLarge, match="65-byte message.*64 bytes"):
        Messages(most=64).feed(framed(b"x" * 65)[:5])


def test_a_compressed_message_is_unimplemented() -> None:
    with pytest.raises(Aborted) as raised:
        Messages(most=64).feed(b"\x01" + framed(b"x")[1:])
    assert raised.value.code == grpc.StatusCode.UNIMPLEMENTED


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(b"3S", 3.0), (b"250m", 0.25), (b"2M", 120.0), (b"1H", 3600.0), (b"5000u", 0.005)],
)
def test_grpc_timeout_is_read_in_its_unit(value: bytes, seconds: float) -> None:
    assert timeout_s([(b"grpc-timeout", value)]) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value", [b"3x", b"S", b"\xb2S", b"1" * 5000 + b"S"], ids=["unit", "digits", "sup2", "long"]
)
def test_an_unreadable_timeout_is_none(value: bytes) -> None:
    """Latin-1's superscript two is a digit to str.isdigit, and int() refuses 4300 digits."""
    assert math.isinf(timeout_s([(b"grpc-timeout", value)]))


def test_no_timeout_is_none() -> None:
    assert math.isinf(timeout_s([]))


def test_metadata_leaves_out_what_http2_and_grpc_own_and_decodes_binary_values() -> None:
    headers = [(b":path", b"/a/B"), (b"content-type", b"application/grpc"), (b"te", b"trailers")]
    headers += [(b"authorization", b"Bearer t"), (b"trace-bin", b"AAE")]
    assert metadata(headers) == (("authorization", "Bearer t"), ("trace-bin", b"\x00\x01"))


def test_the_status_its_message_and_trailing_metadata_are_trailers() -> None:
    fields = trailers(grpc.StatusCode.NOT_FOUND, "no model 'a b' 100%", (("retry-after", "1"),))
    assert fields == [
        (b"grpc-status", b"5"),
        (b"grpc-message", b"no model 'a b' 100%25"),
        (b"retry-after", b"1"),
    ]
