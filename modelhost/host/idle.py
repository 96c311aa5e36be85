"""How often the idle watch looks."""

from __future__ import annotations

from collections.abc import Mapping


def check_interval_s(server_s: float, own_s: Mapping[str, float], most_s: float) -> float:
    """A quarter of the shortest idle time in force, at most `most_s`."""
    quarters = [idle_s / 4 for idle_s in (server_s, *own_s.values()) if idle_s > 0]
    return min([most_s, *quarters])
