"""`--fronts 2` with TorchServe's token authorization: a front answers a hit that holds the
unexpired inference key and relays any other, which the main process refuses as it always has
(docs/migrating-torchserve.md, "Token authorization")."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.fronts import front_pids, hit_with_the_main_process_stopped, raw_request
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

MODEL = "iris.pkl"
ROWS = testing.iris_rows(1)
OIP_ROWS = {"inputs": [{"name": "input-0", "datatype": "FP64", "shape": [1, 4], "data": ROWS[0]}]}
HITS = {  # path → (its body, its own headers)
    f"/models/{MODEL}/invoke": (ROWS, ()),
    f"/predictions/{MODEL}": (ROWS, ()),
    f"/v2/models/{MODEL}/infer": (OIP_ROWS, ()),
    "/invocations": (ROWS, (f"x-amzn-sagemaker-target-model: {MODEL}",)),
}
BRIEF_MIN = 0.05  # minutes the short-lived keys last: 3 s


def keyed_server(
    serve: Servers, work: Path, store: Path, **settings: object
) -> testing.RunningServer:
    """A server with `--token-auth`, two fronts and the model loaded; key_file.json in `work`."""
    args = testing.serve_args(
        store,
        work / "cache",
        workers=1,
        fronts=2,
        memory_budget="2GiB",
        load_models=MODEL,
        **settings,
    )
    server = testing.RunningServer([*args, "--token-auth"], work, cwd=work)
    return serve.enter_context(server)


def bearer(work: Path, kind: str) -> str:
    """The Authorization header's value with the key of `kind` that key_file.json holds now."""
    keys = json.loads((work / "key_file.json").read_text())
    return f"Bearer {keys[kind]['key']}"


def hit(path: str, authorization: str | None) -> bytes:
    """A plain hit on `path`, with `authorization` if any."""
    body, headers = HITS[path]
    sent = ["content-type: application/json", *headers]
    if authorization is not None:
        sent.append(f"authorization: {authorization}")
    return raw_request(path, json.dumps(body).encode(), *sent)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer else 0


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("front-tokens-store")
    testing.iris_logreg(root / MODEL)
    return root


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("front-tokens-work")


@pytest.fixture(scope="module")
def server(serve: Servers, work: Path, store: Path) -> testing.RunningServer:
    return keyed_server(serve, work, store)


@pytest.fixture
def http(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def test_fronts_start_beside_token_authorization(server: testing.RunningServer) -> None:
    assert len(front_pids(server)) == 2
    assert "starts no front" not in server.log_text()


@pytest.mark.parametrize("path", HITS)
def test_a_front_answers_a_hit_that_holds_the_inference_key(
    server: testing.RunningServer, work: Path, path: str
) -> None:
    """With the main process stopped, only a front can answer."""
    answer = hit_with_the_main_process_stopped(server, hit(path, bearer(work, "inference")))
    assert status_of(answer) == 200, answer


@pytest.mark.parametrize("kind", [None, "wrong", "management", "API"])
def test_a_hit_without_the_inference_key_is_refused_as_torchserve_refuses_it(
    http: httpx.Client, work: Path, kind: str | None
) -> None:
    """Relayed, and refused by the main process with TorchServe's words."""
    headers = {} if kind is None else {"authorization": "Bearer abcd1234"}
    if kind in ("management", "API"):
        headers = {"authorization": bearer(work, kind)}
    for path, (body, own) in HITS.items():
        sent = {**headers, **dict(line.split(": ") for line in own)}
        refused = http.post(path, json=body, headers=sent)
        assert refused.status_code == 401, (path, refused.text)
        assert "Token Authorization failed" in refused.text


def test_no_front_answers_a_hit_without_the_key(server: testing.RunningServer) -> None:
    """With the main process stopped, a keyless hit waits for it: the front relayed it."""
    path = f"/models/{MODEL}/invoke"
    assert hit_with_the_main_process_stopped(server, hit(path, None), tries=1) == b""


def test_a_renewed_inference_key_is_the_one_a_front_takes(
    server: testing.RunningServer, http: httpx.Client, work: Path
) -> None:
    """TorchServe's `GET /token?type=inference` with the API key: the old key is refused."""
    old = bearer(work, "inference")
    renewed = http.get(
        "/token", params={"type": "inference"}, headers={"authorization": bearer(work, "API")}
    )
    assert renewed.status_code == 200, renewed.text
    new = bearer(work, "inference")
    path = f"/models/{MODEL}/invoke"
    assert status_of(hit_with_the_main_process_stopped(server, hit(path, new))) == 200
    refused = http.post(path, json=ROWS, headers={"authorization": old})
    assert refused.status_code == 401, refused.text


def test_an_expired_inference_key_is_refused(
    serve: Servers, store: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Past its expiration time no front takes the key, and the main process refuses it."""
    work = tmp_path_factory.mktemp("front-tokens-brief")
    server = keyed_server(serve, work, store, token_expiration_min=BRIEF_MIN)
    key = bearer(work, "inference")
    time.sleep(BRIEF_MIN * 60)
    path = f"/models/{MODEL}/invoke"
    with httpx.Client(base_url=server.url, timeout=60) as client:
        refused = [client.post(path, json=ROWS, headers={"authorization": key}) for _ in range(20)]
    assert {answer.status_code for answer in refused} == {401}
