"""A model name is checked wherever it enters: every route refuses a name that could escape the
store, the disk tier or a worker frame with 400 and says what a valid name is, before the core
sees it."""

from __future__ import annotations

from typing import Any

import pytest
from asgi_calls import call, routes

from modelhost.errors import InvalidModelName
from modelhost.http.app import build_app
from modelhost.http.torchserve import build_management_app
from modelhost.names import MAX_NAME_BYTES, model_name

BAD_NAMES = [
    "",
    ".",
    "..",
    "../etc/passwd",
    "tenants/../../x",
    "a//b",
    "a/./b",
    "/etc/passwd",
    "a\\b",
    "a\x00b",
    "a\nb",
    "a\x7fb",
    "x" * (MAX_NAME_BYTES + 1),
    "é" * 129,  # 258 bytes of UTF-8
    "x" * 256,  # one part over 255 bytes
    "a/",
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_refused(name: str) -> None:
    """Bad names are refused saying what a valid name is, each time (checks are remembered)."""
    for _ in range(2):
        with pytest.raises(InvalidModelName, match="a valid name is a relative path"):
            model_name(name)


@pytest.mark.parametrize("name", ["iris.pkl", "tenants/t007.joblib", "acme-churn", "ü/m..pkl"])
def test_good_names_pass(name: str) -> None:
    assert model_name(name) == name


def test_a_long_name_is_cut_in_the_message() -> None:
    with pytest.raises(InvalidModelName) as refused:
        model_name("y" * 100_000)
    assert len(str(refused.value)) < 600 and "100000 characters" in str(refused.value)


LONG = "x" * 300
TOO_LONG_PART = "y" * 256 + "/z"  # 258 bytes in all: today the file system's ENAMETOOLONG


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("POST", "/models/a%5Cb/invoke", {"content": b"[1]"}),
        ("POST", "/models/a%00b/invoke", {"content": b"[1]"}),
        ("POST", f"/models/{LONG}/invoke", {"content": b"[1]"}),
        ("POST", f"/predictions/{TOO_LONG_PART}", {"content": b"[1]"}),
        ("POST", "/invocations", {"headers": {"X-Amzn-SageMaker-Target-Model": "../x"}}),
        ("POST", "/invocations", {"headers": {"X-Amzn-SageMaker-Target-Model": "/etc/x"}}),
        ("POST", "/models", {"json": {"model_name": "..", "url": "iris.pkl"}}),
        ("POST", "/models", {"json": {"model_name": "a\x00", "url": "iris.pkl"}}),
        ("GET", "/models/a%5Cb", {}),
        ("GET", f"/models/{LONG}", {}),
        ("DELETE", "/models/a%00b", {}),
        ("DELETE", "/models/a%5C..%5Cb", {}),
    ],
)
def test_main_port_routes_refuse_bad_names_with_400(
    method: str, path: str, kwargs: dict[str, Any]
) -> None:
    response = call(build_app(routes()), method, path, **kwargs)
    assert response.status_code == 400, response.text
    torchserve = path.startswith("/predictions/")  # TorchServe's exception name there
    assert response.json()["type"] == ("BadRequestException" if torchserve else "InvalidModelName")
    assert "a valid name is a relative path" in response.json()["message"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v2/models/a%5Cb/infer"),
        ("GET", "/v2/models/a%00b"),
        ("GET", f"/v2/models/{LONG}/ready"),
        ("POST", "/v2/repository/models/a%5Cb/load"),
        ("POST", "/v2/repository/models/a%00/unload"),
    ],
)
def test_oip_routes_refuse_bad_names_in_the_protocols_shape(method: str, path: str) -> None:
    response = call(build_app(routes()), method, path)
    assert response.status_code == 400
    assert "a valid name is a relative path" in response.json()["error"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/models?url=iris.pkl&model_name=.."),
        ("POST", "/models?url=iris.pkl&model_name=a%5Cb"),
        ("GET", "/models/a%00b"),
        ("DELETE", f"/models/{LONG}"),
    ],
)
def test_torchserve_management_routes_refuse_bad_names(method: str, path: str) -> None:
    response = call(build_management_app(routes()), method, path)
    assert response.status_code == 400
    assert "a valid name is a relative path" in response.json()["message"]
