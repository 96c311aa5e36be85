"""The invocation endpoint, in front of the framework: it answers the three invocation routes, tells
the observer what the client saw (model, tier, latency parts, bytes, error type), and passes every
other request on."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.types import Receive, Scope, Send

from modelhost.errors import QueueFull, RateLimited
from modelhost.host import Invocation, Result
from modelhost.http.invocation_paths import MODEL_INVOKE, PREDICTIONS, route_of
from modelhost.http.invocations import InvocationFastPath, Invocations
from modelhost.observe.exchange import Exchange
from modelhost.observe.metrics import Metrics
from modelhost.protocols.tenants import FromHeader, FromToken, token_tenants


class FakeHost:
    """Answers every invocation with the model's name, or raises what it is told to."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.seen: list[tuple[str, Invocation]] = []

    def sole_startup_model(self) -> str:
        return ""  # none: an unnamed call is 400

    async def invoke(self, name: str, invocation: Invocation) -> Result:
        self.seen.append((name, invocation))
        if self.error is not None:
            raise self.error
        return Result(name.encode(), "text/plain", "disk", {"queue": 0.5, "load": 12.0})


class RecordingObserver:
    def __init__(self) -> None:
        self.metrics = Metrics(CollectorRegistry())
        self.exchanges: list[Exchange] = []

    def record(self, exchange: Exchange) -> None:
        self.exchanges.append(exchange)


async def fallback(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 418, "headers": []})
    await send({"type": "http.response.body", "body": b"framework"})


def send(
    host: FakeHost, method: str, path: str, tenants: Any = None, **kwargs: Any
) -> tuple[httpx.Response, Any]:
    observer = RecordingObserver()
    invocations = Invocations(host, 1024, "", observer, tenants=tenants)  # type: ignore[arg-type]
    app = InvocationFastPath(fallback, invocations)  # type: ignore[arg-type]

    async def request() -> httpx.Response:
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(request()), observer


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/invocations", ("/invocations", None)),
        ("/models/tenants/t1.joblib/invoke", (MODEL_INVOKE, "tenants/t1.joblib")),
        ("/predictions/a/b.joblib", (PREDICTIONS, "a/b.joblib")),
        ("/models/t1.joblib", None),
        ("/ping", None),
    ],
)
def test_route_of_matches_the_invocation_routes_only(path: str, route: Any) -> None:
    assert route_of(path) == route


def test_invocation_is_answered_and_observed() -> None:
    """An invocation is answered and observed with its tier parts and bytes."""
    host = FakeHost()
    response, observer = send(
        host,
        "POST",
        "/models/tenants/t1.joblib/invoke?method=predict_proba",
        content=b"[1, 2, 3]",
        headers={"content-type": "text/csv", "X-Amzn-SageMaker-Custom-Attributes": "k=v"},
    )
    assert (response.status_code, response.text) == (200, "tenants/t1.joblib")
    assert response.headers["x-modelhost-cache"] == "disk"
    assert response.headers["server-timing"] == "queue;dur=0.500, load;dur=12.000"
    [(name, invocation)] = host.seen
    assert (invocation.body, invocation.content_type) == (b"[1, 2, 3]", "text/csv")
    attributes = {"X-Amzn-SageMaker-Custom-Attributes": "k=v"}  # also as sent
    assert invocation.params == {"method": "predict_proba", "k": "v", **attributes}
    [seen] = observer.exchanges
    assert (seen.method, seen.route, seen.status, seen.invocation) == (
        "POST",
        MODEL_INVOKE,
        200,
        True,
    )
    assert (seen.model, seen.cache, seen.timings_ms) == (name, "disk", {"queue": 0.5, "load": 12.0})
    assert (seen.bytes_in, seen.bytes_out, seen.error) == (9, len(name), None)
    assert observer.metrics.registry.get_sample_value("modelhost_http_requests_in_flight") == 0


def test_the_target_model_header_names_the_model_of_invocations() -> None:
    headers = {"X-Amzn-SageMaker-Target-Model": "a.joblib"}
    response, observer = send(FakeHost(), "POST", "/invocations", content=b"[1]", headers=headers)
    assert response.text == "a.joblib"
    assert (observer.exchanges[0].route, observer.exchanges[0].model) == (
        "/invocations",
        "a.joblib",
    )


@pytest.mark.parametrize(
    ("path", "type_name"),
    [("/models/m/invoke", "QueueFull"), ("/predictions/m", "ServiceUnavailableException")],
)
def test_errors_get_status_body_and_type(path: str, type_name: str) -> None:
    """Errors get their status JSON body, with TorchServe's type on its route, and are
    observed by modelhost's type."""
    host = FakeHost(QueueFull("model m has 100 requests queued"))
    response, observer = send(host, "POST", path, content=b"[1]")
    assert response.status_code == 429 and response.headers["retry-after"] == "1"
    assert response.json() == {
        "code": 429,
        "type": type_name,
        "message": "model m has 100 requests queued",
    }
    assert (observer.exchanges[0].status, observer.exchanges[0].error) == (429, "QueueFull")


@pytest.mark.parametrize(
    ("path", "type_name"),
    [("/predictions/m", "ServiceUnavailableException"), ("/invocations", "RateLimited")],
)
def test_a_tenant_past_its_rate_is_told_when_to_come_back(path: str, type_name: str) -> None:
    host = FakeHost(RateLimited("tenant t007 sent more than its rate", retry_after_s=7))
    headers = {"X-Amzn-SageMaker-Target-Model": "m"}
    response, _ = send(host, "POST", path, content=b"[1]", headers=headers)
    assert response.status_code == 429 and response.headers["retry-after"] == "7"
    assert response.json()["type"] == type_name


def test_a_body_over_the_limit_is_refused_without_invoking() -> None:
    host = FakeHost()
    response, _ = send(
        host,
        "POST",
        "/invocations",
        content=b"x" * 2000,
        headers={"X-Amzn-SageMaker-Target-Model": "m"},
    )
    assert response.status_code == 413 and "max_request_size" in response.json()["message"]
    assert host.seen == []


def test_no_model_named_is_400() -> None:
    """No model named is a 400 that says which header to send."""
    response, _ = send(FakeHost(), "POST", "/invocations", content=b"[1]")
    assert response.status_code == 400
    assert "X-Amzn-SageMaker-Target-Model" in response.json()["message"]


def test_other_requests_go_on_to_the_framework() -> None:
    for method, path in (("GET", "/ping"), ("GET", "/models/m/invoke"), ("POST", "/models")):
        response, observer = send(FakeHost(), method, path)
        assert (response.status_code, response.text) == (418, "framework")
        assert observer.exchanges == []


@pytest.mark.parametrize(
    "messages",
    [
        [{"type": "http.disconnect"}],
        [
            {"type": "http.request", "body": b"[1, 2", "more_body": True},
            {"type": "http.disconnect"},
        ],
    ],
    ids=["gone-before-the-body", "gone-in-the-middle"],
)
def test_cut_body_is_never_invoked(messages: list[Any]) -> None:
    """A body cut by the client going away is never invoked."""
    host, observer = FakeHost(), RecordingObserver()
    invocations = Invocations(host, 1024, "", observer)  # type: ignore[arg-type]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/models/m/invoke",
        "headers": [(b"content-length", b"100")],
        "query_string": b"",
    }
    sent: list[Any] = []

    async def receive() -> Any:
        return messages.pop(0)

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(invocations(scope, receive, send))
    assert host.seen == []  # a truncated body is not a request to run
    assert (observer.exchanges[0].status, observer.exchanges[0].error) == (400, "BadRequestBody")


def test_multipart_body_sends_its_data_part() -> None:
    """A multipart body reaches the host as its data part.

    `curl -F data=@kitten.jpg -F k=v`: the file's bytes and type, the text field a parameter."""
    host = FakeHost()
    files = {"data": ("kitten.jpg", b"\xff\xd8 jpeg", "image/jpeg")}
    response, observer = send(host, "POST", "/predictions/m", files=files, data={"k": "v"})
    assert response.status_code == 200, response.text
    [(name, invocation)] = host.seen
    assert (name, invocation.body, invocation.content_type) == ("m", b"\xff\xd8 jpeg", "image/jpeg")
    assert invocation.params == {"k": "v"}
    assert observer.exchanges[0].bytes_in > len(b"\xff\xd8 jpeg")  # the whole form came in


def test_urlencoded_form_sends_its_data_field() -> None:
    """A urlencoded form reaches the host as its data field."""
    host = FakeHost()
    form = {"data": "[[1, 2]]", "method": "predict_proba"}
    response, _ = send(host, "POST", "/predictions/m?method=predict", data=form)
    assert response.status_code == 200, response.text
    [(_, invocation)] = host.seen
    assert (invocation.body, invocation.content_type) == (b"[[1, 2]]", "application/json")
    assert invocation.params == {"method": "predict"}  # the query's parameter wins, as in TS


def test_malformed_multipart_is_400() -> None:
    """A malformed multipart body is a 400 that says what to fix."""
    host = FakeHost()
    headers = {"content-type": "multipart/form-data; boundary=xyz"}
    body = b'--xyz\r\nContent-Disposition: form-data; name="data"\r\n\r\n[1]\r\n'  # no --xyz--
    response, observer = send(host, "POST", "/predictions/m", content=body, headers=headers)
    assert response.status_code == 400
    assert "closing boundary --xyz--" in response.json()["message"]
    assert host.seen == []
    assert observer.exchanges[0].error == "BadRequestBody"


def test_a_put_to_predictions_is_an_invocation() -> None:
    """`curl -T kitten.jpg http://host:8080/predictions/m`, TorchServe's quick start, is a PUT."""
    host = FakeHost()
    response, observer = send(host, "PUT", "/predictions/m", content=b"\xff\xd8 jpeg")
    assert (response.status_code, response.text) == (200, "m")
    assert host.seen[0][1].body == b"\xff\xd8 jpeg"
    assert (observer.exchanges[0].method, observer.exchanges[0].route) == ("PUT", PREDICTIONS)


def test_put_to_other_routes_passes_on() -> None:
    """A PUT to other invocation routes goes on to the framework."""
    for path in ("/invocations", "/models/m/invoke"):
        response, _ = send(FakeHost(), "PUT", path, content=b"[1]")
        assert (response.status_code, response.text) == (418, "framework")


@pytest.mark.parametrize(
    ("path", "form"),
    [("/invocations?model_name=m", None), ("/invocations", {"model_name": "m", "data": "[1]"})],
    ids=["query", "form-field"],
)
def test_invocations_take_the_model_from_model_name(path: str, form: Any) -> None:
    """TorchServe's `POST /invocations?model_name=m`, or the name as a form field."""
    host = FakeHost()
    response, observer = send(host, "POST", path, content=None if form else b"[1]", data=form)
    assert (response.status_code, response.text) == (200, "m")
    assert host.seen[0][1].body == b"[1]"
    assert observer.exchanges[0].model == "m"


def test_the_target_model_header_wins_over_model_name() -> None:
    headers = {"X-Amzn-SageMaker-Target-Model": "a.joblib"}
    response, _ = send(
        FakeHost(), "POST", "/invocations?model_name=b", content=b"[1]", headers=headers
    )
    assert response.text == "a.joblib"


def test_tenants_off_leave_the_invocation_and_exchange_without_one() -> None:
    host = FakeHost()
    response, observer = send(
        host, "POST", "/models/t/a.joblib/invoke", headers={"x-modelhost-tenant": "acme"}
    )
    assert response.status_code == 200
    assert host.seen[0][1].tenant == "" and observer.exchanges[0].tenant is None


def test_the_tenant_rule_names_the_invocations_and_exchanges_tenant() -> None:
    host = FakeHost()
    rule = FromHeader("x-modelhost-tenant")
    headers = {"x-modelhost-tenant": "acme", "x-amzn-sagemaker-target-model": "t/a.joblib"}
    response, observer = send(host, "POST", "/invocations", rule, headers=headers)
    assert response.status_code == 200
    assert host.seen[0][1].tenant == "acme" and observer.exchanges[0].tenant == "acme"


def test_a_bad_tenant_is_400_and_an_unknown_token_401_before_the_host() -> None:
    host = FakeHost()
    header = FromHeader("x-modelhost-tenant")
    bad, _ = send(
        host, "POST", "/predictions/a.joblib", header, headers={"x-modelhost-tenant": "a b"}
    )
    token = FromToken(lambda: token_tenants((("secret", "acme"),)))
    unknown, observer = send(host, "POST", "/predictions/a.joblib", token)
    assert (bad.status_code, bad.json()["type"]) == (400, "InvalidTenant")
    assert (unknown.status_code, unknown.json()["type"]) == (401, "Unauthorized")
    assert host.seen == [] and observer.exchanges[0].tenant is None
