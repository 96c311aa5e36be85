"""Linear models' `predict` without scikit-learn's input checks, to the bit (docs/decisions.md,
"Linear models predict without scikit-learn's checks")."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

AGREEMENT_ROWS = 8
_agrees: dict[type, bool] = {}  # per class, once a process, as forests.py's


class Linear:
    def __init__(self, model: Any, classifier: bool) -> None:
        self.model, self.classifier = model, classifier
        self.weights, self.intercept = model.coef_.T, model.intercept_

    def predict(self, rows: np.ndarray, method: str) -> Any:
        if method != "predict" or rows.ndim != 2 or rows.dtype != np.float64 or not len(rows):
            return None
        if not np.isfinite(rows).all():
            return None
        scores = rows @ self.weights + self.intercept
        if not self.classifier:
            return scores
        if scores.ndim > 1 and scores.shape[1] == 1:
            scores = scores.reshape(-1)
        picked = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.model.classes_.take(picked, axis=0)


def linear_of(model: Any) -> Linear | None:
    """A `Linear` for a fitted linear model whose class agrees, else None."""
    classifier = _kind(model)
    if classifier is None:
        return None
    linear = Linear(model, classifier)
    kind = type(model)
    if kind not in _agrees:
        _agrees[kind] = _agree(linear)
    return linear if _agrees[kind] else None


def _kind(model: Any) -> bool | None:
    """Classifier (True) or regressor (False) predicting by scikit-learn's own code; else None."""
    base = sys.modules.get("sklearn.linear_model._base")
    coef = getattr(model, "coef_", None)
    if base is None or not isinstance(coef, np.ndarray) or coef.dtype != np.float64:
        return None
    kind = type(model)
    if isinstance(model, base.LinearClassifierMixin):
        own = (kind.predict, kind.decision_function)
        mixin = (base.LinearClassifierMixin.predict, base.LinearClassifierMixin.decision_function)
        return True if own == mixin and hasattr(model, "classes_") else None
    if isinstance(model, base.LinearModel):
        own = (kind.predict, kind._decision_function)
        mixin = (base.LinearModel.predict, base.LinearModel._decision_function)
        return False if own == mixin else None
    return None


def _agree(linear: Linear) -> bool:
    width = linear.weights.shape[0]
    rows = np.random.default_rng(0).standard_normal((AGREEMENT_ROWS, width))
    return bool(np.array_equal(linear.predict(rows, "predict"), linear.model.predict(rows)))
