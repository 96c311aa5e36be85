"""Hugging Face folders served by a real server and real workers answer what the same model
answers in-process: a classifier's scores, an embedder's vectors, over JSON and OIP, alone and
batched; a folder missing a part is refused with the part named."""

from __future__ import annotations

import concurrent.futures
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from helpers.missing import require_module
from helpers.serving import Servers, invoke

from modelhost import testing

pytestmark = pytest.mark.e2e

TEXTS = ["the cat sat on the mat", "a very good movie", "not fun", "the plot was dull and bad"]
TOLERANCE = 1e-5
MiB = 2**20


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_module("transformers")
    from modelhost.testing.hf_models import hf_classifier, hf_embedder

    root = tmp_path_factory.mktemp("hf-store")
    classifier = hf_classifier(root / "hf/classifier")
    hf_embedder(root / "hf/embedder")
    wide = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4}
    hf_embedder(root / "hf/wide", **wide)  # 12 MiB of weights: more than a load allocates
    testing.tar_gz_of(classifier, root / "hf/classifier.tar.gz")
    declared = Path(shutil.copytree(classifier, root / "hf/declared"))
    (declared / "modelhost.toml").write_text('handler = "huggingface-embeddings"\n')
    parts = {"no-weights": ["model.safetensors"], "no-tokenizer": ["tokenizer.json", "vocab.txt"]}
    for name, removed in parts.items():
        folder = Path(shutil.copytree(classifier, root / f"broken/{name}"))
        for file_name in removed:
            (folder / file_name).unlink()
    return root


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers) -> testing.RunningServer:
    return serve(
        store,
        workers=1,
        threads_per_worker=1,
        memory_budget="4GiB",
        batch_size=16,
        max_batch_delay_ms=300,
    )


@pytest.fixture(scope="module")
def http(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def reference(store: Path, name: str, task: str) -> Any:
    from modelhost.testing.hf_models import reference_outputs

    return reference_outputs(store / name, TEXTS, task)


def probabilities(logits: Any) -> Any:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def by_label(ranked: list[dict[str, Any]]) -> list[float]:
    from modelhost.testing.hf_models import LABELS

    scores = {item["label"]: item["score"] for item in ranked}
    return [scores[label] for label in LABELS]


def size_of(artifact: Path) -> int:
    """An artifact's bytes on disk: its file, or its folder's files."""
    files = [artifact] if artifact.is_file() else artifact.rglob("*")
    return sum(path.stat().st_size for path in files if path.is_file())


def unit(rows: Any) -> Any:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("name", ["hf/classifier", "hf/classifier.tar.gz"])
def test_a_classifier_folder_answers_its_scores(http: httpx.Client, store: Path, name: str) -> None:
    response = invoke(http, name, {"inputs": TEXTS})
    assert response.status_code == 200, response.text
    expected = probabilities(reference(store, "hf/classifier", "classification"))
    got = [by_label(ranked) for ranked in response.json()]
    assert np.allclose(got, expected, atol=TOLERANCE)


def test_an_embedding_folder_answers_its_vectors(http: httpx.Client, store: Path) -> None:
    response = invoke(http, "hf/embedder", {"inputs": TEXTS[0]})
    assert response.status_code == 200, response.text
    expected = unit(reference(store, "hf/embedder", "embeddings"))[0]
    assert np.allclose(response.json(), expected, atol=TOLERANCE)


def test_a_loaded_folder_is_accounted_at_least_its_weights(http: httpx.Client, store: Path) -> None:
    """transformers maps the weights from the file rather than allocating them: they count all
    the same."""
    assert invoke(http, "hf/classifier", {"inputs": TEXTS[0]}).status_code == 200
    assert invoke(http, "hf/wide", {"inputs": TEXTS[0]}).status_code == 200
    weights = (store / "hf/wide/model.safetensors").stat().st_size
    assert http.get("/models/hf/wide").json()["memoryBytes"] >= weights


def test_no_load_is_charged_transformers_imports(
    http: httpx.Client, store: Path, server: testing.RunningServer
) -> None:
    """transformers imports lazily, as a model first needs it (about 90 MB): those imports stay
    when the model goes, so they are the worker's, and each load is charged about its weights."""
    for name in ("hf/classifier", "hf/embedder"):
        assert invoke(http, name, {"inputs": TEXTS[0]}).status_code == 200
    loads = server.events("load")
    assert loads
    for load in loads:
        assert load["bytes"] < size_of(store / load["model"]) + 8 * MiB, load


def test_the_manifest_turns_a_classifier_into_an_embedder(http: httpx.Client) -> None:
    response = invoke(http, "hf/declared", {"inputs": TEXTS})
    assert response.status_code == 200, response.text
    assert np.allclose(np.linalg.norm(response.json(), axis=1), 1.0, atol=TOLERANCE)


def test_requests_together_are_batched(http: httpx.Client, store: Path) -> None:
    """Requests sent together are batched and answered each as alone."""
    assert invoke(http, "hf/embedder", {"inputs": "warm"}).status_code == 200  # loaded: all hits
    before = metric(http, "modelhost_batched_requests_total")
    bodies: list[object] = [{"inputs": text} for text in TEXTS] * 2 + [{"inputs": 7}]
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda body: invoke(http, "hf/embedder", body), bodies))
    assert [answer.status_code for answer in answers] == [200] * 8 + [400]
    expected = unit(reference(store, "hf/embedder", "embeddings"))
    assert np.allclose([a.json() for a in answers[:8]], [*expected, *expected], atol=TOLERANCE)
    assert "a list of texts" in answers[8].json()["message"]
    assert metric(http, "modelhost_batched_requests_total") - before == len(bodies)
    assert metric(http, "modelhost_batch_size_max") > 1


def test_oip_clients_send_texts_as_bytes(http: httpx.Client, store: Path) -> None:
    document = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [4], "data": TEXTS}]}
    response = http.post("/v2/models/hf/classifier/infer", json=document)
    assert response.status_code == 200, response.text
    outputs = {output["name"]: output for output in response.json()["outputs"]}
    expected = probabilities(reference(store, "hf/classifier", "classification"))
    scores = np.reshape(outputs["scores"]["data"], outputs["scores"]["shape"])
    assert np.allclose(scores, expected, atol=TOLERANCE)
    from modelhost.testing.hf_models import LABELS

    assert outputs["label"]["data"] == [LABELS[i] for i in expected.argmax(axis=1)]
    metadata = http.get("/v2/models/hf/classifier").json()
    assert metadata["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    assert [(o["name"], o["datatype"]) for o in metadata["outputs"]] == [
        (name, outputs[name]["datatype"]) for name in ("label", "scores")
    ]


@pytest.mark.parametrize(
    ("name", "missing"),
    [("broken/no-weights", "no weights in safetensors"), ("broken/no-tokenizer", "no tokenizer")],
)
def test_a_folder_missing_a_part_is_refused_naming_it(
    http: httpx.Client, name: str, missing: str
) -> None:
    response = invoke(http, name, {"inputs": TEXTS[0]})
    assert response.status_code == 500
    assert missing in response.json()["message"]
    assert "save_pretrained" in response.json()["message"]


def metric(http: httpx.Client, line_start: str) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_model_config_of_a_classifier_is_tritons_strings_by_batch(http: httpx.Client) -> None:
    """Triton's get_model_config: texts in as TYPE_STRING, one per batch entry ([1] reshaped to
    []), as Triton configures a tensor of the batch dimension alone."""
    assert http.post("/v2/repository/models/hf/classifier/load").status_code == 200
    config = http.get("/v2/models/hf/classifier/config").json()
    assert config["max_batch_size"] > 0
    [text] = config["input"]
    assert (text["name"], text["data_type"], text["dims"]) == ("text", "TYPE_STRING", [1])
    assert text["reshape"] == {"shape": []}
    assert [(o["name"], o["data_type"]) for o in config["output"]] == [
        ("label", "TYPE_STRING"),
        ("scores", "TYPE_FP32"),
    ]
