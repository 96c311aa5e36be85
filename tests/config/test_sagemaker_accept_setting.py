"""SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT: the toolkit's default Accept, a setting here."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.config import load_config
from modelhost.errors import ConfigError


def test_the_variable_sets_default_accept(tmp_path: Path) -> None:
    environ = {"SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "text/csv"}
    assert load_config({}, environ, tmp_path).default_accept == "text/csv"


def test_modelhosts_own_variable_wins(tmp_path: Path) -> None:
    environ = {
        "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "text/csv",
        "MODELHOST_DEFAULT_ACCEPT": "application/x-npy",
    }
    assert load_config({}, environ, tmp_path).default_accept == "application/x-npy"


@pytest.mark.parametrize("value", ["csv", "*/*", "text/csv, application/json"])
def test_anything_but_one_media_type_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT"):
        load_config({}, {"SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": value}, tmp_path)
