"""scikit-learn's random forests and extra trees, predicted tree by tree without its overheads.

Each tree's compiled `apply` finds the leaves and their values are summed in the trees' order,
the forest's own arithmetic, so answers match to the bit; rows not finite as float32 and other
models go to scikit-learn (docs/decisions.md, "Forests are predicted tree by tree").
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

AGREEMENT_ROWS = 8  # rows of a class's first forest compared with the forest's own answers
_agrees: dict[type, bool] = {}  # per class, once a process: our arithmetic is still the forest's


class Forest:
    """A single-output forest's trees and leaf values, read from the model without copies."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.trees = [estimator.tree_ for estimator in model.estimators_]
        self.values = [tree.value for tree in self.trees]
        self.classifier = hasattr(model, "classes_")

    def predict(self, rows: np.ndarray, method: str) -> Any:
        """The forest's answer to `method`, or None where the forest must answer itself."""
        if rows.ndim != 2 or rows.dtype.kind not in "biuf" or len(rows) == 0:
            return None
        with np.errstate(over="ignore"):  # a value beyond float32 turns infinite: left below
            features = np.ascontiguousarray(rows, dtype=np.float32)
        if not np.isfinite(features).all():  # the forest refuses these, or routes missing values
            return None
        if not self.classifier:
            return self._sum(features)[:, 0] if method == "predict" else None
        proba = self._sum(features)
        if method == "predict_proba":
            return proba
        return self.model.classes_.take(np.argmax(proba, axis=1), axis=0)

    def _sum(self, features: np.ndarray) -> np.ndarray:
        """The mean of the trees' leaf values, (rows, classes); one column for a regressor."""
        total = np.zeros((len(features), self.values[0].shape[2]), dtype=np.float64)
        for tree, values in zip(self.trees, self.values, strict=True):
            total += values.take(tree.apply(features), axis=0)[:, 0, :]  # the single output
        total /= len(self.trees)
        return total


def forest_of(model: Any) -> Forest | None:
    """A `Forest` for a fitted single-output forest whose class still agrees, else None."""
    if not _is_forest(model):
        return None
    forest = Forest(model)
    kind = type(model)
    if kind not in _agrees:
        _agrees[kind] = _agree(forest)
    return forest if _agrees[kind] else None


def _is_forest(model: Any) -> bool:
    ensemble = sys.modules.get("sklearn.ensemble")  # unpickling a forest imported it
    if ensemble is None:
        return False
    kinds = (
        ensemble.RandomForestClassifier,
        ensemble.RandomForestRegressor,
        ensemble.ExtraTreesClassifier,
        ensemble.ExtraTreesRegressor,
    )
    if type(model) not in kinds or not getattr(model, "estimators_", None):
        return False
    return bool(model.n_outputs_ == 1)


def _agree(forest: Forest) -> bool:
    """Whether our answers on rows made of the forest's own thresholds are the forest's."""
    thresholds = np.concatenate([tree.threshold for tree in forest.trees])
    rows = np.random.default_rng(0).choice(
        thresholds, (AGREEMENT_ROWS, forest.model.n_features_in_)
    )
    methods = ("predict", "predict_proba") if forest.classifier else ("predict",)
    return all(
        np.array_equal(forest.predict(rows, method), getattr(forest.model, method)(rows))
        for method in methods
    )
