"""What the observability tests share: the system tools they need, and a reader of /events."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from helpers.missing import missing

INSTALL_HINT = "scripts/install-test-tools.sh installs it (make test runs it)"


def require_tool(command: str, package: str) -> str:
    """The path of `command`; skips the test if it is missing, fails it under CI's
    REQUIRE_TEST_TOOLS=1 so a missing install step cannot pass as a skip."""
    path = shutil.which(command)
    if path:
        return path
    missing(f"{command} is not installed (Debian package {package}); {INSTALL_HINT}")


class EventReader(threading.Thread):
    """Reads `GET /events` on a thread of its own, keeping each event's id and JSON."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(daemon=True)
        self.url, self.headers = url, dict(headers or {})
        self.events: list[dict[str, Any]] = []
        self.ended = False
        self.error: Exception | None = None  # what broke the stream before it was closed
        self._closing = False
        self._changed = threading.Condition()
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=None))
        self._connected = threading.Event()

    def __enter__(self) -> EventReader:
        self.start()
        assert self._connected.wait(30), f"no answer from {self.url}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing = True
        self._client.close()  # ends the stream; the thread sees a read error and stops
        if self.error is not None:
            raise self.error

    def run(self) -> None:
        try:
            with self._client.stream("GET", self.url, headers=self.headers) as response:
                response.raise_for_status()
                self._connected.set()
                self._read(response)
        except Exception as error:  # reported by __exit__, unless it is the close itself
            if not self._closing:
                self.error = error
        finally:
            with self._changed:
                self.ended = True
                self._changed.notify_all()

    def _read(self, response: httpx.Response) -> None:
        record: dict[str, str] = {}
        for line in response.iter_lines():
            if line:
                field, _, value = line.partition(":")
                record[field] = value.strip()
            elif "data" in record:
                event = json.loads(record["data"])
                assert event["id"] == int(record["id"])
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
                record = {}

    def wait_for(
        self, found: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 60
    ) -> list[dict[str, Any]]:
        """The events so far, once `found(events)` holds (or the stream ended, or time ran out)."""
        with self._changed:
            self._changed.wait_for(lambda: found(self.events) or self.ended, timeout_s)
            return list(self.events)
