"""The OpenAPI documents cover every route the apps serve; docs/api.md is generated from them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from modelhost.http.app import MANAGEMENT_CALLS, build_app
from modelhost.http.invocations import InvocationFastPath
from modelhost.http.last_resort import LastResort
from modelhost.http.openapi import (
    OPERATIONS,
    TORCHSERVE_OPERATIONS,
    OpenApiRoute,
    api_markdown,
    document,
    openapi_path,
    route_keys,
)
from modelhost.http.routes import HttpSettings, SageMakerRoutes
from modelhost.http.torchserve import build_management_app

API_MD = Path(__file__).parents[2] / "docs" / "api.md"


OBSERVER = SimpleNamespace(metrics=SimpleNamespace(unhandled_errors=None))  # what build_app reads


def routes() -> SageMakerRoutes:
    return SageMakerRoutes(cast(Any, None), HttpSettings(1024, ""))


def served_document(app: Starlette | InvocationFastPath | LastResort) -> dict[str, Any]:
    (route,) = [r for r in app.routes if isinstance(r, OpenApiRoute)]
    return route.document


def documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, methods in doc["paths"].items() for method in methods}


def served(app: Starlette | InvocationFastPath | LastResort) -> set[tuple[str, str]]:
    return {(method, openapi_path(path)) for method, path in route_keys(app.routes)}


@pytest.mark.parametrize(
    ("app", "table"),
    [
        (build_app(routes(), cast(Any, OBSERVER)), OPERATIONS),  # with the observability routes
        (build_management_app(routes()), TORCHSERVE_OPERATIONS),
    ],
    ids=["main", "torchserve"],
)
def test_documented_routes_are_the_served_routes(
    app: Starlette | InvocationFastPath | LastResort, table: dict[tuple[str, str], Any]
) -> None:
    assert documented(served_document(app)) == served(app)
    assert set(table) == route_keys(app.routes)  # no entry for a route that is gone


@pytest.mark.parametrize(
    ("app", "guarded"),
    [
        (build_app(routes(), cast(Any, OBSERVER)), MANAGEMENT_CALLS),
        (build_management_app(routes()), TORCHSERVE_OPERATIONS),
    ],
    ids=["main", "torchserve"],
)
def test_calls_the_cross_site_guard_refuses_document_415(
    app: Starlette | InvocationFastPath | LastResort, guarded: Any
) -> None:
    """A state-changing call with a body that is not JSON is 415 (cross_site.py)."""
    doc = served_document(app)
    for method, path in route_keys(app.routes):
        if (method, path) in guarded and method not in ("GET", "HEAD", "OPTIONS"):
            described = doc["paths"][openapi_path(path)][method.lower()]
            assert "415" in described["responses"], f"{method} {path}"


def test_an_undocumented_route_fails_the_build() -> None:
    async def endpoint(request: Any) -> Any:
        raise NotImplementedError

    with pytest.raises(KeyError, match="GET /nowhere"):
        document([Route("/nowhere", endpoint, methods=["GET"])], "main")


def test_docs_api_md_is_generated_from_the_documents() -> None:
    assert API_MD.read_text() == api_markdown(), (
        "docs/api.md is stale: python -m modelhost.http.openapi > docs/api.md"
    )
