"""Which requests the hit side answers: a keep-alive HTTP/1.1 POST to an invocation route with a
declared body, nothing in its head that uvicorn treats apart (http/hits.py)."""

from __future__ import annotations

import httptools

from modelhost.http.invocation_paths import route_of

Route = tuple[str, str | None]
# what uvicorn answers in its own way: 100-continue, chunked bodies, upgrades
UVICORN_HEADERS = frozenset({"expect", "transfer-encoding", "upgrade"})


class Head:
    """httptools' callbacks: the URL and the headers, names lowered, the last of each kept."""

    __slots__ = ("headers", "url", "whole")

    def __init__(self) -> None:
        self.url = b""
        self.headers: dict[str, str] = {}
        self.whole = True  # the parser is between requests

    def on_message_begin(self) -> None:
        self.url, self.headers, self.whole = b"", {}, False

    def on_message_complete(self) -> None:
        self.whole = True

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")


class Heads:
    """A connection's heads, read one after another by one parser, as uvicorn keeps one a
    connection: a parser made a request costs more than the rest of the head's reading."""

    def __init__(self) -> None:
        self.read = Head()
        self.parser = httptools.HttpRequestParser(self.read)

    @property
    def whole(self) -> bool:
        return self.read.whole

    def feed(self, head: bytes) -> bool:
        """Read `head` (through its blank line); False, and a fresh parser, where it is not one."""
        try:
            self.parser.feed_data(head)
        except httptools.HttpParserError:
            self.parser = httptools.HttpRequestParser(self.read)
            self.read.whole = True
            return False
        return True

    def body(self, body: bytes) -> None:
        """The body of the head just read, all of it: the parser is then ready for the next."""
        try:
            self.parser.feed_data(body)
        except httptools.HttpParserError:  # not a body it expected: read the next head afresh
            self.parser = httptools.HttpRequestParser(self.read)


class PlainHeads(Heads):
    """The heads of a connection the hit side reads."""

    def plain(self, head: bytes, max_body_bytes: int) -> tuple[Route, int] | None:
        """The route and body size of `head` (through its blank line); None: uvicorn's, and
        read no more heads here."""
        if not self.feed(head):
            return None
        parser, headers, url = self.parser, self.read.headers, self.read.url
        if parser.get_method() != b"POST" or parser.get_http_version() != "1.1":
            return None
        if not parser.should_keep_alive() or not UVICORN_HEADERS.isdisjoint(headers):
            return None
        if b"?" in url or b"%" in url:  # uvicorn splits and unquotes
            return None
        body_bytes = _declared(headers)
        if body_bytes is None or body_bytes > max_body_bytes:
            return None
        route = route_of(url.decode("latin-1"))
        return None if route is None else (route, body_bytes)


def _declared(headers: dict[str, str]) -> int | None:
    try:
        size = int(headers["content-length"])
    except (KeyError, ValueError):
        return None
    return size if size >= 0 else None
