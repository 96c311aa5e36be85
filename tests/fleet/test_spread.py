"""Which hot models the router spreads, and how far: a model over half a fair share gets more
instances, gives them back only under a quarter, and the map file round-trips."""

from __future__ import annotations

import pytest

from modelhost.integrations.spread import Poll, parse, rates, render, spread


def test_rates_add_each_instances_requests_of_a_model() -> None:
    before = [Poll(0.0, 100, {"hot": 10}), Poll(0.0, 50, {})]
    after = [Poll(2.0, 300, {"hot": 110, "warm": 20}), Poll(2.0, 90, {"hot": 40})]
    models, total = rates(before, after)
    assert total == pytest.approx(100 + 20)
    assert models == pytest.approx({"hot": 50 + 20, "warm": 10})


def test_a_count_that_went_down_started_again() -> None:
    models, total = rates([Poll(0.0, 1000, {"m": 900})], [Poll(1.0, 30, {"m": 30})])
    assert total == pytest.approx(30) and models == pytest.approx({"m": 30})


def test_a_model_no_longer_hot_has_no_rate() -> None:
    models, _ = rates([Poll(0.0, 10, {"m": 5})], [Poll(1.0, 20, {})])
    assert models == {}


def test_heavy_model_gets_enough_instances() -> None:
    # 3 instances, 300 req/s: a fair share is 100; 150 req/s needs 3 copies of 50
    """A model over half a fair share gets enough instances."""
    assert spread({"hot": 150.0, "cold": 5.0}, 300.0, 3, {}) == {"hot": 3}
    assert spread({"hot": 90.0}, 300.0, 3, {}) == {"hot": 2}
    assert spread({"hot": 40.0}, 300.0, 3, {}) == {}


def test_copies_stop_at_the_widest_split_and_the_fleet() -> None:
    assert spread({"hot": 1000.0}, 1000.0, 8, {}) == {"hot": 4}
    assert spread({"hot": 1000.0}, 1000.0, 2, {}) == {"hot": 2}


def test_between_the_thresholds_nothing_moves() -> None:
    """Spread 3 ways at 150 of 300 req/s; at 60 each copy would carry 30 with two copies (0.3 of
    a fair share, over a quarter): it keeps 3; at 40, two copies of 20 would do: it gives one
    back; at 20, one."""
    assert spread({"hot": 60.0}, 300.0, 3, {"hot": 3}) == {"hot": 3}
    assert spread({"hot": 40.0}, 300.0, 3, {"hot": 3}) == {"hot": 2}
    assert spread({}, 300.0, 3, {"hot": 2}) == {}


def test_an_idle_fleet_gathers_everything() -> None:
    assert spread({}, 0.0, 3, {"hot": 3}) == {}


def test_the_map_round_trips_odd_names() -> None:
    copies = {'tenants/"quoted".joblib': 2, "a\\b": 3, "plain": 4}
    text = render(copies)
    assert text.startswith("#") and parse(text) == copies
    assert parse('# "x" $modelhost_one_of_3;\nother line\n') == {}
