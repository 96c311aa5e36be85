"""Forests predicted tree by tree answer what the forests answer, bit for bit, and leave every
row and model they cannot answer alike to scikit-learn."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)

from modelhost import testing
from modelhost.errors import BadRequestBody
from modelhost.workers.handlers.forests import forest_of
from modelhost.workers.handlers.sklearn import SklearnHandler

CLASSIFIERS = (RandomForestClassifier, ExtraTreesClassifier)
REGRESSORS = (RandomForestRegressor, ExtraTreesRegressor)


@st.composite
def fitted(draw: st.DrawFn) -> tuple[Any, np.ndarray]:
    """A small forest of any supported kind fitted on random data, and rows to predict."""
    kind = draw(st.sampled_from(CLASSIFIERS + REGRESSORS))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    samples, features = draw(st.integers(8, 60)), draw(st.integers(1, 6))
    x = rng.normal(size=(samples, features)) * draw(st.sampled_from([1e-3, 1.0, 1e4]))
    if kind in CLASSIFIERS:
        labels = draw(st.sampled_from([np.arange(2), np.arange(5), np.array(["a", "b", "c"])]))
        y: np.ndarray = rng.choice(labels, samples)
    else:
        y = rng.normal(size=samples)
    model = kind(
        n_estimators=draw(st.integers(1, 7)),
        max_depth=draw(st.sampled_from([None, 1, 3])),
        bootstrap=draw(st.booleans()),
        random_state=seed,
    ).fit(x, y)
    rows = rng.normal(size=(draw(st.integers(1, 17)), features)) * 2
    return model, rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fitted())
def test_answers_are_the_forests_to_the_bit(case: tuple[Any, np.ndarray]) -> None:
    model, rows = case
    forest = forest_of(model)
    assert forest is not None
    methods = ["predict", "predict_proba"] if hasattr(model, "classes_") else ["predict"]
    for method in methods:
        ours, theirs = forest.predict(rows, method), getattr(model, method)(rows)
        assert ours.dtype == theirs.dtype
        assert np.array_equal(ours, theirs), method


@pytest.fixture(scope="module")
def digits_forest() -> RandomForestClassifier:
    x, y = np.asarray(testing.digits_rows(300)), np.arange(300) % 10
    return RandomForestClassifier(n_estimators=20, random_state=0).fit(x, y)


@pytest.mark.parametrize(
    "value",
    [np.nan, np.inf, 1e39],  # 1e39: finite as float64, infinite as the float32 trees compare
    ids=["nan", "infinite", "beyond-float32"],
)
def test_rows_not_finite_as_float32_get_the_forests_own_answer(
    digits_forest: RandomForestClassifier, value: float
) -> None:
    """NaN is a missing value to the forest, infinities an error: either way, its own."""
    rows = np.asarray(testing.digits_rows(2))
    rows[0, 5] = value
    handler = SklearnHandler(digits_forest)
    assert handler.shortcut is not None
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scikit-learn's cast to float32
        theirs = outcome(lambda: digits_forest.predict(rows))
        assert outcome(lambda: handler.predict(rows, "predict")) == theirs


def outcome(predict: Callable[[], Any]) -> tuple[str, str]:
    """What a predict gives back, answer or error, as text."""
    try:
        return "answer", str(predict().tolist())
    except (ValueError, BadRequestBody) as error:
        return "error", str(error).removeprefix("the model refused the input: ")


def test_a_row_of_the_wrong_width_is_a_clear_error(digits_forest: RandomForestClassifier) -> None:
    with pytest.raises(BadRequestBody, match="model expects 64 features per row, got 3"):
        SklearnHandler(digits_forest).predict(np.zeros((1, 3)), "predict")


def test_other_models_are_left_to_scikit_learn() -> None:
    x, y = np.asarray(testing.iris_rows(150)), np.arange(150) % 3
    boosted = GradientBoostingClassifier(n_estimators=3).fit(x, y)
    two_outputs = RandomForestRegressor(n_estimators=3).fit(x, np.stack([y, y], axis=1))
    unfitted = RandomForestClassifier()
    assert [forest_of(m) for m in (boosted, two_outputs, unfitted)] == [None, None, None]


def test_a_handler_answers_a_forests_rows_as_the_forest(
    digits_forest: RandomForestClassifier,
) -> None:
    rows = np.asarray(testing.digits_rows(16))
    handler = SklearnHandler(digits_forest)
    assert np.array_equal(handler.predict(rows, "predict_proba"), digits_forest.predict_proba(rows))
    assert np.array_equal(handler.predict(rows, "predict"), digits_forest.predict(rows))


def test_other_models_load_without_importing_the_forests(tmp_path: Path) -> None:
    """A worker serving linear models never pays for scikit-learn's ensembles."""
    path = testing.iris_logreg(tmp_path / "iris.joblib")
    script = (
        "import sys; from modelhost.workers.handlers.sklearn import SklearnHandler; "
        f"SklearnHandler.load({str(path)!r}); print('sklearn.ensemble' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert found.stdout.strip() == "False", found.stderr
