"""A peer's request collection (Postman), replayed in its order against a server of ours."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import httpx
import pytest


class Request(Protocol):
    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...


class Replay:
    """Sends the collection's requests in order, each once: a test of request `i` (run alone, or
    after others) first sends every request before it, as the collection would have."""

    def __init__(self, client: httpx.Client, steps: Sequence[Request]) -> None:
        self.client, self.steps = client, steps
        self.sent = 0

    def answer(self, index: int) -> httpx.Response:
        """The answer to request `index`, once every request before it has been sent."""
        if index < self.sent:
            pytest.fail(
                f"request {index} was sent already: the steps run in the collection's order"
            )
        for earlier in self.steps[self.sent : index]:
            self._send(earlier)
        self.sent = index + 1
        return self._send(self.steps[index])

    def _send(self, step: Request) -> httpx.Response:
        return self.client.request(step.method, "/" + step.path)
