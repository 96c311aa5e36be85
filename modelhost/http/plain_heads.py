"""Which requests the hit side answers: a keep-alive HTTP/1.1 POST to an invocation route with a
declared body, nothing in its head that uvicorn treats apart (http/hits.py)."""

from __future__ import annotations

import httptools

from modelhost.http.invocation_paths import route_of

Route = tuple[str, str | None]
# what uvicorn answers in its own way: 100-continue, chunked bodies, upgrades
UVICORN_HEADERS = frozenset({"expect", "transfer-encoding", "upgrade"})


class _Head:
    """httptools' callbacks: the URL and the headers, names lowered, the last of each kept."""

    __slots__ = ("headers", "url")

    def __init__(self) -> None:
        self.url = b""
        self.headers: dict[str, str] = {}

    def on_message_begin(self) -> None:
        self.url, self.headers = b"", {}

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")


class PlainHeads:
    """A connection's heads, read one after another by one parser."""

    def __init__(self) -> None:
        self.read = _Head()
        self.parser = httptools.HttpRequestParser(self.read)

    def plain(self, head: bytes, max_body_bytes: int) -> tuple[Route, int] | None:
        """The route and body size of `head` (through its blank line); None: uvicorn's, and
        read no more heads here."""
        try:
            self.parser.feed_data(head)
        except httptools.HttpParserError:
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

    def body(self, body: bytes) -> None:
        """The body of the head just read, all of it."""
        self.parser.feed_data(body)


def _declared(headers: dict[str, str]) -> int | None:
    try:
        size = int(headers["content-length"])
    except (KeyError, ValueError):
        return None
    return size if size >= 0 else None
