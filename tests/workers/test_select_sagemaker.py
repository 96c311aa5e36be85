"""Handler selection for what AWS's SageMaker containers leave in a model folder."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from modelhost import testing
from modelhost.errors import ModelLoadError
from modelhost.workers.handlers import prepared_handler
from modelhost.workers.handlers.select import choose
from modelhost.workers.handlers.xgboost import XGBoostHandler


def test_pickled_xgboost_classifier_in_xgboost_model_loads(tmp_path: Path) -> None:
    """Script mode pickles XGBClassifier as `xgboost-model`; its booster is what is served."""
    import xgboost
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    model = xgboost.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(x, y)
    (tmp_path / "xgboost-model").write_bytes(pickle.dumps(model))
    handler = choose(tmp_path, "m").load()
    assert isinstance(handler, XGBoostHandler)
    assert handler.predict(np.asarray(x[:1], dtype=np.float32), "predict") == [0]


def test_xgboost_model_pickling_something_else_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "xgboost-model").write_bytes(pickle.dumps({"not": "a booster"}))
    with pytest.raises(ModelLoadError, match="pickled dict, not a Booster"):
        prepared_handler(tmp_path, "m")()


def test_xgboost_model_that_is_no_model_names_xgboost(tmp_path: Path) -> None:
    (tmp_path / "xgboost-model").write_bytes(b"garbage")
    with pytest.raises(ModelLoadError, match="saved with Booster.save_model"):
        prepared_handler(tmp_path, "m")()


def test_xgboost_model_saved_by_save_model_loads(tmp_path: Path) -> None:
    testing.xgboost_iris(tmp_path / "booster.ubj").rename(tmp_path / "xgboost-model")
    assert isinstance(choose(tmp_path, "m").load(), XGBoostHandler)
