"""gRPC's calls as an ASGI app (the h2corn front's): a method answered with its status as
trailers, the limits the app holds of a call (its first message's deadline, its size, streams
waiting at once, grpc-timeout), and the caller named by the app, never by the client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from modelhost.rpc import callers
from modelhost.rpc.asgi import CallLimits, GrpcApp
from modelhost.rpc.wire import framed

GONE = b"gone"  # a chunk that stands for the client resetting the stream
LIMITS = CallLimits(first_message_s=0.05, max_message_bytes=64, max_waiting=2)


class Stream:
    """One call's ASGI side: the body's chunks to receive (None: nothing comes), what is sent."""

    def __init__(self, *chunks: bytes | None) -> None:
        self.chunks = list(chunks)
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if not self.chunks or self.chunks[0] is None:
            await asyncio.Event().wait()  # the client sends nothing more
        chunk = self.chunks.pop(0)
        if chunk == GONE:
            await asyncio.sleep(0.01)
            return {"type": "http.disconnect"}
        more = any(waiting != GONE for waiting in self.chunks)
        return {"type": "http.request", "body": chunk, "more_body": more}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def status(self) -> tuple[str, str]:
        fields = dict(self.sent[-1]["headers"])
        return fields[b"grpc-status"].decode(), fields.get(b"grpc-message", b"").decode()

    def answers(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body" and m["body"]]


def scope(path: str = "/s.S/Echo", **headers: str) -> dict[str, Any]:
    fields = [(b"host", b"localhost:8001"), (b"content-type", b"application/grpc")]
    fields += [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    return {"type": "http", "path": path, "headers": fields, "client": ("10.0.0.7", 5000)}


async def echo(request: bytes, context: Any) -> bytes:
    return request


async def caller(request: bytes, context: Any) -> bytes:
    return " ".join(callers.caller(context.invocation_metadata())).encode()


async def sleeps(request: bytes, context: Any) -> bytes:
    await asyncio.sleep(10)
    return request


async def counts(request: bytes, context: Any) -> AsyncIterator[bytes]:
    for n in range(3):
        yield str(n).encode()


async def forever(request: bytes, context: Any) -> AsyncIterator[bytes]:
    try:
        while True:
            yield b"tick"
            await asyncio.sleep(0.001)
    finally:
        ENDED.append(True)


ENDED: list[bool] = []


def app() -> GrpcApp:
    methods = {"Echo": echo, "Caller": caller, "Sleeps": sleeps}
    unary = grpc.unary_unary_rpc_method_handler
    registered = {f"/s.S/{name}": unary(method) for name, method in methods.items()}
    registered["/s.S/Counts"] = grpc.unary_stream_rpc_method_handler(counts)
    registered["/s.S/Forever"] = grpc.unary_stream_rpc_method_handler(forever)
    return GrpcApp(registered, (), LIMITS)


def called(stream: Stream, call_scope: dict[str, Any], served: GrpcApp | None = None) -> Stream:
    asyncio.run((served or app())(call_scope, stream.receive, stream.send))
    return stream


def test_a_unary_call_is_answered_with_ok_trailers() -> None:
    stream = called(Stream(framed(b"hi")[:3], framed(b"hi")[3:]), scope())
    assert stream.answers() == [framed(b"hi")]
    assert stream.status() == ("0", "")
    assert stream.sent[0]["headers"] == [(b"content-type", b"application/grpc")]


def test_a_server_streaming_call_sends_each_answer() -> None:
    stream = called(Stream(framed(b"")), scope("/s.S/Counts"))
    assert stream.answers() == [framed(b"0"), framed(b"1"), framed(b"2")]
    assert stream.status() == ("0", "")


def test_an_unknown_method_is_unimplemented() -> None:
    assert called(Stream(framed(b"")), scope("/s.S/Nope")).status()[0] == "12"


def test_a_stream_without_its_message_in_time_is_ended() -> None:
    stream = called(Stream(framed(b"hi")[:3], None), scope())
    assert stream.status() == ("4", "no message in time")


def test_a_message_past_the_cap_is_refused() -> None:
    code, message = called(Stream(framed(b"x" * 65)), scope()).status()
    assert code == "8" and "max-request-size" in message


def test_grpc_timeout_ends_the_call() -> None:
    stream = called(Stream(framed(b"hi")), scope("/s.S/Sleeps", grpc_timeout="20m"))
    assert stream.status()[0] == "4"


def test_streams_waiting_past_the_budget_are_refused() -> None:
    served = app()

    async def three() -> list[Stream]:
        streams = [Stream(None) for _ in range(3)]
        waiting = [asyncio.ensure_future(served(scope(), s.receive, s.send)) for s in streams]
        await asyncio.gather(*waiting)
        return streams

    statuses = [stream.status()[0] for stream in asyncio.run(three())]
    assert sorted(statuses) == ["4", "4", "8"]  # two timed, the third refused at once


def test_the_caller_is_the_app_s_and_a_client_s_own_is_dropped() -> None:
    forged = {callers.HEADER.replace("-", "_"): "127.0.0.1"}
    stream = called(Stream(framed(b"")), scope("/s.S/Caller", **forged))
    assert stream.answers() == [framed(b"10.0.0.7 ")]


@pytest.mark.parametrize(("host", "named"), [(b"evil.example:8001", "evil.example:8001")])
def test_a_foreign_authority_is_named_with_the_caller(host: bytes, named: str) -> None:
    call_scope = scope("/s.S/Caller")
    call_scope["headers"][0] = (b"host", host)
    stream = called(Stream(framed(b"")), call_scope)
    assert stream.answers() == [framed(f"10.0.0.7 {named}".encode())]


def test_past_the_budget_the_connection_holding_the_most_waiting_streams_is_shed() -> None:
    """Two streams without a message on one connection, then a call on another: the two are
    ended, as the guard ends the connection holding the most, and the call is answered."""
    served = app()

    async def hog_then_call() -> tuple[list[Stream], Stream]:
        hog, call = [Stream(None), Stream(None)], Stream(framed(b"hi"))
        other = {**scope(), "client": ("10.0.0.8", 6000)}
        tasks = [asyncio.ensure_future(served(scope(), s.receive, s.send)) for s in hog]
        await asyncio.sleep(0)  # both wait for their message
        await served(other, call.receive, call.send)
        await asyncio.gather(*tasks)
        return hog, call

    hog, call = asyncio.run(hog_then_call())
    assert call.status() == ("0", "")
    assert [stream.status()[0] for stream in hog] == ["8", "8"]
    assert served.waiting.count == 0 and not served.waiting.held


def test_a_client_that_resets_a_streaming_call_ends_its_handler() -> None:
    ENDED.clear()
    stream = called(Stream(framed(b""), GONE), scope("/s.S/Forever"))
    assert ENDED == [True]
    assert stream.answers() and stream.sent[-1]["type"] == "http.response.body"  # no status


def test_a_message_that_does_not_parse_is_internal_and_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def parse(message: bytes) -> bytes:
        raise ValueError("not a message")

    served = GrpcApp({"/s.S/Echo": grpc.unary_unary_rpc_method_handler(echo, parse)}, (), LIMITS)
    stream = called(Stream(framed(b"junk")), scope(), served)
    assert stream.status() == ("13", "Failed to deserialize request")
    assert not caplog.records
