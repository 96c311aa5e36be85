"""How slow a client may be: its body may pause no longer than the timeout and past it must keep
a minimum average rate (Apache's `MinRate`); answers unread past the send timeout cut it off."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from modelhost.config import Config


class ClientPace(NamedTuple):
    timeout_s: float  # the longest pause, and the grace before the rate
    min_rate: int  # bytes a second; 0: none
    send_timeout_s: float = 60.0  # writes waiting on the client this long: it is gone

    def due(self, started: float, received: int, now: float) -> float:
        """When a body begun at `started`, with `received` bytes by `now`, is late."""
        due = now + self.timeout_s
        if self.min_rate:
            due = min(due, started + self.timeout_s + received / self.min_rate)
        return due


def pace_of(config: Config) -> ClientPace:
    return ClientPace(config.header_timeout_s, config.min_body_rate, config.send_timeout_s)
