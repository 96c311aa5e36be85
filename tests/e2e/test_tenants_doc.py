"""docs/tenants.md followed as an operator reads it: its first commands, run against the example
store `make serve` builds, answer as it says, and its answers' examples have the real keys."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest
from helpers.serving import Servers

from modelhost.examples import build_example_store

pytestmark = pytest.mark.e2e

DOC = Path(__file__).resolve().parents[2] / "docs" / "tenants.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.DOTALL | re.MULTILINE)
EXAMPLE_TENANTS = 13  # t000 to t012: every tenant the page names
DOC_ORIGIN = "localhost:8080"


def blocks(kind: str) -> list[str]:
    """The page's fenced blocks of one kind (sh, json, toml), in order."""
    return [text for found, text in BLOCK.findall(DOC.read_text()) if found == kind]


def commands(block: str) -> list[list[str]]:
    """Each command of a sh block, its continued lines joined, split as the shell would."""
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def serve_settings(command: list[str]) -> dict[str, str]:
    """`modelhost serve`'s flags after the store, as Servers' settings by name."""
    assert command[:2] == ["modelhost", "serve"], command
    flags = command[command.index("--model-store") + 2 :]
    pairs = zip(flags[::2], flags[1::2], strict=True)
    return {flag.lstrip("-").replace("-", "_"): value for flag, value in pairs}


def sent(command: list[str], origin: str) -> httpx.Request:
    """The request a curl command sends, to `origin` instead of the page's."""
    assert command[0] == "curl", command
    method, headers, body, url = "GET", {}, None, ""
    words = iter(command[1:])
    for word in words:
        if word == "-X":
            method = next(words)
        elif word == "-H":
            name, _, value = next(words).partition(":")
            headers[name.strip()] = value.strip()
        elif word == "-d":
            body = next(words)
        elif not word.startswith("-"):
            url = word.replace(DOC_ORIGIN, origin)
            url = url if "://" in url else f"http://{url}"  # as curl takes it
    return httpx.Request(method, url, headers=headers, content=body)


@pytest.fixture(scope="module")
def example_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    build_example_store(root, tenants=EXAMPLE_TENANTS)
    return root


class Walk(NamedTuple):
    """A client, and the requests a sh block's curl commands send to its server."""

    client: httpx.Client
    requests: list[httpx.Request]


@pytest.fixture(scope="module")
def first_commands(example_store: Path, serve: Servers) -> Iterator[Walk]:
    """The server of the page's first sh block, and that block's other commands."""
    serve_line, *rest = commands(blocks("sh")[0])
    server = serve(example_store, workers=1, memory_budget="2GiB", **serve_settings(serve_line))
    with httpx.Client(timeout=30) as client:
        yield Walk(client, [sent(command, server.url.removeprefix("http://")) for command in rest])


def test_the_first_example_answers_for_its_tenant(first_commands: Walk) -> None:
    client, requests = first_commands
    for request in requests:
        answered = client.send(request)
        assert answered.status_code == 200, answered.text
        assert answered.headers["x-modelhost-tenant"] == request.headers["x-modelhost-tenant"]


def test_the_pages_answers_have_the_keys_a_tenant_has(first_commands: Walk) -> None:
    client, requests = first_commands
    assert client.send(requests[0]).status_code == 200
    tenant = requests[0].headers["x-modelhost-tenant"]
    url = requests[0].url.copy_with(path=f"/tenants/{tenant}", query=None)
    real = client.get(url).json()
    for example in blocks("json"):
        shown = json.loads(example)
        assert shown.keys() == real.keys()
        assert shown["latencyMs"].keys() == real["latencyMs"].keys()


def test_the_pages_lookup_finds_the_first_examples_tenant(first_commands: Walk) -> None:
    """The page's `GET /tenants/{tenant}`, sent after its first example, answers for the tenant
    that example counted, as the answer shown below it says."""
    client, requests = first_commands
    counted = client.send(requests[0]).headers["x-modelhost-tenant"]
    (lookup,) = commands(blocks("sh")[1])
    found = client.send(sent(lookup, requests[0].url.netloc.decode()))
    assert found.status_code == 200, found.text
    assert found.json()["tenant"] == counted == json.loads(blocks("json")[0])["tenant"]
