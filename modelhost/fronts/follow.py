"""A relayed connection's HTTP/1.1 messages, counted both ways: what cannot be followed for
sure ends the following for good."""

from __future__ import annotations

import httptools

# their answers' ends are not in the bytes, or the connection turns into another; upgrades and
# 100-continue show as httptools' upgrade error, a 1xx answer or an answer before the body's end
UNFOLLOWED_METHODS = frozenset({b"HEAD", b"CONNECT"})


class Exchanges:
    """One relayed connection's requests and responses."""

    def __init__(self) -> None:
        self.safe = True  # false for good: stay on the relay
        self.begun = self.sent = self.answered = 0  # requests begun, requests whole, responses
        self.responding = False
        self.requests = httptools.HttpRequestParser(_Requests(self))
        self.responses = httptools.HttpResponseParser(_Responses(self))

    def client(self, data: bytes) -> None:
        if self.safe:
            self._feed(self.requests, data)

    def upstream(self, data: bytes) -> None:
        if self.safe:
            self._feed(self.responses, data)

    def _feed(
        self, parser: httptools.HttpRequestParser | httptools.HttpResponseParser, data: bytes
    ) -> None:
        try:
            parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            self.safe = False

    @property
    def settled(self) -> bool:
        """Every request begun is whole and answered whole."""
        return self.safe and not self.responding and self.begun == self.sent == self.answered

    @property
    def awaiting(self) -> bool:
        """Between requests, yet answers are due."""
        return self.safe and self.begun == self.sent > self.answered


class _Requests:
    """The client's side."""

    def __init__(self, exchanges: Exchanges) -> None:
        self.exchanges = exchanges

    def on_message_begin(self) -> None:
        self.exchanges.begun += 1

    def on_headers_complete(self) -> None:
        parser = self.exchanges.requests
        if parser.get_method() in UNFOLLOWED_METHODS or not _keeps_alive(parser):
            self.exchanges.safe = False

    def on_message_complete(self) -> None:
        self.exchanges.sent += 1


class _Responses:
    """The main process's side."""

    def __init__(self, exchanges: Exchanges) -> None:
        self.exchanges = exchanges

    def on_message_begin(self) -> None:
        self.exchanges.responding = True

    def on_headers_complete(self) -> None:
        parser = self.exchanges.responses
        if parser.get_status_code() < 200 or not _keeps_alive(parser):
            self.exchanges.safe = False

    def on_message_complete(self) -> None:
        exchanges = self.exchanges
        exchanges.responding = False
        exchanges.answered += 1
        if exchanges.answered > exchanges.sent:  # answered before its body ended
            exchanges.safe = False


def _keeps_alive(parser: httptools.HttpRequestParser | httptools.HttpResponseParser) -> bool:
    """HTTP/1.1 without `Connection: close`, and a response's end known without a close."""
    return parser.get_http_version() == "1.1" and parser.should_keep_alive()
