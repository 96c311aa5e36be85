"""The built-in handler for XGBoost boosters (.ubj, .json, .bst, or AWS's `xgboost-model`)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.errors import ModelLoadError
from modelhost.names import RUNTIME_SUFFIXES, XGBOOST_NAMES
from modelhost.workers.handlers.rows import RowsHandler, from_probabilities, values_only
from modelhost.workers.handlers.runtime import require

SUFFIXES = RUNTIME_SUFFIXES["xgboost"]
NAMES = XGBOOST_NAMES
PICKLE_START = b"\x80"  # protocol 2 and later
PROBABILITY_OBJECTIVES = ("binary:logistic", "multi:softprob")
_SNIFF_BYTES = 256


class XGBoostHandler(RowsHandler):
    """An XGBoost booster; classifiers answer like scikit-learn's."""

    input_datatype = "FP32"  # its trees split float32 features

    def __init__(self, path: Path, threads: int = 1) -> None:
        xgboost = require("xgboost", "xgboost", f"{path.name} (an XGBoost model)")
        self._booster: Any = _booster(xgboost, path, threads)
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


def _booster(xgboost: Any, path: Path, threads: int) -> Any:
    source: str | bytearray = str(path)
    if path.suffix not in (".ubj", ".json"):  # .bst and xgboost-model name no format:
        source = bytearray(path.read_bytes())  # from bytes, xgboost tells them apart
        if path.name in NAMES and source.startswith(PICKLE_START):
            return _unpickled(xgboost, bytes(source), threads)
    booster = xgboost.Booster(params={"nthread": threads})
    booster.load_model(source)
    return booster


def _unpickled(xgboost: Any, data: bytes, threads: int) -> Any:
    """A pickled Booster or XGBModel, read as AWS's container reads it (refused where the
    worker refuses pickles: workers/no_pickle.py)."""
    model = pickle.loads(data)
    booster = model.get_booster() if hasattr(model, "get_booster") else model
    if not isinstance(booster, xgboost.Booster):
        raise ModelLoadError(f"xgboost-model holds a pickled {type(model).__name__}, not a Booster")
    booster.set_param("nthread", threads)
    return booster


def is_xgboost_json(path: Path) -> bool:
    """Whether a .json file opens with XGBoost's "learner" key."""
    with open(path, "rb") as file:
        head = file.read(_SNIFF_BYTES).lstrip()
    return head.startswith(b"{") and b'"learner"' in head
