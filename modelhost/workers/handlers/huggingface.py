"""The built-in handler for Hugging Face folders: text classification and embeddings, on the CPU.

The folder is read from disk only and runs none of its own code. A batch is one tokenizer call
and one forward pass. Answers match a `text-classification` pipeline with `top_k=None`, and
sentence-transformers' mean-pooled embeddings.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.errors import ModelLoadError
from modelhost.names import HF_CONFIG, HF_WEIGHTS
from modelhost.workers.handlers.base import BatchHandler, InferReply, InferRequest
from modelhost.workers.handlers.runtime import require
from modelhost.workers.handlers.texts import (
    TextRequest,
    decode_texts,
    json_reply,
    oip_reply,
    parameter,
)
from modelhost.workers.handlers.torch import intra_op_threads, limit_threads, module_bytes
from modelhost.workers.signatures import ANY, Signature, TensorSpec

SUFFIXES = HF_WEIGHTS
CLASSIFICATION, EMBEDDINGS = "classification", "embeddings"
TASKS = {  # the manifest's handler → task (None: config.json says)
    "huggingface": None,
    "huggingface-classification": CLASSIFICATION,
    "huggingface-embeddings": EMBEDDINGS,
}
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
)
# transformers imports lazily: what any folder's load would import, the worker's, not the model's
MODULES = (
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "transformers.models.auto.modeling_auto",
    "transformers.models.auto.tokenization_auto",
)
_CONFIG_BYTES = 1 << 20  # a larger .json is something else
_SAVE = "write the folder with model.save_pretrained(folder) and tokenizer.save_pretrained(folder)"


def is_folder(folder: Path) -> bool:
    """Whether `folder` has a config.json naming its model type."""
    config = _read_config(folder) if (folder / HF_CONFIG).is_file() else None
    return config is not None and ("model_type" in config or "architectures" in config)


def model_type_modules(path: Path) -> tuple[str, ...]:
    """The transformers modules of the model type config.json names, beside file `path`."""
    config = _read_config(path.parent) or {}
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type.replace("-", "_").isidentifier():
        return ()  # the name goes into an import: only a plain one
    name = model_type.replace("-", "_")
    package = f"transformers.models.{name}"
    return tuple(f"{package}.{module}_{name}" for module in ("modeling", "tokenization"))


def takes_weights(path: Path) -> bool:
    """Whether a .safetensors file is a model's weights, or the first shard."""
    return "-of-" not in path.name or "-00001-of-" in path.name


class HuggingFaceHandler(BatchHandler):
    """A transformers model and its tokenizer; answers labels with scores, or vectors."""

    batches = True
    pure = True
    answers_oip = True
    device_capable = True

    def __init__(self, folder: Path, threads: int = 1, task: str | None = None) -> None:
        artifact = f"{folder.name}/ (a Hugging Face model)"
        torch = require("torch", "huggingface", artifact)
        transformers = require("transformers", "huggingface", artifact)
        self._torch: Any = torch
        self.threads = limit_threads(torch, threads)
        config = _check_folder(folder)
        self.task = task or _task_of(config)
        self.max_texts = 0
        # a fast tokenizer holds its padding settings on itself while it encodes
        self._tokenizing = threading.Lock()
        self.tokenizer, self.model = _load(transformers, folder, self.task)
        self.max_length = _max_length(self.tokenizer, self.model.config)
        labels = self.model.config.id2label or {}
        self.labels = [str(labels.get(i, f"LABEL_{i}")) for i in range(len(labels))]
        self.multi_label = self.model.config.problem_type == "multi_label_classification"
        self.mapped_bytes = mapped_bytes(self.model, folder)
        self._device = "cpu"

    @classmethod
    def build(cls, task: str | None) -> Any:
        """A runtime's build function for the weights file's folder."""
        return lambda path, threads: cls(path.parent, threads, task)

    def limit_rows(self, max_rows: int) -> None:
        self.max_texts = max_rows

    def signature(self) -> Signature:
        texts = (TensorSpec("text", "BYTES", (ANY,)),)
        if self.task == EMBEDDINGS:
            width = getattr(self.model.config, "hidden_size", None) or ANY
            return Signature(texts, (TensorSpec("embedding", "FP32", (ANY, width)),))
        scores = TensorSpec("scores", "FP32", (ANY, len(self.labels) or ANY))
        return Signature(texts, (TensorSpec("label", "BYTES", (ANY,)), scores))

    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        """Run all the batch's texts at once and split the outputs back."""
        decoded: list[TextRequest | Exception] = []
        for request in requests:
            try:
                decoded.append(decode_texts(request, self.max_texts))
            except Exception as error:  # noqa: BLE001  (only its request's)
                decoded.append(error)
        texts = [text for item in decoded if not isinstance(item, Exception) for text in item.texts]
        outputs = iter(self._forward(texts) if texts else [])
        replies: list[InferReply | Exception] = []
        for request, item in zip(requests, decoded, strict=True):
            if isinstance(item, Exception):
                replies.append(item)
                continue
            rows = np.stack([next(outputs) for _ in item.texts])
            try:
                replies.append(self._reply(request, item, rows))
            except Exception as error:  # noqa: BLE001  (only its request's)
                replies.append(error)
        return replies

    def _forward(self, texts: list[str]) -> np.ndarray:
        """The logits, or the token-mean hidden states, one row per text."""
        torch = self._torch
        with self._tokenizing:
            encoded = self.tokenizer(
                texts,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
        with intra_op_threads(torch, self.threads), torch.inference_mode():
            encoded = encoded.to(self._device)
            output = self.model(**encoded)
            if self.task == CLASSIFICATION:
                return np.asarray(output.logits.float().cpu().numpy())
            mask = encoded["attention_mask"].unsqueeze(-1).to(output.last_hidden_state.dtype)
            summed = (output.last_hidden_state * mask).sum(dim=1)
            return np.asarray((summed / mask.sum(dim=1).clamp(min=1)).float().cpu().numpy())

    def _reply(self, request: InferRequest, texts: TextRequest, rows: np.ndarray) -> InferReply:
        if self.task == EMBEDDINGS:
            if parameter(texts, "normalize", bool, True):
                rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
            if texts.oip is not None:
                return oip_reply(request, texts, {"embedding": rows.astype(np.float32)})
            return json_reply(rows.tolist(), texts)
        scores = _sigmoid(rows) if self.multi_label or rows.shape[1] == 1 else _softmax(rows)
        if texts.oip is not None:
            best = [self.labels[i].encode() for i in scores.argmax(axis=1)]
            outputs = {"label": np.array(best, dtype=object), "scores": scores.astype(np.float32)}
            return oip_reply(request, texts, outputs)
        top_k = parameter(texts, "top_k", int, len(self.labels))
        return json_reply([self._ranked(row, top_k) for row in scores], texts)

    def _ranked(self, scores: np.ndarray, top_k: int) -> list[dict[str, Any]]:
        order = np.argsort(-scores, kind="stable")[: max(1, top_k)]
        return [{"label": self.labels[i], "score": float(scores[i])} for i in order]

    def close(self) -> None:
        self.model = self.tokenizer = None

    def to_device(self, device: str) -> None:
        self.model, self._device = self.model.to(device), device

    def tensor_bytes(self) -> int:
        return module_bytes(self.model)


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return np.asarray(shifted / shifted.sum(axis=1, keepdims=True))


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-logits)))


def _read_config(folder: Path) -> dict[str, Any] | None:
    path = folder / "config.json"
    try:
        if path.stat().st_size > _CONFIG_BYTES:
            return None
        config = json.loads(path.read_bytes())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return config if isinstance(config, dict) else None


def _check_folder(folder: Path) -> dict[str, Any]:
    """The folder's config, once it has weights and a tokenizer."""
    config = _read_config(folder)
    if config is None:
        raise ModelLoadError(f"{folder.name}/ has no readable config.json; {_SAVE}")
    if not any(folder.glob("*.safetensors")):
        raise ModelLoadError(
            f"{folder.name}/ has no weights in safetensors (*.safetensors); {_SAVE} "
            "(safe_serialization, the default, writes model.safetensors)"
        )
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelLoadError(
            f"{folder.name}/ has no tokenizer (none of {', '.join(TOKENIZER_FILES)}); "
            "save it beside the model with tokenizer.save_pretrained(folder)"
        )
    return config


def _task_of(config: dict[str, Any]) -> str:
    """Classification or embeddings, from config.json's architecture."""
    architectures = config.get("architectures") or []
    names = [name for name in architectures if isinstance(name, str)]
    if any(name.endswith("ForSequenceClassification") for name in names):
        return CLASSIFICATION
    if any(name.endswith("Model") and "For" not in name for name in names):
        return EMBEDDINGS
    named = ", ".join(names) or "none"
    raise ModelLoadError(
        f"config.json's architectures ({named}) are neither a ...ForSequenceClassification "
        '(classification) nor a bare ...Model (embeddings); set handler = "huggingface-embeddings" '
        'or "huggingface-classification" in modelhost.toml, or ship a handler.py'
    )


def _load(transformers: Any, folder: Path, task: str) -> tuple[Any, Any]:
    """The tokenizer and the model in eval mode, running none of the folder's code."""
    kind = (
        transformers.AutoModelForSequenceClassification
        if task == CLASSIFICATION
        else transformers.AutoModel
    )
    local = {"local_files_only": True, "trust_remote_code": False}
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), **local)
    model = kind.from_pretrained(str(folder), use_safetensors=True, **local)
    return tokenizer, model.eval()


def mapped_bytes(model: Any, folder: Path) -> int:
    """Bytes of the model's tensors mapped from its safetensors files."""
    weights = {str(path.resolve()) for path in folder.glob("*.safetensors")}
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:  # not Linux
        return 0
    ranges = []
    for line in maps:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] in weights:
            start, end = fields[0].split("-")
            ranges.append((int(start, 16), int(end, 16)))
    tensors = chain(model.parameters(), model.buffers())
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(n for at, n in storages.items() if any(lo <= at < hi for lo, hi in ranges))


def _max_length(tokenizer: Any, config: Any) -> int | None:
    """The longest input in tokens (a tokenizer with no saved limit says 1e30)."""
    limits = [getattr(config, "max_position_embeddings", None)]
    limits.append(getattr(tokenizer, "model_max_length", None))
    known = [int(limit) for limit in limits if isinstance(limit, int) and 0 < limit < 1 << 20]
    return min(known) if known else None
