"""Models that predict a matrix of feature rows: one runtime call per batch.

Rows are stacked, predicted at once and split back. If the stacked call fails, each request is
predicted alone so the failure stays with its cause.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from modelhost.errors import BadRequestBody, PayloadTooLarge
from modelhost.workers.codecs import decode_rows, encode_predictions
from modelhost.workers.handlers.base import ARRAY, Handler, InferReply, InferRequest
from modelhost.workers.oip import tensor_of
from modelhost.workers.signatures import ANY, Signature, TensorSpec

METHODS = ("predict", "predict_proba")

Group = list[tuple[int, np.ndarray]]  # (request index, rows)


class RowsHandler(Handler):
    """A handler whose model maps an (n, features) matrix to n predictions."""

    batches = True
    reads_artifact = False  # the runtimes read the whole model at load
    pure = True
    n_features: int | None = None  # checked first, for a clear 400
    max_rows = 0
    input_name = "input-0"  # any name is taken
    input_datatype = "FP64"  # its runtime's; other numbers are taken

    @property
    def width(self) -> int | None:
        return self.n_features

    def signature(self) -> Signature:
        """Each method's output as a row of zeros gets it."""
        width = self.width
        inputs = (TensorSpec(self.input_name, self.input_datatype, (ANY, width or ANY)),)
        if width is None:
            return Signature(inputs)
        zeros = np.zeros((1, width))
        outputs = [self._output(zeros, method) for method in METHODS]
        return Signature(inputs, tuple(spec for spec in outputs if spec is not None))

    def _output(self, rows: np.ndarray, method: str) -> TensorSpec | None:
        try:
            tensor = tensor_of(method, self._predict(rows, method))
        except Exception:  # noqa: BLE001  (a method it lacks, or zeros refused)
            return None
        return TensorSpec(method, tensor.datatype, (ANY, *tensor.values.shape[1:]))

    def limit_rows(self, max_rows: int) -> None:
        self.max_rows = max_rows

    def _rows(self, request: InferRequest) -> np.ndarray:
        rows = request.values
        if not isinstance(rows, np.ndarray):
            rows = decode_rows(request.body, request.content_type)
        if self.max_rows and len(rows) > self.max_rows:
            raise PayloadTooLarge(
                f"the request has {len(rows)} rows, the limit (max_rows_per_request) is "
                f"{self.max_rows}; send fewer rows a request, or raise --max-rows-per-request"
            )
        return rows

    @abstractmethod
    def predict(self, rows: np.ndarray, method: str) -> Any:
        """Predictions for `rows`, one per row."""

    def infer(self, request: InferRequest) -> InferReply:
        rows = self._rows(request)
        return self._encode(self._predict(rows, method_of(request)), request)

    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        if len(requests) == 1:  # nothing to group, stack or split
            try:
                return [self.infer(requests[0])]
            except Exception as error:  # noqa: BLE001  (its answer, as in a batch)
                return [error]
        replies: list[InferReply | Exception] = [BadRequestBody("not answered")] * len(requests)
        groups: dict[str, Group] = {}
        for index, request in enumerate(requests):
            try:
                rows = self._rows(request)
                groups.setdefault(method_of(request), []).append((index, rows))
            except Exception as error:  # noqa: BLE001  (only its request's)
                replies[index] = error
        for method, group in groups.items():
            self._answer_group(requests, method, group, replies)
        return replies

    def _answer_group(
        self,
        requests: Sequence[InferRequest],
        method: str,
        group: Group,
        replies: list[InferReply | Exception],
    ) -> None:
        counts = [len(rows) for _, rows in group]
        if len(group) == 1:
            index, rows = group[0]
            replies[index] = self._attempt(requests[index], rows, method)
            return
        try:
            predictions = self._predict(np.vstack([rows for _, rows in group]), method)
            if len(predictions) != sum(counts):
                raise ValueError("not one prediction per row")
        except Exception:  # noqa: BLE001  (answer each alone)
            for index, rows in group:
                replies[index] = self._attempt(requests[index], rows, method)
            return
        parts = np.split(np.asarray(predictions), np.cumsum(counts)[:-1])
        for (index, _), part in zip(group, parts, strict=True):
            replies[index] = self._attempt(requests[index], part)

    def _attempt(
        self, request: InferRequest, values: Any, method: str | None = None
    ) -> InferReply | Exception:
        """Encode `values` (predicted first given `method`), or the failure."""
        try:
            predictions = values if method is None else self._predict(values, method)
            return self._encode(predictions, request)
        except Exception as error:  # noqa: BLE001  (only its request's)
            return error

    def _predict(self, rows: np.ndarray, method: str) -> Any:
        if self.n_features is not None and rows.shape[1] != self.n_features:
            raise BadRequestBody(
                f"model expects {self.n_features} features per row, got {rows.shape[1]}"
            )
        return self.predict(rows, method)

    @staticmethod
    def _encode(predictions: Any, request: InferRequest) -> InferReply:
        if request.accept == ARRAY:
            return InferReply(b"", ARRAY, predictions)
        values = predictions.tolist() if isinstance(predictions, np.ndarray) else predictions
        body, content_type = encode_predictions(values, request.accept)
        return InferReply(body, content_type)


def method_of(request: InferRequest) -> str:
    method = request.params.get("method", "predict")
    if method not in METHODS:
        raise BadRequestBody(f"unknown method '{method}'; allowed: {', '.join(METHODS)}")
    return method


def from_probabilities(probabilities: np.ndarray, method: str) -> np.ndarray:
    """A classifier's answer from its class probabilities, as scikit-learn gives it."""
    if probabilities.ndim == 1:  # the positive class only
        probabilities = np.column_stack([1.0 - probabilities, probabilities])
    return probabilities if method == "predict_proba" else probabilities.argmax(axis=1)


def values_only(values: Any, method: str, kind: str) -> Any:
    """The outputs of a model without probabilities; predict_proba is refused."""
    if method == "predict_proba":
        raise BadRequestBody(f"this model ({kind}) gives no probabilities; use method=predict")
    return values
