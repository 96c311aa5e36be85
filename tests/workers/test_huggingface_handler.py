"""The Hugging Face handler in-process, on tiny random-weight folders written by the test."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.missing import require_module

from modelhost.errors import BadRequestBody, ModelLoadError, PayloadTooLarge
from modelhost.resources import usable_cores
from modelhost.workers.handlers.base import InferReply, InferRequest
from modelhost.workers.handlers.huggingface import HuggingFaceHandler, is_folder, model_type_modules
from modelhost.workers.handlers.oip import SpeaksOip
from modelhost.workers.oip_media import oip_media_type
from modelhost.workers.signatures import TensorSpec

TEXTS = ["the cat sat on the mat", "a very good movie", "not fun", "the plot was dull and bad"]
TOLERANCE = 1e-5


@pytest.fixture(scope="module", autouse=True)
def transformers_installed() -> None:
    require_module("transformers")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from modelhost.testing.hf_models import hf_classifier, hf_embedder

    root = tmp_path_factory.mktemp("hf")
    return {"classifier": hf_classifier(root / "cls"), "embedder": hf_embedder(root / "emb")}


@pytest.fixture(scope="module")
def classifier(folders: dict[str, Path]) -> HuggingFaceHandler:
    return HuggingFaceHandler(folders["classifier"])


@pytest.fixture(scope="module")
def embedder(folders: dict[str, Path]) -> HuggingFaceHandler:
    return HuggingFaceHandler(folders["embedder"])


def reference(folder: Path, task: str) -> Any:
    from modelhost.testing.hf_models import reference_outputs

    return reference_outputs(folder, TEXTS, task)


def softmax(logits: Any) -> Any:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def body(reply: InferReply | Exception) -> Any:
    assert isinstance(reply, InferReply), reply
    return json.loads(reply.body)


def request(document: object, content_type: str = "application/json") -> InferRequest:
    return InferRequest(json.dumps(document).encode(), content_type)


def scores_by_label(ranked: list[dict[str, Any]], labels: tuple[str, ...]) -> list[float]:
    found = {item["label"]: item["score"] for item in ranked}
    return [found[label] for label in labels]


def test_the_task_comes_from_the_architecture(
    classifier: HuggingFaceHandler, embedder: HuggingFaceHandler
) -> None:
    assert (classifier.task, embedder.task) == ("classification", "embeddings")


def test_a_classifier_answers_every_label_best_first(
    classifier: HuggingFaceHandler, folders: dict[str, Path]
) -> None:
    from modelhost.testing.hf_models import LABELS

    expected = softmax(reference(folders["classifier"], "classification"))
    answers = body(classifier.infer(request({"inputs": TEXTS})))
    assert len(answers) == len(TEXTS)
    for ranked, row in zip(answers, expected, strict=True):
        assert np.allclose(scores_by_label(ranked, LABELS), row, atol=TOLERANCE)
        assert [item["score"] for item in ranked] == sorted(item["score"] for item in ranked)[::-1]


def test_one_text_one_answer_top_k_cuts(
    classifier: HuggingFaceHandler, folders: dict[str, Path]
) -> None:
    """One text gets one answer and top_k cuts it."""
    from modelhost.testing.hf_models import LABELS

    best = softmax(reference(folders["classifier"], "classification"))[0]
    answer = body(classifier.infer(request({"inputs": TEXTS[0], "parameters": {"top_k": 1}})))
    assert [item["label"] for item in answer] == [LABELS[int(best.argmax())]]
    assert answer[0]["score"] == pytest.approx(float(best.max()), abs=TOLERANCE)
    plain = body(classifier.infer(InferRequest(TEXTS[0].encode(), "text/plain")))
    assert len(plain) == len(LABELS) and plain[0]["label"] == answer[0]["label"]


def test_batch_answers_each_alone(
    classifier: HuggingFaceHandler,
) -> None:
    """A batch is answered as each request alone and a bad one fails alone."""
    alone = [body(classifier.infer(request({"inputs": text}))) for text in TEXTS]
    batch = [request({"inputs": text}) for text in TEXTS]
    replies = classifier.infer_batch([*batch[:2], request({"inputs": 42}), *batch[2:]])
    assert isinstance(replies[2], BadRequestBody)
    assert "a list of texts" in str(replies[2])
    for reply, expected in zip(replies[:2] + replies[3:], alone, strict=True):
        got = body(reply)
        assert [item["label"] for item in got] == [item["label"] for item in expected]
        assert np.allclose(
            [i["score"] for i in got], [i["score"] for i in expected], atol=TOLERANCE
        )


def test_embeddings_are_normalised_token_means(
    embedder: HuggingFaceHandler, folders: dict[str, Path]
) -> None:
    means = reference(folders["embedder"], "embeddings")
    vectors = np.array(body(embedder.infer(request({"inputs": TEXTS}))))
    assert np.allclose(
        vectors, means / np.linalg.norm(means, axis=1, keepdims=True), atol=TOLERANCE
    )
    raw = body(embedder.infer(request({"inputs": TEXTS[1], "parameters": {"normalize": False}})))
    assert np.allclose(raw, means[1], atol=TOLERANCE)


def test_an_oip_request_of_texts_gets_labels_and_scores(
    classifier: HuggingFaceHandler, folders: dict[str, Path]
) -> None:
    expected = softmax(reference(folders["classifier"], "classification"))
    oip = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [4], "data": TEXTS}]}
    answer = body(SpeaksOip(classifier).infer(request(oip, oip_media_type())))
    outputs = {output["name"]: output for output in answer["outputs"]}
    assert outputs["scores"]["shape"] == [4, 3]
    assert np.allclose(np.reshape(outputs["scores"]["data"], (4, 3)), expected, atol=TOLERANCE)
    assert outputs["label"]["shape"] == [4]


def test_an_oip_request_may_ask_for_one_output(embedder: HuggingFaceHandler) -> None:
    oip = {
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [2, 1], "data": TEXTS[:2]}],
        "outputs": [{"name": "embedding"}],
    }
    answer = body(SpeaksOip(embedder).infer_batch([request(oip, oip_media_type())])[0])
    [output] = answer["outputs"]
    assert output["name"] == "embedding" and output["datatype"] == "FP32"
    assert output["shape"] == [2, 16]


def test_the_signature_is_what_oip_answers(
    classifier: HuggingFaceHandler, embedder: HuggingFaceHandler
) -> None:
    """Every output the signature names, asked for alone, comes in its declared type and shape."""
    named = {}
    for handler in (SpeaksOip(classifier), SpeaksOip(embedder)):
        signature = handler.signature()
        assert signature is not None
        assert signature.inputs == (TensorSpec("text", "BYTES", (-1,)),)
        for spec in signature.outputs:
            text = {"name": "text", "datatype": "BYTES", "shape": [2], "data": TEXTS[:2]}
            oip = {"inputs": [text], "outputs": [{"name": spec.name}]}
            [output] = body(handler.infer(request(oip, oip_media_type())))["outputs"]
            assert output["datatype"] == spec.datatype
            assert [2, *spec.shape[1:]] == output["shape"]
            named[spec.name] = spec.shape
    assert named == {"label": (-1,), "scores": (-1, 3), "embedding": (-1, 16)}


def test_text_model_refuses_numbers(
    classifier: HuggingFaceHandler,
) -> None:
    """Numbers sent to a text model are refused with what it takes."""
    oip = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [1.0, 2.0]}]}
    with pytest.raises(BadRequestBody, match="one BYTES input of texts; got x \\(FP32\\)"):
        SpeaksOip(classifier).infer(request(oip, oip_media_type()))
    with pytest.raises(BadRequestBody, match="no texts"):
        classifier.infer(request({"inputs": []}))


def test_max_rows_limits_the_texts_of_a_request(folders: dict[str, Path]) -> None:
    handler = HuggingFaceHandler(folders["classifier"])
    handler.limit_rows(2)
    with pytest.raises(PayloadTooLarge, match="3 texts, the limit .* is 2"):
        handler.infer(request({"inputs": TEXTS[:3]}))


def test_the_manifest_may_ask_a_classifier_folder_for_embeddings(
    folders: dict[str, Path],
) -> None:
    handler = HuggingFaceHandler(folders["classifier"], task="embeddings")
    vectors = body(handler.infer(request({"inputs": TEXTS[:2]})))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=TOLERANCE)


@pytest.mark.parametrize(
    ("removed", "message"),
    [
        (("model.safetensors",), "has no weights in safetensors"),
        (("tokenizer.json", "vocab.txt"), "has no tokenizer"),
    ],
)
def test_a_folder_missing_a_part_says_which(
    folders: dict[str, Path], tmp_path: Path, removed: tuple[str, ...], message: str
) -> None:
    folder = Path(shutil.copytree(folders["classifier"], tmp_path / "model"))
    for name in removed:
        (folder / name).unlink()
    assert is_folder(folder)
    with pytest.raises(ModelLoadError, match=message):
        HuggingFaceHandler(folder)


def test_an_architecture_with_no_task_here_is_refused(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    folder = Path(shutil.copytree(folders["embedder"], tmp_path / "model"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps({**config, "architectures": ["BertForMaskedLM"]})
    )
    with pytest.raises(ModelLoadError, match='BertForMaskedLM.*handler = "huggingface-embeddings"'):
        HuggingFaceHandler(folder)


def test_model_runs_on_its_threads(
    folders: dict[str, Path],
) -> None:
    """A model runs on its threads and gives the caller its count back.

    torch keeps a thread count per calling thread: the handler sets its own around each
    call on whichever thread serves it."""
    import torch

    handler = HuggingFaceHandler(folders["embedder"], threads=2)
    seen: list[int] = []
    handler.model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    after: list[int] = []

    def serve() -> None:
        torch.set_num_threads(1)
        handler.infer(request({"inputs": TEXTS[0]}))
        after.append(torch.get_num_threads())

    thread = threading.Thread(target=serve)
    thread.start()
    thread.join()
    assert (seen, after) == ([min(2, usable_cores())], [1])


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc/self/maps")
def test_the_weights_it_maps_are_counted_as_its_own(
    classifier: HuggingFaceHandler, folders: dict[str, Path]
) -> None:
    """transformers maps safetensors weights rather than copying them: pages the C library's
    allocation counts miss, so the handler says how many bytes of them it holds."""
    weights = (folders["classifier"] / "model.safetensors").stat().st_size
    assert weights // 2 < classifier.mapped_bytes <= weights
    assert SpeaksOip(classifier).mapped_bytes == classifier.mapped_bytes


def test_inference_threads_may_share_the_handler(classifier: HuggingFaceHandler) -> None:
    """A worker with several inference threads calls one handler from each at once."""
    alone = [body(classifier.infer(request({"inputs": TEXTS[: i + 1]}))) for i in range(4)]
    answers: list[list[Any]] = [[] for _ in range(4)]

    def serve(i: int) -> None:
        for _ in range(10):
            answers[i].append(body(classifier.infer(request({"inputs": TEXTS[: i + 1]}))))

    threads = [threading.Thread(target=serve, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, got in enumerate(answers):
        labels = [[[item["label"] for item in ranked] for ranked in answer] for answer in got]
        assert labels == [[[item["label"] for item in ranked] for ranked in alone[i]]] * 10


def test_a_folders_model_type_names_its_modules(folders: dict[str, Path], tmp_path: Path) -> None:
    """Those transformers imports on the first load of a type, imported before it is measured;
    a name that is not a plain identifier goes into no import."""
    import importlib

    modules = model_type_modules(folders["classifier"] / "config.json")
    assert modules == (
        "transformers.models.bert.modeling_bert",
        "transformers.models.bert.tokenization_bert",
    )
    for module in modules:
        importlib.import_module(module)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "../../os"}))
    assert model_type_modules(tmp_path / "config.json") == ()
