"""Under TorchServe's token authorization the OpenAPI documents say which calls need a key."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from starlette.testclient import TestClient
from starlette.types import ASGIApp

from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes
from modelhost.http.token_guard import OPEN, TOKEN_PATH
from modelhost.http.torchserve import build_management_app
from modelhost.protocols.keys import TokenKeys


def keyed_routes(tmp_path: Path) -> SageMakerRoutes:
    keys = TokenKeys(tmp_path / "key_file.json", expiration_s=3600)
    return SageMakerRoutes(cast(Any, None), HttpSettings(1024, "", keys=keys))


def served_document(app: ASGIApp) -> dict[str, Any]:
    """The document the port serves, read without a key as any client reads it."""
    with TestClient(app) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    return cast(dict[str, Any], response.json())


@pytest.mark.parametrize(
    "build",
    [
        build_app,
        build_management_app,
    ],
    ids=["main", "torchserve"],
)
def test_every_guarded_call_names_the_key_and_its_401(tmp_path: Path, build: Any) -> None:
    """A client generated from the document must learn that calls need a bearer key and may be
    refused with 401; the calls the guard leaves open need none."""
    doc = served_document(build(keyed_routes(tmp_path)))
    schemes = doc["components"]["securitySchemes"]
    [(scheme, described)] = schemes.items()
    assert (described["type"], described["scheme"]) == ("http", "bearer")
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            if (method.upper(), path) in OPEN:
                assert operation.get("security") == [], f"{method} {path}"
                continue
            assert operation["security"] == [{scheme: []}], f"{method} {path}"
            assert "401" in operation["responses"], f"{method} {path}"


def test_without_keys_the_document_names_no_security(tmp_path: Path) -> None:
    routes = SageMakerRoutes(cast(Any, None), HttpSettings(1024, ""))
    doc = served_document(build_app(routes))
    assert "components" not in doc
    assert not [op for ops in doc["paths"].values() for op in ops.values() if "security" in op]


def test_the_token_api_is_described_where_it_is_served(tmp_path: Path) -> None:
    """TorchServe's `GET /token?type=` renews a key with the API key; its port's document lists
    it, as a client renewing keys must find it."""
    doc = served_document(build_management_app(keyed_routes(tmp_path)))
    renew = doc["paths"][TOKEN_PATH]["get"]
    assert [p["name"] for p in renew["parameters"]] == ["type"]
    assert {"200", "400", "401"} <= set(renew["responses"])
    main = served_document(build_app(keyed_routes(tmp_path)))
    assert TOKEN_PATH not in main["paths"]
