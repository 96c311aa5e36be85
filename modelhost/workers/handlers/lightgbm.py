"""The built-in handler for LightGBM boosters saved with `save_model` (.txt, .lgb, .bst)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from modelhost.names import RUNTIME_SUFFIXES
from modelhost.workers.handlers.rows import RowsHandler, from_probabilities, values_only
from modelhost.workers.handlers.runtime import require

SUFFIXES = RUNTIME_SUFFIXES["lightgbm"]
PROBABILITY_OBJECTIVES = ("binary", "multiclass", "multiclassova")


class LightGBMHandler(RowsHandler):
    """A LightGBM booster; classifiers answer like scikit-learn's."""

    def __init__(self, path: Path, threads: int = 1) -> None:
        lightgbm = require("lightgbm", "lightgbm", f"{path.name} (a LightGBM model)")
        self._booster: Any = lightgbm.Booster(model_file=str(path))
        self._threads = threads
        self._objective = str(self._booster.params.get("objective", "regression"))
        self.n_features = int(self._booster.num_feature()) or None

    def predict(self, rows: np.ndarray, method: str) -> Any:
        output = self._booster.predict(rows, num_threads=self._threads)
        if self._objective in PROBABILITY_OBJECTIVES:
            return from_probabilities(np.asarray(output), method)
        return values_only(output, method, f"LightGBM {self._objective}")

    def close(self) -> None:
        self._booster = None


def is_lightgbm_text(path: Path) -> bool:
    """Whether a file's first line is `tree`."""
    with open(path, "rb") as file:
        return file.readline(64).strip() == b"tree"
