"""The served OpenAPI documents, checked against the real server by schemathesis: every response
is documented (status, content type, schema) and malformed input never gets a 5xx."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from helpers.serving import Servers
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from modelhost import testing

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES_PER_OPERATION = 10  # enough to vary each operation's input; ~10 s for both documents
STREAMS = {"/events"}  # never ends by itself


@pytest.fixture(scope="module")
def ports(store: Path, serve: Servers) -> tuple[str, str]:
    management_port = testing.free_port()
    running = serve(store, workers=1, management_port=management_port)
    return running.url, f"http://127.0.0.1:{management_port}"


@pytest.mark.parametrize("which", [0, 1], ids=["main", "torchserve"])
def test_every_response_is_documented_and_no_input_breaks_the_server(
    ports: tuple[str, str], which: int
) -> None:
    schema = schemathesis.openapi.from_url(f"{ports[which]}/openapi.json")
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in STREAMS:
            continue
        try:
            exercise(operation)
        except Exception as error:  # noqa: BLE001  (collect every operation's failure, then report)
            failures.append(f"{operation.method.upper()} {operation.path}: {error}")
    assert not failures, "\n\n".join(failures)


def exercise(operation: Any) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        case.call_and_validate(checks=CHECKS)

    run()


def test_the_served_document_lists_the_protocols(ports: tuple[str, str]) -> None:
    paths = httpx.get(f"{ports[0]}/openapi.json").json()["paths"]
    assert "/v2/models/{model}/infer" in paths
    assert "/predictions/{model}" in paths
    management = httpx.get(f"{ports[1]}/openapi.json").json()["paths"]
    assert set(management) == {"/models", "/models/{model}", "/openapi.json"}
