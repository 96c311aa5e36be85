"""The built-in handler for XGBoost boosters saved with `save_model` (.ubj, .json, .bst)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.workers.handlers.rows import RowsHandler, from_probabilities, values_only
from modelhost.workers.handlers.runtime import require

SUFFIXES = (".ubj", ".json", ".bst")
PROBABILITY_OBJECTIVES = ("binary:logistic", "multi:softprob")
_SNIFF_BYTES = 256


class XGBoostHandler(RowsHandler):
    """An XGBoost booster; classifiers answer like scikit-learn's."""

    input_datatype = "FP32"  # its trees split float32 features

    def __init__(self, path: Path, threads: int = 1) -> None:
        xgboost = require("xgboost", "xgboost", f"{path.name} (an XGBoost model)")
        self._booster: Any = xgboost.Booster(params={"nthread": threads})
        # .bst names no format; from bytes, xgboost tells them apart
        source = bytearray(path.read_bytes()) if path.suffix == ".bst" else str(path)
        self._booster.load_model(source)
        learner = json.loads(self._booster.save_config())["learner"]
        self._objective: str = learner["objective"]["name"]
        self.n_features = int(self._booster.num_features()) or None

    def predict(self, rows: np.ndarray, method: str) -> Any:
        output = self._booster.inplace_predict(rows, validate_features=False)
        if self._objective in PROBABILITY_OBJECTIVES:
            return from_probabilities(np.asarray(output), method)
        return values_only(output, method, f"XGBoost {self._objective}")

    def close(self) -> None:
        self._booster = None


def is_xgboost_json(path: Path) -> bool:
    """Whether a .json file opens with XGBoost's "learner" key."""
    with open(path, "rb") as file:
        head = file.read(_SNIFF_BYTES).lstrip()
    return head.startswith(b"{") and b'"learner"' in head
