"""The built-in handler for scikit-learn estimators saved with joblib or pickle."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.errors import BadRequestBody
from modelhost.workers.codecs import decode_rows, encode_predictions
from modelhost.workers.handlers.base import Handler, InferReply, InferRequest

METHODS = ("predict", "predict_proba")


class SklearnHandler(Handler):
    """A joblib or pickle file holding an estimator; answers `predict` or `predict_proba`."""

    def __init__(self, path: Path) -> None:
        import joblib  # imported here so that importing the handlers package stays cheap

        self._model: Any = joblib.load(path)

    def infer(self, request: InferRequest) -> InferReply:
        """Decode rows, run the requested method, encode its output for the Accept header."""
        rows = decode_rows(request.body, request.content_type)
        predictions = predict_rows(self._model, rows, request.params.get("method", "predict"))
        body, content_type = encode_predictions(predictions, request.accept)
        return InferReply(body, content_type)

    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        """Stack the rows of requests that ask the same thing, predict once, split the answers."""
        replies: dict[int, InferReply | Exception] = {}
        groups: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        for index, request in enumerate(requests):
            try:
                rows = decode_rows(request.body, request.content_type)
                _check_width(self._model, rows)
            except Exception as error:  # noqa: BLE001  (answers only this request)
                replies[index] = error
                continue
            key = (request.params.get("method", "predict"), request.accept)
            groups.setdefault(key, []).append((index, rows))
        for (method, accept), members in groups.items():
            for index, reply in self._predict_group(method, accept, members):
                replies[index] = reply
        return [replies[index] for index in range(len(requests))]

    def _predict_group(
        self, method: str, accept: str, members: list[tuple[int, Any]]
    ) -> Iterator[tuple[int, InferReply | Exception]]:
        try:
            stacked = predict_rows(self._model, np.vstack([rows for _, rows in members]), method)
        except Exception:  # noqa: BLE001  (some request's rows: find which, one by one)
            yield from ((index, self._answer(rows, method, accept)) for index, rows in members)
            return
        offset = 0
        for index, rows in members:
            predictions, offset = stacked[offset : offset + len(rows)], offset + len(rows)
            yield index, _encoded(predictions, accept)

    def _answer(self, rows: Any, method: str, accept: str) -> InferReply | Exception:
        try:
            return _encoded(predict_rows(self._model, rows, method), accept)
        except Exception as error:  # noqa: BLE001
            return error

    def close(self) -> None:
        """Drop the estimator so its memory can be returned on unload."""
        self._model = None


def _encoded(predictions: Any, accept: str) -> InferReply | Exception:
    try:
        return InferReply(*encode_predictions(predictions, accept))
    except Exception as error:  # noqa: BLE001  (e.g. an Accept this codec cannot answer)
        return error


def predict_rows(model: Any, rows: Any, method: str = "predict") -> Any:
    """Run `model.<method>(rows)`, turning input the model refuses into `BadRequestBody`."""
    predict = _method(model, method)
    _check_width(model, rows)
    try:
        return predict(rows)
    except ValueError as exc:  # scikit-learn's way of refusing input: NaN, wrong shape, ...
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
