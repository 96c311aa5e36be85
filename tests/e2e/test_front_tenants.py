"""`--fronts 2` with tenants on: a connection either front accepted is its request's tenant's,
held to one rate, counted once and answered with the tenant's header, because the fronts relay
every request to the main process (docs/tenants.md, "The limits of fairness")."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.fronts import accepted_by, front_pids
from helpers.serving import Servers

from modelhost import testing
from modelhost.fronts.processes import REPUBLISH_S

pytestmark = pytest.mark.e2e

MODEL = "iris.pkl"
BURST = 2  # the capped tenant's, with a rate slow enough that no test waits for a refill
TENANTS_FILE = f'[tenants."capped"]\nrate = 0.001\nburst = {BURST}\n'
HITS = 20  # on the front's connection, after the load
BODY = json.dumps(testing.iris_rows(1)).encode()


@pytest.fixture(scope="module")
def fronted(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> testing.RunningServer:
    tenants_file = tmp_path_factory.mktemp("tenants") / "tenants.toml"
    tenants_file.write_text(TENANTS_FILE)
    server: testing.RunningServer = serve(
        store,
        workers=1,
        fronts=2,
        memory_budget="2GiB",
        tenant_from="header",
        tenants_file=tenants_file,
    )
    return server


class Held:
    """One keep-alive connection, and which process accepted it."""

    def __init__(self, server: testing.RunningServer) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        self.client = httpx.Client(base_url=server.url, timeout=60)
        self.front = accepted_by(self.sock, front_pids(server))

    def invoke(self, tenant: str) -> tuple[int, dict[str, str], bytes]:
        """`POST /models/{MODEL}/invoke` on this very connection: status, headers, body."""
        head = (
            f"POST /models/{MODEL}/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"content-type: application/json\r\nx-modelhost-tenant: {tenant}\r\n"
            f"content-length: {len(BODY)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + BODY)
        reader = self.sock.makefile("rb")
        status = int(reader.readline().split()[1])
        headers = {}
        while (line := reader.readline().decode().strip()) != "":
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
        return status, headers, reader.read(int(headers["content-length"]))

    def close(self) -> None:
        self.sock.close()
        self.client.close()


@pytest.fixture
def both(fronted: testing.RunningServer) -> Iterator[tuple[Held, Held]]:
    """A connection of each front."""
    held: list[Held] = []
    try:
        while len({h.front for h in held}) < 2:
            held.append(Held(fronted))
        yield held[0], next(h for h in held if h.front != held[0].front)
    finally:
        for h in held:
            h.close()


def tenant(server: testing.RunningServer, name: str) -> dict[str, object]:
    answered = httpx.get(f"{server.url}/tenants/{name}", timeout=30)
    assert answered.status_code == 200, answered.text
    return dict(answered.json())


def test_a_fronts_request_is_answered_and_counted_as_its_tenants(
    fronted: testing.RunningServer, both: tuple[Held, Held]
) -> None:
    """Once the model is loaded a front could answer its hits itself; it relays them still."""
    front, other = both
    status, _, body = other.invoke("walker")
    assert status == 200, body
    time.sleep(REPUBLISH_S)  # a front answering hits itself would have the model's route by now
    for held in (other, *[front] * HITS):
        status, headers, body = held.invoke("walker")
        assert status == 200, body
        assert headers["x-modelhost-tenant"] == "walker"
    assert tenant(fronted, "walker")["requests"] == 2 + HITS


def test_a_tenants_rate_is_one_across_the_fronts(
    fronted: testing.RunningServer, both: tuple[Held, Held]
) -> None:
    """The burst is spent once whichever front accepted each connection: the third and the
    fourth request are refused, not granted by a bucket of a front's own."""
    front, other = both
    answers = [held.invoke("capped") for held in (front, other, front, other)]
    assert [status for status, _, _ in answers] == [200] * BURST + [429] * 2
    for _, headers, body in answers[BURST:]:
        assert json.loads(body)["type"] == "RateLimited"
        assert int(headers["retry-after"]) >= 1
    assert tenant(fronted, "capped")["rejections"] == {"RateLimited": 2}
