"""Which hot models the router spreads, and how far: rates are requests a second over the interval
each instance was observed, a model over half a fair share gets more instances, gives them back
only under a quarter, and the map file round-trips."""

from __future__ import annotations

import pytest

from modelhost.integrations.spread import Poll, Rates, parse, rates, render, spread


def test_rates_add_each_instances_requests_of_a_model() -> None:
    """The first instance lists `hot` twice; `warm` first, hot since the last poll. The second
    lists `hot` first, hot for all its 40 requests since the last poll."""
    before = [Poll(0.0, 100, {"hot": 10}, {"hot": 50}), Poll(0.0, 50, {})]
    after = [
        Poll(2.0, 300, {"hot": 110, "warm": 20}, {"hot": 250, "warm": 200}),
        Poll(2.0, 90, {"hot": 40}, {"hot": 40}),
    ]
    observed = rates(before, after)
    assert observed.total_rps == pytest.approx(100 + 20) and observed.instances == 2
    assert observed.models == pytest.approx({"hot": 50 + 20, "warm": 10})


def test_a_count_that_went_down_started_again() -> None:
    observed = rates([Poll(0.0, 1000, {"m": 900})], [Poll(1.0, 30, {"m": 30}, {"m": 30})])
    assert observed.total_rps == pytest.approx(30) and observed.models == pytest.approx({"m": 30})


def test_a_model_no_longer_hot_has_no_rate() -> None:
    assert rates([Poll(0.0, 10, {"m": 5})], [Poll(1.0, 20, {})]).models == {}


def test_a_model_newly_listed_is_not_rated_by_its_history() -> None:
    """A model hot for an hour outside an instance's list enters it with an hour's requests, more
    than the instance served in the interval: they are not the interval's. An instance that does
    not say how long the model was hot gives it no rate until it is listed twice."""
    idle = [Poll(10.0, 1000, {}), Poll(10.0, 1000, {})]
    before = [Poll(0.0, 0, {"busy": 0}), Poll(0.0, 0, {}), Poll(0.0, 0, {})]
    after = [Poll(10.0, 1000, {"busy": 100, "late": 3600}), *idle]
    assert spread(rates(before, after), 3, {}) == {}


def test_a_model_newly_listed_is_rated_by_its_share_since_it_became_hot() -> None:
    """3600 of the instance's 360,000 requests since `late` became hot: 1% of 100 req/s."""
    before = [Poll(0.0, 0, {"busy": 0})]
    after = [Poll(10.0, 1000, {"busy": 100, "late": 3600}, {"busy": 1000, "late": 360_000})]
    assert rates(before, after).models == pytest.approx({"busy": 10, "late": 1})


def test_an_instance_that_missed_a_poll_is_left_out() -> None:
    """Neither its requests nor its place in the fair share count that round."""
    before = [Poll(0.0, 0, {}), None, Poll(0.0, 0, {})]
    after = [Poll(1.0, 100, {}), Poll(1.0, 5000, {"m": 5000}), None]
    assert rates(before, after) == Rates({}, pytest.approx(100), 1)


def test_heavy_model_gets_enough_instances() -> None:
    """A model over half a fair share gets enough instances: with 3 instances at 300 req/s a fair
    share is 100; 150 req/s needs 3 copies of 50."""
    assert spread(Rates({"hot": 150.0, "cold": 5.0}, 300.0, 3), 3, {}) == {"hot": 3}
    assert spread(Rates({"hot": 90.0}, 300.0, 3), 3, {}) == {"hot": 2}
    assert spread(Rates({"hot": 40.0}, 300.0, 3), 3, {}) == {}


def test_the_fair_share_is_over_the_instances_that_answered() -> None:
    """Two of three answered, 200 req/s: a fair share is 100, so 90 req/s takes two copies."""
    assert spread(Rates({"hot": 90.0}, 200.0, 2), 3, {}) == {"hot": 2}


def test_a_slow_model_stays_on_one_instance_whatever_its_share() -> None:
    assert spread(Rates({"slow": 0.9}, 1.2, 3), 3, {}) == {}
    assert spread(Rates({"slow": 4.0}, 6.0, 3), 3, {}, min_rps=5.0) == {}
    assert spread(Rates({"slow": 4.0}, 6.0, 3), 3, {}) == {"slow": 3}


def test_copies_stop_at_the_widest_split_and_the_fleet() -> None:
    assert spread(Rates({"hot": 1000.0}, 1000.0, 8), 8, {}) == {"hot": 4}
    assert spread(Rates({"hot": 1000.0}, 1000.0, 2), 2, {}) == {"hot": 2}


def test_between_the_thresholds_nothing_moves() -> None:
    """Spread 3 ways at 150 of 300 req/s; at 60 each copy would carry 30 with two copies (0.3 of
    a fair share, over a quarter): it keeps 3; at 40, two copies of 20 would do: it gives one
    back; at 20, one."""
    assert spread(Rates({"hot": 60.0}, 300.0, 3), 3, {"hot": 3}) == {"hot": 3}
    assert spread(Rates({"hot": 40.0}, 300.0, 3), 3, {"hot": 3}) == {"hot": 2}
    assert spread(Rates({}, 300.0, 3), 3, {"hot": 2}) == {}


def test_an_idle_fleet_gathers_everything() -> None:
    assert spread(Rates({}, 0.0, 3), 3, {"hot": 3}) == {}


def test_the_map_round_trips_odd_names() -> None:
    copies = {'tenants/"quoted".joblib': 2, "a\\b": 3, "plain": 4}
    text = render(copies)
    assert text.startswith("#") and parse(text) == copies
    assert parse('# "x" $modelhost_one_of_3;\nother line\n') == {}


def test_a_model_hot_a_moment_before_the_poll_is_not_rated_by_a_handful() -> None:
    """3 of the last 4 requests were for it: its share over the interval's 300 is what counts."""
    observed = rates([Poll(0.0, 0, {})], [Poll(1.0, 300, {"m": 3}, {"m": 4})])
    assert observed.models == pytest.approx({"m": 3})
