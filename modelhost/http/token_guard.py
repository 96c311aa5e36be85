"""TorchServe's token authorization on a port: each request needs the key of its API, and
`GET /token?type=management|inference` with the API key renews one, as TorchServe answers it."""

from __future__ import annotations

from collections.abc import Callable

from starlette.datastructures import Headers, QueryParams
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from modelhost.http.errors import error_response, status_headers
from modelhost.http.openapi import OpenApiRoute
from modelhost.names import echo
from modelhost.protocols.keys import (
    API,
    INFERENCE,
    MANAGEMENT,
    RENEWABLE,
    TokenKeys,
    refusal_message,
)

Needs = Callable[[str, str], str | None]  # (method, path) → the key's kind, None for none
TOKEN_PATH = "/token"
# what any caller may read: health probes, which cannot send keys, and the APIs' descriptions
OPEN = frozenset({("GET", "/ping"), ("GET", "/openapi.json"), ("OPTIONS", "/")})


class TokenGuard:
    """Refuse a request without the key its route needs; answer the token API if asked to."""

    def __init__(
        self,
        app: ASGIApp,
        keys: TokenKeys,
        needs: Needs,
        token_api: bool,
        on_answer: Callable[[Scope, Response], None] = lambda scope, response: None,
    ) -> None:
        self.app = app
        self.keys = keys
        self.needs = needs
        self.token_api = token_api
        self.on_answer = on_answer  # what the guard answers itself, for the observer
        for route in getattr(app, "routes", []):
            if isinstance(route, OpenApiRoute):
                route.require_keys(OPEN, TOKEN_PATH if token_api else None)

    @property
    def routes(self) -> object:
        return getattr(self.app, "routes", [])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        authorization = Headers(scope=scope).get("authorization", "")
        if self.token_api and path == TOKEN_PATH:
            response = self.renew(authorization, QueryParams(scope["query_string"]))
        elif (kind := self.needs(method, path)) and not self.keys.allows(kind, authorization):
            response = refusal(kind, path)
        else:
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)
        self.on_answer(scope, response)

    def renew(self, authorization: str, query: QueryParams) -> Response:
        """TorchServe's token API: the API key renews the management or the inference key."""
        if not self.keys.allows(API, authorization):
            return refusal(API, TOKEN_PATH)
        kind = query.get("type", "")
        if kind not in RENEWABLE:
            message = f"type must be management or inference, not {echo(kind)}"
            return error_response(400, "BadRequestBody", message)
        self.keys.renew(kind)
        return JSONResponse({"status": f"{kind} key renewed in {self.keys.path}"})


def refusal(kind: str, path: str) -> Response:
    """401 in the path's error shape."""
    message = refusal_message(kind)
    if path.startswith("/v2"):
        return JSONResponse({"error": message}, 401, status_headers(401))
    return error_response(401, "Unauthorized", message)


def inference_port_needs(management_routes: list[Route]) -> Needs:
    """On the inference port: the management key for management calls, else the inference one."""

    def needs(method: str, path: str) -> str | None:
        if (method, path) in OPEN:
            return None
        scope = {"type": "http", "method": method, "path": path, "root_path": ""}
        managing = any(route.matches(scope)[0] is Match.FULL for route in management_routes)
        return MANAGEMENT if managing else INFERENCE

    return needs


def management_port_needs(method: str, path: str) -> str | None:
    """On the management port every call but the API's description needs the management key."""
    return None if (method, path) in OPEN else MANAGEMENT
