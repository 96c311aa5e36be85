"""Triton's model configuration of each kind of signature modelhost's handlers tell."""

from __future__ import annotations

from typing import Any

from modelhost.protocols.triton_config import ANY, MOST_ROWS, model_config


def tensor(name: str, datatype: str, *shape: int) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": list(shape)}


def test_texts_in_and_labels_out_batch_on_their_one_dimension() -> None:
    """A Hugging Face classifier: BYTES is Triton's TYPE_STRING, [-1] is [1] reshaped to []."""
    texts = [tensor("text", "BYTES", ANY)]
    outputs = [tensor("label", "BYTES", ANY), tensor("scores", "FP32", ANY, 2)]
    config = model_config("sentiment", texts, outputs, 100, 5.0)
    assert config["max_batch_size"] == 100
    assert config["dynamic_batching"] == {"max_queue_delay_microseconds": 5000}
    [text] = config["input"]
    assert (text["data_type"], text["dims"], text["reshape"]) == ("TYPE_STRING", [1], {"shape": []})
    assert [(o["name"], o["dims"]) for o in config["output"]] == [("label", [1]), ("scores", [2])]


def test_a_declared_shape_without_a_batch_dimension_is_not_batched() -> None:
    config = model_config("fixed", [tensor("x", "FP32", 4)], [tensor("y", "INT64", ANY)], 100, 5.0)
    assert config["max_batch_size"] == 0
    assert "dynamic_batching" not in config
    assert config["input"][0]["dims"] == [4]
    assert config["output"][0]["dims"] == [-1]


def test_no_row_limit_is_the_largest_batch_triton_can_say() -> None:
    inputs = [tensor("x", "FP64", ANY, 3)]
    assert model_config("m", inputs, [], 0, None)["max_batch_size"] == MOST_ROWS


def test_a_model_that_tells_nothing_is_configured_empty() -> None:
    config = model_config("custom", [], [], 100, 5.0)
    assert (config["max_batch_size"], config["input"], config["output"]) == (0, [], [])
