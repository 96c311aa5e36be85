"""TorchServe archives as users bring them, and what TorchServe's own code answers for them.

Needs `modelhost[torchserve-handlers]` and torch-model-archiver.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from modelhost.testing.models import parent_made, run_archiver

GREETING = "hello from model-config.yaml"
LABELS = ["setosa", "versicolor", "virginica"]
IMAGE_LABELS = ["cat", "dog", "fox", "owl", "bee", "eel"]

TINY_NET = '''"""A linear layer and a softmax: four features in, three class scores out."""
import torch
from torch import nn


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return torch.softmax(self.linear(x), dim=1)
'''

TINY_CNN = '''"""A convolution, a pooling and a linear layer: an image in, six class scores out."""
import torch
from torch import nn


class TinyCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, kernel_size=8, stride=8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.linear = nn.Linear(4, 6)

    def forward(self, x):
        return self.linear(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))
'''

TINY_SEGMENTER = '''"""A strided convolution: three class scores for each 8x8 patch of an image,
in a dict under 'out' as torchvision's segmentation models answer."""
from torch import nn


class TinySegmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, kernel_size=8, stride=8)

    def forward(self, x):
        return {"out": self.conv(x)}
'''

TINY_DETECTOR = '''"""The image's four quadrants as boxes, each scored over six classes, in a
dict of boxes, labels and scores for each image as torchvision's detectors answer."""
import torch
from torch import nn


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, kernel_size=8, stride=8)
        self.pool = nn.AdaptiveAvgPool2d(2)

    def forward(self, images):
        return [self.detect(image) for image in images]

    def detect(self, image):
        scores, labels = torch.sigmoid(self.pool(self.conv(image[None])))[0].flatten(1).max(0)
        height, width = image.shape[-2] / 2, image.shape[-1] / 2
        corners = [(x, y) for y in (0, height) for x in (0, width)]
        boxes = torch.tensor([[x, y, x + width, y + height] for x, y in corners])
        return {"boxes": boxes, "labels": labels, "scores": scores}
'''

TEXT_WORDS = ["the", "fox", "did", "not", "see", "owl", "a", "bee"]
TINY_TEXT = f'''"""A bag of token embeddings and a linear layer: two class scores for a text,
called as TorchServe's text_classifier calls a model (the tokens and their offsets)."""
from torch import nn


class TinyText(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.EmbeddingBag({len(TEXT_WORDS) * (len(TEXT_WORDS) + 1)}, 8, mode="mean")
        self.linear = nn.Linear(8, 2)

    def forward(self, text, offsets):
        return self.linear(self.embedding(text, offsets))
'''

ROWS_HANDLER = '''"""A TorchServe handler as users write it: JSON rows in, labels and scores out."""
import torch
from ts.metrics.dimension import Dimension
from ts.torch_handler.base_handler import BaseHandler


class RowsHandler(BaseHandler):
    def preprocess(self, data):
        rows = [row.get("data") or row.get("body") for row in data]
        return torch.as_tensor(rows, dtype=torch.float32)

    def postprocess(self, data):
        self.context.metrics.add_counter("RowsSeen", len(data), None, [Dimension("Kind", "rows")])
        greeting = self.model_yaml_config["handler"]["greeting"]
        server = self.context.system_properties["server_name"]
        return [
            {
                "label": self.mapping[str(int(scores.argmax()))],
                "scores": [round(float(v), 6) for v in scores],
                "greeting": greeting,
                "server": server,
            }
            for scores in data
        ]
'''

MODEL_CONFIG = f"""minWorkers: 1
maxWorkers: 1
handler:
  greeting: {GREETING}
  profile: true
"""

# TorchServe's loader and handler called in-process, as its worker calls them
_REFERENCE = """
import json, os, sys, tempfile, zipfile
mar, bodies = sys.argv[1], json.loads(sys.argv[2])
model_dir = tempfile.mkdtemp()
zipfile.ZipFile(mar).extractall(model_dir)
sys.path.insert(0, model_dir)
os.chdir(model_dir)
import ts
from ts.context import RequestProcessor
from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl
from ts.model_loader import TsModelLoader
manifest = json.load(open(os.path.join(model_dir, "MAR-INF", "MANIFEST.json")))
configs = os.path.join(os.path.dirname(ts.__file__), "configs")
metrics = MetricsCacheYamlImpl(os.path.join(configs, "metrics.yaml"))
metrics.initialize_cache()
service = TsModelLoader().load("model", model_dir, manifest["model"]["handler"], None, 1,
                               metrics_cache=metrics)
answers = []
for body in bodies:
    value = bytes.fromhex(body["hex"]) if "hex" in body else body["json"]
    service.context.request_processor = [RequestProcessor({})]
    service.context.request_ids = {0: "0"}
    metrics.set_request_ids({0: "0"})
    answers.append(service._entry_point([{"body": value}], service.context)[0])
print("ANSWERS" + json.dumps(answers))
"""


def custom_handler_mar(archive_path: Path, seed: int = 0) -> Path:
    """A `.mar` with an eager TinyNet, a BaseHandler subclass recording metrics, and configs."""
    source = _sources(archive_path, "rows", TINY_NET, ROWS_HANDLER)
    _state_dict(source, TINY_NET, "TinyNet", seed)
    (source / "index_to_name.json").write_text(json.dumps(dict(enumerate(LABELS))))
    (source / "model-config.yaml").write_text(MODEL_CONFIG)
    return _archive(source, archive_path, "handler.py", config=True)


def image_classifier_mar(archive_path: Path, seed: int = 0) -> Path:
    """A `.mar` naming TorchServe's `image_classifier` for an eager TinyCnn with random weights."""
    return _vision_mar(archive_path, "image_classifier", TINY_CNN, "TinyCnn", seed)


def image_segmenter_mar(archive_path: Path, seed: int = 0) -> Path:
    """A `.mar` naming TorchServe's `image_segmenter` for a TinySegmenter with random weights."""
    return _vision_mar(archive_path, "image_segmenter", TINY_SEGMENTER, "TinySegmenter", seed)


def object_detector_mar(archive_path: Path, seed: int = 0) -> Path:
    """A `.mar` naming TorchServe's `object_detector` for a TinyDetector with random weights."""
    return _vision_mar(archive_path, "object_detector", TINY_DETECTOR, "TinyDetector", seed)


def text_classifier_mar(archive_path: Path, seed: int = 0) -> Path:
    """A `.mar` naming TorchServe's `text_classifier` for a TinyText with random weights and a
    vocabulary of TEXT_WORDS and their pairs (the handler looks up words and bigrams)."""
    import torch

    source = _sources(archive_path, "text", TINY_TEXT, None)
    _state_dict(source, TINY_TEXT, "TinyText", seed)
    (source / "index_to_name.json").write_text(json.dumps({0: "negative", 1: "positive"}))
    tokens = TEXT_WORDS + [f"{first} {second}" for first in TEXT_WORDS for second in TEXT_WORDS]
    torch.save({token: index for index, token in enumerate(tokens)}, source / "source_vocab.pt")
    return _archive(source, archive_path, "text_classifier", config=False)


def _vision_mar(archive_path: Path, handler: str, model: str, class_name: str, seed: int) -> Path:
    source = _sources(archive_path, handler, model, None)
    _state_dict(source, model, class_name, seed)
    (source / "index_to_name.json").write_text(json.dumps(dict(enumerate(IMAGE_LABELS))))
    return _archive(source, archive_path, handler, config=False)


def png(path: Path, seed: int = 0, size: int = 64) -> Path:
    """A PNG of random colours (needs pillow)."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(parent_made(path), format="PNG")
    return Path(path)


def torchserve_answers(
    archive_path: Path, bodies: list[Any], python: str = sys.executable
) -> list[Any]:
    """What TorchServe's loader and handler answer for each body, in a fresh `python` process."""
    encoded = [
        {"hex": body.hex()} if isinstance(body, bytes) else {"json": body} for body in bodies
    ]
    done = subprocess.run(
        [python, "-c", _REFERENCE, str(archive_path), json.dumps(encoded)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith("ANSWERS"))
    answers: list[Any] = json.loads(line.removeprefix("ANSWERS"))
    return answers


def unpacked(archive_path: Path, folder: Path) -> Path:
    with zipfile.ZipFile(archive_path) as archive:
        archive.extractall(folder)
    return folder


def _sources(archive_path: Path, kind: str, model_source: str, handler: str | None) -> Path:
    source = parent_made(Path(archive_path)).parent / f".{Path(archive_path).stem}-{kind}-src"
    source.mkdir(exist_ok=True)
    (source / "model.py").write_text(model_source)
    if handler is not None:
        (source / "handler.py").write_text(handler)
    return source


def _state_dict(source: Path, model_source: str, class_name: str, seed: int) -> None:
    import torch

    namespace: dict[str, Any] = {}
    exec(compile(model_source, str(source / "model.py"), "exec"), namespace)  # noqa: S102
    torch.manual_seed(seed)
    torch.save(namespace[class_name]().state_dict(), source / "weights.pt")


def _extra_files(source: Path) -> list[Path]:
    return [
        path
        for path in (source / "index_to_name.json", source / "source_vocab.pt")
        if path.is_file()
    ]


def _archive(source: Path, archive_path: Path, handler: str, *, config: bool) -> Path:
    handler_arg = str(source / handler) if (source / handler).is_file() else handler
    command = [
        *("--model-name", Path(archive_path).stem, "--version", "1.0"),
        *("--model-file", str(source / "model.py")),
        *("--serialized-file", str(source / "weights.pt")),
        *("--handler", handler_arg),
        *("--extra-files", ",".join(str(path) for path in _extra_files(source))),
        *("--export-path", str(Path(archive_path).parent), "--force"),
    ]
    if config:
        command += ["--config-file", str(source / "model-config.yaml")]
    run_archiver(command)
    return Path(archive_path)
