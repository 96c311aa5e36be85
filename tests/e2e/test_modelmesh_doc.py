"""docs/migrating-modelmesh.md followed as an operator reads it: its local try of a model answers
200 at each step against an S3 store, its handler.py answers as it says, and what it says of
gRPC is what deploy/k8s/base does."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import httpx
import joblib
import pytest
import yaml
from helpers.serving import Servers
from helpers.stores import MotoServer
from sklearn.datasets import load_digits
from sklearn.svm import SVC

from modelhost import testing

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "migrating-modelmesh.md"
DEPLOYMENT = ROOT / "deploy" / "k8s" / "base" / "deployment.yaml"
GRPC_INGRESS = ROOT / "deploy" / "k8s" / "base" / "ingress-grpc.yaml"


def paragraph(opening: str) -> str:
    """The page's paragraph that opens with `opening`, its lines joined."""
    (found,) = [p for p in DOC.read_text().split("\n\n") if p.startswith(opening)]
    return " ".join(found.split())


def inline_commands(text: str) -> list[list[str]]:
    """The `modelhost` and `curl` commands in a paragraph's code spans, in order."""
    spans = [shlex.split(span) for span in re.findall(r"`([^`]+)`", text)]
    return [words for words in spans if words[0] in ("modelhost", "curl")]


def sent(command: list[str], origin: str) -> httpx.Request:
    """The request a curl command sends, to `origin` in place of localhost:8080."""
    method, url, words = "GET", "", iter(command[1:])
    for word in words:
        if word == "-X":
            method = next(words)
        elif not word.startswith("-"):
            url = "http://" + word.removeprefix("http://").replace("localhost:8080", origin)
    return httpx.Request(method, url)


@pytest.fixture(scope="module")
def s3_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """An S3 store `models` holding ModelMesh's example mnist-svm as the page renames it; the
    server's environment for it."""
    model = tmp_path_factory.mktemp("model") / "mnist-svm.joblib"
    digits, labels = load_digits(return_X_y=True)
    joblib.dump(SVC().fit(digits, labels), model)
    with MotoServer() as moto:
        client = moto.client()
        client.create_bucket(Bucket="models")
        client.upload_file(str(model), "models", "mnist-svm.joblib")
        yield {**os.environ, **moto.client_env()}


@pytest.mark.e2e
def test_trying_a_model_locally_answers_200_at_each_step(
    s3_models: dict[str, str], serve: Servers
) -> None:
    """The page's local try: its serve command, then each curl it names, in order."""
    serve_line, *curls = inline_commands(paragraph("Try each model locally"))
    assert serve_line[:2] == ["modelhost", "serve"] and curls, serve_line
    store = serve_line[serve_line.index("--model-store") + 1]
    server = serve(store, env=s3_models, workers=1, memory_budget="1GiB")
    with httpx.Client(timeout=60) as client:
        for command in curls:
            answered = client.send(sent(command, server.url.removeprefix("http://")))
            assert answered.status_code == 200, (command, answered.text)


@pytest.mark.e2e
def test_the_pages_handler_answers_as_the_page_says(
    tmp_path: Path, serve: Servers, torch_installed: None
) -> None:
    """The page's handler.py beside a TorchScript model.pt, archived as step 2 archives it:
    one output per input, named after it, its values flattened as the page says."""
    folder = tmp_path / "pytorch-model"
    folder.mkdir()
    (handler,) = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.DOTALL | re.MULTILINE)[:1]
    (folder / "handler.py").write_text(handler)
    testing.torch_iris(folder / "model.pt")  # TorchScript: logits of 3 classes from 4 features
    testing.tar_gz_of(folder, tmp_path / "store" / "pytorch-model.tar.gz")
    server = serve(tmp_path / "store", workers=1, memory_budget="1GiB")
    inputs = [
        {"name": n, "shape": [rows, 4], "datatype": "FP32", "data": [0.5] * rows * 4}
        for n, rows in (("a", 2), ("b", 1))
    ]
    answered = httpx.post(
        f"{server.url}/v2/models/pytorch-model.tar.gz/infer", json={"inputs": inputs}, timeout=60
    )
    assert answered.status_code == 200, answered.text
    shapes = {output["name"]: output["shape"] for output in answered.json()["outputs"]}
    assert shapes == {"a": [6], "b": [3]}
    assert "flattened" in paragraph("A `handler.py` gets")


def test_grpc_is_said_to_be_where_the_base_serves_it() -> None:
    """The pods the page deploys serve gRPC on the base's --grpc-port, behind its gRPC ingress:
    the page says so, and gives the port."""
    (container,) = yaml.safe_load(DEPLOYMENT.read_text())["spec"]["template"]["spec"]["containers"]
    (flag,) = [arg for arg in container["args"] if arg.startswith("--grpc-port=")]
    ingress = yaml.safe_load(GRPC_INGRESS.read_text())["metadata"]["name"]
    text = " ".join(DOC.read_text().split())
    assert f"gRPC on {flag.removeprefix('--grpc-port=')}" in text
    assert f"`{ingress}` ingress" in text
