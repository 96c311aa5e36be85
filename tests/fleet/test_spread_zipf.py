"""The spread over hundreds of models, through one real `Sizing` an instance: under Zipf traffic
the hottest few are spread, slow models are not however long their history, and the map is
rewritten (nginx reloaded) only when the spread changes."""

from __future__ import annotations

from sized_fleet import SizedFleet, zipf

from modelhost.integrations.spread import rates

MODELS = 300


def test_slow_models_among_hundreds_stay_on_one_instance() -> None:
    """Zipf(1.2) at 400 req/s on 3 instances: each instance counts more models as frequent than
    its list of 32 holds, so models under 1 req/s enter the list with minutes of requests behind
    them. Only the top model, a quarter of the requests, is spread, and the map written once."""
    fleet, shares = SizedFleet(3), zipf(MODELS, 1.2)
    fleet.serve(shares, rate_rps=400, seconds=150)
    named = fleet.spread_rounds(shares, rate_rps=400, interval_s=1, rounds=10)
    assert named == {"m000"} and fleet.copies == {"m000": 2}
    assert fleet.changes == 1


def test_the_hottest_few_of_hundreds_are_spread() -> None:
    """Zipf(1.0) on 8 instances, a fair share 12.5% of the requests: the top model (16%) gets 3
    copies, the second (8%) 2, the third (5.3%, under half a fair share) stays on one."""
    fleet, shares = SizedFleet(8), zipf(MODELS, 1.0)
    fleet.serve(shares, rate_rps=400, seconds=60)
    named = fleet.spread_rounds(shares, rate_rps=400, interval_s=10, rounds=10)
    assert named == {"m000", "m001"} and fleet.copies == {"m000": 3, "m001": 2}
    assert fleet.changes == 1


def test_a_model_ranking_into_the_list_is_rated_by_the_interval() -> None:
    """33 models served alike for a minute: one is hot but left out of the list of 32. A few
    requests for it rank it in, with a minute's count behind it; its rate is no more than the
    instance's over the interval."""
    fleet = SizedFleet(1)
    fleet.send([f"m{i % 33}" for i in range(33 * 180)], rate_rps=100)
    first = fleet.poll()
    (left_out,) = {f"m{i}" for i in range(33)} - set(first[0].hot)
    fleet.send([left_out] * 8, rate_rps=100)
    second = fleet.poll()
    observed = rates(first, second)
    assert second[0].hot[left_out] > 100  # a minute of requests, not the last 8
    assert 0 < observed.models[left_out] <= observed.total_rps
