"""A body's deadline: a pause's limit, and past the timeout a minimum average rate."""

from __future__ import annotations

from modelhost.http.client_pace import ClientPace


def test_without_a_minimum_rate_only_a_pause_is_late() -> None:
    assert ClientPace(1.0, 0).due(started=0.0, received=2, now=50.0) == 51.0


def test_a_trickle_below_the_rate_is_late_before_any_pause() -> None:
    """Two bytes in five seconds at 200 a second: late at 1.01 s, long before 6 s."""
    assert ClientPace(1.0, 200).due(started=0.0, received=2, now=5.0) == 1.01


def test_a_body_above_the_rate_is_held_to_the_pause_limit_alone() -> None:
    assert ClientPace(1.0, 200).due(started=0.0, received=2_000, now=4.0) == 5.0
