"""A relayed connection's HTTP/1.1 messages, followed both ways by httptools.

Once every request relayed has its whole response, and neither side is partway through a
message, the front may answer the connection's next request itself. Anything the counts cannot
follow for sure ends the following for good: the connection then stays on the relay.
"""

from __future__ import annotations

import httptools

# their responses' ends cannot be told from the bytes alone, or the connection turns into another
UNFOLLOWED_METHODS = frozenset({b"HEAD", b"CONNECT"})
UNFOLLOWED_HEADERS = frozenset({b"expect", b"upgrade"})


class Exchanges:
    """One relayed connection's requests and responses, counted as their bytes cross."""

    def __init__(self) -> None:
        self.safe = True  # false for good: stay on the relay
        self.begun = self.sent = self.answered = 0  # requests begun, requests whole, responses
        self.responding = False  # a response begun and not yet whole
        self.requests = httptools.HttpRequestParser(_Requests(self))
        self.responses = httptools.HttpResponseParser(_Responses(self))

    def client(self, data: bytes) -> None:
        """Bytes the client sent on, to the main process."""
        if self.safe:
            self._feed(self.requests, data)

    def upstream(self, data: bytes) -> None:
        """Bytes the main process answered, written back to the client."""
        if self.safe:
            self._feed(self.responses, data)

    def _feed(self, parser: httptools.HttpRequestParser, data: bytes) -> None:
        try:
            parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):  # or not HTTP
            self.safe = False

    @property
    def settled(self) -> bool:
        """Every request begun is whole and has its whole response: the next may go elsewhere."""
        return self.safe and not self.responding and self.begun == self.sent == self.answered

    @property
    def awaiting(self) -> bool:
        """Between requests, yet answers are due: the next request waits to know where it goes."""
        return self.safe and self.begun == self.sent > self.answered


class _Requests:
    """The client's side: only plain keep-alive HTTP/1.1 requests are followed."""

    def __init__(self, exchanges: Exchanges) -> None:
        self.exchanges = exchanges

    def on_message_begin(self) -> None:
        self.exchanges.begun += 1

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in UNFOLLOWED_HEADERS:
            self.exchanges.safe = False

    def on_headers_complete(self) -> None:
        parser = self.exchanges.requests
        if parser.get_method() in UNFOLLOWED_METHODS or not _keeps_alive(parser):
            self.exchanges.safe = False

    def on_message_complete(self) -> None:
        self.exchanges.sent += 1


class _Responses:
    """The main process's side: whole final responses that keep the connection alive."""

    def __init__(self, exchanges: Exchanges) -> None:
        self.exchanges = exchanges

    def on_message_begin(self) -> None:
        self.exchanges.responding = True

    def on_headers_complete(self) -> None:
        parser = self.exchanges.responses
        if parser.get_status_code() < 200 or not _keeps_alive(parser):  # 1xx: more to come
            self.exchanges.safe = False

    def on_message_complete(self) -> None:
        exchanges = self.exchanges
        exchanges.responding = False
        exchanges.answered += 1
        if exchanges.answered > exchanges.sent:  # answered before it was whole: not followed
            exchanges.safe = False


def _keeps_alive(parser: httptools.HttpRequestParser | httptools.HttpResponseParser) -> bool:
    """HTTP/1.1 with no `Connection: close`, and a response's end known without the close."""
    return parser.get_http_version() == "1.1" and parser.should_keep_alive()
