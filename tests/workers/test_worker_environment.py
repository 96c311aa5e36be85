"""What a worker's environment holds besides what the server passes on."""

from __future__ import annotations

from modelhost.workers.environment import worker_environment


def test_workers_never_reach_the_hugging_face_hub() -> None:
    environment = worker_environment({"HF_HUB_OFFLINE": "0", "HF_TOKEN": "hf_secret"})
    assert (environment["HF_HUB_OFFLINE"], environment["TRANSFORMERS_OFFLINE"]) == ("1", "1")
    assert "HF_TOKEN" not in environment


def test_tokenizers_default_to_one_thread() -> None:
    """Tokenizers run on one thread unless the user says otherwise."""
    assert worker_environment({})["TOKENIZERS_PARALLELISM"] == "false"
    given = worker_environment({"TOKENIZERS_PARALLELISM": "true"})
    assert given["TOKENIZERS_PARALLELISM"] == "true"
