"""Linear models' `predict` without scikit-learn's checks answers what the models answer, bit for
bit, and leaves every row, method and model it cannot answer alike to scikit-learn."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import (
    HuberRegressor,
    LinearRegression,
    LogisticRegression,
    Perceptron,
    RidgeClassifier,
    SGDClassifier,
)
from sklearn.svm import LinearSVC

from modelhost import testing
from modelhost.errors import BadRequestBody
from modelhost.workers.handlers import linear
from modelhost.workers.handlers.linear import linear_of
from modelhost.workers.handlers.sklearn import SklearnHandler

CLASSIFIERS = (LogisticRegression, SGDClassifier, LinearSVC, Perceptron)


@st.composite
def fitted(draw: st.DrawFn) -> tuple[Any, np.ndarray]:
    """A linear classifier (or Huber's regressor) fitted on random data, and rows to predict."""
    kind = draw(st.sampled_from((*CLASSIFIERS, HuberRegressor)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    samples, features = draw(st.integers(12, 60)), draw(st.integers(1, 6))
    x = rng.normal(size=(samples, features)) * draw(st.sampled_from([1e-3, 1.0, 1e4]))
    if kind is HuberRegressor:
        y: np.ndarray = rng.normal(size=samples)
    else:
        labels = draw(st.sampled_from([np.arange(2), np.arange(5), np.array(["a", "b", "c"])]))
        y = np.resize(labels, samples)  # every class present
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = kind().fit(x, y)
    return model, rng.normal(size=(draw(st.integers(1, 17)), features)) * 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fitted())
def test_answers_are_the_models_to_the_bit(case: tuple[Any, np.ndarray]) -> None:
    model, rows = case
    shortcut = linear_of(model)
    assert shortcut is not None
    ours, theirs = shortcut.predict(rows, "predict"), model.predict(rows)
    assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


@pytest.fixture(scope="module")
def iris() -> LogisticRegression:
    x, y = np.asarray(testing.iris_rows(150)), np.arange(150) % 3
    return LogisticRegression(max_iter=500).fit(x, y)


@pytest.mark.parametrize("value", [np.nan, np.inf], ids=["nan", "infinite"])
def test_rows_not_finite_get_scikit_learns_own_refusal(
    iris: LogisticRegression, value: float
) -> None:
    rows = np.asarray(testing.iris_rows(2))
    rows[1, 2] = value
    with pytest.raises(ValueError) as theirs:
        iris.predict(rows)
    with pytest.raises(BadRequestBody) as ours:
        SklearnHandler(iris).predict(rows, "predict")
    assert str(ours.value) == f"the model refused the input: {theirs.value}"


def test_other_methods_and_kinds_of_rows_are_left_to_scikit_learn(iris: LogisticRegression) -> None:
    shortcut = linear_of(iris)
    assert shortcut is not None
    rows = np.asarray(testing.iris_rows(3))
    assert shortcut.predict(rows, "predict_proba") is None
    assert shortcut.predict(rows.astype(np.float32), "predict") is None
    assert shortcut.predict(rows.astype(np.int64), "predict") is None
    answered = SklearnHandler(iris).predict(rows, "predict_proba")
    assert np.array_equal(answered, iris.predict_proba(rows))


def test_models_with_predictions_of_their_own_are_left_to_scikit_learn() -> None:
    x, y = np.asarray(testing.iris_rows(150)), np.arange(150) % 3

    class Shifted(LogisticRegression):
        def decision_function(self, X: Any) -> Any:
            return super().decision_function(X) + 1

    others = (RidgeClassifier().fit(x, y), LinearRegression().fit(x, y), Shifted().fit(x, y))
    assert [linear_of(model) for model in others] == [None, None, None]
    assert linear_of(LogisticRegression()) is None  # not fitted


def test_a_class_whose_arithmetic_differs_is_left_to_scikit_learn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checked once for each class in a process: a later scikit-learn's own arithmetic wins."""

    class Later(LogisticRegression):
        pass

    x, y = np.asarray(testing.iris_rows(150)), np.arange(150) % 3
    monkeypatch.setattr(linear.Linear, "predict", lambda self, rows, method: np.zeros(len(rows)))
    assert linear_of(Later(max_iter=500).fit(x, y)) is None
