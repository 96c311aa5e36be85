"""How often the idle watch looks: a quarter of the shortest idle time in force."""

from __future__ import annotations

from modelhost.host.idle import check_interval_s


def test_a_models_shorter_idle_time_quickens_the_watch() -> None:
    assert check_interval_s(60.0, {"brief": 2.0, "kept": 0.0}, 1.0) == 0.5


def test_with_no_idle_time_in_force_the_watch_idles_at_its_slowest() -> None:
    assert check_interval_s(0.0, {"kept": 0.0}, 1.0) == 1.0
