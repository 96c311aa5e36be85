"""Which model kills its workers: each death's blame shared among what the worker ran."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.host.culprits import WINDOW_S, Culprits


def test_a_model_running_alone_at_two_deaths_is_held_back() -> None:
    culprits = Culprits()
    assert culprits.died(frozenset({"poisoned"})) == []
    assert culprits.died(frozenset({"poisoned"})) == ["poisoned"]


def test_deaths_beside_other_models_loads_take_more_of_them() -> None:
    """A different model loading at each death: half a blame each time."""
    culprits = Culprits()
    held = [culprits.died(frozenset({"poisoned"}), f"reloaded-{n}") for n in range(4)]
    assert held == [[], [], [], ["poisoned"]]


def test_a_load_is_never_held_back_here() -> None:
    """A model whose load kills its worker is failed_loads.py's to judge."""
    culprits = Culprits()
    assert [culprits.died(frozenset(), "broken") for _ in range(4)] == [[]] * 4


def test_a_model_running_beside_a_broken_load_twice_is_not_held_back() -> None:
    culprits = Culprits()
    assert [culprits.died(frozenset({"hot"}), "broken") for _ in range(2)] == [[], []]


def test_deaths_older_than_the_window_are_forgotten() -> None:
    now = [0.0]
    culprits = Culprits(clock=lambda: now[0])
    culprits.died(frozenset({"poisoned"}))
    now[0] += WINDOW_S
    assert culprits.died(frozenset({"poisoned"})) == []
    now[0] += WINDOW_S - 1
    assert culprits.died(frozenset({"poisoned"})) == ["poisoned"]


def test_a_model_held_back_is_blamed_for_nothing_more() -> None:
    culprits = Culprits()
    for _ in range(2):
        culprits.died(frozenset({"poisoned"}))
    assert culprits.blame("poisoned") == 0
    assert culprits.died(frozenset({"other"})) == []


deaths = st.lists(
    st.tuples(
        st.frozensets(st.sampled_from(["a", "b", "c", "d"]), max_size=3),
        st.sampled_from(["", "a", "loaded"]),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(deaths)
def test_a_model_is_held_back_only_once_it_carries_two_deaths_blame(
    plan: list[tuple[frozenset[str], str]],
) -> None:
    """Whatever the deaths: a model held back had run batches at the death that held it and
    carried at least two deaths' blame; one only ever running batches is left with less."""
    culprits = Culprits()
    for batches, loading in plan:
        before = {name: culprits.blame(name) for name in batches}
        suspects = len(batches | ({loading} if loading else set()))
        for name in culprits.died(batches, loading):
            assert name in batches and before[name] + 1 / suspects >= 2 - 1e-9
        assert all(culprits.blame(name) < 2 - 1e-9 for name in "bcd")
