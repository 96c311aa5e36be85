"""The model of a request, read as the nginx config's maps read it."""

from __future__ import annotations

import pytest

from modelhost.integrations.routing import target_model

HEADER = {"x-amzn-sagemaker-target-model": "from/header.joblib"}


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("/models/t/a.joblib/invoke", "t/a.joblib"),
        ("/models/t%2Fa.joblib/invoke", "t/a.joblib"),
        ("/predictions/t/a.joblib", "t/a.joblib"),
        ("/v2/models/t/a.joblib/infer", "t/a.joblib"),
        ("/v2/models/t/a.joblib/versions/3/infer", "t/a.joblib"),
        ("/v2/models/t/a.joblib/ready", "t/a.joblib"),
        ("/v2/models/t/a.joblib/stats", "t/a.joblib"),  # Triton's extensions
        ("/v2/models/t/a.joblib/config", "t/a.joblib"),
        ("/models/t/a.joblib", "t/a.joblib"),
        ("/invocations", "from/header.joblib"),
    ],
)
def test_the_path_names_the_model_before_the_header(path: str, model: str) -> None:
    assert target_model(path, HEADER) == model


def test_no_model_is_the_empty_key() -> None:
    assert target_model("/ping", {}) == ""
    assert target_model("/invocations", {}) == ""
