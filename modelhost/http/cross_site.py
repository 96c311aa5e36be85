"""Refuse calls that change the server's state when a web page of another origin sent them.

A page can send a "simple" request to 127.0.0.1 with no preflight, so loopback trust would
extend to any site the user visits. Browsers name the page in `Origin` and `Sec-Fetch-Site`.
A body that is not JSON is refused too, as no simple request can send JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from modelhost.http.errors import error_response
from modelhost.names import echo

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OWN_SITES = frozenset({"same-origin", "none"})  # `none`: the address bar, a bookmark
DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}


class CrossSiteGuard:
    """ASGI middleware checking the `routes` given."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = tuple(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            problem = refusal(Headers(scope=scope))
            if problem is not None and self._guarded(scope):
                await answer(scope, *problem)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _guarded(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] is Match.FULL for route in self.routes)


def state_changing(routes: Iterable[Route]) -> list[Route]:
    """The routes taking a method other than a read's."""
    return [route for route in routes if set(route.methods or ()) - SAFE_METHODS]


def refusal(headers: Headers) -> tuple[int, str] | None:
    """The status and reason to refuse a guarded call with, if any."""
    site = headers.get("sec-fetch-site")
    if site is not None and site.lower() not in OWN_SITES:
        return 403, f"the browser says it is {echo(site)} (Sec-Fetch-Site)"
    origin = headers.get("origin")
    if origin is not None and not same_origin(origin, headers.get("host", "")):
        return 403, f"it came from a page of another origin, {echo(origin)} (Origin)"
    content_type = headers.get("content-type")
    if content_type is not None and has_body(headers) and not is_json(content_type):
        return 415, f"its body is {echo(content_type)}, not JSON"
    return None


def same_origin(origin: str, host: str) -> bool:
    """Whether `Origin` names the Host the request was sent to, port and all."""
    parts = urlsplit(origin.lower())
    if not parts.scheme or not parts.hostname:  # `null`: a sandboxed frame, a file:// page
        return False
    default = DEFAULT_PORTS.get(parts.scheme, "")
    return host_and_port(parts.netloc, default) == host_and_port(host.lower(), default)


def host_and_port(netloc: str, default_port: str) -> tuple[str, str]:
    parts = urlsplit(f"//{netloc}")
    try:
        port = str(parts.port) if parts.port is not None else default_port
    except ValueError:  # not a port: no origin of ours
        port = "?"
    return parts.hostname or "", port


def has_body(headers: Headers) -> bool:
    return headers.get("content-length", "0") != "0" or "transfer-encoding" in headers


def is_json(content_type: str) -> bool:
    media_type = content_type.partition(";")[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


def answer(scope: Scope, status: int, reason: str) -> Response:
    """The refusal, in the error shape of the path's protocol."""
    call = f"{scope['method']} {echo(scope['path'])}"
    if status == 415:
        message = (
            f"{call} takes a JSON body: send it with 'Content-Type: application/json' "
            f"(curl: --json), or send no body; {reason}"
        )
    else:
        message = (
            f"{call} changes the server's state and is refused from web pages of other "
            f"origins (cross-site request forgery): {reason}. Send it from a client that is "
            "not a browser (curl, an SDK), or from a page this server serves"
        )
    if scope["path"].startswith("/v2"):
        return JSONResponse({"error": message}, status)
    type_name = "Forbidden" if status == 403 else "UnsupportedMediaType"
    return error_response(status, type_name, message)
