"""Following a relayed connection's messages: when the front may take the connection back."""

from __future__ import annotations

import pytest

from modelhost.fronts.follow import Exchanges

GET = b"GET /ping HTTP/1.1\r\nhost: x\r\n\r\n"
POST = b"POST /models/m/invoke HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\r\n[1]\n"
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
CHUNKED = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"


def followed(*steps: tuple[str, bytes]) -> Exchanges:
    exchanges = Exchanges()
    for side, data in steps:
        getattr(exchanges, side)(data)
    return exchanges


def test_a_whole_answer_to_a_whole_request_settles() -> None:
    exchanges = followed(("client", POST), ("upstream", OK))
    assert exchanges.settled and (exchanges.sent, exchanges.answered) == (1, 1)


def test_a_request_not_yet_answered_is_awaited() -> None:
    exchanges = followed(("client", POST))
    assert exchanges.awaiting and not exchanges.settled


def test_bytes_cut_anywhere_settle_only_at_the_end() -> None:
    """Both sides cut into single bytes: settled only once the last byte of the answer is in."""
    exchanges = Exchanges()
    for byte in range(len(POST)):
        exchanges.client(POST[byte : byte + 1])
        assert not exchanges.settled and exchanges.awaiting == (byte == len(POST) - 1)
    for byte in range(len(CHUNKED)):
        assert not exchanges.settled
        exchanges.upstream(CHUNKED[byte : byte + 1])
    assert exchanges.settled


def test_pipelined_requests_settle_once_each_is_answered() -> None:
    exchanges = followed(("client", GET + POST + GET), ("upstream", OK + CHUNKED))
    assert not exchanges.settled and exchanges.awaiting
    exchanges.upstream(OK)
    assert exchanges.settled


def test_a_request_partway_is_not_settled() -> None:
    exchanges = followed(("client", GET), ("upstream", OK), ("client", POST[:40]))
    assert not exchanges.settled and not exchanges.awaiting


def test_a_streamed_body_settles_after_its_last_chunk() -> None:
    head = b"POST /models/m/invoke HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
    exchanges = followed(("client", head + b"3\r\nabc\r\n"), ("upstream", OK))
    assert not exchanges.safe  # answered before the body ended: not followed
    exchanges = followed(("client", head + b"3\r\nabc\r\n"))
    assert not exchanges.settled
    exchanges.client(b"0\r\n\r\n")
    exchanges.upstream(OK)
    assert exchanges.settled


UNFOLLOWED = {
    "close asked": (b"GET / HTTP/1.1\r\nconnection: close\r\n\r\n", OK),
    "close answered": (GET, b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"),
    "http/1.0": (b"GET / HTTP/1.0\r\n\r\n", OK),
    "http/1.0 answer": (GET, b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"),
    "head": (
        b"HEAD /ping HTTP/1.1\r\nhost: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n",
    ),
    "upgrade": (b"GET / HTTP/1.1\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n", b""),
    "connect": (b"CONNECT x:443 HTTP/1.1\r\nhost: x\r\n\r\n", OK),
    "continue": (
        b"POST / HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 2\r\n\r\nhi",
        b"HTTP/1.1 100 Continue\r\n\r\n" + OK,
    ),
    "switching": (GET, b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n\r\n"),
    "till close": (GET, b"HTTP/1.1 200 OK\r\n\r\nto the end"),
    "not http": (b"\x16\x03\x01 hello\r\n\r\n", OK),
    "garbled answer": (GET, b"HTTP/1.1 two hundred\r\n\r\n"),
    "answered twice": (GET, OK + OK),
}


@pytest.mark.parametrize("kind", UNFOLLOWED)
def test_what_cannot_be_followed_stays_on_the_relay_for_good(kind: str) -> None:
    request, answer = UNFOLLOWED[kind]
    exchanges = followed(("client", request), ("upstream", answer))
    exchanges.client(GET)
    exchanges.upstream(OK)
    assert not exchanges.safe and not exchanges.settled and not exchanges.awaiting
