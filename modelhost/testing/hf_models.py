"""Tiny Hugging Face folders with random weights, written locally, and their in-process answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WORDS = [
    *("the", "a", "cat", "dog", "sat", "on", "mat", "good", "bad", "movie"),
    *("is", "was", "not", "very", "fun", "dull", "plot"),
]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
LABELS = ("negative", "neutral", "positive")
TEXTS = ("the cat sat on the mat", "a very good movie", "not fun", "the plot was dull and bad")


def bert_config(**overrides: Any) -> Any:
    """A tiny BERT; weights drawn wide so that texts get different answers."""
    from transformers import BertConfig

    settings: dict[str, Any] = {
        "vocab_size": len(VOCAB),
        "hidden_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "max_position_embeddings": 64,
        "initializer_range": 0.3,
    }
    return BertConfig(**{**settings, **overrides})


def hf_classifier(folder: Path, seed: int = 0, **sizes: int) -> Path:
    """A BERT classifier of three labels; `sizes` override the tiny config's (hidden_size...)."""
    from transformers import AutoModelForSequenceClassification

    id2label = dict(enumerate(LABELS))
    config = bert_config(
        num_labels=len(LABELS),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
        **sizes,
    )
    return _save(AutoModelForSequenceClassification, config, folder, seed)


def hf_embedder(folder: Path, seed: int = 0, **sizes: int) -> Path:
    """A bare BertModel, as a sentence-embedding folder holds, and its tokenizer."""
    from transformers import AutoModel

    return _save(AutoModel, bert_config(**sizes), folder, seed)


def _save(kind: Any, config: Any, folder: Path, seed: int) -> Path:
    import torch
    from transformers import AutoTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    kind.from_config(config).save_pretrained(folder, safe_serialization=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    AutoTokenizer.from_pretrained(folder).save_pretrained(folder)
    return folder


def reference_outputs(folder: Path, texts: list[str], task: str) -> Any:
    """The model's answers in-process, one text at a time: logits or mean-pooled vectors."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

    kind = AutoModelForSequenceClassification if task == "classification" else AutoModel
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = kind.from_pretrained(folder, local_files_only=True).eval()
    rows = []
    with torch.inference_mode():
        for text in texts:
            encoded = tokenizer([text], return_tensors="pt")
            output = model(**encoded)
            if task == "classification":
                rows.append(output.logits[0].numpy())
            else:
                rows.append(output.last_hidden_state[0].mean(dim=0).numpy())
    return np.stack(rows)
