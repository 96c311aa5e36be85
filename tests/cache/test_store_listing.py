"""A folder store's listing: real models of every kind, and changes seen on the next page."""

from __future__ import annotations

import asyncio
from pathlib import Path

from modelhost import testing
from modelhost.cache.stores.local import LocalStore
from modelhost.testing.hf_models import hf_classifier


def listed(store: LocalStore, after: str = "", limit: int = 1000) -> list[str]:
    return asyncio.run(store.list_keys(after, limit))


def test_real_models_of_every_kind_are_listed(tmp_path: Path) -> None:
    """What testing's builders write, as users ship them, unused: each is one model."""
    testing.onnx_iris(tmp_path / "vision/iris.onnx")
    testing.torch_iris(tmp_path / "torch/iris.pt")
    testing.torch_iris(tmp_path / "torch/iris.pt2")
    hf_classifier(tmp_path / "text/bert")
    testing.tensorflow_iris(tmp_path / "tf/iris")
    testing.sagemaker_folder(tmp_path / "sm")
    assert listed(LocalStore(tmp_path)) == [
        "sm",
        "text/bert",
        "tf/iris",
        "torch/iris.pt",
        "torch/iris.pt2",
        "vision/iris.onnx",
    ]
