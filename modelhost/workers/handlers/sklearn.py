"""The built-in handler for scikit-learn estimators saved with joblib or pickle."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from modelhost.errors import BadRequestBody
from modelhost.names import RUNTIME_SUFFIXES
from modelhost.workers.handlers.forests import forest_of
from modelhost.workers.handlers.linear import linear_of
from modelhost.workers.handlers.rows import METHODS, RowsHandler

SUFFIXES = RUNTIME_SUFFIXES["sklearn"]


class SklearnHandler(RowsHandler):
    def __init__(self, model: Any) -> None:
        self.model = model
        self.shortcut: Shortcut | None = forest_of(model) or linear_of(model)

    @classmethod
    def load(cls, path: Path) -> SklearnHandler:
        import joblib  # the handlers package stays cheap to import

        return cls(joblib.load(path))

    @property
    def width(self) -> int | None:
        width = getattr(self.model, "n_features_in_", None)
        return int(width) if isinstance(width, (int, np.integer)) else None

    def predict(self, rows: np.ndarray, method: str) -> Any:
        return predict_rows(self.model, rows, method, self.shortcut)

    def close(self) -> None:
        self.model = self.shortcut = None


class Shortcut(Protocol):
    def predict(self, rows: np.ndarray, method: str) -> Any:
        """The model's answer to `method`, or None where scikit-learn must answer."""


def predict_rows(
    model: Any, rows: Any, method: str = "predict", shortcut: Shortcut | None = None
) -> Any:
    """Run `model.<method>(rows)`, by `shortcut` where it answers; refused input raises
    `BadRequestBody`."""
    predict = _method(model, method)
    _check_width(model, rows)
    if shortcut is not None and (answer := shortcut.predict(rows, method)) is not None:
        return answer
    try:
        return predict(rows)
    except ValueError as exc:  # how scikit-learn refuses input
        raise BadRequestBody(f"the model refused the input: {exc}") from exc


def _method(model: Any, method: str) -> Any:
    if method not in METHODS:
        raise BadRequestBody(f"unknown method '{method}'; allowed: {', '.join(METHODS)}")
    if not hasattr(model, method):
        kind = type(model).__name__
        raise BadRequestBody(f"this model ({kind}) has no {method}; use method=predict")
    return getattr(model, method)


def _check_width(model: Any, rows: Any) -> None:
    expected = getattr(model, "n_features_in_", None)
    # a SageMaker input_fn may return a list (no shape) or a DataFrame
    shape: tuple[Any, ...] = getattr(rows, "shape", ())
    if isinstance(expected, (int, np.integer)) and len(shape) == 2 and shape[1] != expected:
        raise BadRequestBody(f"model expects {expected} features per row, got {shape[1]}")
