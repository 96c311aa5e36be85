"""A request body's pace: no pause past the timeout, and past it a minimum average rate
(Apache's `MinRate`), so a trickled body cannot hold its connection."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from modelhost.config import Config


class BodyPace(NamedTuple):
    timeout_s: float  # the longest pause, and the grace before the rate
    min_rate: int  # bytes a second; 0: none

    def due(self, started: float, received: int, now: float) -> float:
        """When a body begun at `started`, with `received` bytes by `now`, is late."""
        due = now + self.timeout_s
        if self.min_rate:
            due = min(due, started + self.timeout_s + received / self.min_rate)
        return due


def pace_of(config: Config) -> BodyPace:
    return BodyPace(config.header_timeout_s, config.min_body_rate)
